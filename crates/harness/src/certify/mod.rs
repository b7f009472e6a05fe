//! Certification: run any kernel under test (see [`crate::kernels`]) against the model on many
//! cases, shrink the first failure, diagnose it, and write a certificate. The campaign knows only
//! the [`crate::kernels::KernelUnderTest`] interface, never where a kernel comes from.

pub mod baseline;
pub mod campaign;
pub mod cases;
pub mod checks;
pub mod ci_report;
pub mod coverage;
pub mod field_comparison;
pub mod merge;
mod pipeline;
pub mod production;
pub mod reference_engine;
pub mod regimes;
pub mod report;
mod report_markdown;
pub mod sampling;
pub mod sanitize;
pub mod sequence;
pub mod shard;
pub mod shrink_data;
pub mod signing;
pub mod tool_log;
pub mod trust;

pub use campaign::{certify_variant, CampaignLimits, CampaignResult};
pub use sequence::{certify_kernel, CertifyRequest, KernelOutcome};
