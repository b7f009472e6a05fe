//! A campaign's cases, in the order they run, drawn before anything runs. The campaign
//! ([`crate::certify::certify_variant`]) runs exactly these, and `certify --plan` prints them
//! without running a kernel: what a certificate will have tested, on any machine.
//!
//! In order: the fixed edge cases (smallest shapes, tile edges, a K tail, L > 1), the golden
//! cases the kernel supports, the production-size cases (the problem's and the kernel's declared
//! production shapes, a model's shapes, the range cases of `range_draw.rs`, random large shapes
//! and the deployment regimes' cases), the cases of per-product rounding's worst case, then the
//! random small cases drawn by proptest strategies (shapes inside the kernel's declared support,
//! biased to edges).

use super::cases::CaseSpec;
use super::coverage::{shape_class, Coverage};
use super::fixed_cases::{edge_cases, round_up, stagnation_cases};
use super::limits::CampaignLimits;
use super::production::ProductionSize;
use super::regimes::regimes_of;
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::problem::{Distribution, Shape};
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// What drew a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Edge,
    Golden,
    /// Production shapes, model shapes, range cases, large shapes, regime cases.
    ProductionSize,
    Stagnation,
    Random,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Edge => "edge",
            Source::Golden => "golden",
            Source::ProductionSize => "production-size",
            Source::Stagnation => "stagnation",
            Source::Random => "random",
        }
    }
}

/// The campaign of `kernel` under `limits`, drawn.
pub struct CampaignPlan {
    /// The fixed cases (every case but the random ones), in campaign order.
    pub fixed: Vec<(Source, CaseSpec)>,
    pub production_size: ProductionSize,
    /// Random cases after the fixed ones (`limits.cases`; a time budget may stop them early).
    pub random: usize,
    strategy: proptest::strategy::BoxedStrategy<CaseSpec>,
    seed: u64,
}

/// One case of a plan, as `certify --plan` prints it (one JSON object a line).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PlanRow {
    /// Its place in campaign order (a shard runs the indices it owns).
    pub index: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub l: usize,
    pub dist: &'static str,
    /// Its inputs' seed.
    pub seed: u64,
    /// The class the certificate counts it under (production, range, regime, large, model,
    /// tiny, aligned, unaligned, batched).
    pub class: &'static str,
    pub source: &'static str,
    /// The deployment regimes its shape lies in.
    pub regime: Vec<&'static str>,
    /// For a range case, the cell it was drawn for (`M 128-255 x N 4096-8191`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
}

impl CampaignPlan {
    /// Draws the campaign; `coverage` gets the planned counts and, where a class is thinner or
    /// missing, why.
    pub fn new(
        kernel: &dyn KernelUnderTest,
        limits: &CampaignLimits,
        golden: &[CaseSpec],
        coverage: &mut Coverage,
    ) -> CampaignPlan {
        let support = kernel.support();
        let dists = limits.distributions();
        let edges = edge_cases(support)
            .into_iter()
            .filter(|spec| dists.contains(&spec.dist));
        let goldens = golden
            .iter()
            .copied()
            .filter(|spec| support.supports(spec.shape) && dists.contains(&spec.dist));
        let production_size = ProductionSize::plan(kernel, &dists, limits, coverage);
        // The worst case of per-product rounding, unless only the competition's inputs are drawn.
        let stagnation = if limits.only_gpumode {
            Vec::new()
        } else {
            stagnation_cases(support)
        };
        let mut fixed: Vec<(Source, CaseSpec)> = edges.map(|s| (Source::Edge, s)).collect();
        coverage.planned_edge_cases = fixed.len();
        fixed.extend(goldens.map(|s| (Source::Golden, s)));
        coverage.planned_golden_cases = fixed.len() - coverage.planned_edge_cases;
        coverage.production_size_skipped = limits.quick;
        if !limits.quick {
            fixed.extend(production_size.cases().map(|s| (Source::ProductionSize, s)));
        }
        coverage.planned_stagnation_cases = stagnation.len();
        fixed.extend(stagnation.into_iter().map(|s| (Source::Stagnation, s)));
        CampaignPlan {
            fixed,
            production_size,
            random: limits.cases,
            strategy: case_strategy(support, dists).boxed(),
            seed: limits.seed,
        }
    }

    /// Cases planned in all.
    pub fn planned(&self) -> usize {
        self.fixed.len() + self.random
    }

    /// The random cases' draws, in order: each a proptest value tree (its current value is the
    /// case; shrinking it is how a failure is made small).
    pub fn random_draws(&self) -> impl Iterator<Item = Box<dyn ValueTree<Value = CaseSpec>>> + '_ {
        let mut runner = case_runner(self.seed);
        (0..self.random).map(move |_| {
            self.strategy
                .new_tree(&mut runner)
                .expect("the case strategy never rejects")
        })
    }

    /// The class a certificate counts `spec` under.
    pub fn class_of(&self, spec: &CaseSpec) -> &'static str {
        self.production_size
            .class_of(spec)
            .unwrap_or_else(|| shape_class(spec.shape))
    }

    /// Every case as `certify --plan` prints it, in campaign order.
    pub fn rows(&self) -> Vec<PlanRow> {
        let fixed = self.fixed.iter().copied();
        let random = self
            .random_draws()
            .map(|tree| (Source::Random, tree.current()));
        fixed
            .chain(random)
            .enumerate()
            .map(|(index, (source, spec))| PlanRow {
                index,
                m: spec.shape.m,
                n: spec.shape.n,
                k: spec.shape.k,
                l: spec.shape.l,
                dist: spec.dist.name(),
                seed: spec.seed,
                class: self.class_of(&spec),
                source: source.name(),
                regime: regimes_of(spec.shape).iter().map(|r| r.name()).collect(),
                cell: self
                    .production_size
                    .range_cell_of(&spec)
                    .map(|cell| cell.describe()),
            })
            .collect()
    }
}

/// Edge values the shape strategy prefers: the smallest, tile boundaries and one past them.
const EDGE_MN: [usize; 9] = [1, 2, 31, 127, 128, 129, 200, 255, 256];
const EDGE_K_BLOCKS: [usize; 8] = [1, 3, 4, 15, 16, 17, 20, 32];
/// Random shapes stay below these so a CPU campaign of hundreds of cases takes seconds.
const MAX_RANDOM_MN: usize = 320;
const MAX_RANDOM_K_BLOCKS: usize = 48;

/// Shapes within `support`, half the time from the edge lists.
fn shape_strategy(support: ShapeSupport) -> impl Strategy<Value = Shape> {
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
fn case_strategy(
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
fn case_runner(seed: u64) -> TestRunner {
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    )
}
