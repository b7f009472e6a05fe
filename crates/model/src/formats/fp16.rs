//! fp16 and bf16 are the `half` crate's. One conversion is ours: f64 to fp16 with a single
//! round-to-nearest-even. `half::f16::from_f64` may go through f32 (with F16C it does), which
//! rounds twice and gets ties wrong: 1 + 2^-11 + 2^-40 must round up to 1 + 2^-10, not to 1.
//! The error bounds are computed in f64 and need the single rounding.

use super::minifloat::{binary16_from_f64_rne, MiniFloatSpec};
use half::f16;

pub const FP16_SPEC: MiniFloatSpec = MiniFloatSpec {
    exponent_bits: 5,
    mantissa_bits: 10,
    bias: 15,
};
const MAX_FINITE_CODE: u32 = 0x7BFF;
const INFINITY_CODE: u16 = 0x7C00;

/// f64 to fp16, round to nearest even, overflow to infinity, NaN to NaN (sign kept).
pub fn fp16_from_f64_rne(x: f64) -> f16 {
    f16::from_bits(binary16_from_f64_rne(
        x,
        FP16_SPEC,
        MAX_FINITE_CODE,
        INFINITY_CODE,
        f16::NAN.to_bits(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_rounding_from_f64() {
        assert_eq!(fp16_from_f64_rne(1.0 + 2f64.powi(-11)), f16::ONE);
        assert_eq!(
            fp16_from_f64_rne(1.0 + 2f64.powi(-11) + 2f64.powi(-40)).to_f64(),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(
            fp16_from_f64_rne(1.0 + 3.0 * 2f64.powi(-11)).to_f64(),
            1.0 + 2.0 * 2f64.powi(-10)
        );
        assert_eq!(fp16_from_f64_rne(2f64.powi(-25)).to_bits(), 0);
        assert_eq!(
            fp16_from_f64_rne(2f64.powi(-25) + 2f64.powi(-60)).to_bits(),
            1
        );
        assert_eq!(fp16_from_f64_rne(-2f64.powi(-24)).to_bits(), 0x8001);
        assert_eq!(fp16_from_f64_rne(65520.0), f16::INFINITY);
        assert_eq!(fp16_from_f64_rne(65519.99), f16::MAX);
        assert_eq!(fp16_from_f64_rne(f64::NEG_INFINITY), f16::NEG_INFINITY);
        assert!(fp16_from_f64_rne(f64::NAN).is_nan());
    }
}
