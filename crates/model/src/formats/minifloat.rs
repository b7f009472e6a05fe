//! The rounding core shared by the small float formats (e2m1, e4m3).
//!
//! Both formats are "fn" formats: sign, `E` exponent bits, `M` mantissa bits, a bias, subnormals,
//! and no infinity. Rounding an f32 to such a format is the same algorithm for both, so it lives
//! here once, in the style of Berkeley SoftFloat: the input is split into sign, exponent and
//! significand, the significand is shifted right to the target's quantum with round-to-nearest,
//! ties-to-even, and the result is an unbounded *code* (exponent and mantissa fields concatenated)
//! that the caller checks against the format's largest finite code. What happens on overflow
//! (saturate, or NaN) is the caller's choice, because libraries differ.

/// Parameters of a small sign-magnitude float format without infinities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiniFloatSpec {
    pub exponent_bits: u32,
    pub mantissa_bits: u32,
    pub bias: i32,
}

/// The magnitude of an f32 rounded to a [`MiniFloatSpec`] grid, before any overflow check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundedMagnitude {
    /// Exponent and mantissa fields as one integer, `(biased_exponent << M) | mantissa`.
    /// It can exceed the format's largest finite code: that is an overflow for the caller to handle.
    Code(u32),
    /// The input was +-infinity.
    Infinite,
    /// The input was NaN.
    NotANumber,
}

const F32_MANTISSA_BITS: u32 = 23;
const F32_BIAS: i32 = 127;
const F64_MANTISSA_BITS: u32 = 52;
const F64_EXPONENT_MASK: u64 = 0x7FF;
const F64_BIAS: i32 = 1023;

/// Rounds `|x|` to the grid of `spec` with round-to-nearest, ties-to-even. The input is f64 so
/// that one routine serves f32 inputs (converted exactly) and f64 bounds rounded to fp16 without
/// a double rounding through f32.
///
/// The grid is extended upward without limit (no saturation here), so for example 464.0 rounds
/// to e4m3's 448 (a tie, won by the even mantissa 0b110) and 470.0 to the code above 448.
pub fn round_magnitude_rne(x: f64, spec: MiniFloatSpec) -> RoundedMagnitude {
    let bits = x.to_bits() & 0x7FFF_FFFF_FFFF_FFFF;
    let biased_exponent = (bits >> F64_MANTISSA_BITS) & F64_EXPONENT_MASK;
    let fraction = bits & ((1 << F64_MANTISSA_BITS) - 1);
    if biased_exponent == F64_EXPONENT_MASK {
        return if fraction == 0 {
            RoundedMagnitude::Infinite
        } else {
            RoundedMagnitude::NotANumber
        };
    }
    if bits == 0 {
        return RoundedMagnitude::Code(0);
    }
    // |x| = significand * 2^(exponent - 52), significand an integer below 2^53.
    let (significand, exponent) = if biased_exponent == 0 {
        (fraction, 1 - F64_BIAS)
    } else {
        (
            fraction | (1 << F64_MANTISSA_BITS),
            biased_exponent as i32 - F64_BIAS,
        )
    };
    // The target's quantum at this magnitude: 2^(e - M) for normal values, and the subnormal
    // quantum 2^(emin - M) below the smallest normal exponent emin = 1 - bias.
    let min_normal_exponent = 1 - spec.bias;
    let binade = exponent.max(min_normal_exponent);
    let quantum_exponent = binade - spec.mantissa_bits as i32;
    let shift = quantum_exponent - (exponent - F64_MANTISSA_BITS as i32);
    let quanta = shift_right_rne(significand, shift);
    // quanta counts multiples of the quantum. In the normal range it lies in [2^M, 2^(M+1)], and a
    // round-up to 2^(M+1) carries into the exponent field by itself when we add it below.
    let binade_field = (binade - min_normal_exponent) as u32;
    let code = (u64::from(binade_field) << spec.mantissa_bits).saturating_add(quanta);
    RoundedMagnitude::Code(u32::try_from(code).unwrap_or(u32::MAX))
}

/// f64 to the bits of a 16-bit IEEE format with infinities (fp16, bf16): round to nearest
/// even, overflow to infinity, NaN to `nan_code`; the sign kept in every case.
pub fn binary16_from_f64_rne(
    x: f64,
    spec: MiniFloatSpec,
    max_finite_code: u32,
    infinity_code: u16,
    nan_code: u16,
) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let magnitude = match round_magnitude_rne(x, spec) {
        RoundedMagnitude::NotANumber => nan_code,
        RoundedMagnitude::Infinite => infinity_code,
        RoundedMagnitude::Code(code) if code <= max_finite_code => code as u16,
        RoundedMagnitude::Code(_) => infinity_code,
    };
    sign | magnitude
}

/// `value / 2^shift` rounded to nearest, ties to even. A non-positive shift means a magnitude far
/// above every format here: the result only needs to be large enough to read as overflow.
fn shift_right_rne(value: u64, shift: i32) -> u64 {
    if shift <= 0 {
        return u64::from(u32::MAX);
    }
    if shift >= 64 {
        // value < 2^53 <= 2^(shift-1): strictly below half a quantum.
        return 0;
    }
    let kept = value >> shift;
    let remainder = value & ((1u64 << shift) - 1);
    let half = 1u64 << (shift - 1);
    if remainder > half || (remainder == half && kept & 1 == 1) {
        kept + 1
    } else {
        kept
    }
}

/// Decodes a magnitude code (`exponent_field << M | mantissa`) of `spec` to f32, exactly.
/// Every value of the formats used here fits f32 exactly.
pub fn decode_magnitude(code: u32, spec: MiniFloatSpec) -> f32 {
    let mantissa = code & ((1 << spec.mantissa_bits) - 1);
    let exponent_field = code >> spec.mantissa_bits;
    let (significand, exponent) = if exponent_field == 0 {
        (mantissa, 1 - spec.bias)
    } else {
        (
            mantissa | (1 << spec.mantissa_bits),
            exponent_field as i32 - spec.bias,
        )
    };
    significand as f32 * pow2(exponent - spec.mantissa_bits as i32)
}

/// 2^e as f32 for e in the normal f32 range, built from bits so it never depends on libm.
pub fn pow2(e: i32) -> f32 {
    assert!(
        (-126..=127).contains(&e),
        "pow2 exponent {e} outside the f32 normal range"
    );
    f32::from_bits(((e + F32_BIAS) as u32) << F32_MANTISSA_BITS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const E2M1: MiniFloatSpec = MiniFloatSpec {
        exponent_bits: 2,
        mantissa_bits: 1,
        bias: 1,
    };

    #[test]
    fn shift_right_rne_ties_go_to_even() {
        assert_eq!(shift_right_rne(0b101, 1), 0b10); // 2.5 -> 2
        assert_eq!(shift_right_rne(0b111, 1), 0b100); // 3.5 -> 4
        assert_eq!(shift_right_rne(0b1011, 2), 0b11); // 2.75 -> 3
        assert_eq!(shift_right_rne(1 << 52, 70), 0);
    }

    #[test]
    fn e2m1_grid_round_trips_every_magnitude() {
        for code in 0..8 {
            let value = decode_magnitude(code, E2M1);
            assert_eq!(
                round_magnitude_rne(f64::from(value), E2M1),
                RoundedMagnitude::Code(code)
            );
        }
    }
}
