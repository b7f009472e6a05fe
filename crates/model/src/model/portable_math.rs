//! Elementary functions with the same bits on every machine.
//!
//! The platform's `exp` comes from its libm, whose last bit differs between glibc, musl, macOS
//! and Windows. The model must give identical answers everywhere, so it uses this exp, built only
//! from IEEE-754 basic operations (which Rust never contracts into FMAs): Cody-Waite range
//! reduction by ln 2, a degree-13 Taylor polynomial on |r| <= ln(2)/2, and scaling by 2^k through
//! the exponent bits. Its error is a few f64 ulps, far below anything the fp16 output can see.

/// ln 2 with the low 21 bits of its significand zero (bits 0x3FE62E42FEE00000), so that k * LN2_HI
/// is exact for every |k| < 2^21 (exp needs |k| <= 1075); LN2_LO is the rest of ln 2.
const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
const LOG2_E: f64 = std::f64::consts::LOG2_E;

/// e^x, portable. Overflows to +inf above 709.78 and underflows to 0 below -745.2.
pub fn exp(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.78 {
        return f64::INFINITY;
    }
    if x < -745.2 {
        return 0.0;
    }
    let k = (x * LOG2_E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO;
    // Horner for sum r^i / i!, i = 0..=13.
    let mut poly = 1.0 / factorial(13);
    for i in (0..13).rev() {
        poly = poly * r + 1.0 / factorial(i);
    }
    scale_by_pow2(poly, k as i32)
}

fn factorial(n: u32) -> f64 {
    (1..=n).map(f64::from).product()
}

/// 2^e for e in the normal f64 range, built from the exponent bits (`powi` has no documented
/// precision, so the model does not use it).
pub fn pow2(e: i32) -> f64 {
    assert!(
        (-1022..=1023).contains(&e),
        "pow2 exponent {e} outside the f64 normal range"
    );
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// x * 2^k without libm's ldexp; split in two steps so subnormal results round only once.
fn scale_by_pow2(x: f64, k: i32) -> f64 {
    if k > 1023 {
        x * pow2(1023) * pow2(k - 1023)
    } else if k < -1022 {
        x * pow2(-1022) * pow2((k + 1022).max(-1022))
    } else {
        x * pow2(k)
    }
}

/// silu(x) = x / (1 + e^-x), evaluated in f64 with the portable exp.
pub fn silu(x: f64) -> f64 {
    x / (1.0 + exp(-x))
}

/// Where silu has its minimum: the root of 1 + x(1 - sigmoid(x)) = 0.
pub const SILU_ARGMIN: f64 = -1.278_464_542_761_074;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln2_split_is_the_intended_one() {
        assert_eq!(LN2_HI.to_bits(), 0x3FE6_2E42_FEE0_0000);
        assert!((LN2_HI + LN2_LO - std::f64::consts::LN_2).abs() < 1e-17);
    }

    #[test]
    fn exp_matches_known_values() {
        let cases = [
            (0.0, 1.0),
            (1.0, std::f64::consts::E),
            (-1.0, 1.0 / std::f64::consts::E),
            (10.0, 22026.465794806718),
        ];
        for (x, expected) in cases {
            let relative = (exp(x) - expected).abs() / expected;
            assert!(relative < 4e-16, "exp({x}) = {} vs {expected}", exp(x));
        }
        assert_eq!(exp(-800.0), 0.0);
        assert!(exp(800.0).is_infinite());
        // 2^-1074 region: still positive, no panic.
        assert!(exp(-744.0) > 0.0);
    }

    #[test]
    fn exp_agrees_with_platform_exp_to_a_few_ulps() {
        let mut x = -700.0;
        while x < 700.0 {
            let ours = exp(x);
            let platform = x.exp();
            assert!(((ours - platform) / platform).abs() < 1e-15, "exp({x})");
            x += 0.377;
        }
    }

    #[test]
    fn silu_minimum_is_at_the_argmin() {
        let at = silu(SILU_ARGMIN);
        assert!((at + 0.278_464_542_761_074).abs() < 1e-14, "{at}");
        assert!(silu(SILU_ARGMIN - 1e-4) > at && silu(SILU_ARGMIN + 1e-4) > at);
    }
}
