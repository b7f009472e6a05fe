//! What `bench` is asked and what it reports, shared by the timing of built-in variants
//! (bench.rs) and of external kernels (bench_external.rs); and the certificates it trusts, said
//! on stderr.

use super::external::ExternalArgs;
use clap::Args;
use nvfp4_harness::certify::trust::{timing_trust, Trust};
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
    /// Calls timed one at a time per shape (after 3 warm-ups): a built-in variant's time; an
    /// external kernel's cold-call latency (its time is the batch clock's).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = super::whole::<usize>(1, 1_000_000))]
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
    /// External kernels: how many timed calls' outputs were judged per shape (every one).
    pub judged: Vec<Judged>,
    /// External kernels: the batch clock per shape.
    pub batches: Vec<BatchRow>,
    /// External kernels: the clocks around each timed loop.
    pub clocks: Vec<Clocks>,
    /// Why a timing is not trusted (a wrong timed output, the parent's clock disagreeing with
    /// the reported times, a crash or hang while timed): each makes `bench` exit 1.
    pub findings: Vec<String>,
    /// The parent's per-call clock bound where it disagrees: reported, not a finding (see
    /// bench_external.rs).
    pub clock_notes: Vec<String>,
}

/// The timed calls of an external kernel on one shape whose outputs were judged: all of them.
#[derive(Serialize)]
pub struct Judged {
    pub kernel: String,
    pub shape: Shape,
    pub calls: usize,
    pub wrong: usize,
}

/// One external kernel's batches on one shape (nvfp4_harness::bench::batch_clock).
#[derive(Serialize, Clone)]
pub struct BatchRow {
    pub kernel: String,
    pub shape: Shape,
    /// Calls a batch, and batches.
    pub slots: usize,
    pub batches: usize,
    /// The parent's clock around each batch request, the kernel's and the baseline's.
    pub kernel_batch_us: Vec<f64>,
    pub baseline_batch_us: Vec<f64>,
    /// Each batch's time per call, and their median: the time reported.
    pub figures_us: Vec<f64>,
    pub per_call_us: f64,
    /// The cold-call latency (the per-call CUDA-event median) and whether it is trusted
    /// beside the batch figure.
    pub latency_us: f64,
    pub latency_trusted: bool,
    /// The kernel's worker's CUDA events over each batch (its word, for diagnosis).
    pub batch_events_us: Vec<f64>,
    /// Why the batch's memory bound made the timing untrusted, if it did.
    pub memory_note: Option<String>,
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
    let why = nvfp4_harness::certify::regimes::uncovered_regime(coverage, shape)
        .or_else(|| nvfp4_harness::certify::shape_ranges::uncovered_range(coverage, shape));
    match why {
        Some(why) => {
            eprintln!("skipping {name} on {shape}: {why}");
            false
        }
        None => true,
    }
}
