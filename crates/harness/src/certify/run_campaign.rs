//! The certification campaign for one kernel: fixed edge cases first, then random cases drawn by
//! proptest strategies (shapes inside the kernel's declared support, biased to edges, all
//! distributions), until a case count or a time budget; the first failure is shrunk by proptest to
//! a minimal case, diagnosed, and saved so that `check` can replay it.
//!
//! With [`CampaignLimits::exact`], a kernel that declares its accumulation schedule
//! ([`KernelUnderTest::schedule`]) is also held to zero tolerance: every output that passes the
//! interval check is compared with the replay of that schedule (`model::replay`). The first
//! case that differs is shrunk (to a case that still differs, or that fails the intervals, which
//! then is the campaign's failure), the campaign goes on so that every case is still judged
//! against the intervals, and the result says "correct within the intervals, schedule differs
//! from the declared one" with the first differing element.

use super::campaign::cases::{judged_whole, round_up};
use super::campaign::cases::{run_case, run_cases, CaseOutcome, CaseSpec, RANDOM_BATCH};
use super::campaign::coverage::Coverage;
use super::campaign::limits::CampaignLimits;
use super::campaign::pipeline::run_in_pipeline;
use super::campaign::plan::CampaignPlan;
use super::campaign::sampling::{shape_products, FULL_REFERENCE_PRODUCTS};
use super::shrink::shrink_shape::shrink_case;
use crate::kernels::{KernelCase, KernelFailure, KernelUnderTest};
use nvfp4_model::compare::diagnosis::{diagnose, Diagnosis, Observation};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::{KChunkOrder, MmaModel, Schedule};
use nvfp4_model::model::replay::{replay_dual_gemm, ExactComparison};
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::POISON;
use nvfp4_model::problem::{Distribution, Shape};
use proptest::strategy::ValueTree;
use std::time::{Duration, Instant};

/// A failure, shrunk and diagnosed.
pub struct Failure {
    /// The failing case's index in campaign order (fixed cases first): `merge` keeps the
    /// shards' earliest failure, the one an unsharded campaign stops at.
    pub case_index: usize,
    pub first: CaseSpec,
    pub minimal: CaseOutcome,
    pub diagnosis: Option<Diagnosis>,
    pub shrink_steps: usize,
    /// The failing case's data shrunk further (dual GEMM, wrong outputs).
    pub data: Option<super::shrink::shrink_data::ShrunkData>,
}

/// The result of one kernel's campaign.
pub struct CampaignResult {
    pub coverage: Coverage,
    /// The cases that ran, in order (what `certify --plan` listed, less a shard's others and
    /// what a failure or a time budget cut off).
    pub ran: Vec<CaseSpec>,
    pub failure: Option<Failure>,
    pub elapsed: Duration,
    /// Exact mode only.
    pub exact: Option<ExactResult>,
}

/// What exact mode found.
#[derive(Debug, Clone)]
pub struct ExactResult {
    /// The schedule the kernel declares (`None`: none, so nothing was replayed).
    pub schedule: Option<Schedule>,
    /// The first case whose output passed the intervals but differed from the replay.
    pub mismatch: Option<ExactFailure>,
}

/// An output inside the intervals that is not what the declared schedule gives, shrunk.
#[derive(Debug, Clone)]
pub struct ExactFailure {
    /// The first differing case's index in campaign order.
    pub case_index: usize,
    pub first: CaseSpec,
    pub minimal: CaseSpec,
    pub shrink_steps: usize,
    /// The minimal case's comparison (its first differing element included).
    pub comparison: ExactComparison,
    /// The schedules (every model and K order, the declared epilogue) whose replay the first
    /// differing case's output matches exactly: what the kernel seems to do instead. (The
    /// first case, being larger than the minimal one, tells schedules apart better.)
    pub matching_schedules: Vec<Schedule>,
}

/// Runs the campaign: the `golden` cases the kernel supports, the fixed edge cases, then random
/// cases. `progress` is called after each case with (cases done, cases planned).
pub fn certify_variant(
    kernel: &dyn KernelUnderTest,
    limits: CampaignLimits,
    golden: &[CaseSpec],
    mut progress: impl FnMut(usize, usize),
) -> CampaignResult {
    let started = Instant::now();
    let order = limits.order_for(kernel);
    let mut coverage = Coverage::default();
    let mut ran = Vec::new();
    let schedule = if limits.exact {
        kernel.schedule()
    } else {
        None
    };
    let mut exact = limits.exact.then_some(ExactResult {
        schedule,
        mismatch: None,
    });
    let plan = CampaignPlan::new(kernel, &limits, golden, &mut coverage);
    let fixed: Vec<CaseSpec> = plan.fixed.iter().map(|&(_, spec)| spec).collect();
    let planned = plan.planned();
    let owns = |index: usize| limits.shard.is_none_or(|shard| shard.owns(index));
    let planned_here = limits
        .shard
        .map_or(planned, |shard| shard.share_of(planned));
    let out_of_time = || {
        limits
            .time_budget
            .is_some_and(|budget| started.elapsed() >= budget)
    };
    // One case's outcome: `Some(failure)` ends the campaign; an exact mismatch is shrunk,
    // recorded, and the campaign goes on.
    let mut judge_case = |outcome: CaseOutcome,
                          seconds: f64,
                          index: usize,
                          tree: Option<&mut dyn ValueTree<Value = CaseSpec>>,
                          coverage: &mut Coverage|
     -> Option<Failure> {
        let class = plan.class_of(&outcome.spec);
        coverage.record(&outcome, class, seconds);
        ran.push(outcome.spec);
        super::trace(format_args!(
            "case {index} {} {} {class}: {:.2} s ({:?}), {}",
            outcome.spec.shape,
            outcome.spec.dist.name(),
            seconds,
            outcome.phases,
            if outcome.failed() { "FAILED" } else { "passed" }
        ));
        progress(coverage.cases, planned_here);
        if outcome.failed() {
            let failure = shrink(kernel, outcome, tree, order, schedule);
            return Some(Failure {
                case_index: index,
                ..failure
            });
        }
        let exact = exact.as_mut()?;
        if exact.mismatch.is_some() || !outcome.exact_mismatch() {
            return None;
        }
        let first = outcome.spec;
        let matching = matching_schedules(&outcome, schedule);
        let (minimal, shrink_steps) = shrink_case(kernel, outcome, tree, order, schedule, |o| {
            o.failed() || o.exact_mismatch()
        });
        if minimal.failed() {
            // Shrinking the schedule difference found a case outside the intervals.
            let failure = diagnosed(kernel, minimal, first, shrink_steps, order);
            return Some(Failure {
                case_index: index,
                ..failure
            });
        }
        exact.mismatch = Some(ExactFailure {
            case_index: index,
            first,
            minimal: minimal.spec,
            shrink_steps,
            comparison: minimal.exact.expect("an exact mismatch was compared"),
            matching_schedules: matching,
        });
        None
    };
    // (index in campaign order, case) of the fixed cases this campaign runs.
    let own_fixed: Vec<(usize, CaseSpec)> = fixed
        .iter()
        .copied()
        .enumerate()
        .filter(|&(index, _)| owns(index))
        .collect();
    let specs: Vec<CaseSpec> = own_fixed.iter().map(|&(_, spec)| spec).collect();
    let mut next_fixed = own_fixed.iter().map(|&(index, _)| index);
    let mut failure = run_in_pipeline(kernel, &specs, order, schedule, |outcome, seconds| {
        let index = next_fixed.next().expect("one outcome per case, in order");
        judge_case(outcome, seconds, index, None, &mut coverage)
    });
    if failure.is_none() {
        let mut draws = plan.random_draws();
        let mut index = fixed.len();
        while index < planned && failure.is_none() && !out_of_time() {
            // The next cases this campaign owns, in campaign order, run as one batch and
            // judged in order. Every case is drawn, so that each shard's cases are the
            // unsharded campaign's.
            let mut batch = Vec::with_capacity(RANDOM_BATCH);
            while batch.len() < RANDOM_BATCH && index < planned {
                let tree = draws.next().expect("one draw per random case");
                if owns(index) {
                    batch.push((index, tree));
                }
                index += 1;
            }
            let specs: Vec<CaseSpec> = batch.iter().map(|(_, tree)| tree.current()).collect();
            let outcomes = run_cases(kernel, &specs, order, schedule);
            for ((index, mut tree), (outcome, seconds)) in batch.into_iter().zip(outcomes) {
                failure = judge_case(outcome, seconds, index, Some(tree.as_mut()), &mut coverage);
                if failure.is_some() {
                    break;
                }
            }
        }
    }
    if failure.is_none() {
        coverage.refuses_unsupported_shape = refuses_unsupported_shape(kernel);
    }
    CampaignResult {
        coverage,
        ran,
        failure,
        elapsed: started.elapsed(),
        exact,
    }
}

/// The schedules (every MMA model and K order, with `declared`'s epilogue) whose replay gives
/// exactly the output of `outcome`.
fn matching_schedules(outcome: &CaseOutcome, declared: Option<Schedule>) -> Vec<Schedule> {
    let (Some(declared), Some(dual)) = (declared, outcome.case.dual()) else {
        return Vec::new();
    };
    MmaModel::ALL
        .into_iter()
        .flat_map(|mma| {
            KChunkOrder::ALL.map(|k_order| Schedule {
                mma,
                k_order,
                ..declared
            })
        })
        .filter(|&schedule| {
            replay_dual_gemm(dual.inputs, schedule)
                .compare(&outcome.output)
                .mismatches
                == 0
        })
        .collect()
}

/// Offers the kernel one shape just outside its declared support (K one scale block past a
/// supported multiple): a clean refusal is the expected answer; any output is not judged.
fn refuses_unsupported_shape(kernel: &dyn KernelUnderTest) -> Option<bool> {
    let support = kernel.support();
    if support.k_multiple <= 16 {
        return None;
    }
    let shape = Shape::new(
        round_up(64, support.m_multiple),
        round_up(64, support.n_multiple),
        support.k_multiple + 16,
        1,
    )
    .expect("valid shape");
    let inputs = generate_problem(kernel.problem(), shape, Distribution::Gpumode, 0);
    let mut output = vec![POISON; inputs.output_len()];
    let case = KernelCase::new(inputs, 0);
    Some(matches!(
        kernel.run(&case, &mut output),
        Err(KernelFailure::Refused(_))
    ))
}

/// Shrinks a failing case with its proptest value tree, then diagnoses it.
fn shrink(
    kernel: &dyn KernelUnderTest,
    failing: CaseOutcome,
    tree: Option<&mut dyn ValueTree<Value = CaseSpec>>,
    order: KOrder,
    schedule: Option<Schedule>,
) -> Failure {
    let first = failing.spec;
    let started = Instant::now();
    let (minimal, steps) = shrink_case(kernel, failing, tree, order, schedule, CaseOutcome::failed);
    super::trace(format_args!(
        "shrunk to {} in {steps} runs, {:.1} s",
        minimal.spec.shape,
        started.elapsed().as_secs_f64()
    ));
    diagnosed(kernel, minimal, first, steps, order)
}

fn diagnosed(
    kernel: &dyn KernelUnderTest,
    minimal: CaseOutcome,
    first: CaseSpec,
    shrink_steps: usize,
    order: KOrder,
) -> Failure {
    let started = Instant::now();
    let minimal = judged_whole(minimal, order);
    // The catalogue computes a dozen wrong problems in full on the CPU: not for a minimal case
    // past the size the CPU model judges whole (a bug that needs 2^30 outputs stays that large).
    let catalogue_affordable = shape_products(minimal.spec.shape, 2) <= FULL_REFERENCE_PRODUCTS;
    let diagnosis = match &minimal.result {
        // The catalogue of known bugs is the dual GEMM's.
        Ok(_) if minimal.case.dual().is_some() && catalogue_affordable => {
            Some(diagnose_with_more_runs(kernel, &minimal, first, order))
        }
        _ => None,
    };
    super::trace(format_args!(
        "diagnosed in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let started = Instant::now();
    // Data shrinking only for wrong outputs: a crash or a hang would cost a watchdog per run.
    let data = match &minimal.result {
        Ok(_) => super::shrink::shrink_data::shrink_data(
            kernel,
            &minimal.case.inputs,
            minimal.case.padding_fill,
            order,
        ),
        Err(_) => None,
    };
    super::trace(format_args!(
        "data shrunk in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    Failure {
        case_index: 0,
        first,
        minimal,
        diagnosis,
        shrink_steps,
        data,
    }
}

/// Diagnoses from the minimal case plus larger runs (the first failing case, and a 192x160x784
/// case in the failing and in the gpumode distribution) that separate look-alike bug classes;
/// of those, the runs that fail.
fn diagnose_with_more_runs(
    kernel: &dyn KernelUnderTest,
    minimal: &CaseOutcome,
    first: CaseSpec,
    order: KOrder,
) -> Diagnosis {
    let support = kernel.support();
    let larger = Shape::new(
        round_up(192, support.m_multiple),
        round_up(160, support.n_multiple),
        round_up(784, support.k_multiple),
        1,
    )
    .expect("valid shape");
    let extra: Vec<CaseOutcome> = [
        first,
        CaseSpec {
            shape: larger,
            ..first
        },
        CaseSpec {
            shape: larger,
            dist: Distribution::Gpumode,
            seed: first.seed,
        },
    ]
    .into_iter()
    .filter(|spec| *spec != minimal.spec)
    // The catalogue computes a dozen wrong problems in full on each run: none past the size
    // judged whole.
    .filter(|spec| shape_products(spec.shape, 2) <= FULL_REFERENCE_PRODUCTS)
    .map(|spec| run_case(kernel, spec, order, None))
    // A run the kernel gets right is no evidence for any class (a bug that shows only at some
    // depths or widths would contradict every class there).
    .filter(|outcome| outcome.result.is_ok() && outcome.failed())
    .collect();
    let observations: Vec<Observation> = std::iter::once(minimal)
        .chain(&extra)
        .filter_map(|o| {
            Some(Observation {
                inputs: o.case.dual()?.inputs,
                fill: o.case.padding_fill,
                output: &o.output,
            })
        })
        .collect();
    diagnose(&observations, order)
}
