//! Acceptance intervals: which fp16 outputs a correct kernel may produce. The derivation is in
//! docs/reference/numerics.md; this file implements it and names each constant there.
//!
//! The accumulation contract a kernel must meet (every tensor-core NVFP4 kernel does):
//! - K is consumed in steps of one or more whole 16-element scale blocks by one or more f32
//!   accumulators whose partials are combined by f32 adds at the end; under
//!   [`KOrder::Contiguous`] (the default) each accumulator takes one contiguous run of K in
//!   increasing or decreasing order and there are at most [`MAX_SPLITS`] of them (main loops,
//!   split-K, stream-K); under [`KOrder::Any`] the blocks may come in any order to any number
//!   of accumulators (wider intervals);
//! - each step adds its products to the accumulator with an error of at most
//!   [`STEP_ERROR`] * (|accumulator| + sum of |products| in the step): this covers f32 round-to-
//!   nearest and truncating adds, one FMA per step adding an exact scaled block sum, and fused
//!   multi-term tensor-core adders that align to the
//!   largest operand and keep at least 25 fractional bits for up to 16 products (Hopper's model)
//!   or exact 16-blocks with 35 bits (Blackwell's); a block that Blackwell's adder aligns above
//!   its value (a zero one under its scales) adds up to 2^(Z - 32) ([`ExactDot::raised_blocks`]);
//! - the epilogue computes silu(x1) * x2 in f32 with relative error at most [`epilogue_budget`]
//!   (fast `__expf`, `__fdividef` or `__frcp_rn` are fine; tanh.approx is not), and rounds the
//!   result to fp16 to nearest even.

use super::exact::{fixed_to_f64, ExactDot, FIXED_POINT_EXPONENT};
use super::portable_math::{pow2, silu, SILU_ARGMIN};
use crate::formats::fp16_from_f64_rne;
use crate::problem::SCALE_BLOCK;
use half::f16;

/// f32's unit roundoff for truncation: one ulp relative, 2^-23.
const F32_ULP: f64 = 1.0 / 8_388_608.0;
/// Per-step error factor, in units of f32's unit roundoff for truncation (2^-23): 17 operands truncated at 2^-25 relative to the
/// largest (17/4) plus the final rounding (1).
pub const STEP_ERROR_ULPS: f64 = 17.0 / 4.0 + 1.0;
pub const STEP_ERROR: f64 = STEP_ERROR_ULPS * F32_ULP;
/// Relative slack for the f64 arithmetic of the bounds themselves (each a handful of roundings
/// of 2^-53), and an absolute slack far below the smallest fp16 subnormal (2^-24).
const RELATIVE_SLACK: f64 = 1.0 / (1u64 << 40) as f64;
const ABSOLUTE_SLACK: f64 = 1.0 / (1u64 << 60) as f64;

/// Which K orders the interval must accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KOrder {
    /// Each accumulator sums one contiguous run of K blocks, either direction; at most
    /// [`MAX_SPLITS`] accumulators.
    Contiguous,
    /// Any order of blocks, any number of accumulators.
    Any,
    /// Every product added by its own f32 fused multiply-add, rounded to nearest (`fmaf`, what
    /// cuBLAS SGEMM and torch's fp32 matmul do), K in order within each of at most
    /// [`MAX_SPLITS`] contiguous runs: a CUDA-core kernel that does not sum a scale block first.
    PerProduct,
}

impl KOrder {
    pub const ALL: [KOrder; 3] = [KOrder::Contiguous, KOrder::Any, KOrder::PerProduct];

    pub fn name(self) -> &'static str {
        match self {
            KOrder::Contiguous => "contiguous",
            KOrder::Any => "any",
            KOrder::PerProduct => "per-product",
        }
    }

    /// (steps, per-step error factor in units of the accumulator's ulp, partial sums combined)
    /// for `blocks` scale blocks.
    fn steps(self, blocks: usize) -> (f64, f64, f64) {
        match self {
            KOrder::Contiguous => (
                blocks as f64,
                STEP_ERROR_ULPS,
                blocks.min(MAX_SPLITS) as f64,
            ),
            KOrder::Any => (blocks as f64, STEP_ERROR_ULPS, blocks as f64),
            // One rounding to nearest per product: at most half an ulp of the result.
            KOrder::PerProduct => (
                (blocks * SCALE_BLOCK) as f64,
                0.5,
                blocks.min(MAX_SPLITS) as f64,
            ),
        }
    }
}

impl std::str::FromStr for KOrder {
    type Err = crate::Error;

    fn from_str(text: &str) -> crate::Result<Self> {
        crate::error::parse_name(&KOrder::ALL, KOrder::name, "K order", text)
    }
}

/// Most split-K partials a [`KOrder::Contiguous`] kernel may combine.
pub const MAX_SPLITS: usize = 16;

/// The precision of the accumulator a kernel (or a bug class) adds in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulator {
    /// f32: the contract of every correct kernel.
    F32,
    /// fp16: a bug class; the model bounds it to diagnose it, never to accept it.
    Fp16,
}

impl Accumulator {
    /// One ulp relative (truncation allowed) and the largest finite value.
    fn unit_and_max(self) -> (f64, f64) {
        match self {
            Accumulator::F32 => (F32_ULP, f64::from(f32::MAX)),
            Accumulator::Fp16 => (1.0 / 1024.0, 65504.0),
        }
    }
}

/// A closed real interval, "must be NaN", or (for bug-class models only) no bound at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    Real {
        lo: f64,
        hi: f64,
    },
    NaN,
    /// The model cannot bound the value (an fp16 accumulator that may overflow). Never produced
    /// for the f32 contract.
    Unbounded,
}

/// The deepest K (in 16-blocks) at which the f32 bound of `order` holds (its denominator stays
/// above 1/2): every K `Shape::new` allows under `contiguous`, about 2,000 blocks under `any`.
pub fn max_blocks(order: KOrder) -> usize {
    let holds = |blocks: usize| {
        let (steps, factor, splits) = order.steps(blocks);
        1.0 - factor * F32_ULP * steps - F32_ULP * (splits - 1.0) * splits > 0.5
    };
    // The largest holding count, by bisection (the denominator falls with K).
    let (mut lo, mut hi) = (1usize, 1usize << 40);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The values a contract-abiding kernel's f32 accumulator can hold for this dot product.
pub fn accumulator_range(dot: &ExactDot, blocks: usize, order: KOrder) -> Range {
    let range = accumulator_range_in(dot, blocks, order, Accumulator::F32);
    assert!(
        range != Range::Unbounded,
        "K = {} is above the shape limit that keeps the error bound valid",
        blocks * 16
    );
    range
}

/// The same bound for an accumulator of the given precision: the step error and the combining
/// adds scale with its unit roundoff.
pub fn accumulator_range_in(
    dot: &ExactDot,
    blocks: usize,
    order: KOrder,
    accumulator: Accumulator,
) -> Range {
    if dot.nan {
        return Range::NaN;
    }
    let exact = fixed_to_f64(dot.sum, FIXED_POINT_EXPONENT);
    let abs_terms = fixed_to_f64(dot.abs_terms, FIXED_POINT_EXPONENT);
    let (steps, factor, splits) = order.steps(blocks);
    // A bounds every accumulator's exact partial sum. The final adds of p partials see operands
    // bounded by C (sums of several runs are subsets of blocks, so C <= the subset bound too);
    // their error is at most F32_ULP (p - 1)(C + p E).
    let subset = fixed_to_f64(dot.max_subset_sum(), FIXED_POINT_EXPONENT);
    let run = fixed_to_f64(dot.max_run_sum(), FIXED_POINT_EXPONENT);
    let (partial, combined) = match order {
        KOrder::Contiguous => (run, subset.min(splits * run)),
        KOrder::Any => (subset, subset),
        // A partial sum that stops inside a block differs from a block prefix by at most that
        // block's sum of magnitudes: every run of products is within the block runs' range
        // plus twice the largest block's.
        KOrder::PerProduct => {
            let inside = 2.0 * fixed_to_f64(dot.max_block_abs, FIXED_POINT_EXPONENT);
            (run + inside, splits * (run + inside))
        }
    };
    // E <= c (steps (A + E) + T) + u (p - 1)(C + p E), solved for E; c = factor u.
    let (unit, max) = accumulator.unit_and_max();
    let step_error = factor * unit;
    let numerator = step_error * (steps * partial + abs_terms)
        + unit * (splits - 1.0) * combined
        + raised_maximum_error(dot);
    let denominator = 1.0 - step_error * steps - unit * (splits - 1.0) * splits;
    if denominator <= 0.5 {
        return Range::Unbounded;
    }
    let error = numerator / denominator * (1.0 + RELATIVE_SLACK) + exact.abs() * RELATIVE_SLACK;
    if partial.max(subset) + error >= max {
        return Range::Unbounded;
    }
    Range::Real {
        lo: exact - error,
        hi: exact + error,
    }
}

/// What blocks aligned above their value can cost a Blackwell kernel (as MMA-Sim models its
/// adder): each such block, aligned at `Z`, can cut the other operands of its step, the
/// accumulator included, below 2^(Z - 35), five operands: less than 2^(Z - 32) per block
/// (docs/reference/numerics.md, section 10, "Zero blocks raise Blackwell's maximum"). Nothing where every
/// product is zero: the accumulator is exactly zero throughout.
fn raised_maximum_error(dot: &ExactDot) -> f64 {
    if dot.raised_blocks == 0 || dot.abs_terms == 0 {
        0.0
    } else {
        f64::from(dot.raised_blocks) * pow2(dot.raised_alignment - 32)
    }
}

/// Relative error allowed for the epilogue's own arithmetic when x1 >= `x1_lo`: a fast exp's
/// error grows with |x| (CUDA's `__expf`: 2 + 1.16|x| ulps), and it reaches silu(x) fully only for
/// negative x. Beyond |x| = 128 the cap is harmless: |x2| < 2^47, so |silu(x1) * x2| is far below
/// the smallest fp16 subnormal and both the kernel's answer and the true value round to +-0.
pub fn epilogue_budget(x1_lo: f64) -> f64 {
    F32_ULP * (8.0 + 2.0 * (-x1_lo).clamp(0.0, 128.0))
}

/// The range of silu over [lo, hi], rounded outward.
fn silu_range(lo: f64, hi: f64) -> (f64, f64) {
    let (at_lo, at_hi) = (silu(lo), silu(hi));
    let min = if lo <= SILU_ARGMIN && SILU_ARGMIN <= hi {
        silu(SILU_ARGMIN)
    } else {
        at_lo.min(at_hi)
    };
    let max = at_lo.max(at_hi);
    (outward_down(min), outward_up(max))
}

fn outward_down(x: f64) -> f64 {
    x - x.abs() * RELATIVE_SLACK - ABSOLUTE_SLACK
}

fn outward_up(x: f64) -> f64 {
    x + x.abs() * RELATIVE_SLACK + ABSOLUTE_SLACK
}

/// The real range of silu(x1) * x2 over the two accumulator ranges, with the epilogue budget.
pub fn silu_mul_range(x1: Range, x2: Range) -> Range {
    epilogue_range(Epilogue::SiluMul, x1, x2)
}

/// What an epilogue computes from its two accumulators. Only [`Epilogue::SiluMul`] is the
/// problem; the others are bug classes the diagnosis models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    /// silu(x1) * x2.
    SiluMul,
    /// x1 * x2 (silu forgotten).
    Mul,
    /// x1 / (1 + e^x1) * x2 (the sign of the exponent flipped), which is -silu(-x1) * x2.
    SignFlippedSiluMul,
    /// x1 alone (a plain GEMM).
    First,
}

/// The real range of an epilogue over two accumulator ranges, with the epilogue budget.
pub fn epilogue_range(epilogue: Epilogue, x1: Range, x2: Range) -> Range {
    let (lo1, hi1, lo2, hi2) = match (x1, x2, epilogue) {
        (Range::NaN, _, _)
        | (_, Range::NaN, Epilogue::SiluMul | Epilogue::Mul | Epilogue::SignFlippedSiluMul) => {
            return Range::NaN
        }
        (Range::Unbounded, _, _)
        | (_, Range::Unbounded, Epilogue::SiluMul | Epilogue::Mul | Epilogue::SignFlippedSiluMul) => {
            return Range::Unbounded
        }
        (Range::Real { lo, hi }, _, Epilogue::First) => return Range::Real { lo, hi },
        (Range::Real { lo: lo1, hi: hi1 }, Range::Real { lo: lo2, hi: hi2 }, _) => {
            (lo1, hi1, lo2, hi2)
        }
    };
    // The budget follows the most negative argument the exponential sees.
    let (s_lo, s_hi, exp_argument_lo) = match epilogue {
        Epilogue::SiluMul => {
            let (lo, hi) = silu_range(lo1, hi1);
            (lo, hi, lo1)
        }
        Epilogue::Mul => (lo1, hi1, 0.0),
        Epilogue::SignFlippedSiluMul => {
            let (lo, hi) = silu_range(-hi1, -lo1);
            (-hi, -lo, -hi1)
        }
        Epilogue::First => unreachable!("returned above"),
    };
    let corners = [s_lo * lo2, s_lo * hi2, s_hi * lo2, s_hi * hi2];
    let lo = corners.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = corners.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let budget = epilogue_budget(exp_argument_lo) * lo.abs().max(hi.abs());
    Range::Real {
        lo: outward_down(lo - budget),
        hi: outward_up(hi + budget),
    }
}

/// The fp16 outputs that round-to-nearest-even conversion of any value in `range` can give.
/// An unbounded range gives (-inf, +inf).
pub fn fp16_interval(range: Range) -> (f16, f16) {
    match range {
        Range::NaN => (f16::NAN, f16::NAN),
        Range::Real { lo, hi } => (fp16_from_f64_rne(lo), fp16_from_f64_rne(hi)),
        Range::Unbounded => (f16::NEG_INFINITY, f16::INFINITY),
    }
}

/// The same for a conversion that truncates toward zero (a bug class): still monotone, so the
/// ends map to the ends.
pub fn fp16_interval_toward_zero(range: Range) -> (f16, f16) {
    let toward_zero = |x: f64| {
        let nearest = fp16_from_f64_rne(x);
        if nearest.to_f64().abs() > x.abs() {
            f16::from_bits(nearest.to_bits() - 1)
        } else {
            nearest
        }
    };
    match range {
        Range::Real { lo, hi } => (toward_zero(lo), toward_zero(hi)),
        other => fp16_interval(other),
    }
}

/// Position of an fp16 value on the line of all fp16 values (-0 and +0 share a position), for
/// measuring distances in ulps. NaN has no position.
pub fn fp16_ordinal(x: f16) -> Option<i32> {
    let (position, nan) = fp16_position(x);
    (!nan).then_some(position)
}

/// [`fp16_ordinal`] without the `Option`: the position, and whether `x` is a NaN (whose
/// position means nothing). For scans over whole outputs that the compiler can vectorize.
pub fn fp16_position(x: f16) -> (i32, bool) {
    let bits = i32::from(x.to_bits());
    let magnitude = bits & 0x7FFF;
    let position = if bits & 0x8000 != 0 {
        -magnitude
    } else {
        magnitude
    };
    (position, magnitude > 0x7C00)
}

/// Number of fp16 values in [lo, hi] minus one: 0 when the interval is a single value.
pub fn width_ulps(lo: f16, hi: f16) -> Option<u32> {
    Some((fp16_ordinal(hi)? - fp16_ordinal(lo)?) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// K = 128: one product 0.5 x 0.5 under scales 2^-9 (the accumulator holds 2^-20), then
    /// A's blocks zero under scale 448 against B's ones under 448. MMA-Sim's Blackwell adder
    /// aligns those zero blocks at 16 and cuts the accumulator to 0; the interval must hold it.
    #[test]
    fn a_blackwell_kernel_cut_by_zero_blocks_is_accepted() {
        use crate::formats::E2m1;
        use crate::model::exact::{exact_dot, PreparedRow};
        use crate::model::mma::{blackwell_block_scaled_step, BlackwellScales};
        let codes_a: Vec<u8> = (0..128).map(|k| u8::from(k == 0)).collect();
        let codes_b: Vec<u8> = (0..128).map(|k| if k == 0 { 1 } else { 2 }).collect();
        let scales = [0x01u8, 0x01, 0x01, 0x01, 0x7E, 0x7E, 0x7E, 0x7E];
        let pack = |c: &[u8]| -> Vec<u8> { c.chunks(2).map(|p| p[0] | (p[1] << 4)).collect() };
        let mut acc = 0f32;
        for step in 0..2 {
            let e2m1 = |c: &[u8]| -> [E2m1; 64] {
                std::array::from_fn(|t| E2m1::from_bits(c[step * 64 + t]))
            };
            let s: [u8; 4] = std::array::from_fn(|t| scales[step * 4 + t]);
            acc = blackwell_block_scaled_step(
                BlackwellScales::Block16Ue4m3,
                acc,
                &e2m1(&codes_a),
                s,
                &e2m1(&codes_b),
                s,
            );
        }
        assert_eq!(acc, 0.0);
        let dot = exact_dot(
            &PreparedRow::new(&pack(&codes_a), &scales),
            &PreparedRow::new(&pack(&codes_b), &scales),
        );
        // Blocks 1..3 (zero under 2^-9) and 4..7 (zero under 448), not block 0 (2^-20 = 2^(Z - 8)).
        assert_eq!((dot.raised_blocks, dot.raised_alignment), (7, 16));
        let Range::Real { lo, hi } = accumulator_range(&dot, 8, KOrder::Contiguous) else {
            panic!("finite");
        };
        assert!(
            lo <= 0.0 && 2f64.powi(-20) <= hi && hi < 0.001,
            "[{lo}, {hi}]"
        );
        // Without the charge the interval would be a few ulps of 2^-20 wide.
        let plain = ExactDot {
            raised_blocks: 0,
            ..dot
        };
        let Range::Real { lo, .. } = accumulator_range(&plain, 8, KOrder::Contiguous) else {
            panic!("finite");
        };
        assert!(lo > 0.0, "{lo}");
    }

    #[test]
    fn the_bound_holds_to_the_depth_it_reports() {
        let dot = ExactDot {
            positive_blocks: 1,
            negative_blocks: 1,
            abs_terms: 1,
            ..ExactDot::default()
        };
        // Every K a shape may have, in the default order; about 32,000 in any order.
        assert!(max_blocks(KOrder::Contiguous) >= (1 << 22) / 16);
        let any = max_blocks(KOrder::Any);
        assert!((2_000..2_100).contains(&any), "{any}");
        for order in KOrder::ALL {
            // Would panic past the depth.
            accumulator_range(&dot, max_blocks(order).min((1 << 22) / 16), order);
        }
    }

    #[test]
    fn ordinals_and_widths() {
        assert_eq!(width_ulps(f16::ONE, f16::ONE), Some(0));
        assert_eq!(width_ulps(f16::NEG_ZERO, f16::ZERO), Some(0));
        assert_eq!(
            width_ulps(f16::from_bits(0x8001), f16::from_bits(0x0001)),
            Some(2)
        );
        assert_eq!(width_ulps(f16::NAN, f16::ONE), None);
    }

    #[test]
    fn silu_range_covers_the_minimum() {
        let (lo, hi) = silu_range(-3.0, 0.0);
        assert!(lo <= silu(SILU_ARGMIN) && lo > -0.2785);
        assert!(hi >= 0.0);
    }
}
