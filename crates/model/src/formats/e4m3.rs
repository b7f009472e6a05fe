//! e4m3fn (FP8): 1 sign bit, 4 exponent bits, 3 mantissa bits, bias 7, subnormals, no infinity.
//! The "fn" variant gives up infinities so that 0x7F/0xFF are the only NaNs and the largest finite
//! magnitude is 448 (0x7E). Smallest normal 2^-6, smallest subnormal 2^-9.
//!
//! Encoding from f32 is round-to-nearest-even in both overflow conventions, named because libraries
//! differ: [`E4m3Overflow::Saturate`] (CUDA's `__NV_SATFINITE`, and every NVFP4 quantizer, which
//! clamps to 448 first) and [`E4m3Overflow::NanOnOverflow`] (ml_dtypes' and torch's plain cast).
//!
//! Why not the `float8` crate (0.7): against our ml_dtypes vectors it decodes every code and matches
//! the saturating convention, but it has no NaN-on-overflow conversion: on 1,889 of 23,593 encode
//! vectors (|x| > 464 and infinities) it gives +-448 where ml_dtypes and torch give NaN. Our own
//! code shares one rounding core with e2m1 and fp16; `crates/model/tests/model/conformance_formats.rs` pins the
//! finding (`float8_crate_lacks_the_nan_on_overflow_convention`).

use super::minifloat::{decode_magnitude, round_magnitude_rne, MiniFloatSpec, RoundedMagnitude};

pub const E4M3_SPEC: MiniFloatSpec = MiniFloatSpec {
    exponent_bits: 4,
    mantissa_bits: 3,
    bias: 7,
};

/// Largest finite magnitude.
pub const E4M3_MAX: f32 = 448.0;
/// Smallest positive normal value, 2^-6 (torch's `finfo(float8_e4m3fn).tiny`).
pub const E4M3_MIN_NORMAL: f32 = 0.015625;
/// The codes the harness names: 1.0, the largest finite magnitude (448), NaN (0x7F and 0xFF).
pub const E4M3_ONE_CODE: u8 = 0x38;
pub const E4M3_MAX_CODE: u8 = 0x7E;
pub const E4M3_NAN_CODE: u8 = 0x7F;
const SIGN_BIT: u8 = 0x80;
const NAN_MAGNITUDE: u8 = E4M3_NAN_CODE;
const MAX_MAGNITUDE_CODE: u32 = E4M3_MAX_CODE as u32;

/// What encoding does with a magnitude that rounds above 448 (and with infinities).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E4m3Overflow {
    /// Overflow and infinities become +-448.
    Saturate,
    /// Overflow and infinities become NaN (sign kept).
    NanOnOverflow,
}

/// One e4m3fn value, held as its byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct E4m3(u8);

impl E4m3 {
    pub const fn from_bits(bits: u8) -> Self {
        E4m3(bits)
    }

    pub const fn to_bits(self) -> u8 {
        self.0
    }

    pub fn is_nan(self) -> bool {
        self.0 & NAN_MAGNITUDE == NAN_MAGNITUDE
    }

    /// Exact value as an element (signed), NaN for 0x7F and 0xFF.
    pub fn to_exact(self) -> super::ExactValue {
        match self.unsigned_scale_parts() {
            None => super::ExactValue::NaN,
            Some((significand, exponent)) => super::ExactValue::Finite {
                negative: self.0 & SIGN_BIT != 0,
                significand: significand.into(),
                exponent,
            },
        }
    }

    /// Exact value as an unsigned block scale (UE4M3: the sign bit ignored), NaN for 0x7F, 0xFF.
    pub fn to_exact_unsigned_scale(self) -> super::ExactValue {
        match self.unsigned_scale_parts() {
            None => super::ExactValue::NaN,
            Some((significand, exponent)) => super::ExactValue::Finite {
                negative: false,
                significand: significand.into(),
                exponent,
            },
        }
    }

    /// Exact value; NaN codes decode to f32 NaN with the code's sign.
    pub fn to_f32(self) -> f32 {
        let magnitude = if self.is_nan() {
            f32::NAN
        } else {
            decode_magnitude(u32::from(self.0 & !SIGN_BIT), E4M3_SPEC)
        };
        if self.0 & SIGN_BIT != 0 {
            -magnitude
        } else {
            magnitude
        }
    }

    /// The value as a block scale read by the tensor cores (UE4M3): the sign bit is ignored, so
    /// 0x80 reads as +0 and 0xFF as NaN.
    pub fn to_f32_as_unsigned_scale(self) -> f32 {
        E4m3(self.0 & !SIGN_BIT).to_f32()
    }

    /// Round to nearest, ties to even, with the named overflow convention. NaN stays NaN.
    pub fn from_f32_rne(x: f32, overflow: E4m3Overflow) -> Self {
        let sign = if x.is_sign_negative() { SIGN_BIT } else { 0 };
        let magnitude = match round_magnitude_rne(f64::from(x), E4M3_SPEC) {
            RoundedMagnitude::NotANumber => NAN_MAGNITUDE,
            RoundedMagnitude::Code(code) if code <= MAX_MAGNITUDE_CODE => code as u8,
            RoundedMagnitude::Code(_) | RoundedMagnitude::Infinite => match overflow {
                E4m3Overflow::Saturate => MAX_MAGNITUDE_CODE as u8,
                E4m3Overflow::NanOnOverflow => NAN_MAGNITUDE,
            },
        };
        E4m3(sign | magnitude)
    }

    /// The value as `significand * 2^exponent` with an integer significand in 0..=15 and the
    /// exponent in -9..=5 (sign ignored, as a scale is read). Exact-arithmetic models use this.
    /// Returns `None` for NaN.
    pub fn unsigned_scale_parts(self) -> Option<(u32, i32)> {
        if self.is_nan() {
            return None;
        }
        let magnitude = self.0 & !SIGN_BIT;
        let mantissa = u32::from(magnitude & 0x7);
        let exponent_field = i32::from(magnitude >> 3);
        Some(if exponent_field == 0 {
            (mantissa, 1 - E4M3_SPEC.bias - 3)
        } else {
            (mantissa | 0x8, exponent_field - E4M3_SPEC.bias - 3)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_values() {
        assert_eq!(E4m3::from_bits(0x7E).to_f32(), E4M3_MAX);
        assert_eq!(E4m3::from_bits(0x08).to_f32(), E4M3_MIN_NORMAL);
        assert_eq!(E4m3::from_bits(0x01).to_f32(), 2f32.powi(-9));
        assert!(E4m3::from_bits(0x7F).to_f32().is_nan());
        assert!(E4m3::from_bits(0xFF).to_f32().is_nan());
        assert_eq!(E4m3::from_bits(0xFE).to_f32_as_unsigned_scale(), E4M3_MAX);
    }

    #[test]
    fn overflow_conventions_differ_only_above_the_range() {
        use E4m3Overflow::*;
        assert_eq!(E4m3::from_f32_rne(464.0, NanOnOverflow).to_bits(), 0x7E); // tie to even
        assert_eq!(E4m3::from_f32_rne(464.1, NanOnOverflow).to_bits(), 0x7F);
        assert_eq!(E4m3::from_f32_rne(464.1, Saturate).to_bits(), 0x7E);
        assert_eq!(
            E4m3::from_f32_rne(f32::NEG_INFINITY, Saturate).to_bits(),
            0xFE
        );
        assert_eq!(
            E4m3::from_f32_rne(f32::INFINITY, NanOnOverflow).to_bits(),
            0x7F
        );
    }

    #[test]
    fn scale_parts_reconstruct_every_finite_code() {
        for bits in 0..=255u8 {
            let value = E4m3::from_bits(bits);
            match value.unsigned_scale_parts() {
                None => assert!(value.is_nan()),
                Some((significand, exponent)) => assert_eq!(
                    significand as f64 * 2f64.powi(exponent),
                    f64::from(value.to_f32_as_unsigned_scale())
                ),
            }
        }
    }
}
