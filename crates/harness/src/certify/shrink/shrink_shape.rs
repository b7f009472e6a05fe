//! Shrinking a failing case's shape: the proptest value tree's simplification, then greedy
//! halving (one batch, each dimension halved, the gpumode distribution), then each dimension
//! bisected down to the smallest value that still fails. Bounded in runs and seconds: a failure
//! at a deployment shape costs up to a second per run, and the minimal case found within the
//! budget is still a failing one (the certificate counts the runs).

use super::cases::{run_case, CaseOutcome, CaseSpec};
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::Schedule;
use nvfp4_model::problem::{Distribution, Shape};
use proptest::strategy::ValueTree;
use std::time::Instant;

/// Most kernel runs one shrink may take, and the most seconds: a failure at a deployment
/// shape (N past 8192, K of 16384) costs up to a second per run, and the minimal repro found
/// within the budget is still a failing case (the certificate counts the runs).
const MAX_SHRINK_STEPS: usize = 400;
const SHRINK_SECONDS: f64 = 120.0;

/// Shrinks a case for which `fails` holds with its proptest value tree: simplify while the case
/// still fails, step back when it passes. The fixed edge cases have no tree; they only get the
/// greedy steps. Then each dimension is bisected down to the smallest value that still fails
/// (a bug that needs N past 8192 ends at N = 8193 in about 14 runs, not thousands of
/// decrements). Returns the minimal outcome and the number of runs.
pub(crate) fn shrink_case(
    kernel: &dyn KernelUnderTest,
    failing: CaseOutcome,
    tree: Option<&mut dyn ValueTree<Value = CaseSpec>>,
    order: KOrder,
    schedule: Option<Schedule>,
    fails: impl Fn(&CaseOutcome) -> bool,
) -> (CaseOutcome, usize) {
    let started = Instant::now();
    let mut minimal = failing;
    let mut steps = 0;
    let spent = |steps: usize| {
        steps >= MAX_SHRINK_STEPS || started.elapsed().as_secs_f64() > SHRINK_SECONDS
    };
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
    // Then each dimension bisected between its smallest supported value (or the largest value
    // seen to pass) and the smallest seen to fail.
    let support = kernel.support();
    for dimension in [Dimension::M, Dimension::N, Dimension::K] {
        let unit = dimension.unit(support);
        let mut passing_below = 0;
        while !spent(steps) {
            let failing_at = dimension.of(minimal.spec.shape);
            // The candidate: halfway, on the dimension's grid, strictly inside the gap.
            let gap = failing_at.saturating_sub(passing_below) / unit;
            if gap <= 1 {
                break;
            }
            let candidate_value = passing_below + gap / 2 * unit;
            let Some(candidate) = dimension.with(minimal.spec, candidate_value, support) else {
                passing_below = candidate_value;
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
            } else {
                passing_below = candidate_value;
            }
        }
    }
    (minimal, steps)
}

/// A dimension the shrinker bisects.
#[derive(Clone, Copy)]
enum Dimension {
    M,
    N,
    K,
}

impl Dimension {
    fn of(self, shape: Shape) -> usize {
        match self {
            Dimension::M => shape.m,
            Dimension::N => shape.n,
            Dimension::K => shape.k,
        }
    }

    /// The grid the kernel's support puts the dimension on.
    fn unit(self, support: ShapeSupport) -> usize {
        match self {
            Dimension::M => support.m_multiple.max(1),
            Dimension::N => support.n_multiple.max(1),
            Dimension::K => support.k_multiple.max(16),
        }
    }

    /// `spec` with this dimension set to `value`, if the kernel supports that shape.
    fn with(self, spec: CaseSpec, value: usize, support: ShapeSupport) -> Option<CaseSpec> {
        let s = spec.shape;
        let (m, n, k) = match self {
            Dimension::M => (value, s.n, s.k),
            Dimension::N => (s.m, value, s.k),
            Dimension::K => (s.m, s.n, value),
        };
        let shape = Shape::new(m, n, k, s.l).ok()?;
        support
            .supports(shape)
            .then_some(CaseSpec { shape, ..spec })
    }
}

/// Simpler neighbours of a case, simplest first, all inside `support`: one batch, each
/// dimension halved, the gpumode distribution (the bisection in [`shrink_case`] does the
/// finer steps).
fn smaller_specs(spec: CaseSpec, support: ShapeSupport) -> Vec<CaseSpec> {
    let s = spec.shape;
    let shapes = [
        (s.m, s.n, s.k, 1),
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

    /// A failure that needs N past 300 and K of 1024 ends exactly there, in a few dozen runs
    /// (decrements would take thousands from N = 4000).
    #[test]
    fn bisection_ends_at_the_smallest_failing_dimensions_in_few_runs() {
        let kernel = WrongWhenWide {
            correct: CpuKernel::correct(),
            runs: AtomicUsize::new(0),
        };
        let spec = CaseSpec {
            shape: Shape::new(37, 4000, 3008, 2).unwrap(),
            dist: Distribution::Full,
            seed: 5,
        };
        let failing = run_case(&kernel, spec, KOrder::Contiguous, None);
        assert!(failing.failed());
        let (minimal, steps) = shrink_case(
            &kernel,
            failing,
            None,
            KOrder::Contiguous,
            None,
            CaseOutcome::failed,
        );
        assert_eq!(minimal.spec.shape, Shape::new(1, 301, 1024, 1).unwrap());
        assert_eq!(minimal.spec.dist, Distribution::Gpumode);
        assert!(steps <= 60, "{steps} runs");
        assert_eq!(kernel.runs.load(Ordering::SeqCst), steps + 1);
    }
}
