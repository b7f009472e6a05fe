//! What a campaign is asked (`CampaignLimits`: how many cases, which seed, which extra
//! classes) and how its random small cases are drawn (proptest strategies over shapes inside
//! the kernel's declared support, biased to edges): the inputs of a plan (`plan.rs`), below
//! the campaign that runs it.

use super::cases::{round_up, CaseSpec};
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::{Distribution, Shape};
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::time::Duration;

/// Edge values the shape strategy prefers: the smallest, tile boundaries and one past them.
const EDGE_MN: [usize; 9] = [1, 2, 31, 127, 128, 129, 200, 255, 256];
const EDGE_K_BLOCKS: [usize; 8] = [1, 3, 4, 15, 16, 17, 20, 32];
/// Random shapes stay below these so a CPU campaign of hundreds of cases takes seconds.
const MAX_RANDOM_MN: usize = 320;
const MAX_RANDOM_K_BLOCKS: usize = 48;

/// Shapes within `support`, half the time from the edge lists.
pub fn shape_strategy(support: ShapeSupport) -> impl Strategy<Value = Shape> {
    let mn = |multiple: usize| {
        proptest::prop_oneof![
            proptest::sample::select(EDGE_MN.to_vec()).prop_map(move |v| round_up(v, multiple)),
            (1..=MAX_RANDOM_MN).prop_map(move |v| round_up(v, multiple)),
        ]
    };
    let k_multiple_blocks = support.k_multiple.div_ceil(16);
    let k = proptest::prop_oneof![
        proptest::sample::select(EDGE_K_BLOCKS.to_vec())
            .prop_map(move |b| round_up(b, k_multiple_blocks) * 16),
        (1..=MAX_RANDOM_K_BLOCKS).prop_map(move |b| round_up(b, k_multiple_blocks) * 16),
    ];
    let max_l = support.max_l.min(3);
    (
        mn(support.m_multiple),
        mn(support.n_multiple),
        k,
        proptest::prop_oneof![3 => proptest::strategy::Just(1usize), 1 => 1..=max_l],
    )
        .prop_map(|(m, n, k, l)| Shape::new(m, n, k, l).expect("strategy shapes are valid"))
}

/// Cases over `dists`, listed in shrink order: proptest shrinks toward the first.
pub fn case_strategy(
    support: ShapeSupport,
    dists: Vec<Distribution>,
) -> impl Strategy<Value = CaseSpec> {
    (
        shape_strategy(support),
        proptest::sample::select(dists),
        proptest::num::u64::ANY,
    )
        .prop_map(|(shape, dist, seed)| CaseSpec { shape, dist, seed })
}

/// The random source of a campaign's cases: the same seed draws the same cases everywhere.
pub fn case_runner(seed: u64) -> TestRunner {
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    )
}

/// Limits of one campaign.
#[derive(Debug, Clone)]
pub struct CampaignLimits {
    pub cases: usize,
    /// Cases drawn to put one in every pair of shape ranges (and band triples up to this
    /// count): crates/harness/src/certify/campaign/range_draw.rs. 0 draws none (a CPU reference cannot
    /// judge them).
    pub range_cases: usize,
    /// Models whose feed-forward shapes the campaign runs (`certify --model`).
    pub models: Vec<super::models::ModelShapes>,
    /// Cases drawn in the deployment regimes: one at each regime's wide end, the rest modest
    /// (crates/harness/src/certify/campaign/regime_draw.rs).
    pub regime_cases: usize,
    pub time_budget: Option<Duration>,
    pub seed: u64,
    pub order: KOrder,
    /// Draw only the competition's distribution (to show what its weak check misses).
    pub only_gpumode: bool,
    /// Also compare every passing output with the replay of the kernel's declared schedule,
    /// at zero tolerance (`certify --exact`).
    pub exact: bool,
    /// Run none of the production-size cases (production shapes, random large shapes): a quick
    /// loop while writing a kernel (`certify --quick`). Their planned counts stay in the
    /// coverage, so bench refuses to time the kernel on such a certificate.
    pub quick: bool,
    /// Run only this shard's share of the cases (`certify --shard I/N`).
    pub shard: Option<super::shard::Shard>,
}

/// Random cases a campaign draws unless told otherwise (`certify --cases`).
pub const DEFAULT_CASES: usize = 200;
/// The same where the model's reference is computed on the GPU: the random cases are small,
/// and on the H100 2,000 of them cost a Hopper variant's campaign 2 s (40.3 s to 42.3 s), a
/// Python submission's about 15 s (results/gpu-reference/).
pub const DEFAULT_GPU_CASES: usize = 2000;

/// [`DEFAULT_CASES`], one case per deployment regime, no time budget, the contiguous K order, every distribution, production
/// cases included, the whole campaign; seed 0. The command line draws its seed per run (a
/// fixed seed makes a campaign's inputs public): give yours.
impl Default for CampaignLimits {
    fn default() -> Self {
        CampaignLimits {
            cases: DEFAULT_CASES,
            range_cases: 0,
            models: Vec::new(),
            regime_cases: super::regime_draw::DEFAULT_CPU_REGIME_CASES,
            time_budget: None,
            seed: 0,
            order: KOrder::Contiguous,
            only_gpumode: false,
            exact: false,
            quick: false,
            shard: None,
        }
    }
}

impl CampaignLimits {
    /// The order whose intervals judge `kernel`: the one it declares, else `order`.
    pub fn order_for(&self, kernel: &dyn KernelUnderTest) -> KOrder {
        kernel.declared_order().unwrap_or(self.order)
    }

    pub(super) fn distributions(&self) -> Vec<Distribution> {
        if self.only_gpumode {
            vec![Distribution::Gpumode]
        } else {
            Distribution::ALL.to_vec()
        }
    }
}
