//! Bit-accurate models of how tensor cores accumulate, one named instance per instruction: the
//! instruction's shape and operand types live here, the adder arithmetic in [`adder`]. (The
//! reference's own semantics, exact then one round-to-nearest-even, is `model::exact`.)
//!
//! The functions here are the models' definitions, written for clarity (operand lists, i128);
//! [`fast`] has allocation-free versions with the same results, proven equal by
//! `tests/mma_fast.rs`, which the replay (`model::replay`, `certify --exact`) runs at
//! full-matrix scale. [`schedule`] declares which model, K order and epilogue a kernel uses.
//! The Blackwell instance is pinned by unit tests, the Hopper mma.sync instance by the H100
//! experiment; wgmma is not measured yet.
//!
//! - `blackwell-mxf4nvf4-block16-ue4m3`: `tcgen05.mma kind::mxf4nvf4` with block16 UE4M3 scales,
//!   K = 64 per instruction, as the published model states it (SPEC.md section 4): each block's 16
//!   products summed exactly and multiplied by its two scales; C and the 4 block terms aligned to
//!   the largest exponent, each truncated to 35 fractional bits, summed, truncated to f32; a NaN
//!   scale or C gives NaN;
//! - `hopper-hmma-f16-f32`: `mma.sync m16n8k16` f16 -> f32 as measured on the H100
//!   (docs/tensor-core-models-hopper-findings.md: this function matches 100% of 3,915,776 H100
//!   dot products, tests/conformance_mma.rs checks 17,408 of them on every run): C and
//!   the 16 exact products in one fused step, each product aligned by the SUM of its factors'
//!   exponents (subnormals at -14), zero terms ignored for the maximum, 25 fractional bits cut
//!   toward zero, the sum truncated to f32; NaN results are 0x7FFFFFFF;
//! - `hopper-hmma-f16-f32-published`: the published variant that aligns each product by its
//!   leading bit (SPEC.md: 81.6% on the H100), kept for comparison.

pub mod adder;
pub mod fast;
pub mod probe;
pub mod schedule;

use crate::formats::{E2m1, E4m3};
use adder::{Cut, Dyadic, FusedAdder, Rounding};
use half::f16;

/// Elements of K per Blackwell mxf4nvf4 instruction, and per scale block.
pub const BLACKWELL_K: usize = 64;
const BLOCK: usize = 16;

pub const BLACKWELL_ADDER: FusedAdder = FusedAdder {
    fraction_bits: 35,
    cut: Cut::TowardZero,
    rounding: Rounding::TowardZero,
};
pub const HOPPER_PUBLISHED_ADDER: FusedAdder = FusedAdder {
    fraction_bits: 25,
    cut: Cut::TowardZero,
    rounding: Rounding::TowardZero,
};

fn scale_value(scale: E4m3) -> Option<Dyadic> {
    let (significand, exponent) = scale.unsigned_scale_parts()?;
    Some(Dyadic {
        mantissa: i128::from(significand),
        exponent,
    })
}

/// One Blackwell mxf4nvf4 step for one output: `c` plus 64 products in 4 scale blocks.
pub fn blackwell_mxf4nvf4_step(
    c: f32,
    a: &[E2m1; BLACKWELL_K],
    sfa: [E4m3; 4],
    b: &[E2m1; BLACKWELL_K],
    sfb: [E4m3; 4],
) -> f32 {
    let mut operands = vec![if c.is_nan() {
        None
    } else {
        Dyadic::from_f32(c)
    }];
    for j in 0..BLACKWELL_K / BLOCK {
        // Half units times half units: quarter units, exact in an integer.
        let block: i128 = (j * BLOCK..(j + 1) * BLOCK)
            .map(|k| i128::from(a[k].to_half_units() * b[k].to_half_units()))
            .sum();
        let term = match (scale_value(sfa[j]), scale_value(sfb[j])) {
            (Some(x), Some(y)) => Some(
                Dyadic {
                    mantissa: block,
                    exponent: -2,
                }
                .product(x)
                .product(y),
            ),
            _ => None,
        };
        operands.push(term);
    }
    BLACKWELL_ADDER.sum(&operands)
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
        // Blocks: 1 * 1 = 1; 1 * -1 = -1; 1.5 * 0.5 * 2^-9 * 2^-9 = 3 * 2^-20. With C = 2^-7 the
        // largest exponent is 0, the quantum 2^-35, and everything is kept exactly.
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
        // 1.5 * 0.5 * 2^-18 = 0.75 * 2^-18 lies below the quantum 2^(17-35) = 2^-18 and is cut to
        // zero before the sum, so the result is 0 where the exact answer is 0.75 * 2^-18.
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
        // With C = 0 the largest exponent is 17 still, from block 0, and the same cut applies:
        // -2^17 + 0 exactly.
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [s256, TINY, ONE, ONE], &b, [s32, TINY, ONE, ONE]);
        assert_eq!(got, -131072.0);
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
    fn blackwell_nan_scale_or_c_gives_nan() {
        let zero = codes(&[]);
        let nan = E4m3::from_bits(0x7F);
        assert!(
            blackwell_mxf4nvf4_step(0.0, &zero, [nan, ONE, ONE, ONE], &zero, [ONE; 4]).is_nan()
        );
        assert!(blackwell_mxf4nvf4_step(f32::NAN, &zero, [ONE; 4], &zero, [ONE; 4]).is_nan());
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
        // Without C the same term is the largest and kept exactly.
        let got =
            blackwell_mxf4nvf4_step(0.0, &a, [ONE, TINY, ONE, ONE], &b, [ONE, TINY, ONE, ONE]);
        assert_eq!(got, -0.75 * 2f32.powi(-18));
    }

    #[test]
    fn blackwell_padding_blocks_add_nothing() {
        // The last step of a K % 64 != 0 problem is padded with zero e2m1 values and scale 0:
        // zero terms take no part in the maximum and are cut to 0, so the step is the adder's sum
        // of C and the real blocks alone.
        let a = codes(&[(0, 0x7), (5, 0xC), (16, 0x3)]);
        let b = codes(&[(0, 0x5), (5, 0x4), (16, 0xF)]);
        let zero = E4m3::from_bits(0);
        let scale = E4m3::from_bits(0x49); // 4.5 = 9 * 2^-1
        for c in [0.0f32, -0.0, 1e-9, -3.75, 123456.7] {
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
            let unpadded =
                BLACKWELL_ADDER.sum(&[Dyadic::from_f32(c), Some(blocks[0]), Some(blocks[1])]);
            assert_eq!(padded.to_bits(), unpadded.to_bits(), "C = {c}");
        }
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
