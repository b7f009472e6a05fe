//! e2m1 (FP4): 1 sign bit, 2 exponent bits, 1 mantissa bit, bias 1, no infinity, no NaN.
//!
//! | code | 0 | 1   | 2 | 3   | 4 | 5 | 6 | 7 |
//! |------|---|-----|---|-----|---|---|---|---|
//! | value| 0 | 0.5 | 1 | 1.5 | 2 | 3 | 4 | 6 |
//!
//! Codes 8..=15 are the negatives (8 is -0). Written by hand rather than taken from a crate because
//! no maintained Rust crate implements e2m1; it is 16 values and one rounding routine.

use super::minifloat::{decode_magnitude, round_magnitude_rne, MiniFloatSpec, RoundedMagnitude};

pub const E2M1_SPEC: MiniFloatSpec = MiniFloatSpec {
    exponent_bits: 2,
    mantissa_bits: 1,
    bias: 1,
};

/// Largest finite magnitude, 6.0.
pub const E2M1_MAX: f32 = 6.0;
const SIGN_BIT: u8 = 0b1000;
const MAX_MAGNITUDE_CODE: u32 = 0b0111;

/// One e2m1 value, held as its 4-bit code in the low nibble.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct E2m1(u8);

impl E2m1 {
    /// The code must fit in 4 bits; higher bits are a caller bug, so they are rejected loudly.
    pub fn from_bits(code: u8) -> Self {
        assert!(code < 16, "e2m1 code {code:#x} has more than 4 bits");
        E2m1(code)
    }

    pub fn to_bits(self) -> u8 {
        self.0
    }

    pub fn is_negative(self) -> bool {
        self.0 & SIGN_BIT != 0
    }

    /// Exact value: (half units) * 2^-1.
    pub fn to_exact(self) -> super::ExactValue {
        super::ExactValue::Finite {
            negative: self.is_negative(),
            significand: self.to_half_units().unsigned_abs().into(),
            exponent: -1,
        }
    }

    /// Exact value. -0 decodes to -0.0.
    pub fn to_f32(self) -> f32 {
        let magnitude = decode_magnitude(u32::from(self.0 & !SIGN_BIT), E2M1_SPEC);
        if self.is_negative() {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The value times 2 as a small integer in -12..=12: every e2m1 value is a multiple of 0.5,
    /// so exact dot products can run on integers.
    pub fn to_half_units(self) -> i32 {
        const HALF_UNITS: [i32; 8] = [0, 1, 2, 3, 4, 6, 8, 12];
        let magnitude = HALF_UNITS[usize::from(self.0 & !SIGN_BIT)];
        if self.is_negative() {
            -magnitude
        } else {
            magnitude
        }
    }

    /// Round to nearest, ties to even, saturating to +-6 (infinities included): the semantics of
    /// NVFP4 quantizers, which clamp to +-6 before rounding. The sign of zero is kept.
    /// Returns `None` for NaN, which e2m1 cannot represent.
    pub fn from_f32_rne_saturating(x: f32) -> Option<Self> {
        let sign = if x.is_sign_negative() { SIGN_BIT } else { 0 };
        let magnitude = match round_magnitude_rne(f64::from(x), E2M1_SPEC) {
            RoundedMagnitude::NotANumber => return None,
            RoundedMagnitude::Infinite => MAX_MAGNITUDE_CODE,
            RoundedMagnitude::Code(code) => code.min(MAX_MAGNITUDE_CODE),
        };
        Some(E2m1(sign | magnitude as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_table() {
        let expected = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
        for (code, &value) in expected.iter().enumerate() {
            assert_eq!(E2m1::from_bits(code as u8).to_f32(), value);
            assert_eq!(E2m1::from_bits(code as u8 | 8).to_f32(), -value);
            assert_eq!(
                E2m1::from_bits(code as u8).to_half_units() as f32,
                2.0 * value
            );
        }
        assert!(E2m1::from_bits(8).to_f32().is_sign_negative());
    }

    #[test]
    fn ties_round_to_even_code() {
        let cases = [
            (0.25, 0.0),
            (0.75, 1.0),
            (1.25, 1.0),
            (1.75, 2.0),
            (2.5, 2.0),
            (3.5, 4.0),
            (5.0, 4.0),
        ];
        for (input, expected) in cases {
            assert_eq!(
                E2m1::from_f32_rne_saturating(input).unwrap().to_f32(),
                expected,
                "{input}"
            );
            assert_eq!(
                E2m1::from_f32_rne_saturating(-input).unwrap().to_f32(),
                -expected,
                "-{input}"
            );
        }
    }

    #[test]
    fn saturates_and_rejects_nan() {
        assert_eq!(E2m1::from_f32_rne_saturating(7.0).unwrap().to_f32(), 6.0);
        assert_eq!(
            E2m1::from_f32_rne_saturating(f32::NEG_INFINITY)
                .unwrap()
                .to_f32(),
            -6.0
        );
        assert_eq!(E2m1::from_f32_rne_saturating(f32::NAN), None);
    }
}
