//! What `bench` reports, shared by the timing of built-in variants ([`super::variants`]) and of
//! external kernels ([`super::external`]), and its Markdown; the certificates it trusts, said on
//! stderr.

use super::timing::Timing;
use crate::certify::{timing_trust, Trust};
use nvfp4_model::problem::Shape;
use serde::Serialize;
use std::path::Path;

#[derive(Serialize)]
pub struct BenchReport {
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
    /// external.rs).
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
    /// The cold-call latency by the kernel's CUDA events (the per-call median) and whether it
    /// is trusted beside the parent's figures (the lone calls', and the batch figure).
    pub latency_us: f64,
    pub latency_trusted: bool,
    /// The lone-call batches: each call alone, L2 flushed before it; the parent's clock
    /// around each, the kernel's and the baseline's; each one's time per call, and the
    /// fastest: the cold-call latency bench reports (the parent's), against which the events'
    /// latency is judged.
    pub lone_batches: usize,
    pub lone_kernel_batch_us: Vec<f64>,
    pub lone_baseline_batch_us: Vec<f64>,
    pub lone_figures_us: Vec<f64>,
    pub lone_us: Option<f64>,
    /// Whether the events' latency was judged against `lone_us` (a C-ABI library's Rust
    /// worker). A Python worker's lone figure is shown, not used: on the H100 its lone loop
    /// raised false alarms for an honest kernel and missed a 5% forgery
    /// (results/bench-clock/README.md).
    #[serde(default)]
    pub lone_rule: bool,
    /// The kernel's worker's CUDA events around its lone calls, median (its word).
    pub lone_events_us_median: Option<f64>,
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
    /// The least time any kernel can take for the shape on this GPU (crates/harness/src/bench/roofline.rs).
    pub floor_us: Option<f64>,
}

impl BenchReport {
    /// An empty report of the run `command`.
    pub fn new(command: String) -> Self {
        BenchReport {
            device: String::new(),
            isolation: Vec::new(),
            delivery: Vec::new(),
            command,
            timings: Vec::new(),
            torch: None,
            judged: Vec::new(),
            batches: Vec::new(),
            clocks: Vec::new(),
            findings: Vec::new(),
            clock_notes: Vec::new(),
        }
    }
}

/// Writes `bench.json` (signed, so that a later run can trust it as its baseline) and
/// `bench.md` into `dir`.
pub fn write_signed(report: &BenchReport, markdown: &str, dir: &Path) -> crate::Result<()> {
    use crate::error::Error;
    std::fs::create_dir_all(dir).map_err(|err| Error::file(dir, err))?;
    let mut value = serde_json::to_value(report).expect("reports serialize");
    crate::certify::sign(&mut value)?;
    let json = serde_json::to_string_pretty(&value).expect("reports serialize");
    for (name, text) in [("bench.json", json.as_str()), ("bench.md", markdown)] {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|err| Error::file(&path, format!("cannot write: {err}")))?;
    }
    Ok(())
}

/// The certificate in `dir` that lets bench time `name` of source hash `hash`: what it covered
/// (its coverage JSON), or `None`. A certificate that is refused is named on stderr with why (an
/// edited or forged certificate is worth saying so), and one that is trusted without some checks
/// says which.
pub fn trusted(dir: &Path, name: &str, hash: &str) -> Option<serde_json::Value> {
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
pub fn regime_covered(certified: Option<&serde_json::Value>, name: &str, shape: Shape) -> bool {
    let Some(coverage) = certified else {
        return true;
    };
    let why = crate::certify::uncovered_regime(coverage, shape)
        .or_else(|| crate::certify::uncovered_range(coverage, shape));
    match why {
        Some(why) => {
            eprintln!("skipping {name} on {shape}: {why}");
            false
        }
        None => true,
    }
}

/// The report in Markdown: the table, the batch clock, the judged outputs, the per-call clocks,
/// the notes and findings, the torch paths.
pub fn render(report: &BenchReport) -> String {
    let torch = report.torch.as_ref();
    let ceiling = torch.and_then(|t| t["ceiling_tflops"].as_f64());
    let mut md =
        format!(
            "Device: {}\n\nCommand: `{}`\n\n{}",
            report.device,
            report.command,
            report
                .isolation
                .iter()
                .map(|(kernel, isolation)| format!("Worker isolation of {kernel}: {isolation}\n\n"))
                .chain(report.delivery.iter().map(|(kernel, delivery)| {
                    format!("Timed inputs of {kernel}: {delivery}\n\n")
                }))
                .collect::<String>()
        );
    if let Some(c) = ceiling {
        md.push_str(&format!(
            "Measured fp16 tensor-core ceiling (torch 8192^3 matmul, same run): {c:.0} TFLOP/s\n\n"
        ));
    }
    md.push_str("| variant | shape | median us | min | max | spread | TFLOP/s | of ceiling | vs torch dequant+cuBLAS | vs cuBLAS fp16 pre-dequantized | certified |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (t, trusted) in &report.timings {
        let key = format!("{}x{}x{}", t.shape.m, t.shape.n, t.shape.k);
        let ratio = |field: &str| {
            torch
                .and_then(|v| v["shapes"][&key][field].as_f64())
                .map_or("-".to_string(), |us| format!("{:.2}x", us / t.median_us))
        };
        md.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1}% | {:.0} | {} | {} | {} | {} |\n",
            t.variant,
            t.shape,
            t.median_us,
            t.min_us,
            t.max_us,
            100.0 * t.spread,
            t.tflops,
            ceiling.map_or("-".to_string(), |c| format!("{:.0}%", 100.0 * t.tflops / c)),
            ratio("torch_dequant_us"),
            ratio("fp16_predequant_us"),
            if *trusted {
                "yes"
            } else {
                "NO (--force-untrusted)"
            }
        ));
    }
    if !report.batches.is_empty() {
        md.push_str(&format!("\nThe batch clock of the external kernels (the median above is the time per call in a stream): per shape, batches of calls on fresh inputs (together at least 4x the L2, which the parent flushes after writing them), each batch one request timed by the parent, less the fastest same request served by a baseline worker without the kernel, divided by the calls; the median over the batches. Then lone-call batches, timed the same way: each call alone (the worker flushes L2 and synchronizes the device before it, and synchronizes after it); the fastest one's time per call is the cold-call latency bench reports, the parent's. Beside it the same latency by the kernel's own CUDA events (calls made one at a time, L2 flushed by the parent before each), a cross-check: trusted only where it is not below the parent's lone call by more than {:.2}% of it plus {:.0} us (measured: results/bench-clock/README.md; C-ABI libraries only, a Python worker's lone figure is shown, not used), nor below the time per call in a stream by more than 5%:\n\n| kernel | shape | per call in a stream us | batches x calls | kernel batch ms | baseline batch ms | cold-call latency (parent) us | lone batches x calls | lone batch ms | lone baseline ms | cold-call latency (kernel's events) us | events |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", 100.0 * crate::bench::batch_clock::LONE_SLACK, crate::bench::batch_clock::LONE_SLACK_US));
        let ms = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{:.2}", x / 1000.0))
                .collect::<Vec<_>>()
                .join(", ")
        };
        for b in &report.batches {
            md.push_str(&format!(
                "| {} | {} | {:.1} | {} x {} | {} | {} | {} | {} x {} | {} | {} | {:.1} | {} |\n",
                b.kernel,
                b.shape,
                b.per_call_us,
                b.batches,
                b.slots,
                ms(&b.kernel_batch_us),
                ms(&b.baseline_batch_us),
                b.lone_us.map_or("-".to_string(), |us| format!("{us:.1}")),
                b.lone_batches,
                b.slots,
                ms(&b.lone_kernel_batch_us),
                ms(&b.lone_baseline_batch_us),
                b.latency_us,
                if b.latency_trusted {
                    "trusted"
                } else {
                    "NOT TRUSTED"
                }
            ));
        }
    }
    if !report.judged.is_empty() {
        md.push_str("\nOutputs judged (every timed call's, inputs never seen before):\n\n| kernel | shape | calls judged | wrong |\n|---|---|---|---|\n");
        for j in &report.judged {
            md.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                j.kernel, j.shape, j.calls, j.wrong
            ));
        }
    }
    if !report.clocks.is_empty() {
        md.push_str("\nClocks around the external kernels' timed calls: the CUDA-event median (reported above) and mean (they must agree); the parent's clock around a request (the call and a device-wide synchronize; the inputs are in place before it starts), median, for the kernel and, fastest, for a baseline worker that never loaded it; the median time per call the samples do not account for beyond that fastest baseline request, and the allowance that was a finding before the batch clock (a tenth of the call plus 300 us; now a note below); the median time the device stayed busy after a call's end event, with and without the kernel; the floor no kernel can beat on this GPU (its memory and compute rooflines), below which a median is a finding:\n\n| kernel | shape | events median us | events mean us | request us | fastest baseline request us | unaccounted us | allowed us | busy after end us | busy after end, baseline us | floor us |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for c in &report.clocks {
            let num = |v: Option<f64>| v.map_or("unknown".to_string(), |v| format!("{v:.1}"));
            md.push_str(&format!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {:.1} | {:.1} | {} |\n",
                c.kernel,
                c.shape,
                c.events_us_median,
                c.events_us_mean,
                c.parent_call_us_median,
                num(c.baseline_call_us_min),
                num(c.unaccounted_us),
                num(c.allowed_us),
                c.after_end_us_median,
                c.null_after_end_us_median,
                num(c.floor_us)
            ));
        }
    }
    if !report.clock_notes.is_empty() {
        md.push_str("\nNotes of the parent's per-call clock (reported, not findings):\n\n");
        for note in &report.clock_notes {
            md.push_str(&format!("- {note}\n"));
        }
    }
    if !report.findings.is_empty() {
        md.push_str("\nFindings (timings not trusted):\n\n");
        for finding in &report.findings {
            md.push_str(&format!("- {finding}\n"));
        }
    }
    if let Some(t) = torch {
        md.push_str("\nTorch paths (same run):\n\n| shape | torch dequant + cuBLAS us | cuBLAS fp16 pre-dequantized us |\n|---|---|---|\n");
        if let Some(shapes) = t["shapes"].as_object() {
            for (shape, v) in shapes {
                md.push_str(&format!(
                    "| {shape} | {:.1} | {:.1} |\n",
                    v["torch_dequant_us"].as_f64().unwrap_or(f64::NAN),
                    v["fp16_predequant_us"].as_f64().unwrap_or(f64::NAN)
                ));
            }
        }
    }
    md
}
