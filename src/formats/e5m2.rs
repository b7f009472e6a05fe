//! e5m2 (FP8): 1 sign bit, 5 exponent bits, 2 mantissa bits, bias 15, subnormals, infinities
//! (0x7C, 0xFC) and NaN (0x7D..=0x7F and their negatives): fp16's top byte. Largest finite
//! magnitude 57344 (0x7B), smallest normal 2^-14, smallest subnormal 2^-16. One of MXFP8's two
//! element formats; the model only decodes it (kernels receive its bytes).

use super::exact_value::ExactValue;

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
