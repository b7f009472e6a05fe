//! Certification: run any kernel under test (see [`crate::kernels`]) against the model on many
//! cases, shrink the first failure, diagnose it, and write a certificate. The campaign knows only
//! the [`crate::kernels::KernelUnderTest`] interface, never where a kernel comes from.
//!
//! Four rooms, each using only rooms named after it: `certificate/` (the certificate, its
//! signature, trust, merge, baseline and CI reports), `checks/` (determinism and
//! compute-sanitizer), `shrink/` (a failing case made minimal and diagnosed), `campaign/` (the cases and how
//! each runs). Beside them, [`certify_variant`] (`run_campaign.rs`) runs one kernel's campaign
//! over `campaign/` and `shrink/`, and [`certify_kernel`] (`sequence.rs`) is the whole sequence
//! for one kernel: campaign, checks, certificate. The rooms are private: what callers need is
//! re-exported below.

mod campaign;
mod certificate;
mod checks;
mod run_campaign;
mod sequence;
mod shrink;

// The face: what the CLI, the Python package, the examples and the tests name. Everything else
// stays inside its room.
pub use campaign::cases::{
    builtin_golden_campaign_cases, golden_campaign_cases, run_case_within, CaseSpec,
};
pub use campaign::coverage::Coverage;
pub use campaign::cross_check::{
    cross_check, cross_check_rows, cross_check_sample, CROSS_CHECK_BATCHES, CROSS_CHECK_COLUMNS,
};
pub use campaign::fixed_cases::stagnation_cases;
pub use campaign::limits::{CampaignLimits, DEFAULT_CASES, DEFAULT_GPU_CASES};
pub use campaign::models::{load_model, within_case_bound, ModelShapes, DEFAULT_MAX_TOKENS};
pub use campaign::plan::CampaignPlan;
pub use campaign::production::production_cases;
pub use campaign::range_draw::DEFAULT_GPU_RANGE_CASES;
pub use campaign::reference_engine::{report as reference_engine_report, use_gpu_reference};
pub use campaign::regime_draw::{DEFAULT_CPU_REGIME_CASES, DEFAULT_GPU_REGIME_CASES};
pub use campaign::regimes::{uncovered_regime, Regime, RegimeCount};
pub use campaign::sampling::{
    sample_for, sampled_reference, shape_products, RowSample, FULL_REFERENCE_PRODUCTS,
};
pub use campaign::shape_ranges::uncovered_range;
pub use campaign::shard::{Shard, SHARD_COUNT_ENV};
pub use certificate::baseline::{compare_with_baseline, read_baseline, verdict};
pub use certificate::ci_report::{junit as ci_junit, summary as ci_summary};
pub use certificate::merge::{merge, read_shard, ShardCertificate};
pub use certificate::report::{
    check_dir_writable, check_file_writable, refuse_another_kernels, write_atomically, Certificate,
    ExactOutcome, Status, BUILD,
};
pub use certificate::report_lock::ReportLock;
pub use certificate::signing::{check_key, ensure_key, read_verified, sign, verify};
pub use certificate::trust::{production_coverage_gap, timing_trust, Trust};
pub use checks::determinism::{determinism, COULD_NOT_RUN};
pub use checks::sanitize::{sanitize, Tool};
pub use run_campaign::{certify_variant, CampaignResult};
pub use sequence::{certify_kernel, CertifyRequest, KernelOutcome};
pub use shrink::field_comparison::{mutant_table, render_table};
