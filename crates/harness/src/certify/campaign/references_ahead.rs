//! The random small cases' references, computed while the kernel starts.
//!
//! Why: a Python submission's kernel takes seconds to start (an interpreter, torch and a CUDA
//! context, twice: its build worker's and its campaign worker's; 9.6 s for the torch example on
//! an H200), and the campaign had nothing to do meanwhile. At its end, the small random cases'
//! models (the GPU reference and the CPU model's cross-check, about 5 ms a case) ran beside
//! their batches, and slowed the worker's answer there: the GPU shared between two contexts,
//! the cores busy (`results/small-cases`).
//!
//! How: before the kernel starts, [`ReferencesAhead::start`] draws the campaign's random cases
//! (the same draws the campaign makes from its seed, the same shard's share of them) and a
//! thread computes the whole references of the small ones, in campaign order, on
//! [`crate::cores::ahead_pool`] (below the campaign's priority), until
//! [`ReferencesAhead::stop`] is called once the kernel has started, or [`AHEAD_BYTES`] are held.
//! A batch takes the references made ([`MadeAhead::take`]); a case without one has its model
//! computed beside its batch, as before. A reference depends on its case's inputs alone, which
//! its spec makes: the one made ahead is the one the batch would have made.

use super::cases::{CaseSpec, MadeAhead, MadeReference, PreparedCase};
use super::coverage::Coverage;
use super::limits::CampaignLimits;
use super::plan::CampaignPlan;
use super::reference_engine::case_whole_reference;
use super::sampling::{products, FULL_REFERENCE_PRODUCTS};
use crate::kernels::KernelUnderTest;
use nvfp4_model::model::bounds::KOrder;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

/// The most the references made ahead may hold (expected, lower and upper bound: 6 bytes an
/// output): a default campaign's 2,000 small cases hold about 300 MB.
pub const AHEAD_BYTES: usize = 1 << 30;

/// The thread making references ahead; [`ReferencesAhead::stop`] ends it.
pub struct ReferencesAhead {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<HashMap<CaseSpec, MadeReference>>>,
}

impl ReferencesAhead {
    /// Starts making the references of the random small cases the campaign of `kernel` under
    /// `limits` will run (the plan the campaign makes; `golden` counts among its fixed cases).
    pub fn start(
        kernel: &dyn KernelUnderTest,
        limits: &CampaignLimits,
        golden: &[CaseSpec],
    ) -> ReferencesAhead {
        let order = limits.order_for(kernel);
        let problem = kernel.problem();
        let plan = CampaignPlan::new(kernel, limits, golden, &mut Coverage::default());
        let first_random = plan.fixed.len();
        let specs: Vec<CaseSpec> = plan
            .random_draws()
            .enumerate()
            .filter(|&(i, _)| {
                limits
                    .shard
                    .is_none_or(|shard| shard.owns(first_random + i))
            })
            .map(|(_, tree)| tree.current())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("references-ahead".into())
            .spawn(move || {
                crate::cores::ahead_pool().install(|| make(problem, specs, order, &stopped))
            })
            .ok();
        ReferencesAhead { stop, thread }
    }

    /// Stops making references (the case in hand is finished) and hands over those made.
    pub fn stop(mut self) -> MadeAhead {
        self.stop.store(true, Ordering::Relaxed);
        let references = self
            .thread
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or_default();
        MadeAhead::new(references)
    }
}

#[cfg(test)]
impl ReferencesAhead {
    /// Waits until every reference is made, as if the kernel took that long to start.
    fn finished(mut self) -> MadeAhead {
        let references = self.thread.take().unwrap().join().unwrap();
        MadeAhead::new(references)
    }
}

impl Drop for ReferencesAhead {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The references of `specs`' small cases, in order, until `stop` or [`AHEAD_BYTES`].
fn make(
    problem: nvfp4_model::problem::ProblemKind,
    specs: Vec<CaseSpec>,
    order: KOrder,
    stop: &AtomicBool,
) -> HashMap<CaseSpec, MadeReference> {
    let started = Instant::now();
    let mut made = HashMap::new();
    let mut bytes = 0;
    let drawn = specs.len();
    for spec in specs {
        if stop.load(Ordering::Relaxed) || bytes >= AHEAD_BYTES {
            break;
        }
        let prepared = PreparedCase::new(problem, spec);
        if products(&prepared.case.inputs) > FULL_REFERENCE_PRODUCTS {
            continue;
        }
        let case_started = Instant::now();
        let reference = case_whole_reference(&prepared.case, order, true);
        bytes += prepared.case.inputs.output_len() * 6;
        made.insert(
            prepared.spec,
            (reference, case_started.elapsed().as_secs_f64()),
        );
    }
    crate::trace::trace(format_args!(
        "references made ahead: {} of {drawn} random cases in {:.2} s, while the kernel started",
        made.len(),
        started.elapsed().as_secs_f64()
    ));
    made
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certify::campaign::reference_engine::WholeReference;
    use crate::certify::run_campaign::certify_variant_with;
    use crate::kernels::cpu::CpuKernel;
    use half::f16;
    use nvfp4_model::model::Reference;

    fn limits() -> CampaignLimits {
        CampaignLimits {
            cases: 40,
            quick: true,
            ..CampaignLimits::defaults(false, 11)
        }
    }

    /// The random small cases, as their batches prepare them.
    fn random_cases(kernel: &CpuKernel) -> Vec<PreparedCase> {
        let plan = CampaignPlan::new(kernel, &limits(), &[], &mut Coverage::default());
        plan.random_draws()
            .map(|tree| PreparedCase::new(kernel.problem(), tree.current()))
            .filter(|p| products(&p.case.inputs) <= FULL_REFERENCE_PRODUCTS)
            .collect()
    }

    fn host(made: MadeReference) -> Reference {
        match made.0 {
            Some(WholeReference::Host(reference)) => reference,
            _ => panic!("a small case's reference on the host"),
        }
    }

    fn bits(reference: &Reference) -> Vec<[u16; 3]> {
        let (e, lo, hi) = (&reference.expected, &reference.lo, &reference.hi);
        (0..e.len())
            .map(|i| [e[i].to_bits(), lo[i].to_bits(), hi[i].to_bits()])
            .collect()
    }

    #[test]
    fn a_reference_made_ahead_is_the_one_its_batch_would_make() {
        let kernel = CpuKernel::correct();
        let limits = limits();
        let ahead = ReferencesAhead::start(&kernel, &limits, &[]).finished();
        let cases = random_cases(&kernel);
        assert!(cases.len() >= 16, "{} random small cases", cases.len());
        let order = limits.order_for(&kernel);
        for p in &cases {
            let made = ahead
                .take(&p.spec)
                .expect("made for every random small case");
            let now = case_whole_reference(&p.case, order, true).unwrap();
            assert_eq!(
                bits(&host(made)),
                bits(&host((Some(now), 0.0))),
                "{:?}",
                p.spec
            );
        }
        assert!(ahead.take(&cases[0].spec).is_none(), "taken once");
    }

    /// The campaign judges its random cases against the references made ahead, and takes each:
    /// a wrong one made ahead fails its case.
    #[test]
    fn a_campaign_judges_its_random_cases_against_the_references_made_ahead() {
        let kernel = CpuKernel::correct();
        let ahead = ReferencesAhead::start(&kernel, &limits(), &[]).finished();
        let made = ahead.len();
        let result = certify_variant_with(&kernel, limits(), &[], &ahead, |_, _| {});
        assert!(result.failure.is_none(), "certified");
        assert!(
            made >= 16 && ahead.len() == 0,
            "{made} made, {} left",
            ahead.len()
        );

        let ahead = ReferencesAhead::start(&kernel, &limits(), &[]).finished();
        let wrong = random_cases(&kernel)[5].spec;
        let (reference, seconds) = ahead.take(&wrong).unwrap();
        let mut reference = host((reference, seconds));
        let far = f16::from_f32(30000.0);
        reference.expected.fill(far);
        reference.lo.fill(far);
        reference.hi.fill(far);
        ahead.put(wrong, (Some(WholeReference::Host(reference)), seconds));
        let result = certify_variant_with(&kernel, limits(), &[], &ahead, |_, _| {});
        let failure = result.failure.expect("the wrong reference fails its case");
        assert_eq!(failure.first, wrong);
    }
}
