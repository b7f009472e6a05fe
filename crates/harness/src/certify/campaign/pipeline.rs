//! A campaign's fixed cases (edge, golden, production-size, stagnation) as a pipeline, so that
//! a GPU campaign goes at the GPU's pace: while the kernel runs case i, other threads make the
//! inputs of the next cases (and what the kernel's run of each needs on the device:
//! [`KernelUnderTest::make_ready`]) and another judges case i - 1 (for a case judged on sampled rows, that is
//! where the model runs: its rows are drawn only after the kernel returned). The kernel runs on
//! the calling thread alone, one case at a time, and outcomes are handed over in case order, so
//! the campaign stops at the same first failure as one case after another would; after a wrong
//! output the kernel has run one case more, whose outcome is dropped.

use super::cases::{run_kernel, CaseOutcome, CaseSpec, PreparedCase};
use super::sampling::FULL_REFERENCE_PRODUCTS;
use crate::kernels::KernelUnderTest;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::Schedule;
use std::time::Instant;

/// Runs `specs` in order, handing each outcome to `on_outcome` with the seconds the campaign
/// spent on it (waiting for its inputs, its kernel run, waiting for its judgement: these add up
/// to the pipeline's time), until `on_outcome` returns `Some`, which is returned.
pub(crate) fn run_in_pipeline<T>(
    kernel: &dyn KernelUnderTest,
    specs: &[CaseSpec],
    order: KOrder,
    schedule: Option<Schedule>,
    on_outcome: impl FnMut(CaseOutcome, f64) -> Option<T>,
) -> Option<T> {
    run_with_input_makers(kernel, specs, order, schedule, input_makers(), on_outcome)
}

/// [`run_in_pipeline`] with `makers` threads making inputs ahead.
fn run_with_input_makers<T>(
    kernel: &dyn KernelUnderTest,
    specs: &[CaseSpec],
    order: KOrder,
    schedule: Option<Schedule>,
    makers: usize,
    mut on_outcome: impl FnMut(CaseOutcome, f64) -> Option<T>,
) -> Option<T> {
    let problem = kernel.problem();
    let makers = makers.max(1);
    std::thread::scope(|scope| {
        // Inputs made ahead on a few threads of their own, case i on thread i % makers, each
        // holding at most the case it has made until it is taken (each can be gigabytes): a
        // deployment case's inputs take longer to make than its kernel takes to run. Their
        // parallel work runs on the ahead pool (crate::cores::ahead_pool), below the case in
        // hand, which would otherwise wait for it.
        let mut made = Vec::new();
        for first in 0..makers {
            let (send, receive) = std::sync::mpsc::sync_channel(0);
            made.push(receive);
            scope.spawn(move || {
                for &spec in specs.iter().skip(first).step_by(makers) {
                    // The kernel's own device memory for the case is made here too (a
                    // shared run's buffers, filled), off the kernel's path.
                    let made = crate::cores::ahead_pool().install(|| {
                        let made = PreparedCase::new(problem, spec);
                        kernel.make_ready(&made.case);
                        made
                    });
                    // Sending fails once the campaign has stopped.
                    if send.send(made).is_err() {
                        break;
                    }
                }
            });
        }
        let mut next = 0usize;
        let mut prepared_next = || {
            let case = made[next % makers].recv();
            next += 1;
            case
        };
        let mut judging = None;
        let mut finish = |(handle, seconds): (std::thread::ScopedJoinHandle<CaseOutcome>, f64)| {
            let waited = Instant::now();
            let outcome = handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            on_outcome(outcome, seconds + waited.elapsed().as_secs_f64())
        };
        loop {
            let started = Instant::now();
            let Ok(case) = prepared_next() else { break };
            let ran = run_kernel(kernel, case, order, FULL_REFERENCE_PRODUCTS);
            let seconds = started.elapsed().as_secs_f64();
            if let Some(stop) = judging.take().and_then(&mut finish) {
                return Some(stop);
            }
            // A crash or a hang is judged at once: the next case would likely cost another
            // watchdog.
            let kernel_failed = ran.kernel_failed();
            let handle = scope.spawn(move || ran.judged(order, schedule));
            if kernel_failed {
                if let Some(stop) = finish((handle, seconds)) {
                    return Some(stop);
                }
            } else {
                judging = Some((handle, seconds));
            }
        }
        judging.and_then(finish)
    })
}

/// Threads making a campaign's inputs ahead: a quarter of its cores (crate::cores), one to four.
fn input_makers() -> usize {
    (crate::cores::budget().threads / 4).clamp(1, 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::{Bug, CpuKernel};
    use crate::kernels::{KernelCase, KernelFailure};
    use half::f16;
    use nvfp4_model::problem::{Distribution, Shape};

    fn spec(m: usize, l: usize, seed: u64) -> CaseSpec {
        CaseSpec {
            shape: Shape::new(m, 64, 128, l).unwrap(),
            dist: Distribution::Full,
            seed,
        }
    }

    /// Outcomes in case order, each with its own spec, and the first `Some` ends the run.
    /// With one input maker or several (cases made out of order, handed over in order).
    #[test]
    fn outcomes_come_in_order_until_one_stops_the_run() {
        let specs: Vec<CaseSpec> = (0..7).map(|i| spec(8 + i, 1, i as u64)).collect();
        let kernel = CpuKernel::correct();
        for makers in [1, 3] {
            let mut seen = Vec::new();
            let stopped =
                run_with_input_makers(&kernel, &specs, KOrder::Contiguous, None, makers, |o, s| {
                    assert!(!o.failed() && s >= 0.0);
                    seen.push(o.spec);
                    (seen.len() == 3).then_some(o.spec.seed)
                });
            assert_eq!(stopped, Some(2));
            assert_eq!(seen, specs[..3]);
            // Without a stop every case is handed over, in order.
            let mut all = Vec::new();
            let none: Option<()> =
                run_with_input_makers(&kernel, &specs, KOrder::Contiguous, None, makers, |o, _| {
                    all.push(o.spec);
                    None
                });
            assert_eq!((none, all.as_slice()), (None, specs.as_slice()));
        }
    }

    /// The first wrong case stops the run even though the kernel ran the next one before it was
    /// judged.
    #[test]
    fn the_first_wrong_case_is_the_one_reported() {
        let specs = [spec(8, 1, 1), spec(8, 2, 2), spec(8, 2, 3), spec(8, 1, 4)];
        let kernel = CpuKernel::mutant(Bug::BatchIgnored);
        let mut seen = 0;
        let first = run_in_pipeline(&kernel, &specs, KOrder::Contiguous, None, |o, _| {
            seen += 1;
            o.failed().then_some(o.spec)
        });
        assert_eq!((first, seen), (Some(specs[1]), 2));
    }

    /// A kernel that records the cases made ready for it (by M), on which threads, and finds
    /// each case it runs among them.
    #[derive(Default)]
    struct ReadyFirst {
        ready: std::sync::Mutex<Vec<(usize, Option<String>)>>,
        ran: std::sync::atomic::AtomicUsize,
    }

    impl KernelUnderTest for ReadyFirst {
        fn name(&self) -> &str {
            "ready-first"
        }
        fn make_ready(&self, case: &KernelCase) {
            let thread = std::thread::current().name().map(str::to_string);
            self.ready.lock().unwrap().push((case.shape().m, thread));
        }
        fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
            let made_ready = self
                .ready
                .lock()
                .unwrap()
                .iter()
                .any(|(m, _)| *m == case.shape().m);
            assert!(
                made_ready,
                "case {} ran before it was made ready",
                case.shape()
            );
            self.ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            CpuKernel::correct().run(case, output)
        }
    }

    /// Every case is made ready for the kernel (`make_ready`) before the kernel runs it, on the
    /// pool that makes inputs ahead (not the campaign's thread), once.
    #[test]
    fn every_case_is_made_ready_ahead_before_it_runs() {
        let specs: Vec<CaseSpec> = (0..9).map(|i| spec(8 + i, 1, i as u64)).collect();
        let kernel = ReadyFirst::default();
        let none: Option<()> =
            run_with_input_makers(&kernel, &specs, KOrder::Contiguous, None, 3, |o, _| {
                assert!(!o.failed());
                None
            });
        assert!(none.is_none());
        assert_eq!(
            kernel.ran.load(std::sync::atomic::Ordering::SeqCst),
            specs.len()
        );
        let ready = kernel.ready.lock().unwrap();
        let mut made: Vec<usize> = ready.iter().map(|(m, _)| *m).collect();
        made.sort_unstable();
        assert_eq!(made, (8..17).collect::<Vec<_>>());
        assert!(ready.iter().all(|(_, thread)| thread
            .as_deref()
            .is_some_and(|name| name.starts_with("ahead-"))));
    }

    /// A kernel that fails to run on a case: the run stops there, the next case never started.
    struct CrashesOnBatches(std::sync::atomic::AtomicUsize);

    impl KernelUnderTest for CrashesOnBatches {
        fn name(&self) -> &str {
            "crashes-on-batches"
        }
        fn description(&self) -> String {
            "crashes when L > 1".into()
        }
        fn is_deliberately_broken(&self) -> bool {
            true
        }
        fn run(&self, case: &KernelCase, _: &mut [f16]) -> Result<(), KernelFailure> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            match case.shape().l {
                1 => Ok(()),
                _ => Err(KernelFailure::Crashed("L > 1".into())),
            }
        }
    }

    #[test]
    fn a_crash_is_judged_before_the_next_case_runs() {
        let specs = [spec(8, 2, 1), spec(8, 1, 2), spec(8, 1, 3)];
        let kernel = CrashesOnBatches(Default::default());
        let first = run_in_pipeline(&kernel, &specs, KOrder::Contiguous, None, |o, _| {
            o.result.is_err().then_some(o.spec)
        });
        assert_eq!(first, Some(specs[0]));
        assert_eq!(kernel.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
