//! Bit-accurate models of how tensor cores accumulate, one named instance per instruction: the
//! instruction's shape and operand types live here, the adder arithmetic in [`adder`]. (The
//! reference's own semantics, exact then one round-to-nearest-even, is `model::exact`.)
//!
//! The functions here are the models' definitions, written for clarity (operand lists, i128);
//! [`fast`] has allocation-free versions with the same results, proven equal by
//! `crates/model/tests/model/mma_fast.rs`, which the replay (`model::replay`, `certify --exact`) runs at
//! full-matrix scale. [`schedule`] declares which model, K order and epilogue a kernel uses.
//! The Blackwell instance follows microsoft/MMA-Sim (crates/model/tests/model/blackwell_mmasim_vectors.rs checks it
//! against vectors MMA-Sim produced), the Hopper mma.sync instance the H100 experiment.
//!
//! - `blackwell-mxf4nvf4-block16-ue4m3`: `tcgen05.mma kind::mxf4nvf4` with block16 UE4M3 scales,
//!   K = 64 per instruction, as MMA-Sim (microsoft/MMA-Sim, `nv_fused_dot_add_with_block_scale`)
//!   models it: each 16-element group's products summed exactly and multiplied by its two
//!   scales; that block term is aligned by the SUM of its two scales' exponents (not by its
//!   leading bit: the block sum can lie up to 11 bits above it, or below it), e4m3 subnormal
//!   scales at exponent -6 and zero scales at -126; C at its own exponent (f32 zeros and
//!   subnormals at -126); every term raises the maximum, zero ones included; each term cut toward
//!   zero to 35 fractional bits below the maximum, summed exactly, truncated to f32 (a zero
//!   result is +0, 2^128 or more is infinity); a NaN scale (the sign bit of a UE4M3 scale is
//!   ignored) or a NaN C gives NaN `0x7FFFFFFF`. [`BlackwellScales`] has MMA-Sim's two UE8M0
//!   forms of the same instruction (block16, and block32 = MXFP4) on the same adder;
//! - `blackwell-mxf8f6f4-block32-ue8m0`: `tcgen05.mma kind::mxf8f6f4` with e4m3 / e5m2 operands
//!   and one UE8M0 scale per 32, K = 32 ([`mxf8f6f4`]): each product a term of its own, aligned
//!   by the sum of its elements' and scales' exponents, 25 fractional bits;
//! - `hopper-hmma-f16-f32`: `mma.sync m16n8k16` f16 -> f32 as measured on the H100
//!   (docs/research/tensor-core-models-hopper-findings.md: this function matches 100% of 3,915,776 H100
//!   dot products, crates/model/tests/model/conformance_mma.rs checks 17,408 of them on every run): C and
//!   the 16 exact products in one fused step, each product aligned by the SUM of its factors'
//!   exponents (subnormals at -14), zero terms ignored for the maximum, 25 fractional bits cut
//!   toward zero, the sum truncated to f32; NaN results are 0x7FFFFFFF;
//! - `hopper-hmma-f16-f32-published`: the published variant that aligns each product by its
//!   leading bit (docs/reference/problem.md: 81.6% on the H100), kept for comparison.

pub mod adder;
pub mod fast;
pub mod mxf8f6f4;
pub mod probe;
pub mod schedule;

use crate::formats::{E2m1, E4m3, Ue8m0};
use adder::{Cut, Dyadic, FusedAdder, Rounding};
use half::f16;

/// Elements of K per Blackwell mxf4nvf4 instruction, and per scale block.
pub const BLACKWELL_K: usize = 64;
const BLOCK: usize = 16;

pub const BLACKWELL_ADDER: FusedAdder = FusedAdder {
    fraction_bits: 35,
    cut: Cut::TowardZero,
    rounding: Rounding::TowardZeroUnbounded,
    zeros_in_maximum: true,
};
pub const HOPPER_PUBLISHED_ADDER: FusedAdder = FusedAdder {
    fraction_bits: 25,
    cut: Cut::TowardZero,
    rounding: Rounding::TowardZero,
    zeros_in_maximum: false,
};

/// The NaN every Blackwell block-scaled step produces (MMA-Sim's canonical `0x7FFFFFFF`).
pub const BLACKWELL_NAN: u32 = 0x7FFF_FFFF;

/// The alignment exponent MMA-Sim gives a zero scale (its generic rule for a zero significand:
/// exponent -126). It never changes a UE4M3 result: a block with a zero scale has a zero term and
/// an alignment of at most -118, below any block whose scales are both non-zero (at least -12),
/// and where every block has a zero scale the result is C exactly.
const ZERO_SCALE_ALIGNMENT: i32 = -126;

/// How a Blackwell `tcgen05.mma kind::mxf4nvf4` instruction (K = 64, e2m1 operands) reads its
/// block scales. The adder is the same for all three; the scales' format and how many K elements
/// share one differ. Each 16-element group of K stays a term of its own in every form (MMA-Sim
/// sums per 16 even where two groups share a block32 scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlackwellScales {
    /// `.block16` with UE4M3 scales (NVFP4): 4 scales per instruction; the sign bit is ignored,
    /// 0x7F / 0xFF are NaN.
    Block16Ue4m3,
    /// `.block16` with UE8M0 scales: 4 per instruction, `2^(byte - 127)`, 0xFF is NaN.
    Block16Ue8m0,
    /// `.block32` with UE8M0 scales (MXFP4): 2 per instruction, for K 0..32 and 32..64.
    Block32Ue8m0,
}

/// A block scale as the Blackwell adder sees it: its value `significand * 2^exponent` and the
/// exponent it contributes to its block term's alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleFactor {
    pub significand: u32,
    pub exponent: i32,
    pub alignment: i32,
}

impl BlackwellScales {
    pub const ALL: [BlackwellScales; 3] = [
        BlackwellScales::Block16Ue4m3,
        BlackwellScales::Block16Ue8m0,
        BlackwellScales::Block32Ue8m0,
    ];

    /// K elements per scale.
    pub fn block_size(self) -> usize {
        match self {
            BlackwellScales::Block32Ue8m0 => 32,
            _ => 16,
        }
    }

    /// Scales per operand per instruction.
    pub fn scales_per_step(self) -> usize {
        BLACKWELL_K / self.block_size()
    }

    /// A scale byte: `None` for NaN.
    pub fn decode(self, byte: u8) -> Option<ScaleFactor> {
        match self {
            BlackwellScales::Block16Ue4m3 => {
                let (significand, exponent) = E4m3::from_bits(byte).unsigned_scale_parts()?;
                // unsigned_scale_parts gives 8..=15 for normals (value 2^(exponent + 3) times
                // [1, 2)) and 0..=7 at 2^-9 for subnormals, which align at their exponent
                // field's -6.
                let alignment = match significand {
                    0 => ZERO_SCALE_ALIGNMENT,
                    1..=7 => -6,
                    _ => exponent + 3,
                };
                Some(ScaleFactor {
                    significand,
                    exponent,
                    alignment,
                })
            }
            BlackwellScales::Block16Ue8m0 | BlackwellScales::Block32Ue8m0 => Ue8m0::from_bits(byte)
                .exponent()
                .map(|exponent| ScaleFactor {
                    significand: 1,
                    exponent,
                    alignment: exponent,
                }),
        }
    }
}

/// One Blackwell mxf4nvf4 step for one output (block16 UE4M3, NVFP4): `c` plus 64 products in
/// 4 scale blocks.
pub fn blackwell_mxf4nvf4_step(
    c: f32,
    a: &[E2m1; BLACKWELL_K],
    sfa: [E4m3; 4],
    b: &[E2m1; BLACKWELL_K],
    sfb: [E4m3; 4],
) -> f32 {
    blackwell_block_scaled_step(
        BlackwellScales::Block16Ue4m3,
        c,
        a,
        sfa.map(E4m3::to_bits),
        b,
        sfb.map(E4m3::to_bits),
    )
}

/// One Blackwell `tcgen05.mma kind::mxf4nvf4` step for one output in any of its scale forms:
/// `c` plus 64 products. Scale byte `j` covers K `j * block_size ..`; bytes past
/// [`BlackwellScales::scales_per_step`] are not read.
pub fn blackwell_block_scaled_step(
    scales: BlackwellScales,
    c: f32,
    a: &[E2m1; BLACKWELL_K],
    sfa: [u8; 4],
    b: &[E2m1; BLACKWELL_K],
    sfb: [u8; 4],
) -> f32 {
    let used = scales.scales_per_step();
    let decode = |bytes: [u8; 4]| -> Option<Vec<ScaleFactor>> {
        bytes[..used].iter().map(|&x| scales.decode(x)).collect()
    };
    let (Some(sa), Some(sb)) = (decode(sfa), decode(sfb)) else {
        return f32::from_bits(BLACKWELL_NAN);
    };
    let Some(c_value) = Dyadic::from_f32(c) else {
        // NaN C: NaN. An infinite C is not covered by MMA-Sim (its Python raises on it); the
        // published model's NaN is kept (unreachable in a replay: products are finite and the
        // accumulator starts at +0).
        return f32::from_bits(BLACKWELL_NAN);
    };
    let mut operands = vec![adder::Operand {
        value: c_value,
        alignment: adder::f32_alignment_exponent(c),
    }];
    for j in 0..BLACKWELL_K / BLOCK {
        // Half units times half units: quarter units, exact in an integer.
        let block: i128 = (j * BLOCK..(j + 1) * BLOCK)
            .map(|k| i128::from(a[k].to_half_units() * b[k].to_half_units()))
            .sum();
        let (x, y) = (
            sa[j * BLOCK / scales.block_size()],
            sb[j * BLOCK / scales.block_size()],
        );
        let scale = |s: ScaleFactor| Dyadic {
            mantissa: i128::from(s.significand),
            exponent: s.exponent,
        };
        operands.push(adder::Operand {
            value: Dyadic {
                mantissa: block,
                exponent: -2,
            }
            .product(scale(x))
            .product(scale(y)),
            // The sum of the scales' exponents, whatever the block sum's own magnitude.
            alignment: x.alignment + y.alignment,
        });
    }
    BLACKWELL_ADDER.sum_aligned(&operands)
}

/// One Hopper `mma.sync m16n8k16` f16 -> f32 step for one output, as measured on the H100.
pub fn hopper_hmma_step(c: f32, a: &[f16; BLOCK], b: &[f16; BLOCK]) -> f32 {
    if !c.is_finite() || a.iter().chain(b).any(|x| !x.is_finite()) {
        // Inf and NaN follow IEEE; every NaN comes out as one pattern.
        return fast::hopper_special(c, a, b);
    }
    let mut operands = vec![adder::Operand {
        value: Dyadic::from_f32(c).expect("finite"),
        alignment: adder::f32_alignment_exponent(c),
    }];
    for (&x, &y) in a.iter().zip(b) {
        let value = adder::dyadic_from_f16(x)
            .expect("finite")
            .product(adder::dyadic_from_f16(y).expect("finite"));
        operands.push(adder::Operand {
            value,
            alignment: adder::fp16_alignment_exponent(x) + adder::fp16_alignment_exponent(y),
        });
    }
    let sum = HOPPER_PUBLISHED_ADDER.sum_aligned(&operands);
    // A zero result is +0, except C = -0 with every product a negative zero.
    let all_negative_zero = c.to_bits() == 0x8000_0000
        && a.iter().zip(b).all(|(x, y)| {
            x.is_sign_negative() != y.is_sign_negative() && x.to_f32() * y.to_f32() == 0.0
        });
    if sum == 0.0 && all_negative_zero {
        -0.0
    } else {
        sum
    }
}

/// One Hopper f16 MMA step as published: `c` plus 16 exact fp16 products.
pub fn hopper_published_step(c: f32, a: &[f16; BLOCK], b: &[f16; BLOCK]) -> f32 {
    let mut operands = vec![if c.is_nan() {
        None
    } else {
        Dyadic::from_f32(c)
    }];
    operands.extend(
        a.iter()
            .zip(b)
            .map(|(&x, &y)| Some(adder::dyadic_from_f16(x)?.product(adder::dyadic_from_f16(y)?))),
    );
    HOPPER_PUBLISHED_ADDER.sum(&operands)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(values: &[(usize, u8)]) -> [E2m1; BLACKWELL_K] {
        let mut out = [E2m1::from_bits(0); BLACKWELL_K];
        for &(k, code) in values {
            out[k] = E2m1::from_bits(code);
        }
        out
    }

    const ONE: E4m3 = E4m3::from_bits(0x38);

    const TINY: E4m3 = E4m3::from_bits(0x01); // 2^-9

    #[test]
    fn blackwell_sums_exact_scaled_blocks() {
        // Blocks: 1 * 1 = 1; 1 * -1 = -1; 1.5 * 0.5 * 2^-9 * 2^-9 = 3 * 2^-20; block 3 is zero
        // under scales 1. With C = 2^-7 the largest alignment is 0 (blocks 0, 1 and the zero
        // block 3), the quantum 2^-35, and everything is kept exactly.
        let a = codes(&[(0, 0x2), (16, 0x2), (32, 0x3)]);
        let b = codes(&[(0, 0x2), (16, 0xA), (32, 0x1)]);
        let got = blackwell_mxf4nvf4_step(
            2f32.powi(-7),
            &a,
            [ONE, ONE, TINY, ONE],
            &b,
            [ONE, ONE, TINY, ONE],
        );
        assert_eq!(got, 2f32.powi(-7) + 3.0 * 2f32.powi(-20));
    }

    #[test]
    fn blackwell_truncation_at_35_bits_is_visible_after_cancellation() {
        // Block 0: 16 * (-1 * 1) * 256 * 32 = -2^17 cancels C = 2^17 exactly. Block 1:
        // 1.5 * 0.5 * 2^-18 = 0.75 * 2^-18 lies below the quantum 2^(17-35) = 2^-18 set by C and
        // is cut to zero before the sum, so the result is 0 where the exact answer is 0.75 * 2^-18.
        let mut a = codes(&[(16, 0x3)]);
        let mut b = codes(&[(16, 0x1)]);
        for k in 0..16 {
            a[k] = E2m1::from_bits(0xA);
            b[k] = E2m1::from_bits(0x2);
        }
        let (s256, s32) = (E4m3::from_bits(0x78), E4m3::from_bits(0x60));
        let got = blackwell_mxf4nvf4_step(
            131072.0,
            &a,
            [s256, TINY, ONE, ONE],
            &b,
            [s32, TINY, ONE, ONE],
        );
        assert_eq!(got, 0.0);
        // With C = 0 the maximum is block 0's ALIGNMENT, the sum of its scales' exponents
        // 8 + 5 = 13, not its leading bit 17 (as the published model had it: result -2^17 with
        // block 1 cut). The quantum is 2^-22, block 1 is kept, and -2^17 + 0.75 * 2^-18 is
        // truncated to the f32 next to -2^17 toward zero.
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [s256, TINY, ONE, ONE], &b, [s32, TINY, ONE, ONE]);
        assert_eq!(got, -(131072.0 - 2f32.powi(-7)));
    }

    #[test]
    fn blackwell_aligns_a_block_by_its_scale_exponents() {
        // Blocks 0 and 2: +-16 * 36 * 448 * 448 = +-441 * 2^22, aligned at 8 + 8 = 16 (their
        // leading bit is 26). Block 1: 0.25 * 2^-6 * 2^-4 = 2^-12. The quantum is 2^(16-35), so
        // block 1 survives the cancellation; aligned by the leading bit (quantum 2^-9) it would
        // be cut to 0.
        let mut a = codes(&[(16, 0x1)]);
        let mut b = codes(&[(16, 0x1)]);
        for k in 0..16 {
            a[k] = E2m1::from_bits(0x7);
            b[k] = E2m1::from_bits(0x7);
            a[32 + k] = E2m1::from_bits(0x7);
            b[32 + k] = E2m1::from_bits(0xF);
        }
        let big = E4m3::from_bits(0x7E);
        let (s6, s4) = (E4m3::from_bits(0x08), E4m3::from_bits(0x18)); // 2^-6, 2^-4
        let got = blackwell_mxf4nvf4_step(0.0, &a, [big, s6, big, ONE], &b, [big, s4, big, ONE]);
        assert_eq!(got, 2f32.powi(-12));
    }

    #[test]
    fn blackwell_zero_block_with_large_scales_raises_the_maximum() {
        // Block 1: 1.5 * 0.5 * 2^-9 * 2^-9 = 3 * 2^-20, the only non-zero term. Block 0 is all
        // zero but its scales 448 * 448 align it at 16: the quantum is 2^-19 and block 1 is cut
        // to 2^-19. Under scales 1 the zero block aligns at 0 and block 1 is kept exactly.
        let a = codes(&[(16, 0x3)]);
        let b = codes(&[(16, 0x1)]);
        let big = E4m3::from_bits(0x7E);
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [big, TINY, ONE, ONE], &b, [big, TINY, ONE, ONE]);
        assert_eq!(got, 2f32.powi(-19));
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [ONE, TINY, ONE, ONE], &b, [ONE, TINY, ONE, ONE]);
        assert_eq!(got, 3.0 * 2f32.powi(-20));
    }

    #[test]
    fn blackwell_subnormal_scales_align_at_minus_6() {
        // Blocks 0 and 1: +-0.25 * 2^-9 * 2^-9 = +-2^-20 under subnormal scales, which align at
        // -6 each (not at -9 as normalised values would): the maximum is -12, the quantum 2^-47,
        // and C = 2^-48 is cut to zero before the blocks cancel. Blocks 2 and 3 have zero scales
        // (aligned at -126 each, so far below).
        let a = codes(&[(0, 0x1), (16, 0x1)]);
        let b = codes(&[(0, 0x1), (16, 0x9)]);
        let zero = E4m3::from_bits(0);
        let scales = [TINY, TINY, zero, zero];
        let got = blackwell_mxf4nvf4_step(2f32.powi(-48), &a, scales, &b, scales);
        assert_eq!(got.to_bits(), 0);
        // Normal scales 2^-6 give the same alignment -12: the same cut.
        let s6 = E4m3::from_bits(0x08);
        let scales = [s6, s6, zero, zero];
        let got = blackwell_mxf4nvf4_step(2f32.powi(-48), &a, scales, &b, scales);
        assert_eq!(got.to_bits(), 0);
        // With C = 2^-47 it survives.
        let got = blackwell_mxf4nvf4_step(2f32.powi(-47), &a, scales, &b, scales);
        assert_eq!(got, 2f32.powi(-47));
    }

    #[test]
    fn blackwell_rounds_the_result_toward_zero() {
        // Blocks 1 and 1.5 * 2^-18. With C = 32, the sum 33 + 1.5 * 2^-18 lies between the f32
        // neighbours 33 + 2^-18 and 33 + 2^-17 (ulp(33) = 2^-18): truncation gives the lower one,
        // where round-to-nearest would give the upper one.
        let a = codes(&[(0, 0x2), (16, 0x3)]);
        let b = codes(&[(0, 0x2), (16, 0x2)]);
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [ONE, TINY, ONE, ONE], &b, [ONE, TINY, ONE, ONE]);
        assert_eq!(got, 1.0 + 1.5 * 2f32.powi(-18));
        let got =
            blackwell_mxf4nvf4_step(32.0, &a, [ONE, TINY, ONE, ONE], &b, [ONE, TINY, ONE, ONE]);
        assert_eq!(got, 33.0 + 2f32.powi(-18));
    }

    #[test]
    fn blackwell_zero_results_are_positive() {
        // C = -0 plus zero blocks, and C cancelled exactly: +0 either way.
        let zero = codes(&[]);
        let got = blackwell_mxf4nvf4_step(-0.0, &zero, [ONE; 4], &zero, [ONE; 4]);
        assert_eq!(got.to_bits(), 0);
        let a = codes(&[(0, 0x2)]);
        let got = blackwell_mxf4nvf4_step(-1.0, &a, [ONE; 4], &a, [ONE; 4]);
        assert_eq!(got.to_bits(), 0);
    }

    #[test]
    fn blackwell_nan_scale_or_c_gives_nan() {
        // MMA-Sim's NaN is 0x7FFFFFFF; any NaN scale of the instruction's row or column counts,
        // whether or not its block has a non-zero product.
        let zero = codes(&[]);
        let nan = E4m3::from_bits(0x7F);
        let got = blackwell_mxf4nvf4_step(0.0, &zero, [ONE, ONE, ONE, nan], &zero, [ONE; 4]);
        assert_eq!(got.to_bits(), BLACKWELL_NAN);
        let got = blackwell_mxf4nvf4_step(f32::NAN, &zero, [ONE; 4], &zero, [ONE; 4]);
        assert_eq!(got.to_bits(), BLACKWELL_NAN);
        let got = blackwell_mxf4nvf4_step(0.0, &zero, [ONE; 4], &zero, [E4m3::from_bits(0xFF); 4]);
        assert_eq!(got.to_bits(), BLACKWELL_NAN);
        // The sign bit of a scale is ignored (UE4M3): 0xB8 reads as 1.
        let a = codes(&[(0, 0x2)]);
        assert_eq!(
            blackwell_mxf4nvf4_step(
                0.0,
                &a,
                [E4m3::from_bits(0xB8), ONE, ONE, ONE],
                &a,
                [ONE; 4]
            ),
            1.0
        );
    }

    #[test]
    fn blackwell_cuts_negative_terms_toward_zero() {
        // C = 2^17: quantum 2^-18. A block term -0.75 * 2^-18 is cut to 0 (sign-magnitude), so
        // the result is 2^17 itself; a two's-complement floor would make it -2^-18 and the sum
        // would truncate to the f32 below 2^17.
        let a = codes(&[(16, 0xB)]); // -1.5
        let b = codes(&[(16, 0x1)]); // 0.5
        let got = blackwell_mxf4nvf4_step(
            131072.0,
            &a,
            [ONE, TINY, ONE, ONE],
            &b,
            [ONE, TINY, ONE, ONE],
        );
        assert_eq!(got, 131072.0);
        // Without C the maximum is 0, from the zero blocks under scales 1: the quantum 2^-35
        // keeps the term exactly.
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [ONE, TINY, ONE, ONE], &b, [ONE, TINY, ONE, ONE]);
        assert_eq!(got, -0.75 * 2f32.powi(-18));
    }

    #[test]
    fn blackwell_padding_blocks_add_nothing() {
        // The last step of a K % 64 != 0 problem is padded with zero e2m1 values and scale 0:
        // a padded block's term is zero and its alignment -126 + -126 lies below C's (at least
        // -126), so the step is the adder's sum of C and the real blocks alone.
        let a = codes(&[(0, 0x7), (5, 0xC), (16, 0x3)]);
        let b = codes(&[(0, 0x5), (5, 0x4), (16, 0xF)]);
        let zero = E4m3::from_bits(0);
        let scale = E4m3::from_bits(0x49); // 4.5 = 9 * 2^-1, exponent 2
        for c in [0.0f32, -0.0, 1e-9, -3.75, 123456.7, 1e-42] {
            let padded = blackwell_mxf4nvf4_step(
                c,
                &a,
                [scale, ONE, zero, zero],
                &b,
                [ONE, scale, zero, zero],
            );
            let blocks = [
                Dyadic {
                    mantissa: 12 * 6 - 4 * 4,
                    exponent: -2,
                }
                .product(Dyadic {
                    mantissa: 9,
                    exponent: -1,
                }),
                Dyadic {
                    mantissa: 3 * -12,
                    exponent: -2,
                }
                .product(Dyadic {
                    mantissa: 9,
                    exponent: -1,
                }),
            ];
            let unpadded = BLACKWELL_ADDER.sum_aligned(&[
                adder::Operand {
                    value: Dyadic::from_f32(c).unwrap(),
                    alignment: adder::f32_alignment_exponent(c),
                },
                adder::Operand {
                    value: blocks[0],
                    alignment: 2,
                },
                adder::Operand {
                    value: blocks[1],
                    alignment: 2,
                },
            ]);
            assert_eq!(padded.to_bits(), unpadded.to_bits(), "C = {c}");
        }
    }

    #[test]
    fn blackwell_ue8m0_forms() {
        // UE8M0 byte 127 is 1. Block32: scale 0 covers K 0..32, scale 1 K 32..64, and each
        // 16-element group is a term of its own.
        let a = codes(&[(0, 0x2), (20, 0x3), (40, 0x7)]);
        let b = codes(&[(0, 0x2), (20, 0x2), (40, 0x1)]);
        let mx = BlackwellScales::Block32Ue8m0;
        let got = blackwell_block_scaled_step(mx, 0.0, &a, [127, 128, 0, 0], &b, [127, 126, 0, 0]);
        assert_eq!(got, 1.0 + 1.5 + 3.0);
        // Bytes past the second are not read.
        let got =
            blackwell_block_scaled_step(mx, 0.0, &a, [127, 128, 0xFF, 3], &b, [127, 126, 9, 0xFF]);
        assert_eq!(got, 5.5);
        // 0xFF is NaN.
        let got = blackwell_block_scaled_step(mx, 0.0, &a, [127, 0xFF, 0, 0], &b, [127; 4]);
        assert_eq!(got.to_bits(), BLACKWELL_NAN);
        // 2^127 * 2^127: 2^128 or more is infinity, not f32::MAX.
        let b16 = BlackwellScales::Block16Ue8m0;
        let got = blackwell_block_scaled_step(b16, 0.0, &a, [254; 4], &b, [254; 4]);
        assert_eq!(got, f32::INFINITY);
        // -1 * 2^-160 is cut, by the final truncation, to +0 (not -0).
        let n = codes(&[(0, 0xA)]);
        let got = blackwell_block_scaled_step(b16, 0.0, &n, [47; 4], &a, [47; 4]);
        assert_eq!(got.to_bits(), 0);
    }

    fn f16s(values: &[f32]) -> [f16; 16] {
        let mut out = [f16::ZERO; 16];
        for (o, &v) in out.iter_mut().zip(values) {
            *o = f16::from_f32(v);
        }
        out
    }

    #[test]
    fn hopper_aligns_a_product_by_the_sum_of_its_exponents() {
        // 1.5 * 1.5 = 2.25 is aligned as 2^0 (not 2^1), so the quantum is 2^-25 and the product
        // 2^-12 * 2^-13 = 2^-25 survives; then 2.25 cancels. The published model's quantum is
        // 2^-24 and loses it.
        let a = f16s(&[1.5, 2f32.powi(-12), 1.5]);
        let b = f16s(&[1.5, 2f32.powi(-13), -1.5]);
        assert_eq!(hopper_hmma_step(0.0, &a, &b), 2f32.powi(-25));
        assert_eq!(hopper_published_step(0.0, &a, &b), 0.0);
    }

    #[test]
    fn hopper_keeps_subnormal_fp16_at_exponent_minus_14() {
        // 2^-24 (subnormal) * 1 is aligned at -14, so the quantum is 2^-39 and the product of two
        // subnormals, 2^-48, is cut away before the first product cancels.
        let t = 2f32.powi(-24);
        let a = f16s(&[t, t, t]);
        let b = f16s(&[1.0, t, -1.0]);
        assert_eq!(hopper_hmma_step(0.0, &a, &b), 0.0);
        assert_eq!(hopper_published_step(0.0, &a, &b), 2f32.powi(-48));
    }

    #[test]
    fn hopper_zero_signs_and_nan() {
        let zeros = f16s(&[]);
        let negative_zeros = [f16::NEG_ZERO; 16];
        assert_eq!(
            hopper_hmma_step(-0.0, &zeros, &zeros).to_bits(),
            0x0000_0000,
            "+0 products make +0"
        );
        assert_eq!(
            hopper_hmma_step(-0.0, &negative_zeros, &zeros).to_bits(),
            0x8000_0000,
            "all -0: -0"
        );
        let inf = f16s(&[f32::INFINITY]);
        assert_eq!(
            hopper_hmma_step(0.0, &inf, &zeros).to_bits(),
            0x7FFF_FFFF,
            "inf * 0 is NaN"
        );
        assert_eq!(hopper_hmma_step(0.0, &inf, &f16s(&[1.0])), f32::INFINITY);
    }

    #[test]
    fn hopper_published_model_truncates_small_products_against_a_large_c() {
        let one = f16::ONE;
        let tiny = f16::from_f32(2f32.powi(-14));
        let mut a = [f16::ZERO; 16];
        let mut b = [f16::ZERO; 16];
        a[0] = tiny;
        b[0] = tiny; // product 2^-28, below the 2^-25 quantum of C = 1
        assert_eq!(hopper_published_step(1.0, &a, &b), 1.0);
        a[1] = one;
        b[1] = f16::from_f32(-1.0); // cancels C: the 2^-28 product was already cut
        assert_eq!(hopper_published_step(1.0, &a, &b), 0.0);
    }
}
