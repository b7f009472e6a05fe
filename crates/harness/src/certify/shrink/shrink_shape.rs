//! Shrinking a failing case's shape: the proptest value tree's simplification, then greedy
//! halving (one batch, half the batches, each dimension halved, the gpumode distribution), then
//! each dimension, L included, stepped down on its grid by 2^j units for j descending, keeping
//! each smaller value that still fails. On a failing region that is an interval (N > 8192)
//! that is a bisection; on one that is not (N = 128 mod 256 past 16384, M = 1 mod 128) it still
//! ends on the smallest failing value the steps reach, where a bisection assumes an interval
//! and stops at the first passing midpoint. Bounded in runs and by the failure's time bound: a
//! failure at a deployment shape costs up to a second per run, and the minimal case found
//! within the bound is still a failing one (the certificate counts the runs and says when the
//! bound stopped it).

use super::cases::{run_case, CaseOutcome, CaseSpec};
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::Schedule;
use nvfp4_model::problem::{Distribution, Shape};
use proptest::strategy::ValueTree;
use std::time::Instant;

/// Most kernel runs one shrink may take: with the time bound, what keeps a slow kernel's shrink
/// short (the certificate counts the runs).
const MAX_SHRINK_STEPS: usize = 400;

/// A shape shrink's result.
pub(crate) struct ShapeShrink {
    /// The smallest failing case found.
    pub minimal: CaseOutcome,
    /// Kernel runs made.
    pub steps: usize,
    /// Whether every step was tried (false when the runs or the time ran out).
    pub finished: bool,
}

/// Shrinks a case for which `fails` holds with its proptest value tree: simplify while the case
/// still fails, step back when it passes. The fixed edge cases have no tree; they only get the
/// greedy steps. Then each dimension is stepped down on its grid (a bug that needs N past 8192
/// ends at N = 8193 in about 14 runs, not thousands of decrements), until `deadline`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn shrink_case(
    kernel: &dyn KernelUnderTest,
    failing: CaseOutcome,
    tree: Option<&mut dyn ValueTree<Value = CaseSpec>>,
    order: KOrder,
    schedule: Option<Schedule>,
    fails: impl Fn(&CaseOutcome) -> bool,
    deadline: Instant,
) -> ShapeShrink {
    let mut minimal = failing;
    let mut steps = 0;
    let spent = |steps: usize| steps >= MAX_SHRINK_STEPS || Instant::now() >= deadline;
    if let Some(tree) = tree {
        'simplify: while !spent(steps) && tree.simplify() {
            loop {
                steps += 1;
                let outcome = run_case(kernel, tree.current(), order, schedule);
                super::trace(format_args!(
                    "shrink run {steps}: {} {} {}",
                    outcome.spec.shape,
                    outcome.spec.dist.name(),
                    if fails(&outcome) { "fails" } else { "passes" }
                ));
                if fails(&outcome) {
                    minimal = outcome;
                    continue 'simplify;
                }
                if spent(steps) || !tree.complicate() {
                    break 'simplify;
                }
            }
        }
    }
    // Then greedy steps: halve each dimension, drop batches, switch to gpumode, while the case
    // still fails.
    'greedy: while !spent(steps) {
        for candidate in smaller_specs(minimal.spec, kernel.support()) {
            steps += 1;
            let outcome = run_case(kernel, candidate, order, schedule);
            super::trace(format_args!(
                "shrink run {steps}: {} {} {}",
                candidate.shape,
                candidate.dist.name(),
                if fails(&outcome) { "fails" } else { "passes" }
            ));
            if fails(&outcome) {
                minimal = outcome;
                continue 'greedy;
            }
            if spent(steps) {
                break 'greedy;
            }
        }
        break;
    }
    // Then each dimension stepped down by 2^j of its units, j descending, keeping each value
    // that still fails: on an interval, after step j the value is within 2^j units of the
    // smallest failing one, so one try per j suffices.
    let support = kernel.support();
    for dimension in Dimension::ALL {
        let unit = dimension.unit(support);
        let smallest = dimension.smallest(support);
        let value = dimension.of(minimal.spec.shape);
        let levels = (value / unit).max(1).ilog2();
        for j in (0..=levels).rev() {
            if spent(steps) {
                break;
            }
            let value = dimension.of(minimal.spec.shape);
            let Some(candidate_value) = value.checked_sub(unit << j) else {
                continue;
            };
            if candidate_value < smallest {
                continue;
            }
            let Some(candidate) = dimension.with(minimal.spec, candidate_value, support) else {
                continue;
            };
            steps += 1;
            let outcome = run_case(kernel, candidate, order, schedule);
            super::trace(format_args!(
                "shrink run {steps}: {} {}",
                candidate.shape,
                if fails(&outcome) { "fails" } else { "passes" }
            ));
            if fails(&outcome) {
                minimal = outcome;
            }
        }
    }
    let finished = !spent(steps);
    ShapeShrink {
        minimal,
        steps,
        finished,
    }
}

/// A dimension of a shape, as the shrinker and the region step it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dimension {
    M,
    N,
    K,
    L,
}

impl Dimension {
    pub const ALL: [Dimension; 4] = [Dimension::M, Dimension::N, Dimension::K, Dimension::L];

    pub fn name(self) -> &'static str {
        match self {
            Dimension::M => "M",
            Dimension::N => "N",
            Dimension::K => "K",
            Dimension::L => "L",
        }
    }

    pub fn of(self, shape: Shape) -> usize {
        match self {
            Dimension::M => shape.m,
            Dimension::N => shape.n,
            Dimension::K => shape.k,
            Dimension::L => shape.l,
        }
    }

    /// The grid the kernel's support puts the dimension on.
    pub fn unit(self, support: ShapeSupport) -> usize {
        match self {
            Dimension::M => support.m_multiple.max(1),
            Dimension::N => support.n_multiple.max(1),
            Dimension::K => support.k_multiple.max(16),
            Dimension::L => 1,
        }
    }

    /// The smallest value on the grid.
    pub fn smallest(self, support: ShapeSupport) -> usize {
        self.unit(support)
    }

    /// `spec` with this dimension set to `value`, if the kernel supports that shape.
    pub fn with(self, spec: CaseSpec, value: usize, support: ShapeSupport) -> Option<CaseSpec> {
        let s = spec.shape;
        let (m, n, k, l) = match self {
            Dimension::M => (value, s.n, s.k, s.l),
            Dimension::N => (s.m, value, s.k, s.l),
            Dimension::K => (s.m, s.n, value, s.l),
            Dimension::L => (s.m, s.n, s.k, value),
        };
        let shape = Shape::new(m, n, k, l).ok()?;
        support
            .supports(shape)
            .then_some(CaseSpec { shape, ..spec })
    }
}

/// Simpler neighbours of a case, simplest first, all inside `support`: one batch, half the
/// batches, each dimension halved, the gpumode distribution (the steps in [`shrink_case`] do
/// the finer ones).
fn smaller_specs(spec: CaseSpec, support: ShapeSupport) -> Vec<CaseSpec> {
    let s = spec.shape;
    let shapes = [
        (s.m, s.n, s.k, 1),
        (s.m, s.n, s.k, s.l / 2),
        (s.m / 2, s.n, s.k, s.l),
        (s.m, s.n / 2, s.k, s.l),
        (s.m, s.n, s.k / 2, s.l),
    ];
    let mut out: Vec<CaseSpec> = shapes
        .iter()
        .filter_map(|&(m, n, k, l)| Shape::new(m, n, k, l).ok())
        .filter(|shape| support.supports(*shape) && *shape != s)
        .map(|shape| CaseSpec { shape, ..spec })
        .collect();
    if spec.dist != Distribution::Gpumode {
        out.push(CaseSpec {
            dist: Distribution::Gpumode,
            ..spec
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu::CpuKernel;
    use crate::kernels::{KernelCase, KernelFailure};
    use half::f16;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Correct (the CPU kernel) except at N past 300 or K of 1024 and more, where it writes
    /// zeros; counts its runs.
    struct WrongWhenWide {
        correct: CpuKernel,
        runs: AtomicUsize,
    }

    impl KernelUnderTest for WrongWhenWide {
        fn name(&self) -> &str {
            "wrong-when-wide"
        }
        fn description(&self) -> String {
            "zeros at N > 300 and K >= 1024".into()
        }
        fn is_deliberately_broken(&self) -> bool {
            true
        }
        fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            let shape = case.shape();
            if shape.n > 300 && shape.k >= 1024 {
                output.fill(f16::ZERO);
                return Ok(());
            }
            self.correct.run(case, output)
        }
    }

    const FAR: std::time::Duration = std::time::Duration::from_secs(600);

    /// Correct (the CPU kernel) except where `wrong(shape)`, where it writes zeros; counts its
    /// runs and sleeps `pause` per run.
    struct WrongWhere {
        correct: CpuKernel,
        runs: AtomicUsize,
        wrong: fn(Shape) -> bool,
        pause: std::time::Duration,
    }

    impl WrongWhere {
        fn new(wrong: fn(Shape) -> bool) -> Self {
            WrongWhere {
                correct: CpuKernel::correct(),
                runs: AtomicUsize::new(0),
                wrong,
                pause: std::time::Duration::ZERO,
            }
        }
    }

    impl KernelUnderTest for WrongWhere {
        fn name(&self) -> &str {
            "wrong-where"
        }
        fn description(&self) -> String {
            "zeros where its predicate holds".into()
        }
        fn is_deliberately_broken(&self) -> bool {
            true
        }
        fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
            self.runs.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(self.pause);
            if (self.wrong)(case.shape()) {
                output.fill(f16::from_f32(1000.0));
                return Ok(());
            }
            self.correct.run(case, output)
        }
    }

    /// The shrink of the failing case at `shape`, bounded by `bound` from its first failure.
    fn shrunk_from(
        kernel: &dyn KernelUnderTest,
        shape: Shape,
        bound: std::time::Duration,
    ) -> ShapeShrink {
        let spec = CaseSpec {
            shape,
            dist: Distribution::Full,
            seed: 5,
        };
        let failing = run_case(kernel, spec, KOrder::Contiguous, None);
        assert!(failing.failed());
        shrink_case(
            kernel,
            failing,
            None,
            KOrder::Contiguous,
            None,
            CaseOutcome::failed,
            Instant::now() + bound,
        )
    }

    /// A failure that needs N past 300 and K of 1024 ends exactly there, in a few dozen runs
    /// (decrements would take thousands from N = 4000).
    #[test]
    fn stepping_ends_at_the_smallest_failing_dimensions_in_few_runs() {
        let kernel = WrongWhenWide {
            correct: CpuKernel::correct(),
            runs: AtomicUsize::new(0),
        };
        let shrunk = shrunk_from(&kernel, Shape::new(37, 4000, 3008, 2).unwrap(), FAR);
        assert_eq!(
            shrunk.minimal.spec.shape,
            Shape::new(1, 301, 1024, 1).unwrap()
        );
        assert_eq!(shrunk.minimal.spec.dist, Distribution::Gpumode);
        assert!(shrunk.finished);
        assert!(shrunk.steps <= 60, "{} runs", shrunk.steps);
        assert_eq!(kernel.runs.load(Ordering::SeqCst), shrunk.steps + 1);
    }

    /// L is shrunk like the others: a bug of an expert table of 32 (wrong from L = 33) found
    /// at L = 179 ends at L = 33, not at the campaign's L.
    #[test]
    fn the_number_of_batches_is_shrunk_to_its_boundary() {
        let kernel = WrongWhere::new(|shape| shape.l >= 33);
        let shrunk = shrunk_from(&kernel, Shape::new(3, 40, 64, 179).unwrap(), FAR);
        assert_eq!(shrunk.minimal.spec.shape, Shape::new(1, 1, 16, 33).unwrap());
        assert!(shrunk.finished);
    }

    /// A failing region that is not an interval (N = 8 mod 16 past 100, as N = 128 mod 256
    /// past 16384 is on a GPU): halving N always passes and a bisection would stop at its first
    /// passing midpoint; stepping by 2^j finds N = 104.
    #[test]
    fn a_failing_region_that_is_not_an_interval_is_stepped_down_to_its_smallest_value() {
        let kernel = WrongWhere::new(|shape| shape.n % 16 == 8 && shape.n > 100);
        let shrunk = shrunk_from(&kernel, Shape::new(2, 3992, 32, 1).unwrap(), FAR);
        assert_eq!(
            shrunk.minimal.spec.shape,
            Shape::new(1, 104, 16, 1).unwrap()
        );
    }

    /// A slow kernel's shrink stops at its deadline, on a case that still fails, and says it
    /// did not finish. Counted in runs, not wall time, so that a loaded machine cannot fail it:
    /// every run sleeps `pause`, so no more than `bound / pause` runs start before the deadline,
    /// where the unbounded shrink of the same case takes more.
    #[test]
    fn the_shrink_stops_at_its_deadline_on_a_failing_case() {
        let pause = std::time::Duration::from_millis(40);
        let bound = std::time::Duration::from_millis(300);
        let shape = Shape::new(37, 4000, 64, 1).unwrap();
        let mut unbounded = WrongWhere::new(|shape| shape.n > 300);
        unbounded.pause = std::time::Duration::ZERO;
        let whole = shrunk_from(&unbounded, shape, FAR);
        assert!(whole.finished);
        let runs_within = (bound.as_millis() / pause.as_millis()) as usize + 1;
        assert!(
            whole.steps > runs_within,
            "the whole shrink takes {} runs: the bound would not show",
            whole.steps
        );
        let mut kernel = WrongWhere::new(|shape| shape.n > 300);
        kernel.pause = pause;
        let shrunk = shrunk_from(&kernel, shape, bound);
        assert!(!shrunk.finished);
        assert!(shrunk.minimal.failed());
        assert!(shrunk.steps >= 1);
        assert!(
            shrunk.steps <= runs_within,
            "{} runs within a bound of {} ms at {} ms a run",
            shrunk.steps,
            bound.as_millis(),
            pause.as_millis()
        );
    }
}
