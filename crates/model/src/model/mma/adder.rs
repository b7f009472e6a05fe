//! The arithmetic of a fused multi-term adder, kept apart from any instruction's shape and types
//! (as MMA-Sim does): operands arrive as exact dyadic rationals, each with the exponent the adder
//! aligns it by; the adder takes the largest alignment exponent, cuts each operand to a number of
//! fractional bits below it, sums exactly, and rounds once.

/// An exact value `mantissa * 2^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dyadic {
    pub mantissa: i128,
    pub exponent: i32,
}

impl Dyadic {
    pub const ZERO: Dyadic = Dyadic {
        mantissa: 0,
        exponent: 0,
    };

    /// A finite f32, exactly.
    pub fn from_f32(x: f32) -> Option<Self> {
        if !x.is_finite() {
            return None;
        }
        let bits = x.to_bits();
        let biased = ((bits >> 23) & 0xFF) as i32;
        let fraction = i128::from(bits & 0x7F_FFFF);
        let (mantissa, exponent) = if biased == 0 {
            (fraction, -149)
        } else {
            (fraction | 0x80_0000, biased - 150)
        };
        Some(Dyadic {
            mantissa: if x.is_sign_negative() {
                -mantissa
            } else {
                mantissa
            },
            exponent,
        })
    }

    pub fn product(self, other: Dyadic) -> Dyadic {
        Dyadic {
            mantissa: self.mantissa * other.mantissa,
            exponent: self.exponent + other.exponent,
        }
    }

    /// floor(log2 |x|), or `None` for zero.
    fn magnitude_exponent(self) -> Option<i32> {
        (self.mantissa != 0)
            .then(|| 127 - self.mantissa.unsigned_abs().leading_zeros() as i32 + self.exponent)
    }

    pub fn to_f64(self) -> f64 {
        self.mantissa as f64 * 2f64.powi(self.exponent)
    }
}

/// How an aligned operand is cut to the adder's width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Truncate the magnitude (sign-magnitude datapath).
    TowardZero,
    /// Two's-complement truncation: toward minus infinity.
    Floor,
}

/// The final rounding to f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    /// IEEE round toward zero: a magnitude past `f32::MAX` gives `f32::MAX`, and a negative value
    /// cut to zero gives -0.
    TowardZero,
    NearestEven,
    /// MMA-Sim's normalisation of the Blackwell block-scaled adder's sum: the sum's significand is
    /// truncated to 24 bits at its own exponent (at least -126: the f32 subnormal grid), then
    /// converted to f32. So the same as `TowardZero` except that a magnitude of 2^128 or more
    /// becomes infinity, and a zero result, cut or exact, is always +0.
    TowardZeroUnbounded,
}

/// A fused adder: `fraction_bits` below the largest alignment exponent are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FusedAdder {
    pub fraction_bits: i32,
    pub cut: Cut,
    pub rounding: Rounding,
    /// Whether an operand whose value is zero still raises the maximum alignment exponent by its
    /// own (Blackwell in MMA-Sim: a block whose sum is zero keeps its scales' exponent) or takes
    /// no part in it (Hopper, measured).
    pub zeros_in_maximum: bool,
}

/// One adder operand: its exact value and the exponent the adder aligns it by. For most adders
/// that is the exponent of its leading bit; Hopper's aligns a product by the sum of its factors'
/// exponents, which can be one less (1.5 * 1.5 = 2.25 is aligned as 2^0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Operand {
    pub value: Dyadic,
    pub alignment: i32,
}

impl Operand {
    /// Aligned by its leading bit.
    pub fn natural(value: Dyadic) -> Self {
        Operand {
            value,
            alignment: value.magnitude_exponent().unwrap_or(i32::MIN),
        }
    }
}

impl FusedAdder {
    /// `operands` summed as this adder does, each aligned by its leading bit, rounded to f32.
    /// `None` operands are NaN.
    pub fn sum(&self, operands: &[Option<Dyadic>]) -> f32 {
        let Some(operands): Option<Vec<Operand>> =
            operands.iter().map(|d| d.map(Operand::natural)).collect()
        else {
            return f32::NAN;
        };
        self.sum_aligned(&operands)
    }

    /// The same with explicit alignment exponents. Zero operands raise the maximum only where
    /// [`FusedAdder::zeros_in_maximum`] says so.
    pub fn sum_aligned(&self, operands: &[Operand]) -> f32 {
        let emax = operands
            .iter()
            .filter(|o| self.zeros_in_maximum || o.value.mantissa != 0)
            .map(|o| o.alignment)
            .max();
        let Some(emax) = emax.filter(|&e| e != i32::MIN) else {
            // No operand counts (or only zeros aligned by their leading bit): the sum is zero.
            return 0.0;
        };
        let quantum = emax - self.fraction_bits;
        let quanta: i128 = operands.iter().map(|o| self.cut_to(o.value, quantum)).sum();
        round_to_f32(quanta, quantum, self.rounding)
    }

    /// `d` as a whole number of `2^quantum`, cut per [`Cut`].
    fn cut_to(&self, d: Dyadic, quantum: i32) -> i128 {
        if d.mantissa == 0 {
            // A zero's exponent may lie far above the quantum (a zero block under a larger
            // maximum): no shift needed.
            return 0;
        }
        let shift = d.exponent - quantum;
        if shift >= 0 {
            return d.mantissa << shift;
        }
        let shift = (-shift).min(127) as u32;
        match self.cut {
            Cut::Floor => d.mantissa >> shift,
            Cut::TowardZero => {
                let magnitude = (d.mantissa.unsigned_abs() >> shift) as i128;
                if d.mantissa < 0 {
                    -magnitude
                } else {
                    magnitude
                }
            }
        }
    }
}

/// `n * 2^exponent` to f32 with the given rounding (overflow: infinity, or f32::MAX toward zero).
pub fn round_to_f32(n: i128, exponent: i32, rounding: Rounding) -> f32 {
    match rounding {
        Rounding::NearestEven => super::super::exact::fixed_to_f32_rne(n, exponent),
        Rounding::TowardZeroUnbounded => {
            let value = Dyadic {
                mantissa: n,
                exponent,
            };
            match value.magnitude_exponent() {
                None => 0.0,
                Some(e) if e >= 128 => {
                    if n < 0 {
                        f32::NEG_INFINITY
                    } else {
                        f32::INFINITY
                    }
                }
                Some(_) => {
                    let truncated = round_to_f32(n, exponent, Rounding::TowardZero);
                    // A negative value below the smallest subnormal is cut to +0, not -0.
                    if truncated == 0.0 {
                        0.0
                    } else {
                        truncated
                    }
                }
            }
        }
        Rounding::TowardZero => {
            let nearest = super::super::exact::fixed_to_f32_rne(n, exponent);
            let exact = Dyadic {
                mantissa: n,
                exponent,
            };
            let overshoots = match Dyadic::from_f32(nearest) {
                None => true, // rounded to infinity
                Some(r) => compare_magnitude(r, exact) == std::cmp::Ordering::Greater,
            };
            if overshoots && nearest != 0.0 {
                f32::from_bits(nearest.to_bits() - 1)
            } else {
                nearest
            }
        }
    }
}

fn compare_magnitude(a: Dyadic, b: Dyadic) -> std::cmp::Ordering {
    match (a.magnitude_exponent(), b.magnitude_exponent()) {
        (None, None) => std::cmp::Ordering::Equal,
        (None, Some(_)) => std::cmp::Ordering::Less,
        (Some(_), None) => std::cmp::Ordering::Greater,
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        // Same leading bit: the one with the larger exponent has the shorter mantissa, so
        // shifting it left by the difference cannot overflow.
        _ => {
            let e = a.exponent.min(b.exponent);
            let scale = |d: Dyadic| d.mantissa.unsigned_abs() << (d.exponent - e) as u32;
            scale(a).cmp(&scale(b))
        }
    }
}

/// fp16 inputs as dyadics (Hopper's f16 MMA operands).
pub fn dyadic_from_f16(x: half::f16) -> Option<Dyadic> {
    Dyadic::from_f32(x.to_f32())
}

/// The exponent an fp16 contributes to a product's alignment: its unbiased exponent, with zeros
/// and subnormals at -14 (not renormalised).
pub fn fp16_alignment_exponent(x: half::f16) -> i32 {
    let field = i32::from((x.to_bits() >> 10) & 0x1F);
    field.max(1) - 15
}

/// The same for an f32 accumulator: -126 for zeros and subnormals.
pub fn f32_alignment_exponent(x: f32) -> i32 {
    let field = ((x.to_bits() >> 23) & 0xFF) as i32;
    field.max(1) - 127
}
