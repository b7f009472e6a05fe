//! The reference: for every output element, the model's correctly rounded answer and the interval
//! of answers a correct kernel may give.
//!
//! `expected` is declared as: each dot product computed exactly and rounded once to f32 (nearest
//! even); for the dual GEMM, silu(D1) * D2 evaluated in f64 with the portable exp on those f32
//! values; then one rounding to fp16 (nearest even). It is bit-identical on every machine and
//! thread count: each element is computed independently with integer and IEEE basic operations.

use super::bounds::{accumulator_range, fp16_interval, silu_mul_range, KOrder};
use super::exact::{fixed_to_f32_rne, ExactDot, FIXED_POINT_EXPONENT};
use super::exact_grid::exact_dot_grid;
use super::portable_math::silu;
use crate::formats::fp16_from_f64_rne;
use crate::problem::{DualGemmInputs, GemmInputs, GroupGemmInputs, ProblemInputs};
use half::f16;
use ndarray::Array3;

/// Version of the model's declared semantics. Golden files record it; bump it whenever any
/// `expected`, `lo` or `hi` bit could change.
pub const MODEL_VERSION: &str = "2";

/// Outputs of one problem, each `[M, N, L]` with L fastest (a contiguous torch tensor of shape
/// (M, N, L)); for the grouped GEMM, the groups' `[M_g, N_g]` matrices one after another.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub expected: Vec<f16>,
    pub lo: Vec<f16>,
    pub hi: Vec<f16>,
}

impl Reference {
    fn with_len(len: usize) -> Self {
        Reference {
            expected: vec![f16::ZERO; len],
            lo: vec![f16::ZERO; len],
            hi: vec![f16::ZERO; len],
        }
    }

    pub fn len(&self) -> usize {
        self.expected.len()
    }

    pub fn is_empty(&self) -> bool {
        self.expected.is_empty()
    }

    /// `expected`, `lo` and `hi` as `[M, N, L]` arrays for `dims` = (M, N, L) (for a grouped GEMM,
    /// [`ProblemInputs::output_dims`](crate::problem::ProblemInputs::output_dims)), moved, not
    /// copied (the Python package hands them to numpy as they are).
    pub fn into_arrays(self, (m, n, l): (usize, usize, usize)) -> [Array3<f16>; 3] {
        [self.expected, self.lo, self.hi].map(|values| {
            Array3::from_shape_vec((m, n, l), values).expect("dims hold every element")
        })
    }

    /// Stores batch `l` of `[M, N, L]` outputs from its `[M, N]` elements.
    fn store_batch(&mut self, l: usize, batches: usize, batch: &[(f16, f16, f16)]) {
        for (i, &(e, lo, hi)) in batch.iter().enumerate() {
            self.expected[i * batches + l] = e;
            self.lo[i * batches + l] = lo;
            self.hi[i * batches + l] = hi;
        }
    }
}

/// One output element of the dual GEMM from its two exact dot products.
pub fn dual_gemm_element(
    d1: &ExactDot,
    d2: &ExactDot,
    blocks: usize,
    order: KOrder,
) -> (f16, f16, f16) {
    let (lo, hi) = fp16_interval(silu_mul_range(
        accumulator_range(d1, blocks, order),
        accumulator_range(d2, blocks, order),
    ));
    (dual_gemm_expected_element(d1, d2), lo, hi)
}

/// The declared expected output of one dual-GEMM element (it reads only the sums and NaN flags).
fn dual_gemm_expected_element(d1: &ExactDot, d2: &ExactDot) -> f16 {
    if d1.nan || d2.nan {
        return f16::NAN;
    }
    let x1 = f64::from(fixed_to_f32_rne(d1.sum, FIXED_POINT_EXPONENT));
    let x2 = f64::from(fixed_to_f32_rne(d2.sum, FIXED_POINT_EXPONENT));
    fp16_from_f64_rne(silu(x1) * x2)
}

/// One output element of the plain GEMM.
pub fn gemm_element(d: &ExactDot, blocks: usize, order: KOrder) -> (f16, f16, f16) {
    let (lo, hi) = fp16_interval(accumulator_range(d, blocks, order));
    let expected = if d.nan {
        f16::NAN
    } else {
        f16::from_f32(fixed_to_f32_rne(d.sum, FIXED_POINT_EXPONENT))
    };
    (expected, lo, hi)
}

pub fn dual_gemm_reference(inputs: &DualGemmInputs, order: KOrder) -> Reference {
    dual_gemm_reference_with_progress(inputs, order, &|| {})
}

/// Calls `row_done` as each output row of each batch is finished (from several threads).
fn dual_gemm_reference_with_progress(
    inputs: &DualGemmInputs,
    order: KOrder,
    row_done: &(dyn Fn() + Sync),
) -> Reference {
    let shape = inputs.shape;
    let blocks = shape.scale_cols();
    let mut out = Reference::with_len(shape.m * shape.n * shape.l);
    for l in 0..shape.l {
        let batch = exact_dot_grid(
            &inputs.a,
            &[&inputs.b1, &inputs.b2],
            l,
            true,
            None,
            |_, col, d| {
                tick_after_last_column(col, shape.n, row_done);
                dual_gemm_element(&d[0], &d[1], blocks, order)
            },
        );
        out.store_batch(l, shape.l, &batch);
    }
    out
}

pub fn gemm_reference(inputs: &GemmInputs, order: KOrder) -> Reference {
    gemm_reference_with_progress(inputs, order, &|| {})
}

/// Calls `row_done` as each output row of each batch is finished (from several threads).
fn gemm_reference_with_progress(
    inputs: &GemmInputs,
    order: KOrder,
    row_done: &(dyn Fn() + Sync),
) -> Reference {
    let shape = inputs.shape;
    let blocks = shape.scale_cols();
    let mut out = Reference::with_len(shape.m * shape.n * shape.l);
    for l in 0..shape.l {
        let batch = exact_dot_grid(&inputs.a, &[&inputs.b], l, true, None, |_, col, d| {
            tick_after_last_column(col, shape.n, row_done);
            gemm_element(&d[0], blocks, order)
        });
        out.store_batch(l, shape.l, &batch);
    }
    out
}

/// Each output element is computed exactly once, so counting the elements of the last column
/// counts rows (a row's other elements may finish a little later: a bar does not mind).
fn tick_after_last_column(col: usize, n: usize, row_done: &(dyn Fn() + Sync)) {
    if col + 1 == n {
        row_done();
    }
}

/// The expected output of the dual GEMM alone, without intervals (the statistics the intervals
/// need are not computed): the same bits as [`dual_gemm_reference`]'s `expected`.
pub fn dual_gemm_expected(inputs: &DualGemmInputs) -> Vec<f16> {
    let shape = inputs.shape;
    let mut out = vec![f16::ZERO; shape.m * shape.n * shape.l];
    for l in 0..shape.l {
        let batch = exact_dot_grid(
            &inputs.a,
            &[&inputs.b1, &inputs.b2],
            l,
            false,
            None,
            |_, _, d| dual_gemm_expected_element(&d[0], &d[1]),
        );
        for (i, e) in batch.into_iter().enumerate() {
            out[i * shape.l + l] = e;
        }
    }
    out
}

/// The reference of any problem's inputs (outputs laid out as [`ProblemInputs::output_dims`]).
pub fn problem_reference(inputs: &ProblemInputs, order: KOrder) -> Reference {
    problem_reference_with_progress(inputs, order, &|| {})
}

/// The same, calling `row_done` once per output row finished (of every batch, of every group:
/// [`output_rows`] in all), from several threads, for a progress bar.
pub fn problem_reference_with_progress(
    inputs: &ProblemInputs,
    order: KOrder,
    row_done: &(dyn Fn() + Sync),
) -> Reference {
    match inputs {
        ProblemInputs::DualGemm(d) => dual_gemm_reference_with_progress(d, order, row_done),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => {
            gemm_reference_with_progress(g, order, row_done)
        }
        ProblemInputs::GroupGemm(g) => group_gemm_reference_with_progress(g, order, row_done),
    }
}

/// How many times [`problem_reference_with_progress`] calls `row_done` for `inputs`.
pub fn output_rows(inputs: &ProblemInputs) -> usize {
    match inputs {
        ProblemInputs::DualGemm(d) => d.shape.m * d.shape.l,
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => g.shape.m * g.shape.l,
        ProblemInputs::GroupGemm(g) => g.groups.iter().map(|g| g.shape.m * g.shape.l).sum(),
    }
}

pub fn group_gemm_reference(inputs: &GroupGemmInputs, order: KOrder) -> Reference {
    group_gemm_reference_with_progress(inputs, order, &|| {})
}

fn group_gemm_reference_with_progress(
    inputs: &GroupGemmInputs,
    order: KOrder,
    row_done: &(dyn Fn() + Sync),
) -> Reference {
    let parts: Vec<Reference> = inputs
        .groups
        .iter()
        .map(|group| gemm_reference_with_progress(group, order, row_done))
        .collect();
    let mut out = Reference {
        expected: vec![],
        lo: vec![],
        hi: vec![],
    };
    for part in parts {
        out.expected.extend(part.expected);
        out.lo.extend(part.lo);
        out.hi.extend(part.hi);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::generate::generate_problem;
    use crate::problem::{Distribution, ProblemKind, Shape};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_progress_count_is_every_output_row_and_changes_nothing() {
        for kind in ProblemKind::ALL {
            let shape = Shape::new(40, 24, 64, 3).unwrap();
            let inputs = generate_problem(kind, shape, Distribution::Full, 5);
            let rows = AtomicUsize::new(0);
            let counted = problem_reference_with_progress(&inputs, KOrder::Contiguous, &|| {
                rows.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(rows.into_inner(), output_rows(&inputs), "{}", kind.name());
            let plain = problem_reference(&inputs, KOrder::Contiguous);
            let bits = |r: &Reference| -> Vec<u16> {
                [&r.expected, &r.lo, &r.hi]
                    .into_iter()
                    .flatten()
                    .map(|x| x.to_bits())
                    .collect()
            };
            assert_eq!(bits(&counted), bits(&plain), "{}", kind.name());
        }
    }
}
