//! A format value as exact arithmetic sees it: `(-1)^negative * significand * 2^exponent` with an
//! integer significand, or an infinity, or NaN. Every element and scale format of the
//! block-scaled family decodes to one, so that the model multiplies and sums them without
//! rounding (see `model::scaled_gemm`).

/// One decoded value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExactValue {
    Finite {
        negative: bool,
        significand: u64,
        exponent: i32,
    },
    Infinite {
        negative: bool,
    },
    NaN,
}

impl ExactValue {
    pub const ONE: ExactValue = ExactValue::Finite {
        negative: false,
        significand: 1,
        exponent: 0,
    };

    /// The exact product; NaN if either is NaN or an infinity meets a zero.
    pub fn times(self, other: ExactValue) -> ExactValue {
        use ExactValue::*;
        match (self, other) {
            (NaN, _) | (_, NaN) => NaN,
            (Infinite { negative: a }, Infinite { negative: b }) => Infinite { negative: a != b },
            (
                Infinite { negative: a },
                Finite {
                    negative: b,
                    significand,
                    ..
                },
            )
            | (
                Finite {
                    negative: b,
                    significand,
                    ..
                },
                Infinite { negative: a },
            ) => {
                if significand == 0 {
                    NaN
                } else {
                    Infinite { negative: a != b }
                }
            }
            (
                Finite {
                    negative: a,
                    significand: sa,
                    exponent: ea,
                },
                Finite {
                    negative: b,
                    significand: sb,
                    exponent: eb,
                },
            ) => Finite {
                negative: a != b,
                // The family's significands are at most 2^11 (fp16's) and a term multiplies at
                // most four of them and one f32 alpha: far below 2^64.
                significand: sa
                    .checked_mul(sb)
                    .expect("significand product exceeds 64 bits"),
                exponent: ea + eb,
            },
        }
    }

    /// The value as f64 (exact for every single decoded format value).
    pub fn to_f64(self) -> f64 {
        match self {
            ExactValue::Finite {
                negative,
                significand,
                exponent,
            } => {
                let magnitude = significand as f64 * pow2(exponent);
                if negative {
                    -magnitude
                } else {
                    magnitude
                }
            }
            ExactValue::Infinite { negative: true } => f64::NEG_INFINITY,
            ExactValue::Infinite { negative: false } => f64::INFINITY,
            ExactValue::NaN => f64::NAN,
        }
    }

    /// Decodes an IEEE-style binary format with `exponent_bits`, `mantissa_bits` and a bias of
    /// `2^(exponent_bits - 1) - 1`: subnormals, and an all-ones exponent field for infinity
    /// (mantissa 0) and NaN. e5m2, fp16, bf16 and f32 are all this.
    pub fn from_ieee_bits(bits: u64, exponent_bits: u32, mantissa_bits: u32) -> ExactValue {
        let negative = bits >> (exponent_bits + mantissa_bits) & 1 == 1;
        let mantissa = bits & ((1 << mantissa_bits) - 1);
        let field = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
        let bias = (1i32 << (exponent_bits - 1)) - 1;
        if field == (1 << exponent_bits) - 1 {
            return if mantissa == 0 {
                ExactValue::Infinite { negative }
            } else {
                ExactValue::NaN
            };
        }
        let (significand, exponent) = if field == 0 {
            (mantissa, 1 - bias)
        } else {
            (mantissa | 1 << mantissa_bits, field as i32 - bias)
        };
        ExactValue::Finite {
            negative,
            significand,
            exponent: exponent - mantissa_bits as i32,
        }
    }

    /// f32's value (alpha, a per-tensor scale, an f32 bias).
    pub fn from_f32(x: f32) -> ExactValue {
        ExactValue::from_ieee_bits(u64::from(x.to_bits()), 8, 23)
    }
}

/// 2^e as f64, from its bits (`powi` is a loop of multiplications): exact for e in
/// -1074..=1023, zero below and infinity above.
fn pow2(e: i32) -> f64 {
    match e {
        ..-1074 => 0.0,
        -1074..=-1023 => f64::from_bits(1u64 << (e + 1074)),
        -1022..=1023 => f64::from_bits(((e + 1023) as u64) << 52),
        _ => f64::INFINITY,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_round_trips_through_exact_values() {
        for x in [
            0.0f32,
            -0.0,
            1.0,
            -1.5,
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            3.1e-40,
            6.0e20,
        ] {
            assert_eq!(ExactValue::from_f32(x).to_f64(), f64::from(x), "{x}");
        }
        assert_eq!(
            ExactValue::from_f32(f32::NEG_INFINITY),
            ExactValue::Infinite { negative: true }
        );
        assert_eq!(ExactValue::from_f32(f32::NAN), ExactValue::NaN);
    }

    #[test]
    fn pow2_is_exact_over_f64s_range() {
        // Each power is twice the one below it, from the smallest subnormal to the largest;
        // `powi` itself is not exact down there (2f64.powi(-1074) is 0).
        assert_eq!(pow2(-1074), 5e-324);
        assert_eq!(pow2(0), 1.0);
        for e in -1073..=1023 {
            assert_eq!(pow2(e), 2.0 * pow2(e - 1), "{e}");
        }
        assert_eq!(pow2(-1075), 0.0);
        assert_eq!(pow2(1024), f64::INFINITY);
    }

    #[test]
    fn products_follow_ieee_special_cases() {
        let zero = ExactValue::from_f32(0.0);
        let inf = ExactValue::from_f32(f32::INFINITY);
        let minus_two = ExactValue::from_f32(-2.0);
        assert_eq!(inf.times(zero), ExactValue::NaN);
        assert_eq!(
            inf.times(minus_two),
            ExactValue::Infinite { negative: true }
        );
        assert_eq!(minus_two.times(minus_two).to_f64(), 4.0);
        assert_eq!(ExactValue::NaN.times(ExactValue::ONE), ExactValue::NaN);
    }
}
