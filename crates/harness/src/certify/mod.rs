//! Certification: run any kernel under test (see [`crate::kernels`]) against the model on many
//! cases, shrink the first failure, diagnose it, and write a certificate. The campaign knows only
//! the [`crate::kernels::KernelUnderTest`] interface, never where a kernel comes from.

pub mod baseline;
pub mod campaign;
pub mod cases;
pub mod checks;
pub mod ci_report;
pub mod coverage;
mod failure_class;
pub mod field_comparison;
mod limits;
pub mod merge;
pub mod models;
mod pipeline;
pub mod plan;
pub mod production;
pub mod range_draw;
pub mod reference_engine;
pub mod regime_draw;
pub mod regimes;
pub mod report;
mod report_markdown;
pub mod sampling;
pub mod sanitize;
pub mod sequence;
pub mod shape_ranges;
pub mod shard;
pub mod shrink_data;
mod shrink_shape;
pub mod signing;
pub mod tool_log;
pub mod trust;

/// With NVFP4_ORACLE_TRACE set, a campaign says on stderr what it is doing (each case with its
/// shape and seconds, each shrink run, the diagnosis and data shrinking): where a long run's
/// time goes.
pub(crate) fn trace(what: std::fmt::Arguments) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("NVFP4_ORACLE_TRACE").is_some()) {
        eprintln!("trace: {what}");
    }
}

pub use campaign::{certify_variant, CampaignLimits, CampaignResult};
pub use sequence::{certify_kernel, CertifyRequest, KernelOutcome};
