//! `nvfp4-oracle bench`: time GPU variants that passed certification, against torch in one run.

use super::external::ExternalArgs;
use crate::compare::{judge, OutputShape};
use crate::error::{Error, Result};
use crate::golden::set::{DUAL_GEMM_BENCHMARKS, GROUP_GEMM_BENCHMARKS};
use crate::gpu::bench::{bench_variant, input_sets, Timing};
use crate::gpu::device::device_info;
use crate::gpu::variants::gpu_variants;
use crate::kernels::isolated::IsolatedKernel;
use crate::kernels::{KernelCase, KernelUnderTest};
use crate::model::bounds::KOrder;
use crate::model::problem_reference;
use crate::problem::generate::{generate_group_gemm, generate_problem};
use crate::problem::Shape;
use crate::problem::{Distribution, ProblemInputs, ProblemKind};
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
    /// External kernels: timed call outputs checked per shape. Each check is one timed call
    /// given inputs never seen before, its output judged against the model: a kernel cannot be
    /// right once and fast (and wrong) afterwards.
    #[arg(long, default_value_t = 2)]
    pub spot_checks: usize,
    #[command(flatten)]
    pub external: ExternalArgs,
}

/// One timed call of an external kernel whose output was judged.
#[derive(Serialize)]
struct SpotCheck {
    kernel: String,
    shape: Shape,
    at_call: usize,
    seed: u64,
    pass: bool,
    failed_elements: usize,
}

/// The clocks around one external kernel's timed calls on one shape: the sum of its CUDA-event
/// samples cannot exceed either wall clock (the worker's, the parent's) unless something lies.
#[derive(Serialize)]
struct Clocks {
    kernel: String,
    shape: Shape,
    events_total_us: f64,
    worker_wall_us: f64,
    parent_wall_us: f64,
}

#[derive(Serialize)]
struct BenchReport {
    device: String,
    command: String,
    timings: Vec<(Timing, bool)>,
    torch: Option<serde_json::Value>,
    spot_checks: Vec<SpotCheck>,
    clocks: Vec<Clocks>,
}

/// A certificate of this source hash that says certified.
fn trusted(dir: &Path, name: &str, hash: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(format!("{name}.json"))) else {
        return false;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return false;
    };
    value["status"] == serde_json::json!("certified")
        && value["source_hash"] == serde_json::json!(hash)
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
        command: std::env::args().collect::<Vec<_>>().join(" "),
        timings: Vec::new(),
        torch: None,
        spot_checks: Vec::new(),
        clocks: Vec::new(),
    };
    for variant in &variants {
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
    let markdown = render(&report);
    print!("{markdown}");
    std::fs::create_dir_all(&args.report_dir).map_err(|err| Error::file(&args.report_dir, err))?;
    let json = serde_json::to_string_pretty(&report).expect("reports serialize");
    for (name, text) in [("bench.json", json), ("bench.md", markdown)] {
        let path = args.report_dir.join(name);
        std::fs::write(&path, text)
            .map_err(|err| Error::file(&path, format!("cannot write: {err}")))?;
    }
    let wrong: Vec<&SpotCheck> = report.spot_checks.iter().filter(|c| !c.pass).collect();
    if !wrong.is_empty() {
        for check in &wrong {
            eprintln!(
                "timing not trusted: {} on {}: the output of timed call {} (fresh inputs, seed {}) was wrong in {} elements",
                check.kernel, check.shape, check.at_call, check.seed, check.failed_elements
            );
        }
        return Ok(ExitCode::from(super::EXIT_FAIL));
    }
    Ok(ExitCode::SUCCESS)
}

/// A benchmark shape of any problem.
enum BenchShape {
    One(Shape),
    /// The grouped GEMM's groups (L = 1 each).
    Groups(Vec<Shape>),
}

impl BenchShape {
    fn inputs(&self, problem: ProblemKind, seed: u64) -> ProblemInputs {
        match self {
            BenchShape::One(shape) => {
                generate_problem(problem, *shape, Distribution::Gpumode, seed)
            }
            BenchShape::Groups(groups) => ProblemInputs::GroupGemm(
                generate_group_gemm(groups, Distribution::Gpumode, seed).expect("benchmark groups"),
            ),
        }
    }

    /// The shape a report names it by (groups: the largest M, and the number of groups as L).
    fn label(&self, problem: ProblemKind) -> Shape {
        match self {
            BenchShape::One(shape) => problem.normalize(*shape),
            BenchShape::Groups(groups) => Shape {
                m: groups.iter().map(|g| g.m).max().unwrap_or(1),
                l: groups.len(),
                ..groups[0]
            },
        }
    }
}

/// The competition's benchmark shapes of each problem (shared/SPEC.md; GPU MODE's task.yml).
fn default_bench_shapes(problem: ProblemKind) -> Vec<BenchShape> {
    let one = |m, n, k, l| BenchShape::One(Shape::new(m, n, k, l).expect("valid"));
    match problem {
        ProblemKind::DualGemm => DUAL_GEMM_BENCHMARKS
            .iter()
            .map(|&(m, n, k)| one(m, n, k, 1))
            .collect(),
        ProblemKind::Gemm => vec![
            one(128, 7168, 16384, 1),
            one(128, 4096, 7168, 1),
            one(128, 7168, 2048, 1),
        ],
        ProblemKind::Gemv => vec![
            one(7168, 1, 16384, 1),
            one(4096, 1, 7168, 8),
            one(7168, 1, 2048, 4),
        ],
        ProblemKind::GroupGemm => GROUP_GEMM_BENCHMARKS
            .iter()
            .map(|&(ms, n, k)| {
                BenchShape::Groups(
                    ms.iter()
                        .map(|&m| Shape::new(m, n, k, 1).expect("valid"))
                        .collect(),
                )
            })
            .collect(),
    }
}

/// Times a certified external kernel in its worker, on every shape it supports, with
/// `--spot-checks` of its timed calls judged against the model.
fn bench_external(
    kernel: &IsolatedKernel,
    shapes: &[Shape],
    args: &BenchArgs,
    report: &mut BenchReport,
) -> Result<()> {
    let name = kernel.name().to_string();
    let is_trusted = trusted(&args.report_dir, &name, &kernel.info.source_hash);
    if !is_trusted && !args.force_untrusted {
        eprintln!(
            "skipping {name}: no certificate of this kernel's files in {} (certify it first, or --force-untrusted)",
            args.report_dir.display()
        );
        return Ok(());
    }
    if let Err(err) = kernel.prepare() {
        eprintln!("skipping {name}: {err}");
        return Ok(());
    }
    let info = device_info().as_ref().map_err(|e| Error::Gpu(e.clone()))?;
    report.device = info.describe();
    let problem = kernel.problem();
    let bench_shapes: Vec<BenchShape> = if args.shapes.is_empty() {
        default_bench_shapes(problem)
    } else {
        shapes.iter().map(|&s| BenchShape::One(s)).collect()
    };
    for bench_shape in &bench_shapes {
        let shape = bench_shape.label(problem);
        if !kernel.support().supports(shape) {
            eprintln!("skipping {name} on {shape}: outside its declared support");
            continue;
        }
        let case = |seed: u64| KernelCase::new(bench_shape.inputs(problem, seed), 0);
        let first = case(1111);
        let count = input_sets(&first, info.l2_bytes);
        let mut sets = vec![first];
        sets.extend((1..count).map(|set| case(1111 + set as u64)));
        // Spot checks spread over the timed calls, each on inputs no call has seen.
        let checks = args.spot_checks.min(args.reps);
        let fresh: Vec<(usize, u64, KernelCase)> = (0..checks)
            .map(|i| {
                let seed = 90_000 + i as u64;
                ((i + 1) * args.reps / (checks + 1), seed, case(seed))
            })
            .collect();
        let calls: Vec<(usize, KernelCase)> = fresh
            .iter()
            .map(|(at, _, c)| (*at, KernelCase::new(c.inputs.clone(), 0)))
            .collect();
        let started = std::time::Instant::now();
        let (timed, outputs) = kernel
            .time(&sets, &calls, args.reps, 3)
            .map_err(|failure| Error::Gpu(format!("{name} on {shape}: {failure}")))?;
        let parent_wall_us = started.elapsed().as_secs_f64() * 1e6;
        report.clocks.push(Clocks {
            kernel: name.clone(),
            shape,
            events_total_us: timed.samples_us.iter().sum(),
            worker_wall_us: timed.wall_us,
            parent_wall_us,
        });
        for ((at, seed, case), output) in fresh.iter().zip(&outputs) {
            let reference = problem_reference(&case.inputs, KOrder::Contiguous);
            let (m, n, l) = case.inputs.output_dims();
            let verdict = judge(
                OutputShape { m, n, l },
                output,
                &reference.expected,
                &reference.lo,
                &reference.hi,
            );
            report.spot_checks.push(SpotCheck {
                kernel: name.clone(),
                shape,
                at_call: *at,
                seed: *seed,
                pass: verdict.pass,
                failed_elements: verdict.failed,
            });
        }
        report.timings.push((
            Timing::from_samples(&name, shape, timed.samples_us, count),
            is_trusted,
        ));
    }
    Ok(())
}

fn render(report: &BenchReport) -> String {
    let torch = report.torch.as_ref();
    let ceiling = torch.and_then(|t| t["ceiling_tflops"].as_f64());
    let mut md = format!(
        "Device: {}\n\nCommand: `{}`\n\n",
        report.device, report.command
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
        md.push_str("\nClocks around the external kernels' timed calls (sum of CUDA-event samples; the worker's and the parent's wall clocks around the same loop, flushes included):\n\n| kernel | shape | events total us | worker wall us | parent wall us |\n|---|---|---|---|---|\n");
        for c in &report.clocks {
            md.push_str(&format!(
                "| {} | {} | {:.0} | {:.0} | {:.0} |\n",
                c.kernel, c.shape, c.events_total_us, c.worker_wall_us, c.parent_wall_us
            ));
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
