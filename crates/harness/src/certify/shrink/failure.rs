//! What a campaign does with a case that fails: the one call after a failure, in order, under
//! one time bound from that case (`time_bound.rs`). The case is shrunk (`shrink_shape.rs`); a
//! minimal case outside the intervals gets its failing region (`region.rs`), is judged on every
//! element, diagnosed (`diagnose.rs`) and its wrong problem identified (`identify.rs`), and its
//! data shrunk (`shrink_data.rs`); in exact mode, a minimal case still inside the intervals is
//! a schedule difference, with the schedules whose replay the first differing output matches.

use super::cases::{CaseOutcome, CaseSpec};
use super::diagnose::diagnosed;
use super::identify::identified;
use super::region::{failing_region, Region};
use super::shrink_data::{shrink_data, ShrunkData};
use super::shrink_shape::shrink_case;
use super::time_bound::{Step, TimeBound};
use super::trace;
use crate::kernels::{KernelFailure, KernelUnderTest};
use nvfp4_model::compare::diagnosis::Diagnosis;
use nvfp4_model::compare::identify::Identification;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::{KChunkOrder, MmaModel, Schedule};
use nvfp4_model::model::replay::{replay_dual_gemm, ExactComparison};
use proptest::strategy::ValueTree;
use std::time::Instant;

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
    pub data: Option<ShrunkData>,
    /// Around the minimal case: each dimension's boundary and which ones the failure needs
    /// (none for a hang: each run would cost a watchdog).
    pub region: Option<Region>,
    /// The nearby problem the output answers, or the nearest one (wrong dual-GEMM outputs).
    pub identification: Option<Identification>,
    /// What the time bound stopped before its end, in words (empty when everything finished).
    pub unfinished: Vec<String>,
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

/// What a failing case became once shrunk.
pub enum Shrunk {
    /// Outside the intervals: the campaign's failure.
    Failure(Box<Failure>),
    /// Exact mode: still inside the intervals, but not what the declared schedule gives.
    ScheduleDiffers(ExactFailure),
}

/// Shrinks `failing`, the case at `case_index` in campaign order: a case outside the intervals
/// to one that still fails, then diagnosed; a case that only differs from the replay of the
/// declared `schedule` (exact mode) to one that still fails or differs, which is diagnosed as
/// a failure where it fails. `tree` is the random case's proptest value tree (none for a fixed
/// case).
pub fn shrunk(
    kernel: &dyn KernelUnderTest,
    failing: CaseOutcome,
    case_index: usize,
    tree: Option<&mut dyn ValueTree<Value = CaseSpec>>,
    order: KOrder,
    schedule: Option<Schedule>,
) -> Shrunk {
    let first = failing.spec;
    let schedule_only = !failing.failed();
    let matching = if schedule_only {
        matching_schedules(&failing, schedule)
    } else {
        Vec::new()
    };
    let still_fails: fn(&CaseOutcome) -> bool = if schedule_only {
        |o| o.failed() || o.exact_mismatch()
    } else {
        CaseOutcome::failed
    };
    let bound = TimeBound::from_now();
    let mut unfinished = Vec::new();
    let mut stopped = |step: Step, finished: bool| {
        if !finished {
            unfinished.push(step.unfinished_words().to_string());
        }
    };
    let started = Instant::now();
    let shrunk_shape = shrink_case(
        kernel,
        failing,
        tree,
        order,
        schedule,
        still_fails,
        bound.end_of(Step::ShapeShrink),
    );
    stopped(Step::ShapeShrink, shrunk_shape.finished);
    let (minimal, shrink_steps) = (shrunk_shape.minimal, shrunk_shape.steps);
    if !schedule_only {
        trace(format_args!(
            "shrunk to {} in {shrink_steps} runs, {:.1} s",
            minimal.spec.shape,
            started.elapsed().as_secs_f64()
        ));
    }
    if !minimal.failed() {
        return Shrunk::ScheduleDiffers(ExactFailure {
            case_index,
            first,
            minimal: minimal.spec,
            shrink_steps,
            comparison: minimal.exact.expect("an exact mismatch was compared"),
            matching_schedules: matching,
        });
    }
    // Shrinking a schedule difference may find a case outside the intervals: a failure too.
    let region = (!matches!(minimal.result, Err(KernelFailure::Hung(_)))).then(|| {
        failing_region(
            kernel,
            minimal.spec,
            order,
            schedule,
            &still_fails,
            bound.end_of(Step::Region),
        )
    });
    stopped(Step::Region, region.as_ref().is_none_or(|r| r.finished));
    let started = Instant::now();
    let identification_ends = bound.end_of(Step::Identification);
    let (minimal, diagnosis, extra) = diagnosed(kernel, minimal, first, order, identification_ends);
    let identification = identified(kernel, &minimal, &extra, order, identification_ends);
    drop(extra);
    stopped(
        Step::Identification,
        identification.as_ref().is_none_or(|i| i.finished)
            && (diagnosis.is_some()
                || minimal.result.is_err()
                || !bound.over(Step::Identification)),
    );
    trace(format_args!(
        "diagnosed and identified in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    let started = Instant::now();
    // Data shrinking only for wrong outputs: a crash or a hang would cost a watchdog per run.
    let data = match &minimal.result {
        Ok(_) => shrink_data(
            kernel,
            &minimal.case.inputs,
            minimal.case.padding_fill,
            order,
            bound.end_of(Step::DataShrink),
        ),
        Err(_) => None,
    };
    stopped(
        Step::DataShrink,
        minimal.result.is_err() || !bound.over(Step::DataShrink),
    );
    trace(format_args!(
        "data shrunk in {:.1} s; {:.1} s after the first failure",
        started.elapsed().as_secs_f64(),
        bound.elapsed().as_secs_f64()
    ));
    Shrunk::Failure(Box::new(Failure {
        case_index,
        first,
        minimal,
        diagnosis,
        shrink_steps,
        data,
        region,
        identification,
        unfinished,
    }))
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
