//! `nvfp4-oracle bench`: time GPU variants that passed certification, against torch in one run.

use super::bench_external::bench_external;
use super::bench_report::{regime_covered, trusted, BenchArgs, BenchReport};
use nvfp4_harness::error::{Error, Result};
use nvfp4_harness::gpu::bench::bench_variant;
use nvfp4_harness::gpu::variants::gpu_variants;
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_model::golden::set::DUAL_GEMM_BENCHMARKS;
use nvfp4_model::problem::{ProblemKind, Shape};
use std::process::ExitCode;

fn torch_baseline(shapes: &[Shape], reps: usize) -> Option<serde_json::Value> {
    // In this process's private folder: a fixed name in /tmp could be a link planted there.
    let script = nvfp4_harness::private_tmp::dir()
        .ok()?
        .join("torch-bench.py");
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
    nvfp4_harness::sandbox::protect_parent();
    nvfp4_harness::certify::signing::ensure_key()?;
    let shapes: Vec<Shape> = if args.shapes.is_empty() {
        DUAL_GEMM_BENCHMARKS
            .iter()
            .map(|&(m, n, k)| Shape::new(m, n, k, 1).expect("valid"))
            .collect()
    } else {
        args.shapes.clone()
    };
    let external = args.external.kernels()?;
    let all = gpu_variants();
    // Named as certify names them: wildcards too ('hopper-*'), and a name that matches no GPU
    // variant is refused with the list.
    for pattern in &args.kernels {
        if !all.iter().any(|v| super::certify::matches(pattern, v.name)) {
            return Err(nvfp4_model::Error::UnknownName {
                what: "GPU variant",
                given: pattern.clone(),
                expected: all.iter().map(|v| v.name).collect::<Vec<_>>().join(", "),
            }
            .into());
        }
    }
    let variants: Vec<_> = all
        .into_iter()
        .filter(|v| {
            if args.kernels.is_empty() {
                // External kernels alone unless built-in ones are named too.
                external.is_empty() && !v.test_kernel
            } else {
                args.kernels
                    .iter()
                    .any(|k| super::certify::matches(k, v.name))
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
        judged: Vec::new(),
        batches: Vec::new(),
        clocks: Vec::new(),
        findings: Vec::new(),
        clock_notes: Vec::new(),
    };
    let mut unavailable = Vec::new();
    for variant in &variants {
        if let Err(reason) = nvfp4_harness::worker::nvrtc::gpu_availability(Some(variant.arch)) {
            eprintln!("skipping {}: cannot run here: {reason}", variant.name);
            unavailable.push(variant.name.to_string());
            continue;
        }
        let certified = trusted(&args.report_dir, variant.name, &variant.source_hash());
        let is_trusted = certified.is_some();
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
            .filter(|s| regime_covered(certified.as_ref(), variant.name, *s))
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
            if !unavailable.is_empty() || nvfp4_harness::gpu::device::device_info().is_err() {
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
    nvfp4_harness::certify::signing::sign(&mut value)?;
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
    if !report.batches.is_empty() {
        md.push_str("\nThe batch clock of the external kernels (the median above is the time per call in a stream): per shape, batches of calls on fresh inputs (together at least 4x the L2, which the parent flushes after writing them), each batch one request timed by the parent, less the fastest same request served by a baseline worker without the kernel, divided by the calls; the median over the batches; beside it the cold-call latency (CUDA events around calls made one at a time, L2 flushed before each), trusted only where it is not below the batch figure by more than 5%:\n\n| kernel | shape | per call in a stream us | batches x calls | kernel batch ms | baseline batch ms | cold-call latency us | latency |\n|---|---|---|---|---|---|---|---|\n");
        let ms = |v: &[f64]| v.iter().map(|x| format!("{:.2}", x / 1000.0)).collect::<Vec<_>>().join(", ");
        for b in &report.batches {
            md.push_str(&format!(
                "| {} | {} | {:.1} | {} x {} | {} | {} | {:.1} | {} |\n",
                b.kernel,
                b.shape,
                b.per_call_us,
                b.batches,
                b.slots,
                ms(&b.kernel_batch_us),
                ms(&b.baseline_batch_us),
                b.latency_us,
                if b.latency_trusted { "trusted" } else { "NOT TRUSTED" }
            ));
        }
    }
    if !report.judged.is_empty() {
        md.push_str("\nOutputs judged (every timed call's, inputs never seen before):\n\n| kernel | shape | calls judged | wrong |\n|---|---|---|---|\n");
        for j in &report.judged {
            md.push_str(&format!("| {} | {} | {} | {} |\n", j.kernel, j.shape, j.calls, j.wrong));
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
