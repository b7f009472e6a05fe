//! e5m2 (FP8): 1 sign bit, 5 exponent bits, 2 mantissa bits, bias 15, subnormals, infinities
//! (0x7C, 0xFC) and NaN (0x7D..=0x7F and their negatives): fp16's top byte. Largest finite
//! magnitude 57344 (0x7B), smallest normal 2^-14, smallest subnormal 2^-16. One of MXFP8's two
//! element formats.
//!
//! Encoding from f32 rounds to nearest even in two conventions, both pinned against ml_dtypes
//! 0.6.0 by golden/conformance/e5m2_encode.safetensors: IEEE's (overflow from 61440 on and
//! infinities to infinity: ml_dtypes' cast) and saturating (clamped to +-57344 first: what the
//! MX quantizers do). NaN becomes ml_dtypes' 0x7E / 0xFE, by sign.

use super::exact_value::ExactValue;
use super::minifloat::{round_magnitude_rne, MiniFloatSpec, RoundedMagnitude};

pub const E5M2_SPEC: MiniFloatSpec = MiniFloatSpec {
    exponent_bits: 5,
    mantissa_bits: 2,
    bias: 15,
};
const MAX_FINITE_CODE: u32 = 0x7B;
const INFINITY_CODE: u8 = 0x7C;
const NAN_CODE: u8 = 0x7E;

pub const E5M2_MAX: f32 = 57344.0;

/// One e5m2 value, held as its byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct E5m2(u8);

impl E5m2 {
    pub const fn from_bits(bits: u8) -> Self {
        E5m2(bits)
    }

    pub const fn to_bits(self) -> u8 {
        self.0
    }

    pub fn to_exact(self) -> ExactValue {
        ExactValue::from_ieee_bits(u64::from(self.0), 5, 2)
    }

    /// f32 to e5m2, round to nearest even, overflow and infinities to infinity (ml_dtypes' cast).
    pub fn from_f32_rne(x: f32) -> Self {
        Self::encode(x, INFINITY_CODE)
    }

    /// f32 to e5m2, round to nearest even, clamped to +-57344 (infinities too).
    pub fn from_f32_rne_saturating(x: f32) -> Self {
        Self::encode(x, MAX_FINITE_CODE as u8)
    }

    fn encode(x: f32, overflow: u8) -> Self {
        let sign = if x.is_sign_negative() { 0x80 } else { 0 };
        let magnitude = match round_magnitude_rne(f64::from(x), E5M2_SPEC) {
            RoundedMagnitude::NotANumber => NAN_CODE,
            RoundedMagnitude::Infinite => overflow,
            RoundedMagnitude::Code(code) if code <= MAX_FINITE_CODE => code as u8,
            RoundedMagnitude::Code(_) => overflow,
        };
        E5m2(sign | magnitude)
    }

    /// Exact: fp16 with the low byte zero.
    pub fn to_f32(self) -> f32 {
        half::f16::from_bits(u16::from(self.0) << 8).to_f32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_values() {
        assert_eq!(E5m2::from_bits(0x7B).to_f32(), E5M2_MAX);
        assert_eq!(E5m2::from_bits(0x01).to_f32(), 2f32.powi(-16));
        assert_eq!(E5m2::from_bits(0x04).to_f32(), 2f32.powi(-14));
        assert_eq!(E5m2::from_bits(0x3C).to_f32(), 1.0);
        assert_eq!(E5m2::from_bits(0xFC).to_f32(), f32::NEG_INFINITY);
        assert!(E5m2::from_bits(0x7D).to_f32().is_nan());
    }

    #[test]
    fn exact_decoding_agrees_with_fp16_for_every_code() {
        for bits in 0..=255u8 {
            let value = E5m2::from_bits(bits);
            let (exact, float) = (value.to_exact().to_f64(), f64::from(value.to_f32()));
            assert!(
                exact == float || (exact.is_nan() && float.is_nan()),
                "{bits:#x}"
            );
        }
    }
}
