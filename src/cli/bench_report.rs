//! What `bench` is asked and what it reports, shared by the timing of built-in variants
//! (bench.rs) and of external kernels (bench_external.rs); and the certificates it trusts, said
//! on stderr.

use super::external::ExternalArgs;
use clap::Args;
use nvfp4_harness::certify::{timing_trust, Trust};
use nvfp4_harness::gpu::bench::Timing;
use nvfp4_model::problem::Shape;
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Variants to time (default: every non-test GPU variant).
    #[arg(long = "kernel")]
    pub kernels: Vec<String>,
    /// Shapes MxNxK, comma separated (default: the four dual-GEMM benchmark shapes).
    #[arg(long, value_delimiter = ',')]
    pub shapes: Vec<Shape>,
    /// Timed repetitions per shape (after 3 warm-ups).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(1, 1_000_000))]
    pub reps: usize,
    /// Where certificates are read from and bench.json / bench.md written to.
    #[arg(long, default_value = "certify-report")]
    pub report_dir: PathBuf,
    /// Time variants without a certificate of the same source hash; the report says so.
    #[arg(long)]
    pub force_untrusted: bool,
    /// Skip the torch comparison even if python3 with torch is present.
    #[arg(long)]
    pub no_torch: bool,
    /// External kernels: how many timed calls per shape have their outputs judged against the
    /// model. Every timed call gets inputs no call has seen and its output is kept; which ones
    /// are judged is drawn after the timed loop, so a kernel cannot be right only when checked.
    #[arg(long, default_value_t = 4, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<usize>(0, 1_000_000))]
    pub spot_checks: usize,
    /// The main branch's bench.json: say which medians got slower beyond the noise of both
    /// runs (the larger spread, at least 5%) and exit 5 if any did. bench.json is signed;
    /// a baseline must be signed with this machine's key.
    #[arg(long, value_name = "BENCH.json")]
    pub baseline: Option<PathBuf>,
    #[command(flatten)]
    pub external: ExternalArgs,
}

#[derive(Serialize)]
pub(super) struct BenchReport {
    pub device: String,
    /// External kernels: the operating-system boundary each one's worker ran in.
    pub isolation: Vec<(String, String)>,
    /// External kernels: how each one's timed calls got their inputs.
    pub delivery: Vec<(String, String)>,
    pub command: String,
    pub timings: Vec<(Timing, bool)>,
    pub torch: Option<serde_json::Value>,
    /// External kernels: the timed calls whose outputs were judged.
    pub spot_checks: Vec<SpotCheck>,
    /// External kernels: the clocks around each timed loop.
    pub clocks: Vec<Clocks>,
    /// Why a timing is not trusted (a wrong timed output, the parent's clock disagreeing with
    /// the reported times, a crash or hang while timed): each makes `bench` exit 1.
    pub findings: Vec<String>,
    /// The parent's per-call clock bound where it disagrees: reported, not a finding (see
    /// bench_external.rs).
    pub clock_notes: Vec<String>,
}

/// One timed call of an external kernel whose output was judged.
#[derive(Serialize)]
pub struct SpotCheck {
    pub kernel: String,
    pub shape: Shape,
    pub at_call: usize,
    pub seed: u64,
    pub pass: bool,
    pub failed_elements: usize,
}

/// The clocks around one external kernel's timed loop on one shape, per call.
#[derive(Serialize)]
pub struct Clocks {
    pub kernel: String,
    pub shape: Shape,
    /// The median of the CUDA-event samples (what the table reports).
    pub events_us_median: f64,
    /// The mean of the samples: it must agree with the median (work done in a few calls and
    /// served from a cache in the others does not).
    pub events_us_mean: f64,
    /// The parent's clock around each timed request (the call and a synchronize), median.
    pub parent_call_us_median: f64,
    /// The fastest request without the kernel (served by the baseline worker).
    pub baseline_call_us_min: Option<f64>,
    /// The median time per call the samples do not account for, beyond the fastest baseline
    /// request's own overhead, and how much of it is allowed before it is a finding.
    pub unaccounted_us: Option<f64>,
    pub allowed_us: Option<f64>,
    /// What the workers said their calls took beyond the sample, median (the kernel's word,
    /// and the baseline's: where the parent's extra time went, for diagnosis only).
    pub worker_beyond_sample_us: Option<f64>,
    pub baseline_worker_beyond_sample_us: Option<f64>,
    /// Median time the device stayed busy after a call's end event (and in the baseline's
    /// requests).
    pub after_end_us_median: f64,
    pub null_after_end_us_median: f64,
    /// The least time any kernel can take for the shape on this GPU (crates/harness/src/gpu/roofline.rs).
    pub floor_us: Option<f64>,
}

/// The certificate in `dir` that lets bench time `name` of source hash `hash`: what it covered
/// (its coverage JSON), or `None`. A certificate that is refused is named on stderr with why (an
/// edited or forged certificate is worth saying so), and one that is trusted without some checks
/// says which.
pub(super) fn trusted(dir: &Path, name: &str, hash: &str) -> Option<serde_json::Value> {
    match timing_trust(dir, name, hash) {
        Trust::Absent => None,
        Trust::Refused { path, why } => {
            eprintln!("not trusting {}: {why}", path.display());
            None
        }
        Trust::Trusted {
            path,
            checks_not_run,
            coverage,
        } => {
            if let Some(why) = checks_not_run {
                eprintln!("note: {}: certified without {why}", path.display());
            }
            Some(coverage)
        }
    }
}

/// Whether bench may time `name` on `shape` under the certificate coverage `certified`
/// (`None`: untrusted, timed only with --force-untrusted, which says so elsewhere): not where the
/// shape lies in a deployment regime, or a pair of shape ranges, the campaign never reached;
/// says why on stderr.
pub(super) fn regime_covered(
    certified: Option<&serde_json::Value>,
    name: &str,
    shape: Shape,
) -> bool {
    let Some(coverage) = certified else {
        return true;
    };
    let why = nvfp4_harness::certify::uncovered_regime(coverage, shape)
        .or_else(|| nvfp4_harness::certify::uncovered_range(coverage, shape));
    match why {
        Some(why) => {
            eprintln!("skipping {name} on {shape}: {why}");
            false
        }
        None => true,
    }
}
