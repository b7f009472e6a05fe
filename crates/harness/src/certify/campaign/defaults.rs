//! The campaign a run gets unless told otherwise, one constructor for the command line and the
//! Python package: how many random, regime and range cases, by where the model's reference is
//! computed (the GPU judges many more cases in the same time).

use super::limits::{CampaignLimits, DEFAULT_CASES, DEFAULT_GPU_CASES};
use super::range_draw::DEFAULT_GPU_RANGE_CASES;
use super::regime_draw::{DEFAULT_CPU_REGIME_CASES, DEFAULT_GPU_REGIME_CASES};

impl CampaignLimits {
    /// The default campaign drawn from `seed`, for a reference computed on the GPU
    /// (`reference_on_gpu`) or by the CPU model: the random cases, the deployment-regime cases
    /// and the range cases (none on the CPU, which cannot judge them in time); the rest as
    /// [`CampaignLimits::default`].
    pub fn defaults(reference_on_gpu: bool, seed: u64) -> CampaignLimits {
        let (cases, regime_cases, range_cases) = if reference_on_gpu {
            (
                DEFAULT_GPU_CASES,
                DEFAULT_GPU_REGIME_CASES,
                DEFAULT_GPU_RANGE_CASES,
            )
        } else {
            (DEFAULT_CASES, DEFAULT_CPU_REGIME_CASES, 0)
        };
        CampaignLimits {
            cases,
            regime_cases,
            range_cases,
            seed,
            ..CampaignLimits::default()
        }
    }
}
