//! `nvfp4-oracle bench`: time GPU variants that passed certification, against torch in one run.

use super::bench_external::{bench_external, Clocks, SpotCheck};
use super::external::ExternalArgs;
use crate::error::{Error, Result};
use crate::golden::set::DUAL_GEMM_BENCHMARKS;
use crate::gpu::bench::{bench_variant, Timing};
use crate::gpu::variants::gpu_variants;
use crate::kernels::KernelUnderTest;
use crate::problem::{ProblemKind, Shape};
use clap::Args;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Variants to time (default: every non-test GPU variant).
    #[arg(long = "kernel")]
    pub kernels: Vec<String>,
    /// Shapes MxNxK, comma separated (default: the four dual-GEMM benchmark shapes).
    #[arg(long, value_delimiter = ',')]
    pub shapes: Vec<Shape>,
    /// Timed repetitions per shape (after 3 warm-ups).
    #[arg(long, default_value_t = 50)]
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
    #[arg(long, default_value_t = 4)]
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
    command: String,
    pub timings: Vec<(Timing, bool)>,
    torch: Option<serde_json::Value>,
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

/// A certificate this oracle signed, of this source hash, this model version and this build,
/// that says certified; a certificate that fails only its signature is named on stderr (an
/// edited or forged certificate is worth saying so).
pub(super) fn trusted(dir: &Path, name: &str, hash: &str) -> bool {
    let path = dir.join(format!("{name}.json"));
    let Ok(text) = std::fs::read_to_string(&path) else {
        return false;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    if let Err(why) = crate::certify::signing::verify(&value) {
        eprintln!("not trusting {}: {why}", path.display());
        return false;
    }
    match allows_timing(&value, hash) {
        Ok(()) => {
            if let Some(why) = checks_not_run(&value) {
                eprintln!("note: {}: certified without {why}", path.display());
            }
            true
        }
        Err(why) => {
            if !why.is_empty() {
                eprintln!("not trusting {}: {why}", path.display());
            }
            false
        }
    }
}

/// The checks a certified kernel's certificate says did not run, in words, if any.
///
/// Such a certificate is still trusted. Whether the checks ran was settled in the parent before
/// any of the kernel's code ran, by the operator's options (`--sanitize 0`, `--determinism 0`)
/// or machine (no compute-sanitizer installed), so a kernel cannot bring it about; and a user
/// without the CUDA toolkit's sanitizer must still be able to certify and time. What a kernel
/// can bring about, a check that was started and could not run (it raised, crashed or hung
/// when checked, or the tool's log does not read as the tool's), is a finding and fails the
/// certificate (src/certify/checks.rs, src/certify/sanitize.rs), which bench never times.
fn checks_not_run(value: &serde_json::Value) -> Option<String> {
    let skipped: Vec<&str> = value["checks_skipped"]
        .as_array()?
        .iter()
        .filter_map(|reason| reason.as_str())
        .collect();
    (!skipped.is_empty()).then(|| skipped.join("; "))
}

/// The check a certificate started and did not complete, in words, if any: the determinism
/// check's failed run, or a compute-sanitizer tool that did not run the whole sample.
fn check_that_did_not_run(value: &serde_json::Value) -> Option<String> {
    if let Some(note) = value["determinism"]["note"].as_str() {
        return Some(format!(
            "its determinism check did not run to its end ({note})"
        ));
    }
    let sanitizer = &value["sanitizer"];
    let planned = sanitizer["cases"].as_u64().unwrap_or(0);
    sanitizer["tools"].as_array()?.iter().find_map(|run| {
        let short = run["cases_run"].as_u64().unwrap_or(0) < planned;
        let note = run["note"].as_str();
        (short || note.is_some()).then(|| {
            format!(
                "compute-sanitizer {} did not run its sample to its end ({})",
                run["tool"].as_str().unwrap_or("?"),
                note.unwrap_or("cut short")
            )
        })
    })
}

/// Whether a certificate whose signature holds lets bench time the kernel; the reason when not
/// (empty for a certificate of another kernel, model or outcome, which the caller reports).
fn allows_timing(value: &serde_json::Value, hash: &str) -> std::result::Result<(), String> {
    if value["status"] != serde_json::json!("certified")
        || value["source_hash"] != serde_json::json!(hash)
        || value["model_version"] != serde_json::json!(crate::model::MODEL_VERSION)
    {
        return Err(String::new());
    }
    if let Some(shard) = value["shard"].as_object() {
        return Err(format!(
            "it covers shard {}/{} of the campaign only; `nvfp4-oracle merge` the shards first",
            shard.get("index").unwrap_or(&serde_json::Value::Null),
            shard.get("count").unwrap_or(&serde_json::Value::Null)
        ));
    }
    // A worker that ran without the sandbox could reach the key that signs certificates.
    if let Some(isolation) = value["environment"]["isolation"].as_str() {
        if !isolation.starts_with("sandboxed") {
            return Err(format!(
                "its worker ran without the sandbox ({isolation}), within reach of the key that \
                 signs certificates; certify it where the sandbox holds, or time it with \
                 --force-untrusted"
            ));
        }
    }
    // A check that was started and could not run fails the certificate; a certificate written
    // before that rule (where it was a note beside "certified") is not trusted either.
    if let Some(why) = check_that_did_not_run(value) {
        return Err(format!(
            "{why}; a check that could not run does not pass: certify it again"
        ));
    }
    // bench times production shapes: the certificate must have covered them.
    match crate::certify::report::production_coverage_gap(&value["coverage"]) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

fn torch_baseline(shapes: &[Shape], reps: usize) -> Option<serde_json::Value> {
    let script = std::env::temp_dir().join("nvfp4-oracle-torch-bench.py");
    std::fs::write(
        &script,
        include_str!("../../scripts/torch_dual_gemm_bench.py"),
    )
    .ok()?;
    let list: Vec<String> = shapes
        .iter()
        .map(|s| format!("{}x{}x{}", s.m, s.n, s.k))
        .collect();
    let out = std::process::Command::new("python3")
        .arg(&script)
        .args(["--shapes", &list.join(","), "--reps", &reps.to_string()])
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "note: torch comparison skipped: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("python3 failed")
        );
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    // Before any worker starts: this process's memory out of a worker's reach, and the key that
    // signs certificates made (so that every sandbox hides it).
    crate::worker::sandbox::protect_parent();
    crate::certify::signing::ensure_key()?;
    let shapes: Vec<Shape> = if args.shapes.is_empty() {
        DUAL_GEMM_BENCHMARKS
            .iter()
            .map(|&(m, n, k)| Shape::new(m, n, k, 1).expect("valid"))
            .collect()
    } else {
        args.shapes.clone()
    };
    let external = args.external.kernels()?;
    let variants: Vec<_> = gpu_variants()
        .into_iter()
        .filter(|v| {
            if args.kernels.is_empty() {
                // External kernels alone unless built-in ones are named too.
                external.is_empty() && !v.test_kernel
            } else {
                args.kernels.iter().any(|k| k == v.name)
            }
        })
        .collect();
    if variants.is_empty() && external.is_empty() {
        return Err(Error::Usage(
            "no GPU variant selected; see `nvfp4-oracle variants`".into(),
        ));
    }
    let mut report = BenchReport {
        device: String::new(),
        isolation: Vec::new(),
        delivery: Vec::new(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        timings: Vec::new(),
        torch: None,
        spot_checks: Vec::new(),
        clocks: Vec::new(),
        findings: Vec::new(),
        clock_notes: Vec::new(),
    };
    let mut unavailable = Vec::new();
    for variant in &variants {
        if let Err(reason) = crate::worker::nvrtc::gpu_availability(Some(variant.arch)) {
            eprintln!("skipping {}: cannot run here: {reason}", variant.name);
            unavailable.push(variant.name.to_string());
            continue;
        }
        let is_trusted = trusted(&args.report_dir, variant.name, &variant.source_hash());
        if !is_trusted && !args.force_untrusted {
            eprintln!(
                "skipping {}: no certificate of this source in {} (run `nvfp4-oracle certify --kernel {}` first, or --force-untrusted)",
                variant.name,
                args.report_dir.display(),
                variant.name
            );
            continue;
        }
        let unsupported: Vec<String> = shapes
            .iter()
            .filter(|s| !variant.support.supports(**s))
            .map(|s| s.to_string())
            .collect();
        if !unsupported.is_empty() {
            eprintln!(
                "skipping {} on {}: outside its declared support",
                variant.name,
                unsupported.join(", ")
            );
        }
        let supported: Vec<Shape> = shapes
            .iter()
            .copied()
            .filter(|s| variant.support.supports(*s))
            .collect();
        let (info, timings) = bench_variant(variant, &supported, args.reps)?;
        report.device = info.describe();
        report
            .timings
            .extend(timings.into_iter().map(|t| (t, is_trusted)));
    }
    for kernel in &external {
        bench_external(kernel, &shapes, &args, &mut report)?;
    }
    // The torch comparison is of the dual GEMM.
    let any_dual = !variants.is_empty()
        || external
            .iter()
            .any(|k| k.problem() == ProblemKind::DualGemm);
    if !args.no_torch && any_dual {
        report.torch = torch_baseline(&shapes, args.reps);
    }
    if report.timings.is_empty() {
        // Nothing was timed: no table to write, and no success to report; a timing that failed
        // (a hang, a crash, a wrong output while timed) is said first.
        for finding in &report.findings {
            eprintln!("{finding}");
        }
        if !report.findings.is_empty() {
            eprintln!("nothing timed: every timing failed (see above)");
            return Ok(ExitCode::from(super::EXIT_FAIL));
        }
        return Ok(
            if !unavailable.is_empty() || crate::gpu::device::device_info().is_err() {
                eprintln!("nothing timed: no selected kernel can run on this machine");
                ExitCode::from(super::EXIT_UNAVAILABLE)
            } else {
                eprintln!(
                "nothing timed: no selected kernel has a certificate it can be timed on (see the lines above)"
            );
                ExitCode::from(super::EXIT_FAIL)
            },
        );
    }
    let mut markdown = render(&report);
    // Read before this run's report is written: the baseline may be the same file.
    let slower = match &args.baseline {
        Some(path) => {
            let baseline = super::bench_baseline::read_baseline(path)?;
            let timings: Vec<_> = report.timings.iter().map(|(t, _)| t.clone()).collect();
            let changes = super::bench_baseline::compare(&baseline, &timings);
            markdown.push_str(&super::bench_baseline::render(path, &changes));
            changes.iter().any(|c| c.slower)
        }
        None => false,
    };
    print!("{markdown}");
    std::fs::create_dir_all(&args.report_dir).map_err(|err| Error::file(&args.report_dir, err))?;
    // Signed, so that a later run can trust it as its baseline.
    let mut value = serde_json::to_value(&report).expect("reports serialize");
    crate::certify::signing::sign(&mut value)?;
    let json = serde_json::to_string_pretty(&value).expect("reports serialize");
    for (name, text) in [("bench.json", json), ("bench.md", markdown)] {
        let path = args.report_dir.join(name);
        std::fs::write(&path, text)
            .map_err(|err| Error::file(&path, format!("cannot write: {err}")))?;
    }
    if !report.findings.is_empty() {
        for finding in &report.findings {
            eprintln!("{finding}");
        }
        return Ok(ExitCode::from(super::EXIT_FAIL));
    }
    if slower {
        eprintln!("slower than the baseline beyond the noise of both runs (see the table above)");
        return Ok(ExitCode::from(super::EXIT_REGRESSION));
    }
    Ok(ExitCode::SUCCESS)
}

fn render(report: &BenchReport) -> String {
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
    if !report.spot_checks.is_empty() {
        md.push_str("\nSpot checks (timed calls on fresh inputs, outputs judged against the model):\n\n| kernel | shape | call | seed | verdict |\n|---|---|---|---|---|\n");
        for c in &report.spot_checks {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                c.kernel,
                c.shape,
                c.at_call,
                c.seed,
                if c.pass {
                    "pass".to_string()
                } else {
                    format!("FAIL ({} elements): timing not trusted", c.failed_elements)
                }
            ));
        }
    }
    if !report.clocks.is_empty() {
        md.push_str("\nClocks around the external kernels' timed calls: the CUDA-event median (reported above) and mean (they must agree); the parent's clock around a request (the call and a device-wide synchronize; the inputs are in place before it starts), median, for the kernel and, fastest, for a baseline worker that never loaded it; the median time per call the samples do not account for beyond that fastest baseline request, and how much is allowed (a tenth of the call plus 300 us) before it is a finding; the median time the device stayed busy after a call's end event, with and without the kernel; the floor no kernel can beat on this GPU (its memory and compute rooflines), below which a median is a finding:\n\n| kernel | shape | events median us | events mean us | request us | fastest baseline request us | unaccounted us | allowed us | busy after end us | busy after end, baseline us | floor us |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_times_only_what_a_sandboxed_campaign_covered() {
        let hash = "ab".repeat(32);
        let good = serde_json::json!({
            "status": "certified",
            "source_hash": hash,
            "model_version": crate::model::MODEL_VERSION,
            "environment": {"isolation": "sandboxed: own mount, PID namespaces"},
            "coverage": {
                "planned_production_cases": 13, "planned_large_cases": 8,
                "by_shape_class": {"production": 13, "large": 8},
            },
        });
        assert_eq!(allows_timing(&good, &hash), Ok(()));
        let mut other = good.clone();
        other["source_hash"] = serde_json::json!("cd".repeat(32));
        assert_eq!(allows_timing(&other, &hash), Err(String::new()));
        let mut open = good.clone();
        open["environment"]["isolation"] = serde_json::json!("NOT sandboxed: no user namespaces");
        assert!(allows_timing(&open, &hash)
            .unwrap_err()
            .contains("without the sandbox"));
        // A check that could not run failed the certificate: not timed.
        let mut unchecked = good.clone();
        unchecked["status"] = serde_json::json!("failed");
        unchecked["determinism"] = serde_json::json!({"findings": [
            {"verdict": crate::certify::checks::COULD_NOT_RUN}]});
        assert_eq!(allows_timing(&unchecked, &hash), Err(String::new()));
        // Written before checks failed closed: "certified", its failed run a note.
        let mut noted = good.clone();
        noted["determinism"] = serde_json::json!({"note": "RuntimeError", "findings": []});
        assert!(allows_timing(&noted, &hash)
            .unwrap_err()
            .contains("determinism check did not run to its end"));
        let mut cut = good.clone();
        cut["sanitizer"] = serde_json::json!({"cases": 2, "tools": [
            {"tool": "memcheck", "cases_run": 2, "note": null},
            {"tool": "initcheck", "cases_run": 1, "note": "case 1: raised"}]});
        assert!(allows_timing(&cut, &hash)
            .unwrap_err()
            .contains("compute-sanitizer initcheck did not run"));
        cut["sanitizer"]["tools"][1] =
            serde_json::json!({"tool": "initcheck", "cases_run": 2, "note": null});
        assert_eq!(allows_timing(&cut, &hash), Ok(()));
        // No compute-sanitizer on the machine: timed, and said so.
        let mut no_tool = good.clone();
        no_tool["checks_skipped"] = serde_json::json!([format!(
            "{} (put the CUDA toolkit's bin on PATH)",
            crate::certify::checks::SANITIZER_NOT_FOUND
        )]);
        assert_eq!(allows_timing(&no_tool, &hash), Ok(()));
        assert!(checks_not_run(&no_tool)
            .unwrap()
            .starts_with("compute-sanitizer: not found"));
        assert_eq!(checks_not_run(&good), None);
        let mut built_in = good.clone();
        built_in["environment"] = serde_json::json!({"isolation": null});
        assert_eq!(allows_timing(&built_in, &hash), Ok(()));
        let mut short = good.clone();
        short["coverage"]["by_shape_class"]["production"] = serde_json::json!(5);
        assert!(allows_timing(&short, &hash)
            .unwrap_err()
            .contains("5 of its 13"));
        let mut shard = good.clone();
        shard["shard"] = serde_json::json!({"index": 2, "count": 4});
        assert!(allows_timing(&shard, &hash)
            .unwrap_err()
            .contains("shard 2/4 of the campaign only"));
        let mut merged = good.clone();
        merged["shard"] = serde_json::Value::Null;
        merged["merged_shards"] = serde_json::json!(4);
        assert_eq!(allows_timing(&merged, &hash), Ok(()));
        let mut old = good;
        old["coverage"] = serde_json::json!({"by_shape_class": {}});
        assert!(allows_timing(&old, &hash)
            .unwrap_err()
            .contains("certify it again"));
    }
}
