//! The shapes kernels really run at, in every campaign: the problem's benchmark shapes and the
//! competition's test shapes. The random cases stay small (hundreds of rows and columns, K up
//! to 768) so that a campaign of thousands of cases is quick; a kernel's deep-K, wide-N and
//! many-tile paths (a K loop past 4096, an epilogue past N = 2048, a persistent loop wrapping
//! past the SM count) only run here.
//!
//! A GPU kernel gets every shape in every distribution. A CPU kernel computes every output
//! element itself on a machine of a few cores, so it gets each shape once, at
//! [`CPU_ROWS`] rows of M (N, K and L as in the shape: the depth and width that reach those
//! paths), the distributions taken in turn; the certificate says so.

use super::campaign::CaseSpec;
use crate::golden::set::{DUAL_GEMM_BENCHMARKS, DUAL_GEMM_TESTS};
use crate::kernels::ShapeSupport;
use crate::problem::{Distribution, ProblemKind, Shape};

/// Rows of M a CPU kernel's production cases keep.
pub const CPU_ROWS: usize = 2;

/// GEMM and GEMV shapes (M, N, K, L) the problem's benchmarks time (docs/problem.md); their test
/// shapes are not recorded.
const GEMM_BENCHMARKS: [(usize, usize, usize, usize); 3] = [
    (128, 7168, 16384, 1),
    (128, 4096, 7168, 1),
    (128, 7168, 2048, 1),
];
const GEMV_BENCHMARKS: [(usize, usize, usize, usize); 3] =
    [(7168, 1, 16384, 1), (4096, 1, 7168, 8), (7168, 1, 2048, 4)];

/// The production shapes of `problem` (none for the grouped GEMM, whose campaign draws its
/// groups from one shape: its benchmark groups are in the golden set).
pub fn production_shapes(problem: ProblemKind) -> Vec<Shape> {
    let dims: Vec<(usize, usize, usize, usize)> = match problem {
        ProblemKind::DualGemm => DUAL_GEMM_BENCHMARKS
            .iter()
            .chain(DUAL_GEMM_TESTS.iter())
            .map(|&(m, n, k)| (m, n, k, 1))
            .collect(),
        ProblemKind::Gemm => GEMM_BENCHMARKS.to_vec(),
        ProblemKind::Gemv => GEMV_BENCHMARKS.to_vec(),
        ProblemKind::GroupGemm => Vec::new(),
    };
    dims.into_iter()
        .filter_map(|(m, n, k, l)| Shape::new(m, n, k, l).ok())
        .collect()
}

/// The production cases of a campaign, and, when they are fewer or thinner than a GPU
/// kernel's, why (for the certificate).
pub fn production_cases(
    problem: ProblemKind,
    support: ShapeSupport,
    on_gpu: bool,
    dists: &[Distribution],
) -> (Vec<CaseSpec>, Option<String>) {
    let shapes: Vec<Shape> = production_shapes(problem)
        .into_iter()
        .filter(|&shape| support.supports(shape))
        .collect();
    // Seeds apart from the edge cases' (below 100) and the golden set's (1111).
    let seed = |i: usize, j: usize| 5000 + (i * 16 + j) as u64;
    if on_gpu {
        let cases = shapes
            .iter()
            .enumerate()
            .flat_map(|(i, &shape)| {
                dists.iter().enumerate().map(move |(j, &dist)| CaseSpec {
                    shape,
                    dist,
                    seed: seed(i, j),
                })
            })
            .collect();
        return (cases, None);
    }
    let thin = |shape: Shape| {
        let rows = CPU_ROWS.div_ceil(support.m_multiple) * support.m_multiple;
        Shape::new(rows.min(shape.m), shape.n, shape.k, shape.l).expect("a smaller M is valid")
    };
    let cases: Vec<CaseSpec> = shapes
        .iter()
        .enumerate()
        .filter(|_| !dists.is_empty())
        .map(|(i, &shape)| CaseSpec {
            shape: thin(shape),
            dist: dists[i % dists.len()],
            seed: seed(i, 0),
        })
        .collect();
    let why = (!cases.is_empty()).then(|| {
        format!(
            "a CPU kernel runs each of the {} production shapes once, at {CPU_ROWS} rows of M \
             (N, K and L as in the shape), one distribution per shape in turn: it computes \
             every output itself, and the full shapes in every distribution would take it many \
             minutes",
            cases.len()
        )
    });
    (cases, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_kernel_gets_every_shape_in_every_distribution() {
        let (cases, why) = production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
        );
        assert_eq!(cases.len(), 13 * Distribution::ALL.len());
        assert_eq!(why, None);
        assert!(cases.iter().any(|c| c.shape.k > 4096 && c.shape.n > 2048));
        assert!(cases.iter().any(|c| c.shape.m == 7168));
    }

    #[test]
    fn a_cpu_kernel_gets_thin_cases_that_keep_depth_and_width() {
        let (cases, why) = production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            false,
            &Distribution::ALL,
        );
        assert_eq!(cases.len(), 13);
        assert!(cases.iter().all(|c| c.shape.m == CPU_ROWS));
        assert!(cases.iter().any(|c| c.shape.k > 4096));
        assert!(cases.iter().any(|c| c.shape.n > 2048));
        for dist in Distribution::ALL {
            assert!(cases.iter().any(|c| c.dist == dist), "{dist:?}");
        }
        assert!(why
            .expect("a CPU kernel is told why")
            .contains("2 rows of M"));
    }

    #[test]
    fn shapes_outside_the_support_are_left_out() {
        let support = ShapeSupport {
            k_multiple: 4096,
            ..ShapeSupport::ANY
        };
        let (cases, _) = production_cases(
            ProblemKind::DualGemm,
            support,
            true,
            &[Distribution::Gpumode],
        );
        assert!(!cases.is_empty());
        assert!(cases.iter().all(|c| c.shape.k % 4096 == 0));
    }
}
