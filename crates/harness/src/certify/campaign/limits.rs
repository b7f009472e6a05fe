//! What a campaign is asked (`CampaignLimits`: how many cases, which seed, which extra
//! classes): the input of a plan (`plan.rs`, which also draws the random small cases), below
//! the campaign that runs it.

use crate::kernels::KernelUnderTest;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::Distribution;
use std::time::Duration;

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
