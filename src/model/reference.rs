//! The reference: for every output element, the model's correctly rounded answer and the interval
//! of answers a correct kernel may give.
//!
//! `expected` is declared as: each dot product computed exactly and rounded once to f32 (nearest
//! even); for the dual GEMM, silu(D1) * D2 evaluated in f64 with the portable exp on those f32
//! values; then one rounding to fp16 (nearest even). It is bit-identical on every machine and
//! thread count: each element is computed independently with integer and IEEE basic operations.

use super::bounds::{accumulator_range, fp16_interval, silu_mul_range, KOrder};
use super::exact::{exact_dot, fixed_to_f32_rne, ExactDot, PreparedRow, FIXED_POINT_EXPONENT};
use super::portable_math::silu;
use crate::formats::fp16_from_f64_rne;
use crate::problem::{DualGemmInputs, GemmInputs, GroupGemmInputs, ProblemInputs};
use half::f16;
use rayon::prelude::*;

/// Version of the model's declared semantics. Golden files record it; bump it whenever any
/// `expected`, `lo` or `hi` bit could change.
pub const MODEL_VERSION: &str = "1";

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
    if d1.nan || d2.nan {
        return (f16::NAN, lo, hi);
    }
    let x1 = f64::from(fixed_to_f32_rne(d1.sum, FIXED_POINT_EXPONENT));
    let x2 = f64::from(fixed_to_f32_rne(d2.sum, FIXED_POINT_EXPONENT));
    (fp16_from_f64_rne(silu(x1) * x2), lo, hi)
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
    let shape = inputs.shape;
    let blocks = shape.scale_cols();
    let mut out = Reference::with_len(shape.m * shape.n * shape.l);
    for l in 0..shape.l {
        let (a, b1, b2) = (
            PreparedRow::all_rows(&inputs.a, l),
            PreparedRow::all_rows(&inputs.b1, l),
            PreparedRow::all_rows(&inputs.b2, l),
        );
        fill_rows(&mut out, shape.n, shape.l, l, |m, n| {
            dual_gemm_element(
                &exact_dot(&a[m], &b1[n]),
                &exact_dot(&a[m], &b2[n]),
                blocks,
                order,
            )
        });
    }
    out
}

pub fn gemm_reference(inputs: &GemmInputs, order: KOrder) -> Reference {
    let shape = inputs.shape;
    let blocks = shape.scale_cols();
    let mut out = Reference::with_len(shape.m * shape.n * shape.l);
    for l in 0..shape.l {
        let (a, b) = (
            PreparedRow::all_rows(&inputs.a, l),
            PreparedRow::all_rows(&inputs.b, l),
        );
        fill_rows(&mut out, shape.n, shape.l, l, |m, n| {
            gemm_element(&exact_dot(&a[m], &b[n]), blocks, order)
        });
    }
    out
}

/// The reference of any problem's inputs (outputs laid out as [`ProblemInputs::output_dims`]).
pub fn problem_reference(inputs: &ProblemInputs, order: KOrder) -> Reference {
    match inputs {
        ProblemInputs::DualGemm(d) => dual_gemm_reference(d, order),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => gemm_reference(g, order),
        ProblemInputs::GroupGemm(g) => group_gemm_reference(g, order),
    }
}

pub fn group_gemm_reference(inputs: &GroupGemmInputs, order: KOrder) -> Reference {
    let parts: Vec<Reference> = inputs
        .groups
        .iter()
        .map(|group| gemm_reference(group, order))
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

/// Fills batch `l` of `[M, N, L]` outputs, rows in parallel. Each element depends only on its own
/// inputs, so the result does not depend on the thread count.
fn fill_rows(
    out: &mut Reference,
    n: usize,
    batches: usize,
    l: usize,
    element: impl Fn(usize, usize) -> (f16, f16, f16) + Sync,
) {
    let row_len = n * batches;
    out.expected
        .par_chunks_mut(row_len)
        .zip(out.lo.par_chunks_mut(row_len))
        .zip(out.hi.par_chunks_mut(row_len))
        .enumerate()
        .for_each(|(m, ((expected, lo), hi))| {
            for col in 0..n {
                let (e, low, high) = element(m, col);
                expected[col * batches + l] = e;
                lo[col * batches + l] = low;
                hi[col * batches + l] = high;
            }
        });
}
