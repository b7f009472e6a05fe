//! bf16 is the `half` crate's; one conversion is ours, as for fp16: f64 to bf16 with a single
//! round-to-nearest-even (through f32 it would round twice). Also its exact decoding.

use super::exact_value::ExactValue;
use super::minifloat::{binary16_from_f64_rne, MiniFloatSpec};
use half::bf16;

pub const BF16_SPEC: MiniFloatSpec = MiniFloatSpec {
    exponent_bits: 8,
    mantissa_bits: 7,
    bias: 127,
};
const MAX_FINITE_CODE: u32 = 0x7F7F;
const INFINITY_CODE: u16 = 0x7F80;
const QUIET_NAN_CODE: u16 = 0x7FC0;

/// f64 to bf16, round to nearest even, overflow to infinity, NaN to NaN (sign kept).
pub fn bf16_from_f64_rne(x: f64) -> bf16 {
    bf16::from_bits(binary16_from_f64_rne(
        x,
        BF16_SPEC,
        MAX_FINITE_CODE,
        INFINITY_CODE,
        QUIET_NAN_CODE,
    ))
}

pub fn bf16_to_exact(x: bf16) -> ExactValue {
    ExactValue::from_ieee_bits(u64::from(x.to_bits()), 8, 7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_rounding_from_f64() {
        let one_and_half_ulp = 1.0 + 2f64.powi(-8);
        assert_eq!(bf16_from_f64_rne(one_and_half_ulp).to_f64(), 1.0); // tie to even
        assert_eq!(
            bf16_from_f64_rne(one_and_half_ulp + 2f64.powi(-40)).to_f64(),
            1.0 + 2f64.powi(-7)
        );
        // Through f32 the 2^-40 is lost and the tie goes to even: the double rounding.
        assert_eq!(
            bf16::from_f32((one_and_half_ulp + 2f64.powi(-40)) as f32).to_f64(),
            1.0
        );
        assert_eq!(bf16_from_f64_rne(2f64.powi(-134)).to_bits(), 0); // half the smallest subnormal
        assert_eq!(bf16_from_f64_rne(-3.0 * 2f64.powi(-134)).to_bits(), 0x8002);
        assert_eq!(bf16_from_f64_rne(f64::from(f32::MAX)).to_bits(), 0x7F80);
        assert_eq!(bf16_from_f64_rne(3.3895313892515355e38).to_bits(), 0x7F7F);
        assert!(bf16_from_f64_rne(f64::NAN).is_nan());
    }

    #[test]
    fn exact_decoding_agrees_with_half() {
        for bits in (0..=u16::MAX).step_by(7) {
            let x = bf16::from_bits(bits);
            let exact = bf16_to_exact(x).to_f64();
            assert!(
                exact == x.to_f64() || (exact.is_nan() && x.is_nan()),
                "{bits:#x}"
            );
        }
    }
}
