//! `bench` for external kernels: timed in their worker so that the kernel cannot falsify the
//! result. Per shape, calls one at a time between CUDA events (the cold-call latency,
//! [`super::per_call`]), then batches of calls timed by the parent's clock
//! against a baseline worker ([`super::batch`]): the batch figure is the time
//! reported; then lone-call batches, the cold call as the parent sees it, with which the
//! latency by CUDA events must agree; every timed output is judged.

use super::batch::BatchPlan;
use super::batch_clock::{
    choose_slots, latency_finding, lone_finding, median, wrong_outputs_finding, BATCHES,
    LONE_BATCHES, LONE_RECHECK_BATCHES,
};
use super::batch_inputs::{BatchInputs, DeviceInputs, HostInputs};
use super::batch_memory::{free_memory, slot_bytes, BatchMemory};
use super::judge::{f16_values, OutputJudge};
use super::report::{regime_covered, trusted, BatchRow, BenchReport, Clocks, Judged};
use super::roofline::{self, below_floor_finding};
use super::timing::Timing;
use crate::error::{Error, Result};
use crate::gpu::device::device_info;
use crate::gpu::l2::L2Reset;
use crate::kernels::{KernelCase, KernelFailure, KernelUnderTest};
use crate::worker::isolated::IsolatedKernel;
use crate::worker::protocol::CaseFiles;
use nvfp4_model::golden::set::{DUAL_GEMM_BENCHMARKS, GROUP_GEMM_BENCHMARKS};
use nvfp4_model::problem::generate::{generate_group_gemm, generate_problem};
use nvfp4_model::problem::{Distribution, ProblemInputs, ProblemKind, Shape};
use std::path::Path;
use std::time::Duration;

/// Warm-up calls before each timed loop (each on its own inputs).
const WARM_UP: usize = 3;
/// The first seed of the inputs of a shape's calls (call i gets `first + i`): drawn anew for
/// every run, so that no kernel can compute its timed calls' answers in advance from a seed it
/// knows or can guess (halved: `first + i` never wraps).
fn first_seed() -> u64 {
    crate::secrets::unpredictable_seed() >> 1
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

/// The median of `walls` less `samples`, call by call.
fn beyond(walls: &[f64], samples: &[f64]) -> Option<f64> {
    let differences: Vec<f64> = walls.iter().zip(samples).map(|(w, s)| w - s).collect();
    median(&differences)
}

/// What a bench run asks of each external kernel.
pub struct ExternalOptions<'a> {
    /// The shapes to time; empty: the competition's benchmark shapes of the kernel's problem.
    pub shapes: &'a [Shape],
    /// Calls timed one at a time per shape (the cold-call latency).
    pub reps: usize,
    /// Where its certificate is read.
    pub report_dir: &'a std::path::Path,
    /// Time it without a certificate of its files.
    pub force_untrusted: bool,
}

/// Times a certified external kernel in its worker on every shape it supports. `Ok(false)` where
/// it was skipped for want of a certificate of its files (and not `--force-untrusted`).
pub fn bench_external(
    kernel: &IsolatedKernel,
    args: &ExternalOptions<'_>,
    report: &mut BenchReport,
) -> Result<bool> {
    let name = kernel.name().to_string();
    let certified = trusted(args.report_dir, &name, &kernel.info.source_hash);
    let is_trusted = certified.is_some();
    if !is_trusted && !args.force_untrusted {
        eprintln!(
            "skipping {name}: no certificate of this kernel's files in {} (certify it first, or --force-untrusted)",
            args.report_dir.display()
        );
        return Ok(false);
    }
    // The parent's own GPU state first, before any code of the kernel's runs: a kernel that
    // then takes the device's memory cannot turn its timing into "no usable GPU".
    let info = device_info().as_ref().map_err(|e| Error::from(e.clone()))?;
    let mut l2 = L2Reset::new()?;
    if let Err(err) = kernel.prepare() {
        eprintln!("skipping {name}: {err}");
        return Ok(true);
    }
    report.device = info.describe();
    if let Some(isolation) = kernel.environment().isolation {
        report.isolation.push((name.to_string(), isolation));
    }
    let problem = kernel.problem();
    let bench_shapes: Vec<BenchShape> = if args.shapes.is_empty() {
        default_bench_shapes(problem)
    } else {
        args.shapes.iter().map(|&s| BenchShape::One(s)).collect()
    };
    // The timed sets live in the kernel's input directory, read-only to a sandboxed worker.
    let scratch = kernel.input_dir().join("bench");
    let judge = &OutputJudge::new();
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
            // Every timed call's output is judged.
            |n| (0..n).collect(),
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
        // The parent's clock around each single request: reported only. Its round trip's noise
        // on a busy host is as large as a call, so the batch below is the clock bench trusts.
        if let Some(text) = run.wall_clock_finding() {
            report
                .clock_notes
                .push(format!("{name} on {shape}: {text}"));
        }
        let judged_calls = run.outputs.len();
        let mut wrong = Vec::new();
        for (call, output) in &run.outputs {
            let seed = first + (WARM_UP + call) as u64;
            let failed = judge.failed_elements(&bench_shape.inputs(problem, seed), output);
            if failed > 0 {
                wrong.push((format!("call {call} (seed {seed})"), failed));
            }
        }
        let latency_us = median(&run.calls.samples_us).unwrap_or(0.0);
        let batch = run.shared_inputs.then(|| {
            time_in_batches(
                kernel,
                &mut l2,
                bench_shape,
                problem,
                &first_case,
                latency_us,
                first + (WARM_UP + args.reps) as u64,
                judge,
                info.l2_bytes,
                per_call,
            )
        });
        let (batch_row, batch_wrong, batch_judged) = match batch {
            Some(Ok(outcome)) => (Some(outcome.row), outcome.wrong, outcome.judged),
            Some(Err(failure)) => {
                report.findings.push(format!(
                    "timing failed: {name} on {shape}: in a batch: {failure}"
                ));
                continue;
            }
            None => (None, Vec::new(), 0),
        };
        wrong.extend(batch_wrong);
        if let Some(finding) = wrong_outputs_finding(judged_calls + batch_judged, &wrong) {
            report
                .findings
                .push(format!("{name} on {shape}: {finding}"));
        }
        report.judged.push(Judged {
            kernel: name.clone(),
            shape,
            calls: judged_calls + batch_judged,
            wrong: wrong.len(),
        });
        let Some(row) = batch_row else {
            report.timings.push((
                Timing::from_samples(&name, shape, run.calls.samples_us, WARM_UP + args.reps),
                is_trusted,
            ));
            continue;
        };
        for finding in [
            latency_finding(latency_us, row.per_call_us),
            row.lone_us
                .filter(|_| row.lone_rule)
                .and_then(|lone| lone_finding(latency_us, lone)),
            floor
                .as_ref()
                .and_then(|floor| below_floor_finding(row.per_call_us, floor)),
            row.memory_note.clone(),
        ]
        .into_iter()
        .flatten()
        {
            report
                .findings
                .push(format!("{name} on {shape}: {finding}"));
        }
        report.timings.push((
            Timing::from_samples(&name, shape, row.figures_us.clone(), row.slots),
            is_trusted,
        ));
        report.batches.push(row);
    }
    Ok(true)
}

/// One shape's batches: the report's row, the calls whose outputs were wrong (named, with the
/// elements wrong) and how many outputs were judged.
struct BatchOutcome {
    row: BatchRow,
    wrong: Vec<(String, usize)>,
    judged: usize,
}

/// Times `kernel` on `bench_shape` in batches ([`super::batch`]) in the workers
/// the per-call timing left, every output judged.
#[allow(clippy::too_many_arguments)]
fn time_in_batches(
    kernel: &IsolatedKernel,
    l2: &mut L2Reset,
    bench_shape: &BenchShape,
    problem: ProblemKind,
    first_case: &KernelCase,
    latency_us: f64,
    first_seed: u64,
    judge: &OutputJudge,
    l2_bytes: usize,
    per_call: Duration,
) -> std::result::Result<BatchOutcome, KernelFailure> {
    let (slot_bytes, input_bytes) = slot_bytes(first_case)
        .ok_or_else(|| KernelFailure::Crashed("no batch for host tensors".into()))?;
    // A quarter of the free memory: the rest is the kernel's and the judge's.
    let choice = choose_slots(
        input_bytes,
        slot_bytes,
        l2_bytes,
        latency_us,
        free_memory() / 4,
    );
    let memory = BatchMemory::new(first_case, choice.slots)
        .map_err(|why| KernelFailure::Crashed(format!("the batch's memory: {why}")))?;
    let slots = choice.slots;
    let seed = |b: usize, i: usize| first_seed + (b * slots + i) as u64;
    let described = CaseFiles::describe(first_case, Path::new(""));
    let plan = BatchPlan {
        memory: &memory,
        described: &described,
        batches: BATCHES,
        lone_batches: LONE_BATCHES,
        first_batch: 0,
        // A lone call adds the worker's L2 flush and two synchronizations to a call.
        timeout: (per_call * 2 + Duration::from_millis(10)) * slots as u32
            + Duration::from_secs(30),
    };
    let shape = Shape {
        m: described.m,
        n: described.n,
        k: described.k,
        l: described.l,
    };
    // A dual GEMM's inputs made and its outputs judged on the GPU where the GPU reference takes
    // the shape; otherwise (another problem, no GPU reference, or the generator would not load)
    // on the host.
    let on_device = judge
        .gpu()
        .filter(|gpu| {
            problem == ProblemKind::DualGemm && gpu.declines(&first_case.inputs).is_none()
        })
        .and_then(|gpu| match DeviceInputs::new(&memory, gpu, shape, seed) {
            Ok(inputs) => Some(inputs),
            Err(why) => {
                crate::trace::trace(format_args!(
                    "{shape}: batches made and judged on the host: {why}"
                ));
                None
            }
        });
    let mut on_device = on_device;
    let mut on_host = HostInputs::new(
        &memory,
        |b, i| KernelCase::new(bench_shape.inputs(problem, seed(b, i)), 0),
        |_, _, case: &KernelCase, bytes| {
            let output = f16_values(&crate::gpu::library::lmn_to_mnl(bytes, shape));
            judge.failed_elements(&case.inputs, &output)
        },
    );
    let inputs: &mut dyn BatchInputs = match on_device.as_mut() {
        Some(inputs) => inputs,
        None => &mut on_host,
    };
    let mut batch = kernel.time_batches(l2, &plan, inputs)?;
    // The lone rule where it was measured to hold: a library's Rust worker (no torch).
    let lone_rule = kernel.environment().torch.is_none();
    if lone_rule
        && batch
            .clock
            .lone_us()
            .is_some_and(|lone| lone_finding(latency_us, lone).is_some())
    {
        // Before a finding, the lone calls once more on fresh inputs: see LONE_RECHECK_BATCHES.
        let recheck = BatchPlan {
            batches: 0,
            lone_batches: LONE_RECHECK_BATCHES,
            first_batch: BATCHES + LONE_BATCHES,
            ..plan
        };
        let again = kernel.time_batches(l2, &recheck, inputs)?;
        batch.add_lone_round(again);
    }
    let wrong = batch
        .wrong
        .iter()
        .map(|call| {
            (
                format!(
                    "batch {} call {} (seed {})",
                    call.batch,
                    call.slot,
                    seed(call.batch, call.slot)
                ),
                call.elements,
            )
        })
        .collect();
    let judged = batch.judged;
    let figures_us = batch.clock.per_call_us();
    let per_call_us = median(&figures_us).unwrap_or(0.0);
    let lone_us = batch.clock.lone_us();
    let latency_trusted = latency_finding(latency_us, per_call_us).is_none()
        && (!lone_rule || lone_us.is_none_or(|lone| lone_finding(latency_us, lone).is_none()));
    let memory_note = choice.below_l2.then(|| {
        format!(
            "timing not trusted: the device memory held only {slots} calls a batch, whose \
             inputs are less than {} times the L2: calls may read inputs from L2",
            super::batch_clock::L2_TIMES
        )
    });
    if let Some(most) = batch
        .worker
        .other_threads
        .iter()
        .copied()
        .max()
        .filter(|&n| n > 0)
    {
        return Err(KernelFailure::Crashed(format!(
            "the kernel kept {most} Python thread(s) of its own alive beside a batch"
        )));
    }
    Ok(BatchOutcome {
        row: BatchRow {
            kernel: kernel.name().to_string(),
            shape: bench_shape.label(problem),
            slots,
            batches: BATCHES,
            kernel_batch_us: batch.clock.kernel_batch_us.clone(),
            baseline_batch_us: batch.clock.baseline_batch_us.clone(),
            figures_us,
            per_call_us,
            latency_us,
            latency_trusted,
            lone_batches: batch.clock.lone_kernel_batch_us.len(),
            lone_kernel_batch_us: batch.clock.lone_kernel_batch_us.clone(),
            lone_baseline_batch_us: batch.clock.lone_baseline_batch_us.clone(),
            lone_figures_us: batch.clock.lone_per_call_us(),
            lone_us,
            lone_rule,
            lone_events_us_median: median(&batch.lone_samples_us),
            batch_events_us: batch.worker.samples_us.clone(),
            memory_note,
        },
        wrong,
        judged,
    })
}
