//! UE8M0 (`float8_e8m0fnu`): the block scale of the MX formats (MXFP4, MXFP8; one per 32
//! elements). Eight exponent bits, no sign, no mantissa, bias 127: code c is 2^(c - 127), from
//! 2^-127 (0x00) to 2^127 (0xFE); 0xFF is the only NaN. There is no zero and no infinity.
//!
//! 0x00 is 2^-127, not zero: Triton's `tl.dot_scaled` decoded it as 0 until its PRs 11624 and
//! 11737, an error no tolerance test saw.
//!
//! Encoding from f32 ([`Ue8m0::from_f32_ml_dtypes`]) is the cast of ml_dtypes (0.6.0), pinned by
//! golden/conformance/ue8m0_encode.safetensors: the nearest power of two with the tie
//! (1.5 * 2^e) going up; in the f32 subnormal range (below 2^-126) up to and including 2^-127 to
//! 0x00 and above it to 0x01 (up, not to nearest); zero, negatives, infinities, NaN and values
//! that round past 2^127 to NaN. torch's cast (2.11, CPU and CUDA alike;
//! [`Ue8m0::from_f32_torch`], pinned by golden/conformance/ue8m0_torch_cpu.bin and
//! results/ue8m0/) differs in two ways only: it ignores the sign (-x casts as x) and casts
//! zero to 0x00 (2^-127), where ml_dtypes gives NaN. The MX quantizers do not cast: they derive the scale's exponent
//! from the block's largest magnitude (floor or ceiling of its log2), which belongs with them.

/// Exponent bias: code c is 2^(c - BIAS).
pub const UE8M0_BIAS: i32 = 127;
/// The only NaN.
pub const UE8M0_NAN_CODE: u8 = 0xFF;
/// 1.0.
pub const UE8M0_ONE_CODE: u8 = 0x7F;

/// One UE8M0 value, held as its byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ue8m0(u8);

impl Ue8m0 {
    pub const fn from_bits(bits: u8) -> Self {
        Ue8m0(bits)
    }

    pub const fn to_bits(self) -> u8 {
        self.0
    }

    pub fn is_nan(self) -> bool {
        self.0 == UE8M0_NAN_CODE
    }

    /// The power of two's exponent, -127..=127; `None` for NaN.
    pub fn exponent(self) -> Option<i32> {
        (!self.is_nan()).then(|| i32::from(self.0) - UE8M0_BIAS)
    }

    /// Exact value: 2^(c - 127), NaN for 0xFF.
    pub fn to_exact(self) -> super::ExactValue {
        match self.exponent() {
            None => super::ExactValue::NaN,
            Some(exponent) => super::ExactValue::Finite {
                negative: false,
                significand: 1,
                exponent,
            },
        }
    }

    /// Exact value: 2^-127 (code 0x00) is an f32 subnormal, every other code a normal.
    pub fn to_f32(self) -> f32 {
        match self.0 {
            UE8M0_NAN_CODE => f32::NAN,
            // 2^-127: the f32 subnormal whose top mantissa bit alone is set.
            0 => f32::from_bits(1 << 22),
            code => f32::from_bits(u32::from(code) << 23),
        }
    }

    /// ml_dtypes' cast from f32 (see the module's rules).
    pub fn from_f32_ml_dtypes(x: f32) -> Self {
        if x.is_nan() || x.is_infinite() || x <= 0.0 {
            return Ue8m0(UE8M0_NAN_CODE);
        }
        if !x.is_normal() {
            // Subnormal: 2^-127 is the subnormal with bit 22 alone; anything above goes up.
            return Ue8m0(u8::from(x.to_bits() > 1 << 22));
        }
        let bits = x.to_bits();
        let exponent = ((bits >> 23) & 0xFF) as i32 - UE8M0_BIAS;
        // The top mantissa bit set means m >= 1.5: the tie and above round up.
        let rounded = exponent + ((bits >> 22) & 1) as i32;
        if rounded > UE8M0_BIAS {
            return Ue8m0(UE8M0_NAN_CODE);
        }
        Ue8m0((rounded + UE8M0_BIAS) as u8)
    }

    /// torch's cast from f32: ml_dtypes' on the magnitude, and zero to 0x00 (2^-127).
    pub fn from_f32_torch(x: f32) -> Self {
        if x == 0.0 {
            return Ue8m0(0);
        }
        Self::from_f32_ml_dtypes(x.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_values() {
        assert_eq!(Ue8m0::from_bits(UE8M0_ONE_CODE).to_f32(), 1.0);
        assert_eq!(Ue8m0::from_bits(0x00).to_f32(), 2f32.powi(-127));
        assert_eq!(Ue8m0::from_bits(0xFE).to_f32(), 2f32.powi(127));
        assert!(Ue8m0::from_bits(0xFF).to_f32().is_nan());
        assert_eq!(Ue8m0::from_bits(0x00).exponent(), Some(-127));
        assert_eq!(Ue8m0::from_bits(0xFF).exponent(), None);
    }

    #[test]
    fn the_cast_rounds_ties_up_and_has_no_zero() {
        let code = |x: f32| Ue8m0::from_f32_ml_dtypes(x).to_bits();
        assert_eq!(code(1.5), 0x80);
        assert_eq!(code(0.75), 0x7F);
        assert_eq!(code(1.4999999), 0x7F);
        assert_eq!(code(0.0), 0xFF);
        assert_eq!(code(-1.0), 0xFF);
        assert_eq!(code(1.5 * 2f32.powi(127)), 0xFF);
        assert_eq!(code(2f32.powi(-130)), 0x00);
        assert_eq!(code(f32::from_bits((1 << 22) + 1)), 0x01);
    }
}
