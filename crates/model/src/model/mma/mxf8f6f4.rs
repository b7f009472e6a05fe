//! `blackwell-mxf8f6f4-block32-ue8m0`: Blackwell's `tcgen05.mma kind::mxf8f6f4` with FP8
//! operands (e4m3 or e5m2, each side its own), one UE8M0 scale per 32 elements, f32 C and D,
//! K = 32 per instruction, as MMA-Sim (microsoft/MMA-Sim, `nv_fused_dot_add` called with the two
//! scales) models it. crates/model/tests/model/blackwell_mmasim_vectors.rs checks this file against vectors MMA-Sim
//! produced (golden/conformance/blackwell_mmasim_mxf8f6f4.safetensors).
//!
//! The instruction's shape and types are here; the adder is [`super::adder`] with 25 fractional
//! bits (mxf4nvf4 has 35):
//! 1. Special values first, as MMA-Sim checks the f64 sum of the 32 products and C: a NaN element,
//!    a NaN scale (0xFF), a NaN C, or an infinite element times a zero gives NaN `0x7FFFFFFF`;
//!    otherwise an infinity among the products or C gives that infinity (NaN if both signs meet).
//! 2. Every product is a term of its own, aligned by the SUM of four exponents: its two elements'
//!    (floor(log2) for a normal, the format's smallest normal exponent for a subnormal, -6 for
//!    e4m3 and -14 for e5m2, and -126 for a zero) and its two scales' (byte - 127). C is aligned
//!    at its own exponent (zeros and subnormals at -126). Every term raises the maximum, zero
//!    ones included.
//! 3. Each term is cut toward zero to 25 fractional bits below the maximum, the cut terms summed
//!    exactly, the sum truncated to f32 (a zero result is +0, 2^128 or more is infinity).
//!
//! MMA-Sim's `kind::mxf8f6f4` also names e2m1, but its code reads those operands' bytes as
//! integers (and e3m2 and e2m3 are not implemented), so only the FP8 pairs are modelled here.

use super::adder::{f32_alignment_exponent, Cut, Dyadic, FusedAdder, Operand, Rounding};
use super::BLACKWELL_NAN;
use crate::formats::ExactValue;

/// Elements of K per instruction; one scale covers all of them.
pub const MXF8F6F4_K: usize = 32;

pub const MXF8F6F4_ADDER: FusedAdder = FusedAdder {
    fraction_bits: 25,
    cut: Cut::TowardZero,
    rounding: Rounding::TowardZeroUnbounded,
    zeros_in_maximum: true,
};

/// An FP8 operand type of the instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fp8Type {
    E4m3,
    E5m2,
}

impl Fp8Type {
    pub const ALL: [Fp8Type; 2] = [Fp8Type::E4m3, Fp8Type::E5m2];

    pub fn name(self) -> &'static str {
        match self {
            Fp8Type::E4m3 => "e4m3",
            Fp8Type::E5m2 => "e5m2",
        }
    }

    fn decode(self, code: u8) -> ExactValue {
        match self {
            Fp8Type::E4m3 => crate::formats::E4m3::from_bits(code).to_exact(),
            Fp8Type::E5m2 => crate::formats::E5m2::from_bits(code).to_exact(),
        }
    }

    /// The exponent a code contributes to its product's alignment (step 2).
    fn alignment(self, code: u8) -> i32 {
        let (mantissa_bits, bias) = match self {
            Fp8Type::E4m3 => (3, 7),
            Fp8Type::E5m2 => (2, 15),
        };
        let field = i32::from((code & 0x7F) >> mantissa_bits);
        if code & 0x7F == 0 {
            -126
        } else {
            field.max(1) - bias
        }
    }
}

/// A UE8M0 scale byte's value, `None` for 0xFF (NaN).
fn scale_exponent(byte: u8) -> Option<i32> {
    (byte != 0xFF).then(|| i32::from(byte) - 127)
}

fn dyadic(value: ExactValue) -> Dyadic {
    match value {
        ExactValue::Finite {
            negative,
            significand,
            exponent,
        } => Dyadic {
            mantissa: if negative {
                -i128::from(significand)
            } else {
                i128::from(significand)
            },
            exponent,
        },
        _ => unreachable!("special values are handled before the adder"),
    }
}

/// One step for one output: `c` plus the 32 products of `a` (type `a_type`) and `b` (`b_type`)
/// under the scale bytes `sa` and `sb`.
pub fn blackwell_mxf8f6f4_step(
    c: f32,
    a_type: Fp8Type,
    a: &[u8; MXF8F6F4_K],
    sa: u8,
    b_type: Fp8Type,
    b: &[u8; MXF8F6F4_K],
    sb: u8,
) -> f32 {
    let nan = f32::from_bits(BLACKWELL_NAN);
    let (Some(ea), Some(eb)) = (scale_exponent(sa), scale_exponent(sb)) else {
        return nan;
    };
    if c.is_nan() {
        return nan;
    }
    let products: Vec<ExactValue> = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| a_type.decode(x).times(b_type.decode(y)))
        .collect();
    // Step 1: NaN, then infinities (a finite scale never turns an infinity into NaN).
    if products.contains(&ExactValue::NaN) {
        return nan;
    }
    let infinities = products
        .iter()
        .filter_map(|p| match p {
            ExactValue::Infinite { negative } => Some(*negative),
            _ => None,
        })
        .chain(c.is_infinite().then_some(c < 0.0));
    let (mut positive, mut negative) = (false, false);
    for is_negative in infinities {
        if is_negative {
            negative = true;
        } else {
            positive = true;
        }
    }
    match (positive, negative) {
        (true, true) => return nan,
        (true, false) => return f32::INFINITY,
        (false, true) => return f32::NEG_INFINITY,
        (false, false) => {}
    }
    let mut operands = Vec::with_capacity(MXF8F6F4_K + 1);
    operands.push(Operand {
        value: Dyadic::from_f32(c).expect("finite"),
        alignment: f32_alignment_exponent(c),
    });
    for ((&x, &y), product) in a.iter().zip(b).zip(products) {
        let value = dyadic(product);
        operands.push(Operand {
            value: Dyadic {
                mantissa: value.mantissa,
                exponent: value.exponent + ea + eb,
            },
            alignment: a_type.alignment(x) + b_type.alignment(y) + ea + eb,
        });
    }
    MXF8F6F4_ADDER.sum_aligned(&operands)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(c: f32, a: u8, sa: u8, b: u8, sb: u8) -> f32 {
        let mut av = [0u8; MXF8F6F4_K];
        let mut bv = [0u8; MXF8F6F4_K];
        av[0] = a;
        bv[0] = b;
        blackwell_mxf8f6f4_step(c, Fp8Type::E4m3, &av, sa, Fp8Type::E5m2, &bv, sb)
    }

    #[test]
    fn one_product_under_its_scales() {
        // e4m3 0x38 = 1, e5m2 0x40 = 2; scales 2^1 and 2^-3: 1 * 2 * 2 / 8 = 0.5.
        assert_eq!(step(0.0, 0x38, 128, 0x40, 124), 0.5);
        assert_eq!(step(0.25, 0x38, 127, 0x40, 127), 2.25);
    }

    #[test]
    fn c_below_the_window_is_cut() {
        // The product 1 sets the maximum at 0 (zeros at -126 + -126 + scales do not); C = 2^-26
        // is 2^-26 below it, past the 25 fractional bits: cut to zero.
        assert_eq!(step(2f32.powi(-26), 0x38, 127, 0x3C, 127), 1.0);
        assert_eq!(
            step(2f32.powi(-25), 0x38, 127, 0x3C, 127),
            1.0 + 2f32.powi(-25)
        );
    }

    #[test]
    fn a_zero_step_under_huge_scales_drops_c() {
        // Zero elements align at -126 plus the other element's and both scales' exponents:
        // 1 * 0 under 2^127 * 2^127 aligns at 128, and C = 1 falls 128 bits below the maximum.
        // The exact sum is 1; the model (and MMA-Sim) gives 0: the family's intervals charge
        // it (docs/reference/numerics.md, section 10, "Zero blocks raise Blackwell's maximum").
        assert_eq!(step(1.0, 0x00, 254, 0x3C, 254), 0.0);
        assert_eq!(step(1.0, 0x00, 127, 0x3C, 127), 1.0);
    }

    #[test]
    fn special_values() {
        assert_eq!(step(0.0, 0x38, 0xFF, 0x3C, 127).to_bits(), BLACKWELL_NAN);
        assert_eq!(step(0.0, 0x7F, 127, 0x3C, 127).to_bits(), BLACKWELL_NAN);
        // e5m2 infinity times e4m3 zero: NaN; times one: infinity; against C = -inf: NaN.
        assert_eq!(step(0.0, 0x00, 127, 0x7C, 127).to_bits(), BLACKWELL_NAN);
        assert_eq!(step(0.0, 0x38, 127, 0xFC, 127), f32::NEG_INFINITY);
        assert_eq!(
            step(f32::NEG_INFINITY, 0x38, 127, 0x7C, 127).to_bits(),
            BLACKWELL_NAN
        );
    }

    #[test]
    fn alignment_exponents() {
        assert_eq!(Fp8Type::E4m3.alignment(0x00), -126);
        assert_eq!(Fp8Type::E4m3.alignment(0x01), -6); // subnormal
        assert_eq!(Fp8Type::E4m3.alignment(0x38), 0);
        assert_eq!(Fp8Type::E5m2.alignment(0x80), -126); // -0
        assert_eq!(Fp8Type::E5m2.alignment(0x03), -14);
        assert_eq!(Fp8Type::E5m2.alignment(0x7B), 15);
    }
}
