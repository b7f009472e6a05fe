//! `bench` for external kernels: timed in their worker so that the kernel cannot falsify the
//! result ([`nvfp4_harness::worker::timing`]), every shape's timing checked three ways: outputs of timed
//! calls drawn after the loop and judged against the model, the parent's wall clock against the
//! reported samples, and a crash or hang while timed.

use super::bench_report::{regime_covered, trusted, BenchArgs, BenchReport, Clocks, SpotCheck};
use nvfp4_harness::gpu::bench::Timing;
use nvfp4_harness::gpu::device_info;
use nvfp4_harness::gpu::l2::L2Reset;
use nvfp4_harness::gpu::roofline::{self, below_floor_finding};
use nvfp4_harness::kernels::{KernelCase, KernelUnderTest};
use nvfp4_harness::worker::timing::median;
use nvfp4_harness::worker::CaseFiles;
use nvfp4_harness::worker::IsolatedKernel;
use nvfp4_harness::{Error, Result};
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::golden::set::{DUAL_GEMM_BENCHMARKS, GROUP_GEMM_BENCHMARKS};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::problem_reference;
use nvfp4_model::problem::generate::{generate_group_gemm, generate_problem};
use nvfp4_model::problem::{Distribution, ProblemInputs, ProblemKind, Shape};
use std::time::Duration;

/// Warm-up calls before each timed loop (each on its own inputs).
const WARM_UP: usize = 3;
/// The first seed of the inputs of a shape's calls (call i gets `first + i`): drawn anew for
/// every run, so that no kernel can compute its timed calls' answers in advance from a seed it
/// knows or can guess (halved: `first + i` never wraps).
fn first_seed() -> u64 {
    nvfp4_harness::secrets::unpredictable_seed() >> 1
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

/// The competition's benchmark shapes of each problem (docs/reference/problem.md; GPU MODE's task.yml).
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

/// `count` distinct indices below `n`, drawn from the clock: chosen after the timed loop, so
/// the kernel could not have known them.
fn draw_after_the_fact(n: usize, count: usize) -> Vec<usize> {
    let mut state = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        | 1;
    let mut picked: Vec<usize> = Vec::new();
    while picked.len() < count.min(n) {
        // xorshift64: enough to pick a few indices nobody could predict.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let i = (state % n as u64) as usize;
        if !picked.contains(&i) {
            picked.push(i);
        }
    }
    picked.sort_unstable();
    picked
}

/// The median of `walls` less `samples`, call by call.
fn beyond(walls: &[f64], samples: &[f64]) -> Option<f64> {
    let differences: Vec<f64> = walls.iter().zip(samples).map(|(w, s)| w - s).collect();
    median(&differences)
}

/// Times a certified external kernel in its worker on every shape it supports.
pub fn bench_external(
    kernel: &IsolatedKernel,
    shapes: &[Shape],
    args: &BenchArgs,
    report: &mut BenchReport,
) -> Result<()> {
    let name = kernel.name().to_string();
    let certified = trusted(&args.report_dir, &name, &kernel.info.source_hash);
    let is_trusted = certified.is_some();
    if !is_trusted && !args.force_untrusted {
        eprintln!(
            "skipping {name}: no certificate of this kernel's files in {} (certify it first, or --force-untrusted)",
            args.report_dir.display()
        );
        return Ok(());
    }
    // The parent's own GPU state first, before any code of the kernel's runs: a kernel that
    // then takes the device's memory cannot turn its timing into "no usable GPU".
    let info = device_info().as_ref().map_err(|e| Error::from(e.clone()))?;
    let mut l2 = L2Reset::new()?;
    if let Err(err) = kernel.prepare() {
        eprintln!("skipping {name}: {err}");
        return Ok(());
    }
    report.device = info.describe();
    if let Some(isolation) = kernel.environment().isolation {
        report.isolation.push((name.to_string(), isolation));
    }
    let problem = kernel.problem();
    let bench_shapes: Vec<BenchShape> = if args.shapes.is_empty() {
        default_bench_shapes(problem)
    } else {
        shapes.iter().map(|&s| BenchShape::One(s)).collect()
    };
    // The timed sets live in the kernel's input directory, read-only to a sandboxed worker.
    let scratch = kernel.input_dir().join("bench");
    let first = first_seed();
    for bench_shape in &bench_shapes {
        let shape = bench_shape.label(problem);
        if !kernel.support().supports(shape) {
            eprintln!("skipping {name} on {shape}: outside its declared support");
            continue;
        }
        if !regime_covered(certified.as_ref(), &name, shape) {
            continue;
        }
        // One set of inputs per call, none seen twice: the warm-up sets now, each timed call's
        // inputs written only just before its call.
        let _ = std::fs::remove_dir_all(&scratch);
        let warmup_sets = (0..WARM_UP)
            .map(|i| {
                let case = KernelCase::new(bench_shape.inputs(problem, first + i as u64), 0);
                CaseFiles::write(&case, &scratch.join(format!("warmup{i}")))
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|err| Error::file(&scratch, err))?;
        let first_case = KernelCase::new(bench_shape.inputs(problem, first), 0);
        let floor = roofline::floor(&first_case.inputs, info);
        let per_call = Duration::from_secs(
            10 + (2 * first_case.inputs.output_len() * shape.k / 100_000_000_000) as u64,
        );
        let timed = kernel.time(
            &mut l2,
            &warmup_sets,
            args.reps,
            |call| {
                KernelCase::new(
                    bench_shape.inputs(problem, first + (WARM_UP + call) as u64),
                    0,
                )
            },
            |n| draw_after_the_fact(n, args.spot_checks),
            per_call,
        );
        let _ = std::fs::remove_dir_all(&scratch);
        let run = match timed {
            Ok(run) => run,
            Err(failure) => {
                report
                    .findings
                    .push(format!("timing failed: {name} on {shape}: {failure}"));
                continue;
            }
        };
        let delivery = (name.clone(), run.delivery.clone());
        if !report.delivery.contains(&delivery) {
            report.delivery.push(delivery);
        }
        report.clocks.push(Clocks {
            kernel: name.clone(),
            shape,
            events_us_median: median(&run.calls.samples_us).unwrap_or(0.0),
            events_us_mean: run.calls.samples_us.iter().sum::<f64>()
                / run.calls.samples_us.len().max(1) as f64,
            parent_call_us_median: median(&run.parent_call_us).unwrap_or(0.0),
            baseline_call_us_min: run
                .null_parent_call_us
                .iter()
                .copied()
                .min_by(f64::total_cmp),
            unaccounted_us: run.unaccounted_us(),
            allowed_us: run.clock_allowance_us(),
            worker_beyond_sample_us: beyond(&run.worker_wall_us, &run.calls.samples_us),
            baseline_worker_beyond_sample_us: beyond(
                &run.null_worker_wall_us,
                &run.null_loop.samples_us,
            ),
            after_end_us_median: median(&run.calls.after_end_us).unwrap_or(0.0),
            null_after_end_us_median: median(&run.null_loop.after_end_us).unwrap_or(0.0),
            floor_us: floor.as_ref().map(|f| f.us),
        });
        let below_floor = floor.as_ref().and_then(|floor| {
            below_floor_finding(median(&run.calls.samples_us).unwrap_or(0.0), floor)
        });
        for finding in [
            run.after_end_finding(),
            run.batch_finding(),
            run.threads_finding(),
            below_floor,
        ]
        .into_iter()
        .flatten()
        {
            report
                .findings
                .push(format!("{name} on {shape}: {finding}"));
        }
        // The parent's clock around each request: a finding where the inputs came in shared
        // device memory (then a timed request costs what the baseline's costs besides the
        // call: results/parent-owned/). Where they came as files (the C-ABI library, the
        // grouped GEMM), reported only: loading them varies by milliseconds between requests,
        // more than the slack, and raised false alarms on honest kernels
        // (results/sandbox/).
        if let Some(text) = run.wall_clock_finding() {
            let line = format!("{name} on {shape}: {text}");
            if run.shared_inputs {
                report.findings.push(line);
            } else {
                report.clock_notes.push(line);
            }
        }
        for (call, output) in &run.outputs {
            let seed = first + (WARM_UP + call) as u64;
            let inputs = bench_shape.inputs(problem, seed);
            let reference = problem_reference(&inputs, KOrder::Contiguous);
            let (m, n, l) = inputs.output_dims();
            let verdict = judge(
                OutputShape { m, n, l },
                output,
                &reference.expected,
                &reference.lo,
                &reference.hi,
            );
            if !verdict.pass {
                report.findings.push(format!(
                    "timing not trusted: {name} on {shape}: the output of timed call {call} (inputs never seen before, seed {seed}) was wrong in {} elements",
                    verdict.failed
                ));
            }
            report.spot_checks.push(SpotCheck {
                kernel: name.clone(),
                shape,
                at_call: *call,
                seed,
                pass: verdict.pass,
                failed_elements: verdict.failed,
            });
        }
        report.timings.push((
            Timing::from_samples(&name, shape, run.calls.samples_us, WARM_UP + args.reps),
            is_trusted,
        ));
    }
    Ok(())
}
