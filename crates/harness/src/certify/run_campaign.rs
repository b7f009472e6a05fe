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

use super::campaign::cases::MadeAhead;
use super::campaign::cases::{run_cases, CaseOutcome, CaseSpec, RANDOM_BATCH};
use super::campaign::coverage::Coverage;
use super::campaign::fixed_cases::refuses_unsupported_shape;
use super::campaign::limits::CampaignLimits;
use super::campaign::pipeline::run_in_pipeline;
use super::campaign::plan::CampaignPlan;
use super::shrink::failure::{shrunk, ExactFailure, Failure, Shrunk};
use crate::kernels::KernelUnderTest;
use nvfp4_model::model::mma::schedule::Schedule;
use proptest::strategy::ValueTree;
use std::time::{Duration, Instant};

/// Cases of outputs past this many elements are freed on a thread of their own.
const DROPPED_ASIDE_ELEMENTS: usize = 1 << 24;

/// Frees a judged case's buffers (inputs, output and reference: gigabytes for a deployment
/// case, about 50 ms a gigabyte to hand back to the system) off the thread that runs the next
/// case, which would otherwise wait for it between two cases.
fn drop_aside(outcome: CaseOutcome) {
    // By the case's size: an output judged on the GPU never came back, but its inputs did.
    if outcome.case.inputs.output_len() >= DROPPED_ASIDE_ELEMENTS {
        std::thread::spawn(move || drop(outcome));
    }
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

/// Runs the campaign: the `golden` cases the kernel supports, the fixed edge cases, then random
/// cases. `progress` is called after each case with (cases done, cases planned).
pub fn certify_variant(
    kernel: &dyn KernelUnderTest,
    limits: CampaignLimits,
    golden: &[CaseSpec],
    progress: impl FnMut(usize, usize),
) -> CampaignResult {
    certify_variant_with(kernel, limits, golden, &MadeAhead::default(), progress)
}

/// [`certify_variant`], the random small cases taking their references from those made
/// `ahead` while the kernel started (`super::certify_kernel`).
pub(crate) fn certify_variant_with(
    kernel: &dyn KernelUnderTest,
    limits: CampaignLimits,
    golden: &[CaseSpec],
    ahead: &MadeAhead,
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
    let mut draws = plan.random_draws();
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
        crate::trace::trace(format_args!(
            "case {index} {} {} {class}: {:.2} s ({:?}), {}",
            outcome.spec.shape,
            outcome.spec.dist.name(),
            seconds,
            outcome.phases,
            if outcome.failed() { "FAILED" } else { "passed" }
        ));
        progress(coverage.cases, planned_here);
        let exact_open = exact.as_ref().is_some_and(|exact| exact.mismatch.is_none());
        let to_shrink = outcome.failed() || (exact_open && outcome.exact_mismatch());
        if !to_shrink {
            drop_aside(outcome);
            return None;
        }
        match shrunk(kernel, outcome, index, tree, order, schedule) {
            Shrunk::Failure(failure) => Some(*failure),
            Shrunk::ScheduleDiffers(mismatch) => {
                exact.as_mut()?.mismatch = Some(mismatch);
                None
            }
        }
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
            let outcomes = run_cases(kernel, &specs, order, schedule, ahead);
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
