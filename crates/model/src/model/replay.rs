//! Replay: the bit-exact prediction of a dual GEMM's output under a declared accumulation
//! [`Schedule`], for every element of the full matrix. `certify --exact` compares a kernel's
//! output with it at zero tolerance.
//!
//! Semantics (docs/reference/tensor-core-models.md has the derivations):
//! - each output's two f32 accumulators start at +0 and receive K in steps, in the schedule's
//!   [`KChunkOrder`] (`Decreasing` visits the last step first; `SplitHalvesIncreasing` gives
//!   each K half its own accumulator from +0, then adds them once in f32):
//!   - `hopper-hmma-f16-f32`: one step per 16-element scale block, [`fast::hopper_nvfp4_step`]
//!     (= `hopper_hmma_step` on the fp16 operands `e2m1 * |scale|`, exact in fp16; a NaN scale
//!     makes NaN operands; the scale's sign bit is ignored, UE4M3);
//!   - `blackwell-mxf4nvf4-block16-ue4m3`: one step per 64 K, [`fast::blackwell_nvfp4_step`]
//!     (= `blackwell_mxf4nvf4_step`); when K % 64 != 0 the last step holds the remaining 1..3
//!     blocks, padded with zero e2m1 values and scale 0, which adds nothing (a padded term is
//!     zero and aligned at -252, below C's alignment, so it neither raises the adder's maximum
//!     nor adds; `mma::tests::blackwell_padding_blocks_add_nothing`);
//!   - `exact-rne`: the exact sum over K rounded once to f32, nearest even (the reference's own
//!     accumulators; the order does not matter);
//! - the epilogue [`OutputEpilogue::SiluMulF64Rne`]: `v = x / (1 + exp(-x)) * x2` in f64 with
//!   `x = x1`, IEEE semantics for inf and NaN, then one round to nearest even fp16. The GPU's f64
//!   `exp` (CUDA: at most 1 ulp) is not ours ([`portable_math::exp`](super::portable_math::exp), within 2^-50 relative of
//!   glibc's), so the prediction is `fp16(v)` from our `v`, and where `v * (1 -+ 2^-46)` round
//!   to two different fp16 values the element is *ambiguous* and both are accepted
//!   ([`predict_silu_mul_f64`] has the argument).
//!
//! Comparison ([`ReplayElement::accepts`]): bitwise on fp16, except that a NaN prediction accepts any
//! NaN (the fp16 NaN payload and sign are not checked) and an ambiguous element accepts either
//! candidate.
//!
//! [`replay_dual_gemm`] runs at full-matrix scale (operands decoded once per row, the fast
//! allocation-free steps, rows in parallel); [`replay_dual_gemm_with_model_steps`] computes the
//! same through the model definitions (`model::mma`'s `hopper_hmma_step`,
//! `blackwell_mxf4nvf4_step`) one element at a time, slowly, so that tests can hold the two equal.

use super::exact::{exact_dot, fixed_to_f32_rne, PreparedRow, FIXED_POINT_EXPONENT};
use super::mma::fast::{self, NvBlock};
use super::mma::schedule::{KChunkOrder, MmaModel, OutputEpilogue, Schedule};
use super::mma::{blackwell_mxf4nvf4_step, hopper_hmma_step, BLACKWELL_K};
use super::portable_math::silu;
use crate::formats::{fp16_from_f64_rne, E2m1, E4m3};
use crate::problem::{BlockScaledMatrix, DualGemmInputs, Shape, SCALE_BLOCK};
use half::f16;
use rayon::prelude::*;

/// Relative half-width of the band around our f64 epilogue value inside which the GPU's may lie.
/// Both evaluations are within 2^-49 of the real value (our exp within 2^-50 relative, CUDA's
/// within 1 ulp = 2^-52, plus three correctly rounded operations of 2^-53 each), so they differ
/// by less than 2^-48; 2^-46 leaves a factor of 4.
pub const EPILOGUE_RELATIVE_SLACK: f64 = 1.0 / (1u64 << 46) as f64;

/// One output element's prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayElement {
    /// The two f32 accumulators (A @ B1^T and A @ B2^T) at the end of K.
    pub x1: f32,
    pub x2: f32,
    /// The fp16 output.
    pub output: f16,
    /// Where the epilogue is a near-tie: the other fp16 value a GPU may produce.
    pub alternative: Option<f16>,
}

impl ReplayElement {
    pub fn is_ambiguous(&self) -> bool {
        self.alternative.is_some()
    }

    /// Whether `got` is what this element predicts (NaN: any NaN; ambiguous: either candidate).
    pub fn accepts(&self, got: f16) -> bool {
        same_fp16(self.output, got) || self.alternative.is_some_and(|alt| same_fp16(alt, got))
    }
}

/// Bitwise equality, every NaN equal to every NaN.
pub fn same_fp16(predicted: f16, got: f16) -> bool {
    if predicted.is_nan() {
        got.is_nan()
    } else {
        predicted.to_bits() == got.to_bits()
    }
}

/// The predicted output of a whole dual GEMM, `[M, N, L]` with L fastest (as `Reference`).
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    pub shape: Shape,
    pub schedule: Schedule,
    pub elements: Vec<ReplayElement>,
}

/// The first element where an output differs from a replay.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExactMismatch {
    pub m: usize,
    pub n: usize,
    pub l: usize,
    /// fp16 bits.
    pub predicted: u16,
    pub alternative: Option<u16>,
    pub observed: u16,
    /// The predicted accumulators.
    pub x1: f32,
    pub x2: f32,
}

impl std::fmt::Display for ExactMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |bits: u16| format!("{bits:#06x} ({})", f16::from_bits(bits));
        write!(
            f,
            "element (m {}, n {}, l {}): predicted {}{}, observed {} (predicted accumulators x1 = {:e}, x2 = {:e})",
            self.m,
            self.n,
            self.l,
            show(self.predicted),
            self.alternative
                .map_or(String::new(), |alt| format!(" or {}", show(alt))),
            show(self.observed),
            self.x1,
            self.x2
        )
    }
}

/// An output compared with a replay at zero tolerance.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct ExactComparison {
    pub elements: usize,
    /// Elements whose epilogue is a near-tie (either candidate accepted).
    pub ambiguous: usize,
    /// Of those, how many outputs were the alternative rather than our own rounding.
    pub ambiguous_alternative: usize,
    pub mismatches: usize,
    pub first_mismatch: Option<ExactMismatch>,
}

impl Replay {
    pub fn len(&self) -> usize {
        self.elements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    pub fn ambiguous_count(&self) -> usize {
        self.elements.iter().filter(|e| e.is_ambiguous()).count()
    }

    /// Compares an `[M, N, L]` output with the prediction.
    pub fn compare(&self, output: &[f16]) -> ExactComparison {
        assert_eq!(output.len(), self.len(), "output and replay sizes differ");
        let (n, l) = (self.shape.n, self.shape.l);
        let mut out = ExactComparison {
            elements: self.len(),
            ..ExactComparison::default()
        };
        for (i, (e, &got)) in self.elements.iter().zip(output).enumerate() {
            out.ambiguous += usize::from(e.is_ambiguous());
            out.ambiguous_alternative += usize::from(
                e.alternative.is_some_and(|alt| same_fp16(alt, got)) && !same_fp16(e.output, got),
            );
            if !e.accepts(got) {
                out.mismatches += 1;
                if out.first_mismatch.is_none() {
                    out.first_mismatch = Some(ExactMismatch {
                        m: i / (n * l),
                        n: i / l % n,
                        l: i % l,
                        predicted: e.output.to_bits(),
                        alternative: e.alternative.map(f16::to_bits),
                        observed: got.to_bits(),
                        x1: e.x1,
                        x2: e.x2,
                    });
                }
            }
        }
        out
    }
}

/// The epilogue's prediction for accumulators `x1`, `x2`: the fp16 value and, where the GPU's
/// f64 evaluation may round the other way, the other candidate.
pub fn predict_epilogue(epilogue: OutputEpilogue, x1: f32, x2: f32) -> (f16, Option<f16>) {
    match epilogue {
        OutputEpilogue::SiluMulF64Rne => predict_silu_mul_f64(x1, x2),
    }
}

/// `fp16(x / (1 + exp(-x)) * x2)` evaluated in f64 with `x = x1`, as the GPU does it.
///
/// Why the band is enough:
/// - finite `v` with a normal f64 magnitude: ours and the GPU's are each within 2^-49 relative
///   of the real value (see [`EPILOGUE_RELATIVE_SLACK`]), so the GPU's lies in
///   `[v (1 - 2^-46), v (1 + 2^-46)]` and rounds to one of the two ends' fp16 values;
/// - tiny `v` (below 2^-60, f64 underflow included, and `x1 < -709.78` where our exp overflows
///   and CUDA's may not, making silu `-0` here and a tiny negative there): both round to a zero
///   whose sign is `sign(x1) xor sign(x2)` on both machines (`1 + exp(-x) > 0` keeps the sign of
///   `x`, and IEEE underflow keeps signs), which the band's ends give too;
/// - inf and NaN follow IEEE: `exp(-inf) = 0` so silu(+inf) = +inf; `exp(+inf) = inf` so
///   silu(-inf) = -inf / inf = NaN; `inf * 0` = NaN; NaN in, NaN out. Only where `x2` is
///   infinite and `x1` is within 0.01 of -709.78 (the f64 exp overflow threshold, where the two
///   exps may disagree about overflowing) is the outcome NaN or an infinity: both accepted.
///   (Accumulators of NVFP4 dot products never reach inf: |sum| < 2^20 blocks * 2^27.)
/// - exact evaluations: for `x1 >= 38`, `exp(-x) < 2^-54` on both machines, so `1 + exp(-x)`
///   rounds to 1, silu is `x` exactly and `x * x2` (two f32) is exact in f64; with `x1 = +-0`
///   or `x2 = +-0` the result is a signed zero. There both compute the same `v` and an exact
///   tie is no ambiguity: it rounds to even on both.
pub fn predict_silu_mul_f64(x1: f32, x2: f32) -> (f16, Option<f16>) {
    let (x, y) = (f64::from(x1), f64::from(x2));
    let v = silu(x) * y;
    let value = fp16_from_f64_rne(v);
    if y.is_infinite() && (-709.79..=-709.77).contains(&x) {
        // silu(x) is -0 (exp overflowed) or tiny and negative: times +-inf, NaN or -+inf.
        let infinity = fp16_from_f64_rne(-y);
        return if value.is_nan() {
            (value, Some(infinity))
        } else {
            (value, Some(f16::NAN))
        };
    }
    if !v.is_finite() || x >= 38.0 || x == 0.0 || y == 0.0 {
        return (value, None);
    }
    let ends = [
        fp16_from_f64_rne(v * (1.0 - EPILOGUE_RELATIVE_SLACK)),
        fp16_from_f64_rne(v * (1.0 + EPILOGUE_RELATIVE_SLACK)),
    ];
    let alternative = ends
        .into_iter()
        .find(|end| end.to_bits() != value.to_bits());
    (value, alternative)
}

fn element(epilogue: OutputEpilogue, x1: f32, x2: f32) -> ReplayElement {
    let (output, alternative) = predict_epilogue(epilogue, x1, x2);
    ReplayElement {
        x1,
        x2,
        output,
        alternative,
    }
}

/// One dot product under a model and an order, on decoded rows.
fn nv_dot(model: MmaModel, order: KChunkOrder, a: &[NvBlock], b: &[NvBlock]) -> f32 {
    // One accumulator over a contiguous run of steps, forwards or backwards.
    let run = |from: usize, to: usize, reverse: bool| -> f32 {
        let mut c = 0.0f32;
        match model {
            MmaModel::HopperHmmaF16F32 => {
                let steps = a[from..to].iter().zip(&b[from..to]);
                if reverse {
                    steps
                        .rev()
                        .for_each(|(x, y)| c = fast::hopper_nvfp4_step(c, x, y));
                } else {
                    steps.for_each(|(x, y)| c = fast::hopper_nvfp4_step(c, x, y));
                }
            }
            MmaModel::BlackwellMxf4Nvf4Block16Ue4m3 => {
                let (from, to) = (from * 4, (to * 4).min(a.len()));
                let steps = a[from..to].chunks(4).zip(b[from..to].chunks(4));
                if reverse {
                    steps
                        .rev()
                        .for_each(|(x, y)| c = fast::blackwell_nvfp4_step(c, x, y));
                } else {
                    steps.for_each(|(x, y)| c = fast::blackwell_nvfp4_step(c, x, y));
                }
            }
            MmaModel::ExactRne => unreachable!("exact-rne uses exact rows"),
        }
        c
    };
    let steps = match model {
        MmaModel::BlackwellMxf4Nvf4Block16Ue4m3 => a.len().div_ceil(4),
        _ => a.len(),
    };
    match order {
        KChunkOrder::Increasing => run(0, steps, false),
        KChunkOrder::Decreasing => run(0, steps, true),
        KChunkOrder::SplitHalvesIncreasing => {
            run(0, steps / 2, false) + run(steps / 2, steps, false)
        }
    }
}

fn exact_f32(a: &PreparedRow, b: &PreparedRow) -> f32 {
    let dot = exact_dot(a, b);
    if dot.nan {
        f32::NAN
    } else {
        fixed_to_f32_rne(dot.sum, FIXED_POINT_EXPONENT)
    }
}

/// Output rows handled by one parallel task: B rows are read once per group from cache.
const ROWS_PER_TASK: usize = 8;

/// Fills batch `l` of the `[M, N, L]` elements, groups of rows in parallel; each element depends
/// only on its own inputs, so the result does not depend on the thread count.
fn fill(
    elements: &mut [ReplayElement],
    shape: Shape,
    l: usize,
    epilogue: OutputEpilogue,
    dots: impl Fn(usize, usize) -> (f32, f32) + Sync,
) {
    let row_len = shape.n * shape.l;
    elements
        .par_chunks_mut(row_len * ROWS_PER_TASK)
        .enumerate()
        .for_each(|(task, rows)| {
            let first = task * ROWS_PER_TASK;
            let count = rows.len() / row_len;
            for n in 0..shape.n {
                for r in 0..count {
                    let (x1, x2) = dots(first + r, n);
                    rows[r * row_len + n * shape.l + l] = element(epilogue, x1, x2);
                }
            }
        });
}

fn decoded_rows(operand: &BlockScaledMatrix, batch: usize) -> Vec<Vec<NvBlock>> {
    (0..operand.rows())
        .into_par_iter()
        .map(|row| NvBlock::row(operand.row_data(row, batch), operand.row_scales(row, batch)))
        .collect()
}

/// The prediction of every output element under `schedule` (fast path; see the module docs).
pub fn replay_dual_gemm(inputs: &DualGemmInputs, schedule: Schedule) -> Replay {
    let shape = inputs.shape;
    let empty = ReplayElement {
        x1: 0.0,
        x2: 0.0,
        output: f16::ZERO,
        alternative: None,
    };
    let mut elements = vec![empty; shape.m * shape.n * shape.l];
    for l in 0..shape.l {
        match schedule.mma {
            MmaModel::ExactRne => {
                let (a, b1, b2) = (
                    PreparedRow::all_rows(&inputs.a, l),
                    PreparedRow::all_rows(&inputs.b1, l),
                    PreparedRow::all_rows(&inputs.b2, l),
                );
                fill(&mut elements, shape, l, schedule.epilogue, |m, n| {
                    (exact_f32(&a[m], &b1[n]), exact_f32(&a[m], &b2[n]))
                });
            }
            model => {
                let (a, b1, b2) = (
                    decoded_rows(&inputs.a, l),
                    decoded_rows(&inputs.b1, l),
                    decoded_rows(&inputs.b2, l),
                );
                let order = schedule.k_order;
                fill(&mut elements, shape, l, schedule.epilogue, |m, n| {
                    (
                        nv_dot(model, order, &a[m], &b1[n]),
                        nv_dot(model, order, &a[m], &b2[n]),
                    )
                });
            }
        }
    }
    Replay {
        shape,
        schedule,
        elements,
    }
}

/// The fp16 operand of a Hopper step: `e2m1 * |scale|` (exact; NaN for a NaN scale).
fn hopper_operand(operand: &BlockScaledMatrix, row: usize, block: usize, l: usize) -> [f16; 16] {
    let scale = operand
        .scale(row, block * SCALE_BLOCK, l)
        .to_f32_as_unsigned_scale();
    std::array::from_fn(|k| {
        f16::from_f32(operand.value(row, block * SCALE_BLOCK + k, l).to_f32() * scale)
    })
}

/// The operands of a Blackwell step: 64 e2m1 values and 4 scales from block `4 * step`, padded
/// past K with zero values and scale 0.
fn blackwell_operands(
    operand: &BlockScaledMatrix,
    row: usize,
    step: usize,
    l: usize,
) -> ([E2m1; BLACKWELL_K], [E4m3; 4]) {
    let k0 = step * BLACKWELL_K;
    let values = std::array::from_fn(|k| {
        if k0 + k < operand.k() {
            operand.value(row, k0 + k, l)
        } else {
            E2m1::from_bits(0)
        }
    });
    let scales = std::array::from_fn(|j| {
        if k0 + j * SCALE_BLOCK < operand.k() {
            operand.scale(row, k0 + j * SCALE_BLOCK, l)
        } else {
            E4m3::from_bits(0)
        }
    });
    (values, scales)
}

/// The same prediction through the model definitions, one element and one step at a time
/// (slow: for tests and small cases).
pub fn replay_dual_gemm_with_model_steps(inputs: &DualGemmInputs, schedule: Schedule) -> Replay {
    let shape = inputs.shape;
    let blocks = shape.scale_cols();
    let dot = |b: &BlockScaledMatrix, m: usize, n: usize, l: usize| -> f32 {
        let a = &inputs.a;
        let steps = match schedule.mma {
            MmaModel::HopperHmmaF16F32 => blocks,
            MmaModel::BlackwellMxf4Nvf4Block16Ue4m3 => shape.k.div_ceil(BLACKWELL_K),
            MmaModel::ExactRne => {
                return exact_f32(
                    &PreparedRow::new(a.row_data(m, l), a.row_scales(m, l)),
                    &PreparedRow::new(b.row_data(n, l), b.row_scales(n, l)),
                )
            }
        };
        let step = |c: f32, step: usize| match schedule.mma {
            MmaModel::HopperHmmaF16F32 => hopper_hmma_step(
                c,
                &hopper_operand(a, m, step, l),
                &hopper_operand(b, n, step, l),
            ),
            _ => {
                let (av, asf) = blackwell_operands(a, m, step, l);
                let (bv, bsf) = blackwell_operands(b, n, step, l);
                blackwell_mxf4nvf4_step(c, &av, asf, &bv, bsf)
            }
        };
        // Each partial from +0 in its order, then the partials added left to right in f32.
        schedule
            .k_order
            .partials(steps)
            .into_iter()
            .map(|part| part.into_iter().fold(0.0f32, step))
            .reduce(|x, y| x + y)
            .unwrap_or(0.0)
    };
    let mut elements = Vec::with_capacity(shape.m * shape.n * shape.l);
    for m in 0..shape.m {
        for n in 0..shape.n {
            for l in 0..shape.l {
                let (x1, x2) = (dot(&inputs.b1, m, n, l), dot(&inputs.b2, m, n, l));
                elements.push(element(schedule.epilogue, x1, x2));
            }
        }
    }
    Replay {
        shape,
        schedule,
        elements,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(x: f16) -> u16 {
        x.to_bits()
    }

    /// The epilogue with the platform's f64 exp instead of ours.
    fn silu_mul_f64_platform(x1: f32, x2: f32) -> f16 {
        let x = f64::from(x1);
        fp16_from_f64_rne(x / (1.0 + (-x).exp()) * f64::from(x2))
    }

    #[test]
    fn special_values_follow_ieee() {
        let p = |x1: f32, x2: f32| predict_silu_mul_f64(x1, x2);
        assert!(
            p(f32::NEG_INFINITY, 1.0).0.is_nan(),
            "silu(-inf) = -inf / inf"
        );
        assert_eq!(p(f32::INFINITY, 2.0), (f16::INFINITY, None));
        assert_eq!(p(f32::INFINITY, -2.0), (f16::NEG_INFINITY, None));
        assert!(p(f32::INFINITY, 0.0).0.is_nan(), "inf * 0");
        assert!(p(f32::NAN, 1.0).0.is_nan() && p(1.0, f32::NAN).0.is_nan());
        assert!(p(0.0, f32::INFINITY).0.is_nan(), "silu(0) * inf = 0 * inf");
        // exp(1000) overflows: silu(-1000) = -1000 / inf = -0, and the sign follows x2.
        assert_eq!(bits(p(-1000.0, 3.0).0), 0x8000);
        assert_eq!(bits(p(-1000.0, -3.0).0), 0x0000);
        assert_eq!(p(-1000.0, 3.0).1, None);
        // Signed zeros: sign(x1) xor sign(x2).
        assert_eq!(bits(p(-0.0, 5.0).0), 0x8000);
        assert_eq!(bits(p(0.0, -0.0).0), 0x8000);
        assert_eq!(bits(p(-0.0, -0.0).0), 0x0000);
        assert_eq!(bits(p(7.0, 0.0).0), 0x0000);
        assert_eq!(bits(p(-7.0, 0.0).0), 0x8000);
        // Near the exp overflow threshold an infinite x2 gives NaN or an infinity: both accepted.
        let (value, alternative) = p(-709.785, f32::INFINITY);
        assert!(value.is_nan() && alternative == Some(f16::NEG_INFINITY));
        // Overflow of the fp16 rounding is an ordinary value.
        assert_eq!(p(1e10, 1e10), (f16::INFINITY, None));
    }

    #[test]
    fn near_ties_are_ambiguous_and_accept_both_candidates() {
        // x1 = 37.5: exp(-37.5) < 2^-53, so here 1 + exp(-x) rounds to 1 and v = 37.5 * x2
        // exactly, but 37.5 < 38 is inside the band rule. x2 = 29 * 2^-10 puts v at
        // 1087.5 * 2^-10, the midpoint of two fp16 neighbours: ambiguous, both accepted.
        let x2 = 29.0 * 2f32.powi(-10);
        let (value, alternative) = predict_silu_mul_f64(37.5, x2);
        let (even, odd) = (
            f16::from_f32(1088.0 / 1024.0),
            f16::from_f32(1087.0 / 1024.0),
        );
        assert_eq!(value, even, "the tie goes to even");
        assert_eq!(alternative, Some(odd));
        let e = element(OutputEpilogue::SiluMulF64Rne, 37.5, x2);
        assert!(e.is_ambiguous() && e.accepts(even) && e.accepts(odd));
        let outside = [even.to_bits() + 1, odd.to_bits() - 1].map(f16::from_bits);
        assert!(!e.accepts(outside[0]) && !e.accepts(outside[1]));
        // One f32 ulp of x2 away (2^-24 relative, far outside the 2^-46 band): not ambiguous.
        let (value, alternative) = predict_silu_mul_f64(37.5, f32::from_bits(x2.to_bits() + 1));
        assert_eq!((value, alternative), (even, None));
        // A comparison counts the element as ambiguous, and notes which candidate came.
        let replay = Replay {
            shape: Shape::new(1, 1, 16, 1).unwrap(),
            schedule: crate::model::mma::schedule::HOPPER_F16_INCREASING_K,
            elements: vec![e],
        };
        let took_even = replay.compare(&[even]);
        let took_odd = replay.compare(&[odd]);
        assert_eq!(
            (took_even.ambiguous, took_even.ambiguous_alternative),
            (1, 0)
        );
        assert_eq!(
            (
                took_odd.ambiguous,
                took_odd.ambiguous_alternative,
                took_odd.mismatches
            ),
            (1, 1, 0)
        );
        let wrong = replay.compare(&[outside[0]]);
        assert_eq!(wrong.mismatches, 1);
        assert_eq!(
            wrong.first_mismatch.unwrap().alternative,
            Some(odd.to_bits())
        );
        // From x1 = 38 on both machines compute v exactly: an exact tie rounds to even on both.
        let x2 = (1.0 + 2f32.powi(-11)) / 64.0;
        assert_eq!(predict_silu_mul_f64(64.0, x2), (f16::ONE, None));
        // An ordinary element accepts exactly one value; a NaN any NaN.
        let e = element(OutputEpilogue::SiluMulF64Rne, 1.0, 1.0);
        assert!(!e.is_ambiguous() && e.accepts(e.output));
        assert!(!e.accepts(f16::from_bits(e.output.to_bits() + 1)));
        let nan = element(OutputEpilogue::SiluMulF64Rne, f32::NAN, 1.0);
        assert!(nan.accepts(f16::from_bits(0xFE01)) && !nan.accepts(f16::ZERO));
    }

    #[test]
    fn the_platform_exp_stays_inside_the_prediction() {
        // What a CPU or GPU evaluation with another f64 exp gives is always a candidate: random
        // accumulators over the whole range that matters (silu's bend, the exp saturation, large
        // products and fp16 overflow).
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut ambiguous = 0;
        for _ in 0..200_000 {
            let r = next();
            let x1 = f32::from_bits((r as u32 & 0x807F_FFFF) | ((r >> 32) as u32 % 40 + 112) << 23);
            let x2 = f32::from_bits(
                ((r >> 20) as u32 & 0x807F_FFFF) | ((r >> 40) as u32 % 50 + 100) << 23,
            );
            let (value, alternative) = predict_silu_mul_f64(x1, x2);
            let platform = silu_mul_f64_platform(x1, x2);
            assert!(
                same_fp16(value, platform) || alternative.is_some_and(|a| same_fp16(a, platform)),
                "x1 = {x1:e}, x2 = {x2:e}: predicted {value} / {alternative:?}, platform {platform}"
            );
            ambiguous += usize::from(alternative.is_some());
        }
        assert!(ambiguous < 10, "{ambiguous} ambiguous of 200000");
    }

    #[test]
    fn portable_exp_is_within_2_pow_minus_50_of_the_platform_exp() {
        // The replay's band assumes our exp within 2^-50 relative of the real exp; glibc's is
        // within 1 ulp (2^-52), and measured over 2 * 10^7 points ours is within 2^-52 of it.
        let mut state = 0x1234_5678_9ABC_DEF0u64;
        for _ in 0..1_000_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            let x = -708.0 + u * (709.78 + 708.0);
            let relative = ((crate::model::portable_math::exp(x) - x.exp()) / x.exp()).abs();
            assert!(relative < 2f64.powi(-51), "exp({x}): relative {relative:e}");
        }
    }
}
