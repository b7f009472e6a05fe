//! The block-scaled GEMM family's model (`problem::scaled_gemm`): for every output element, the
//! exact reference and the outputs a correct kernel may produce.
//!
//! **The exact reference** is what a kernel with a perfect f32 accumulator computes: the exact
//! sum of the products (every product of two scaled elements is exact, and [`WideSum`] adds
//! them without rounding) rounded once to f32, then the library's epilogue in its own arithmetic
//! ([`Epilogue`]; for [`Epilogue::F32`] the multiply and the add rounded separately).
//!
//! **The acceptance interval** holds every output of a kernel that meets the accumulation
//! contract of docs/reference/numerics.md ("The block-scaled family"):
//! - K is consumed in steps of at most 32 products, each step's error at most [`STEP_ULPS`] f32
//!   ulps of (|accumulator| + the step's sum of |products|) (per-product FMAs, Hopper's 16-term
//!   fused adders, Blackwell's exact 16- or 32-blocks, an upcast to bf16 followed by wgmma), by
//!   at most [`MAX_SPLITS`] accumulators over contiguous runs of K whose partials are added in
//!   f32 at the end;
//! - underflow in the accumulator or in a product, flushed to zero or not, costs at most 2^-126
//!   per product, per step and per final add ([`UNDERFLOW`]);
//! - a fused step's adder may align to a block's scales rather than to its magnitude (Blackwell's
//!   block-scaled adders, as MMA-Sim models them, put zero blocks in their maximum): a 16-group
//!   whose sum is far below its scales' alignment `Z` costs up to 2^(Z - 32) absolutely;
//! - the epilogue is one of [`Epilogue`]'s (for [`Epilogue::F32`], separate roundings or one
//!   FMA: both accepted).
//!
//! Every such accumulator lies in `[S - E, S + E]` around the exact sum S; the epilogue is
//! monotone in the accumulator, so the outputs lie between the epilogue at the two f32 values
//! that bracket that range. Where the accumulator could overflow f32 the element is not judged.

mod wide_sum;

pub use wide_sum::{SumValue, WideSum};

use crate::formats::ExactValue;
use crate::problem::scaled_gemm::{
    Epilogue, OutDtype, ScaleFormat, ScaledGemmInputs, ScaledOperand,
};

/// Products per error-accounting group: the bound counts K / 16 steps whatever the kernel's
/// step, which over-counts kernels whose steps are 32 products.
pub const GROUP: usize = 16;
/// Error of one step in f32 ulps (2^-23 relative) of |accumulator| + sum of |products|. 16
/// per-product FMAs: 16 x 1/2; Hopper's fused adder on 16 products: 17/4 + 1; a 32-product
/// fused adder with the same 25-bit alignment: 33/4 + 1 = 9.25, over two groups. 10 covers all.
pub const STEP_ULPS: f64 = 10.0;
/// Most accumulators (split-K, stream-K partials) a kernel may combine.
pub const MAX_SPLITS: usize = 16;
/// Absolute error per product, step and final add from underflow: the smallest normal f32.
pub const UNDERFLOW: f64 = 1.1754943508222875e-38;
const F32_ULP: f64 = 1.0 / 8_388_608.0;
/// Slack for the f64 arithmetic of the bound itself (group sums, products of bounds).
const RELATIVE_SLACK: f64 = 1.0 / (1u64 << 40) as f64;

/// What a correct kernel may write for one element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Accepted {
    /// Any value of the output type in `[lo, hi]` (values of that type, as f64).
    Between { lo: f64, hi: f64 },
    /// NaN only (a NaN scale or element took part, an infinity met a zero or its opposite, or
    /// alpha was zero with an infinite sum).
    NaN,
    /// The f32 accumulator could overflow on the way: not judged.
    Unjudged,
}

impl Accepted {
    /// As two numbers, the form case files and the Python package carry: the interval's ends;
    /// NaN and NaN where NaN is the answer; -inf and inf where the element is not judged.
    pub fn bounds(&self) -> (f64, f64) {
        match *self {
            Accepted::Between { lo, hi } => (lo, hi),
            Accepted::NaN => (f64::NAN, f64::NAN),
            Accepted::Unjudged => (f64::NEG_INFINITY, f64::INFINITY),
        }
    }

    /// The inverse of [`Accepted::bounds`].
    pub fn from_bounds(lo: f64, hi: f64) -> Accepted {
        if lo.is_nan() || hi.is_nan() {
            Accepted::NaN
        } else if lo == f64::NEG_INFINITY && hi == f64::INFINITY {
            Accepted::Unjudged
        } else {
            Accepted::Between { lo, hi }
        }
    }

    pub fn accepts(&self, got: f64) -> bool {
        match *self {
            Accepted::Between { lo, hi } => lo <= got && got <= hi,
            Accepted::NaN => got.is_nan(),
            Accepted::Unjudged => true,
        }
    }
}

/// The model's answer for one GEMM: row-major `M x N`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaledReference {
    pub m: usize,
    pub n: usize,
    /// The exact reference, as values of the output type.
    pub expected: Vec<f64>,
    pub accepted: Vec<Accepted>,
}

impl ScaledReference {
    /// Elements of `output` outside their interval, as `(index, got)`.
    pub fn rejected(&self, output: &[f64]) -> Vec<(usize, f64)> {
        assert_eq!(output.len(), self.accepted.len(), "output size");
        output
            .iter()
            .zip(&self.accepted)
            .enumerate()
            .filter(|(_, (&got, accepted))| !accepted.accepts(got))
            .map(|(i, (&got, _))| (i, got))
            .collect()
    }

    pub fn unjudged(&self) -> usize {
        self.accepted
            .iter()
            .filter(|a| **a == Accepted::Unjudged)
            .count()
    }
}

pub fn scaled_gemm_reference(inputs: &ScaledGemmInputs) -> ScaledReference {
    scaled_gemm_reference_with_progress(inputs, &|_| {})
}

/// Decoded values of B kept at once (24 bytes each): B is decoded in blocks of its rows.
const DECODED_B_VALUES: usize = 1 << 22;

/// The same, calling `rows_done` with the number of output rows' worth of elements finished
/// (from several threads), for a progress bar.
pub fn scaled_gemm_reference_with_progress(
    inputs: &ScaledGemmInputs,
    rows_done: &(dyn Fn(usize) + Sync),
) -> ScaledReference {
    reference_in_blocks(inputs, DECODED_B_VALUES, rows_done)
}

/// The reference, B decoded `decoded_b_values / K` rows at a time.
fn reference_in_blocks(
    inputs: &ScaledGemmInputs,
    decoded_b_values: usize,
    rows_done: &(dyn Fn(usize) + Sync),
) -> ScaledReference {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (m, n, k) = (inputs.m(), inputs.n(), inputs.k());
    let mut expected = vec![0.0; m * n];
    let mut accepted = vec![Accepted::Unjudged; m * n];
    let done = AtomicUsize::new(0);
    // Each operand element is decoded once per block of B's rows, not once per product.
    let block = (decoded_b_values / k).clamp(1, n.max(1));
    for first in (0..n).step_by(block) {
        let cols = first..(first + block).min(n);
        let b_values: Vec<ExactValue> = cols
            .clone()
            .flat_map(|col| (0..k).map(move |kk| inputs.b.value(col, kk)))
            .collect();
        let b_alignments: Vec<Vec<Option<i32>>> = cols
            .clone()
            .map(|col| group_alignments(&inputs.b, col))
            .collect();
        expected
            .par_chunks_mut(n.max(1))
            .zip(accepted.par_chunks_mut(n.max(1)))
            .enumerate()
            .for_each(|(row, (expected_row, accepted_row))| {
                let a_row: Vec<ExactValue> = (0..k).map(|kk| inputs.a.value(row, kk)).collect();
                let a_alignments = group_alignments(&inputs.a, row);
                for (j, col) in cols.clone().enumerate() {
                    let b_row = &b_values[j * k..(j + 1) * k];
                    let alignments = (a_alignments.as_slice(), b_alignments[j].as_slice());
                    (expected_row[col], accepted_row[col]) =
                        element(inputs, &a_row, b_row, alignments, col);
                }
                let finished = done.fetch_add(cols.len(), Ordering::Relaxed) + cols.len();
                rows_done(finished / n);
            });
    }
    ScaledReference {
        m,
        n,
        expected,
        accepted,
    }
}

/// The magnitudes the error bound needs, from the products of one dot product.
#[derive(Debug, Clone, Copy, Default)]
struct Magnitudes {
    /// Sum of |product| over the whole row.
    abs_terms: f64,
    /// Largest and smallest prefix sums over the 16-groups (0 included).
    prefix_max: f64,
    prefix_min: f64,
    /// Sum of the positive and of the magnitudes of the negative group sums.
    positive_groups: f64,
    negative_groups: f64,
    /// Largest sum of |product| within one group.
    max_group_abs: f64,
    /// Sum of [`raised_maximum_error`] over the groups.
    raised_maximum: f64,
}

/// The reference and acceptance of the element of A's row `a_row` and B's row `b_row` (decoded;
/// `alignments`: their 16-groups' scale alignments, [`group_alignments`]), output column `col`.
fn element(
    inputs: &ScaledGemmInputs,
    a_row: &[ExactValue],
    b_row: &[ExactValue],
    alignments: (&[Option<i32>], &[Option<i32>]),
    col: usize,
) -> (f64, Accepted) {
    let mut wide = WideSum::new();
    let mut magnitudes = Magnitudes::default();
    let (mut prefix, mut group_sum, mut group_abs) = (0.0f64, 0.0f64, 0.0f64);
    for k in 0..inputs.k() {
        let product = a_row[k].times(b_row[k]);
        wide.add(product);
        if let ExactValue::Finite { .. } = product {
            let value = product.to_f64();
            group_sum += value;
            group_abs += value.abs();
        }
        if (k + 1) % GROUP == 0 {
            prefix += group_sum;
            magnitudes.prefix_max = magnitudes.prefix_max.max(prefix);
            magnitudes.prefix_min = magnitudes.prefix_min.min(prefix);
            if group_sum > 0.0 {
                magnitudes.positive_groups += group_sum;
            } else {
                magnitudes.negative_groups -= group_sum;
            }
            magnitudes.abs_terms += group_abs;
            magnitudes.max_group_abs = magnitudes.max_group_abs.max(group_abs);
            let group = k / GROUP;
            magnitudes.raised_maximum +=
                raised_maximum_error(alignments.0[group], alignments.1[group], group_sum);
            group_sum = 0.0;
            group_abs = 0.0;
        }
    }
    let epilogue = Epilogues::new(inputs, col);
    match wide.finish() {
        SumValue::NaN => (f64::NAN, Accepted::NaN),
        // An infinite element makes the sum infinite, but a kernel whose finite products or
        // partials overflow f32 with the other sign gets NaN: judged only where none can.
        SumValue::Infinite { .. } if accumulator_error(0.0, &magnitudes, inputs.k()).is_none() => {
            (f64::NAN, Accepted::Unjudged)
        }
        SumValue::Infinite { negative } => {
            let acc = if negative {
                f32::NEG_INFINITY
            } else {
                f32::INFINITY
            };
            let out = epilogue.reference(acc);
            let accepted = if out.is_nan() {
                Accepted::NaN
            } else {
                Accepted::Between { lo: out, hi: out }
            };
            (out, accepted)
        }
        SumValue::Finite(sum) => {
            let expected = epilogue.reference(sum as f32);
            let accepted = match accumulator_error(sum, &magnitudes, inputs.k()) {
                None => Accepted::Unjudged,
                Some(error) => {
                    let lo = f32_at_or_below(sum - error);
                    let hi = f32_at_or_above(sum + error);
                    let (a, b) = (epilogue.range(lo), epilogue.range(hi));
                    Accepted::Between {
                        lo: a.0.min(b.0),
                        hi: a.1.max(b.1),
                    }
                }
            };
            (expected, accepted)
        }
    }
}

/// What one 16-group can cost beyond the step contract when a fused adder aligns it by its
/// scales and not by its value. MMA-Sim's Blackwell adders take their maximum over alignment
/// exponents, zero terms included: `kind::mxf4nvf4` aligns a block's sum at the sum of its two
/// scales' exponents `Z` even when the sum is 0, so the step's other operands, the accumulator
/// included, are cut below 2^(Z - 35) (35 fractional bits, 5 operands: less than 2^(Z - 32) in
/// all); `kind::mxf8f6f4` aligns a zero product at -126 + the other factor's exponent (at most
/// 15) + the scales', at most Z - 111, and cuts 25 bits below it (33 operands: less than
/// 2^(Z - 130)). Where the group's exact sum is at least 2^(Z - 10) its own magnitude already
/// bounds the cut (the contract's derivation), so only groups whose sum is below that are
/// charged. Operands without block scales align by their values: no charge.
fn raised_maximum_error(a: Option<i32>, b: Option<i32>, group_sum: f64) -> f64 {
    let (Some(a), Some(b)) = (a, b) else {
        return 0.0;
    };
    let z = a + b;
    if group_sum.abs() >= 2f64.powi(z - 10) {
        0.0
    } else {
        2f64.powi(z - 32)
    }
}

/// For each 16-group of `operand`'s row `row`, the alignment exponent of the block scale covering
/// it: floor(log2) of its value, at least -6 for a UE4M3 subnormal (MMA-Sim aligns those at
/// their exponent field's -6), -126 for a zero scale; `None` without block scales or for a NaN
/// scale (the element is NaN then).
fn group_alignments(operand: &ScaledOperand, row: usize) -> Vec<Option<i32>> {
    (0..operand.k / GROUP)
        .map(|group| {
            let (format, block) = operand.format.scale()?;
            scale_alignment(
                format,
                operand.scales[row * (operand.k / block) + group * GROUP / block],
            )
        })
        .collect()
}

fn scale_alignment(format: ScaleFormat, byte: u8) -> Option<i32> {
    match format.decode(byte) {
        ExactValue::Finite { significand: 0, .. } => Some(-126),
        ExactValue::Finite {
            significand,
            exponent,
            ..
        } => {
            let floor_log2 = 63 - significand.leading_zeros() as i32 + exponent;
            Some(match format {
                ScaleFormat::Ue4m3 => floor_log2.max(-6),
                ScaleFormat::Ue8m0 => floor_log2,
            })
        }
        _ => None,
    }
}

/// E: the largest distance from the exact sum a contract-abiding f32 accumulator can end at, or
/// `None` where it could overflow. The derivation is the NVFP4 bound's (docs/reference/numerics.md) with
/// the family's step error and the underflow term.
fn accumulator_error(sum: f64, mag: &Magnitudes, k: usize) -> Option<f64> {
    let steps = k.div_ceil(GROUP) as f64;
    let splits = (k.div_ceil(GROUP)).min(MAX_SPLITS) as f64;
    let slack = mag.abs_terms * RELATIVE_SLACK * 16.0;
    // A partial sum that stops inside a group (per-product FMAs) differs from a group prefix by
    // at most that group's sum of magnitudes.
    let run = mag.prefix_max - mag.prefix_min + 2.0 * mag.max_group_abs + slack;
    let subset = mag.positive_groups.max(mag.negative_groups) + slack;
    let combined = subset.min(splits * run);
    let step_error = STEP_ULPS * F32_ULP;
    let underflow = (k as f64 + steps + splits) * UNDERFLOW;
    // Where every product is zero the accumulator is exactly zero throughout: nothing to cut.
    let raised_maximum = if mag.abs_terms > 0.0 {
        mag.raised_maximum
    } else {
        0.0
    };
    let numerator = step_error * (steps * run + mag.abs_terms + slack)
        + F32_ULP * (splits - 1.0) * combined
        + underflow
        + raised_maximum;
    let denominator = 1.0 - step_error * steps - F32_ULP * (splits - 1.0) * splits;
    if denominator <= 0.5 {
        return None;
    }
    let error = numerator / denominator * (1.0 + RELATIVE_SLACK) + sum.abs() * RELATIVE_SLACK;
    let largest = run.max(subset).max(mag.abs_terms) + error;
    (largest < f64::from(f32::MAX) / 2.0).then_some(error)
}

/// The largest f32 at or below x (x within f32's range).
fn f32_at_or_below(x: f64) -> f32 {
    let nearest = x as f32;
    if f64::from(nearest) > x {
        -next_up(-nearest)
    } else {
        nearest
    }
}

/// The smallest f32 at or above x (x within f32's range).
fn f32_at_or_above(x: f64) -> f32 {
    let nearest = x as f32;
    if f64::from(nearest) < x {
        next_up(nearest)
    } else {
        nearest
    }
}

/// The next f32 toward +infinity, for finite x (`f32::next_up` needs a newer Rust than ours).
fn next_up(x: f32) -> f32 {
    let bits = x.to_bits();
    if x == 0.0 {
        f32::from_bits(1)
    } else if x > 0.0 {
        f32::from_bits(bits + 1)
    } else {
        f32::from_bits(bits - 1)
    }
}

/// One element's epilogue: alpha, its column's bias, the output type and order.
struct Epilogues {
    alpha: f32,
    bias: f32,
    out: OutDtype,
    order: Epilogue,
}

impl Epilogues {
    fn new(inputs: &ScaledGemmInputs, col: usize) -> Self {
        Epilogues {
            alpha: inputs.alpha,
            bias: inputs.bias.as_ref().map_or(0.0, |bias| bias[col]),
            out: inputs.out,
            order: inputs.epilogue,
        }
    }

    /// The epilogue as the exact reference defines it (separate f32 roundings).
    fn reference(&self, acc: f32) -> f64 {
        self.forms(acc)[0]
    }

    /// The outputs the accepted forms give for `acc`, lowest and highest.
    fn range(&self, acc: f32) -> (f64, f64) {
        let [a, b] = self.forms(acc);
        if a.is_nan() || b.is_nan() {
            return (a, a);
        }
        (a.min(b), a.max(b))
    }

    /// The output of each accepted form for `acc`: the reference form first.
    fn forms(&self, acc: f32) -> [f64; 2] {
        let out = |x: f64| self.out.round(x);
        match self.order {
            Epilogue::F32 => {
                // Rust's f32 arithmetic is IEEE's: each operation rounded once, to nearest even;
                // `mul_add` rounds once for both.
                let separate = out(f64::from(self.alpha * acc + self.bias));
                let fused = out(f64::from(self.alpha.mul_add(acc, self.bias)));
                [separate, fused]
            }
            // A sum or product of two values of at most 24 bits is exact in f64 or, for a sum
            // whose exponents differ too much, rounds in f64 without changing the rounding
            // to 24 bits or fewer.
            Epilogue::BiasInOutput => {
                let scaled = out(f64::from(self.alpha * acc));
                let value = out(scaled + f64::from(self.bias));
                [value, value]
            }
            Epilogue::AfterCast => {
                let cast = out(f64::from(acc));
                let scaled = out(cast * out(f64::from(self.alpha)));
                let value = out(scaled + f64::from(self.bias));
                [value, value]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::scaled_gemm::{OperandFormat, OutDtype};
    use crate::problem::scaled_generate::{random_operand, ScaledDistribution};

    #[test]
    fn decoding_b_in_blocks_changes_nothing() {
        let a = random_operand(OperandFormat::Mxfp4, 7, 64, ScaledDistribution::Edges, 3, 0);
        let b = random_operand(OperandFormat::Bf16, 9, 64, ScaledDistribution::Edges, 3, 1);
        let inputs = ScaledGemmInputs::new(a, b, 0.5, None, OutDtype::F32, Epilogue::F32).unwrap();
        let whole = scaled_gemm_reference(&inputs);
        let rows = std::sync::atomic::AtomicUsize::new(0);
        let one_row_at_a_time = reference_in_blocks(&inputs, 64, &|done| {
            rows.fetch_max(done, std::sync::atomic::Ordering::Relaxed);
        });
        let bits = |r: &ScaledReference| -> Vec<(u64, u64, u64)> {
            r.expected
                .iter()
                .zip(&r.accepted)
                .map(|(e, a)| (e.to_bits(), a.bounds().0.to_bits(), a.bounds().1.to_bits()))
                .collect()
        };
        assert_eq!(bits(&whole), bits(&one_row_at_a_time));
        assert_eq!(rows.into_inner(), 7);
    }
}
