//! Fast paths of the tensor-core step functions, with the same results bit for bit: no
//! allocation, no i128, one i64 sum. `crates/model/tests/model/mma_fast.rs` proves each equal to the function it
//! replaces ([`super::hopper_hmma_step`], [`super::blackwell_mxf4nvf4_step`],
//! [`super::blackwell_block_scaled_step`]) on 10^5 random steps each, specials included, and
//! against the committed H100 and MMA-Sim vectors.
//!
//! Two kinds of input:
//! - general fp16 operands ([`hopper_hmma_step_fast`]), for anything that holds fp16 arrays;
//! - NVFP4 operands ([`NvBlock`]: one 16-element scale block of e2m1 half units and its scale,
//!   decoded once per row), which is what the replay feeds the steps. In that domain every
//!   Hopper operand `e2m1 * |scale|` is an fp16 normal or zero (its magnitude lies in
//!   [2^-10, 2688]), the 16 products of a block share one scale exponent, and the block step
//!   reduces to one exact integer dot product plus, only where C dominates the products, a
//!   per-product truncation.

use super::{BlackwellScales, ScaleFactor, BLACKWELL_NAN, BLOCK};
use crate::formats::{E2m1, E4m3};
use crate::model::portable_math::pow2;
use half::f16;

/// Fractional bits of the Hopper adder (f16 -> f32) and of the Blackwell mxf4nvf4 adder.
const HOPPER_BITS: i32 = 25;
const BLACKWELL_BITS: i32 = 35;

/// The NaN every Hopper step produces (measured: canonical 0x7FFFFFFF).
pub const HOPPER_NAN: u32 = 0x7FFF_FFFF;

/// `s * 2^q` rounded toward zero to f32. The same as `adder::round_to_f32(.., TowardZero)`,
/// including its `-0` for a negative value cut to zero and `f32::MAX` on overflow.
#[inline]
pub fn rtz_to_f32(s: i64, q: i32) -> f32 {
    if s == 0 {
        return 0.0;
    }
    let magnitude = s.unsigned_abs();
    let top = 63 - magnitude.leading_zeros() as i32;
    let value_exponent = top + q;
    let bits = if value_exponent > 127 {
        f32::MAX.to_bits()
    } else {
        // f32 keeps 24 bits; below 2^-126 the grid is 2^-149.
        let quantum = (value_exponent - 23).max(-149);
        let shift = quantum - q;
        let kept = if shift >= 0 {
            magnitude.checked_shr(shift as u32).unwrap_or(0)
        } else {
            magnitude << (-shift) as u32
        } as u32;
        if value_exponent >= -126 {
            // kept in [2^23, 2^24): the implicit bit becomes the exponent field.
            ((value_exponent + 127) as u32) << 23 | (kept & 0x7F_FFFF)
        } else {
            kept // subnormal (or zero): kept < 2^23 units of 2^-149
        }
    };
    f32::from_bits(bits | if s < 0 { 0x8000_0000 } else { 0 })
}

/// `value * 2^shift` as an integer, cut toward zero when `shift < 0` (sign-magnitude).
#[inline(always)]
fn cut(value: i64, shift: i32) -> i64 {
    if value == 0 {
        0
    } else if shift >= 0 {
        value << shift
    } else {
        let magnitude = value
            .unsigned_abs()
            .checked_shr((-shift) as u32)
            .unwrap_or(0) as i64;
        if value < 0 {
            -magnitude
        } else {
            magnitude
        }
    }
}

/// An f32 accumulator as `mantissa * 2^(exponent - 23)` with its alignment exponent (zeros and
/// subnormals at -126, not renormalised). `None` for inf and NaN.
#[inline(always)]
fn decode_f32(c: f32) -> Option<(i64, i32)> {
    let bits = c.to_bits();
    let field = ((bits >> 23) & 0xFF) as i32;
    if field == 0xFF {
        return None;
    }
    let fraction = i64::from(bits & 0x7F_FFFF);
    let magnitude = if field == 0 {
        fraction
    } else {
        fraction | 0x80_0000
    };
    let mantissa = if bits >> 31 != 0 {
        -magnitude
    } else {
        magnitude
    };
    Some((mantissa, field.max(1) - 127))
}

/// What a Hopper step gives when C or an operand is inf or NaN: the IEEE sum (every NaN as
/// [`HOPPER_NAN`]). Shared with [`super::hopper_hmma_step`].
pub(super) fn hopper_special(c: f32, a: &[f16; BLOCK], b: &[f16; BLOCK]) -> f32 {
    let ieee = a
        .iter()
        .zip(b)
        .fold(f64::from(c), |acc, (x, y)| acc + x.to_f64() * y.to_f64());
    if ieee.is_nan() {
        f32::from_bits(HOPPER_NAN)
    } else {
        ieee as f32
    }
}

/// [`super::hopper_hmma_step`] without allocation: `mma.sync m16n8k16` f16 -> f32 as measured on
/// the H100, for any fp16 operands.
pub fn hopper_hmma_step_fast(c: f32, a: &[f16; BLOCK], b: &[f16; BLOCK]) -> f32 {
    let Some((c_mantissa, c_exponent)) = decode_f32(c) else {
        return hopper_special(c, a, b);
    };
    // Magnitudes (< 2^22), signs and alignments of the 16 products.
    let mut magnitude = [0i64; BLOCK];
    let mut negative = [false; BLOCK];
    let mut alignment = [0i32; BLOCK];
    let mut emax = if c_mantissa != 0 {
        c_exponent
    } else {
        i32::MIN
    };
    let mut all_negative_zero = true;
    for k in 0..BLOCK {
        let (x, y) = (a[k].to_bits(), b[k].to_bits());
        let (fx, fy) = (i32::from((x >> 10) & 0x1F), i32::from((y >> 10) & 0x1F));
        if fx == 0x1F || fy == 0x1F {
            return hopper_special(c, a, b);
        }
        let significand =
            |bits: u16, field: i32| i64::from(bits & 0x3FF) | if field > 0 { 0x400 } else { 0 };
        magnitude[k] = significand(x, fx) * significand(y, fy);
        negative[k] = (x ^ y) & 0x8000 != 0;
        alignment[k] = fx.max(1) + fy.max(1) - 30;
        if magnitude[k] != 0 {
            emax = emax.max(alignment[k]);
        }
        all_negative_zero &= magnitude[k] == 0 && negative[k];
    }
    let sum = if emax == i32::MIN {
        0.0
    } else {
        // In units of 2^(emax - 25): a product P * 2^(ea + eb - 20) is P * 2^(5 - d) with
        // d = emax - (ea + eb) >= 0 for a non-zero product, so (P << 5) >> d cuts its magnitude
        // toward zero; C (M * 2^(eC - 23)) is (M << 2) >> (emax - eC). A zero term stays zero
        // whatever its (clamped) shift.
        let term = |m: i64, negative: bool, up: u32, d: i32| {
            let cut = (m << up) >> d.clamp(0, 63);
            if negative {
                -cut
            } else {
                cut
            }
        };
        let mut s = term(c_mantissa.abs(), c_mantissa < 0, 2, emax - c_exponent);
        for k in 0..BLOCK {
            s += term(magnitude[k], negative[k], 5, emax - alignment[k]);
        }
        rtz_to_f32(s, emax - HOPPER_BITS)
    };
    // A zero result is +0, except C = -0 with every product a negative zero.
    if sum == 0.0 && all_negative_zero && c.to_bits() == 0x8000_0000 {
        -0.0
    } else {
        sum
    }
}

/// Marks a zero element in [`NvBlock::log2`]: a non-zero element's entry is 0..=7 (|half| <= 12,
/// significand <= 15), so the sum of two entries is negative exactly when a factor is zero.
const ZERO_LOG2: i8 = -64;

/// One 16-element scale block of one NVFP4 row, decoded for the fast steps: element k is
/// `half[k] / 2 * scale` with `scale = significand * 2^exponent` (the e4m3 magnitude: its sign
/// bit is ignored, UE4M3; or a UE8M0 power of two, for the Blackwell step only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvBlock {
    /// e2m1 values in half units, signed: -12..=12.
    pub half: [i8; BLOCK],
    /// floor(log2(|half\[k\]| * significand)), or -64 where that is zero. The fp16 value
    /// `e2m1 * scale` has exponent `log2[k] + exponent - 1`.
    pub log2: [i8; BLOCK],
    /// Bit k: the e2m1 sign bit of element k (a zero keeps its sign as an fp16 operand).
    pub signs: u16,
    /// Bit k: element k is zero (as a value, whatever its sign).
    pub zeros: u16,
    pub significand: i32,
    pub exponent: i32,
    /// The exponent the scale contributes to a Blackwell block term's alignment
    /// ([`ScaleFactor::alignment`]).
    pub alignment: i32,
    /// A NaN scale (code 0x7F or 0xFF): every element of the block is NaN.
    pub nan: bool,
}

impl NvBlock {
    /// A block under a UE4M3 scale (NVFP4).
    pub fn new(values: &[E2m1; BLOCK], scale: E4m3) -> Self {
        NvBlock::with_scale(
            values,
            BlackwellScales::Block16Ue4m3.decode(scale.to_bits()),
        )
    }

    /// A block under a decoded scale (`None`: NaN).
    pub fn with_scale(values: &[E2m1; BLOCK], scale: Option<ScaleFactor>) -> Self {
        let (significand, exponent, alignment, nan) = match scale {
            Some(s) => (s.significand as i32, s.exponent, s.alignment, false),
            None => (0, 0, 0, true),
        };
        let mut block = NvBlock {
            half: [0; BLOCK],
            log2: [ZERO_LOG2; BLOCK],
            signs: 0,
            zeros: 0,
            significand,
            exponent,
            alignment,
            nan,
        };
        for (k, v) in values.iter().enumerate() {
            let half = v.to_half_units();
            block.half[k] = half as i8;
            block.signs |= u16::from(v.is_negative()) << k;
            let magnitude = half.unsigned_abs() * significand as u32;
            if magnitude == 0 {
                block.zeros |= 1 << k;
            } else {
                block.log2[k] = (31 - magnitude.leading_zeros()) as i8;
            }
        }
        block
    }

    /// Block `j` of a packed FP4 row (low nibble = even k) with its plain scales.
    pub fn from_packed(packed: &[u8], scales: &[u8], j: usize) -> Self {
        let mut values = [E2m1::from_bits(0); BLOCK];
        for (i, &byte) in packed[j * BLOCK / 2..(j + 1) * BLOCK / 2]
            .iter()
            .enumerate()
        {
            values[2 * i] = E2m1::from_bits(byte & 0xF);
            values[2 * i + 1] = E2m1::from_bits(byte >> 4);
        }
        NvBlock::new(&values, E4m3::from_bits(scales[j]))
    }

    /// Every block of a packed row.
    pub fn row(packed: &[u8], scales: &[u8]) -> Vec<NvBlock> {
        (0..scales.len())
            .map(|j| NvBlock::from_packed(packed, scales, j))
            .collect()
    }

    /// The fp16 operands the Hopper kernels feed the MMA: `e2m1 * |scale|`, exact (NaN for a
    /// NaN scale).
    pub fn to_f16(&self) -> [f16; BLOCK] {
        let mut out = [f16::ZERO; BLOCK];
        for (k, o) in out.iter_mut().enumerate() {
            *o = if self.nan {
                f16::NAN
            } else {
                let value = f32::from(self.half[k])
                    * 0.5
                    * self.significand as f32
                    * (pow2(self.exponent) as f32);
                let signed_zero = if self.signs >> k & 1 != 0 { -0.0 } else { 0.0 };
                f16::from_f32(if value == 0.0 { signed_zero } else { value })
            };
        }
        out
    }
}

/// The exact block dot product in quarter units, and the largest `log2_a + log2_b` over the
/// non-zero products (negative when every product is zero).
#[inline(always)]
fn block_products(a: &NvBlock, b: &NvBlock) -> (i32, i8) {
    let mut sum = 0i32;
    let mut max_log2 = i8::MIN;
    for k in 0..BLOCK {
        sum += i32::from(a.half[k]) * i32::from(b.half[k]);
        max_log2 = max_log2.max(a.log2[k].wrapping_add(b.log2[k]));
    }
    (sum, max_log2)
}

/// One Hopper `mma.sync` f16 -> f32 step on NVFP4 operands: `c` plus the 16 products of
/// `a.to_f16()` and `b.to_f16()`; equal to [`super::hopper_hmma_step`] on those operands.
#[inline]
pub fn hopper_nvfp4_step(c: f32, a: &NvBlock, b: &NvBlock) -> f32 {
    if a.nan || b.nan || c.is_nan() {
        return f32::from_bits(HOPPER_NAN);
    }
    let Some((c_mantissa, c_exponent)) = decode_f32(c) else {
        return c; // an infinite C plus finite products
    };
    let (sum, max_log2) = block_products(a, b);
    // Product k is half_a * half_b * sig_a * sig_b * 2^unit, aligned at log2_a + log2_b + unit.
    let unit = a.exponent + b.exponent - 2;
    let products_nonzero = max_log2 >= 0;
    let emax = match (products_nonzero, c_mantissa != 0) {
        (true, true) => (i32::from(max_log2) + unit).max(c_exponent),
        (true, false) => i32::from(max_log2) + unit,
        (false, true) => c_exponent,
        (false, false) => {
            // Zero: +0, except C = -0 with every product a negative zero.
            let negative_zeros = (a.signs ^ b.signs) == 0xFFFF;
            return if negative_zeros && c.to_bits() == 0x8000_0000 {
                -0.0
            } else {
                0.0
            };
        }
    };
    let q = emax - HOPPER_BITS;
    let scale = i64::from(a.significand * b.significand);
    let shift = unit - q;
    let products = if !products_nonzero {
        0
    } else if shift >= 0 {
        // Every product is a whole number of quanta: the exact block sum.
        (i64::from(sum) * scale) << shift
    } else {
        // C dominates: each product is cut toward zero on its own. |product| <= 144 * 225 <
        // 2^15, so i32 lanes hold it and a shift of 31 clears it (branch-free, vectorisable).
        let right = (-shift).min(31) as u32;
        let scale = scale as i32;
        let mut cut_sum = 0i32;
        for k in 0..BLOCK {
            let p = i32::from(a.half[k]) * i32::from(b.half[k]) * scale;
            let sign = p >> 31;
            cut_sum += ((p.abs() >> right) ^ sign) - sign;
        }
        i64::from(cut_sum)
    };
    let s = cut(c_mantissa, c_exponent - 23 - q) + products;
    // s != 0 here unless C and the products cancel exactly, which gives +0 as in the model.
    rtz_to_f32(s, q)
}

/// One Blackwell mxf4nvf4 step on 1 to 4 blocks of 16: `c` plus each block's exact dot product
/// times its two scales, aligned by the sum of the scales' exponents (zero blocks included) and C
/// by its own, cut at 35 fractional bits below the largest, truncated to f32 (MMA-Sim's adder,
/// [`super::blackwell_block_scaled_step`]). Equal to that function with the missing blocks
/// (K % 64 != 0) padded with zero e2m1 values and scale 0: a padded term is zero and aligned at
/// -252, below C's alignment (at least -126). A block32 scale is given to both of its blocks.
#[inline]
pub fn blackwell_nvfp4_step(c: f32, a: &[NvBlock], b: &[NvBlock]) -> f32 {
    debug_assert!(a.len() == b.len() && (1..=4).contains(&a.len()));
    if a.iter().chain(b).any(|x| x.nan) {
        return f32::from_bits(BLACKWELL_NAN);
    }
    // NaN C: NaN; an infinite C (not covered by MMA-Sim) too, as in the model.
    let Some((c_mantissa, c_exponent)) = decode_f32(c) else {
        return f32::from_bits(BLACKWELL_NAN);
    };
    // Terms as (integer, exponent of its unit); C's unit is 2^(eC - 23) and C takes part in the
    // maximum even when zero (at -126).
    let mut terms = [(0i64, 0i32); 5];
    terms[0] = (c_mantissa, c_exponent - 23);
    let mut emax = c_exponent;
    for (j, (x, y)) in a.iter().zip(b).enumerate() {
        let (sum, _) = block_products(x, y);
        terms[j + 1] = (
            i64::from(sum) * i64::from(x.significand * y.significand),
            x.exponent + y.exponent - 2,
        );
        emax = emax.max(x.alignment + y.alignment);
    }
    // A block term is below 2^(alignment + 12) (|sum| <= 576, significands < 2): below 2^47
    // quanta, and five of them fit an i64 with room.
    let q = emax - BLACKWELL_BITS;
    let s = terms[..=a.len()]
        .iter()
        .map(|&(value, unit)| cut(value, unit - q))
        .sum();
    blackwell_to_f32(s, q)
}

/// `s * 2^q` truncated to f32 as MMA-Sim normalises the Blackwell sum: toward zero, a zero result
/// (exact or cut) is +0, and a magnitude of 2^128 or more is infinity.
#[inline]
fn blackwell_to_f32(s: i64, q: i32) -> f32 {
    if s == 0 {
        return 0.0;
    }
    if 63 - s.unsigned_abs().leading_zeros() as i32 + q >= 128 {
        return if s < 0 {
            f32::NEG_INFINITY
        } else {
            f32::INFINITY
        };
    }
    let truncated = rtz_to_f32(s, q);
    if truncated == 0.0 {
        0.0
    } else {
        truncated
    }
}

/// [`super::blackwell_mxf4nvf4_step`]'s signature on the fast path.
pub fn blackwell_mxf4nvf4_step_fast(
    c: f32,
    a: &[E2m1; super::BLACKWELL_K],
    sfa: [E4m3; 4],
    b: &[E2m1; super::BLACKWELL_K],
    sfb: [E4m3; 4],
) -> f32 {
    blackwell_block_scaled_step_fast(
        BlackwellScales::Block16Ue4m3,
        c,
        a,
        sfa.map(E4m3::to_bits),
        b,
        sfb.map(E4m3::to_bits),
    )
}

/// [`super::blackwell_block_scaled_step`]'s signature on the fast path.
pub fn blackwell_block_scaled_step_fast(
    scales: BlackwellScales,
    c: f32,
    a: &[E2m1; super::BLACKWELL_K],
    sfa: [u8; 4],
    b: &[E2m1; super::BLACKWELL_K],
    sfb: [u8; 4],
) -> f32 {
    let used = scales.scales_per_step();
    // Every scale of the instruction is read (a NaN one gives NaN whichever block it scales).
    if sfa[..used]
        .iter()
        .chain(&sfb[..used])
        .any(|&x| scales.decode(x).is_none())
    {
        return f32::from_bits(BLACKWELL_NAN);
    }
    let block = |values: &[E2m1; super::BLACKWELL_K], bytes: [u8; 4], j: usize| {
        NvBlock::with_scale(
            values[j * BLOCK..(j + 1) * BLOCK].try_into().expect("16"),
            scales.decode(bytes[j * BLOCK / scales.block_size()]),
        )
    };
    let a: [NvBlock; 4] = std::array::from_fn(|j| block(a, sfa, j));
    let b: [NvBlock; 4] = std::array::from_fn(|j| block(b, sfb, j));
    blackwell_nvfp4_step(c, &a, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_toward_zero_to_f32() {
        assert_eq!(rtz_to_f32(1, 0), 1.0);
        assert_eq!(rtz_to_f32((1 << 24) + 1, 0), 16_777_216.0);
        assert_eq!(rtz_to_f32(-((1 << 25) - 1), 0), -33_554_430.0);
        assert_eq!(rtz_to_f32(3, -151).to_bits(), 0); // 0.75 * 2^-149: cut to +0
        assert_eq!(rtz_to_f32(-5, -151).to_bits(), 0x8000_0001); // -1.25 * 2^-149
        assert_eq!(rtz_to_f32(-1, -151).to_bits(), 0x8000_0000);
        assert_eq!(rtz_to_f32(1, 128), f32::MAX);
    }

    #[test]
    fn nvblock_operands_are_exact_fp16() {
        // 6 * 448 = 2688 and 0.5 * 2^-9 = 2^-10: the extremes of the domain, both normal fp16.
        let values = [E2m1::from_bits(0x7); BLOCK];
        let block = NvBlock::new(&values, E4m3::from_bits(0x7E));
        assert_eq!(block.to_f16()[0].to_f32(), 2688.0);
        let values = [E2m1::from_bits(0x9); BLOCK];
        let block = NvBlock::new(&values, E4m3::from_bits(0x81)); // sign bit ignored
        assert_eq!(block.to_f16()[0].to_f32(), -(2f32.powi(-10)));
        assert_eq!(block.log2[0], 0);
        assert!(NvBlock::new(&values, E4m3::from_bits(0xFF)).to_f16()[0].is_nan());
        let negative_zero = NvBlock::new(&[E2m1::from_bits(0x8); BLOCK], E4m3::from_bits(0x38));
        assert_eq!(negative_zero.to_f16()[3].to_bits(), 0x8000);
        assert_eq!(negative_zero.zeros, 0xFFFF);
    }
}
