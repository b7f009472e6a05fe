//! An exact sum of dyadic values whose exponents span hundreds of bits. The block-scaled
//! family's products range from 2^-435 (an e5m2 subnormal times a bf16 subnormal times UE8M0
//! scales of 2^-127, with alpha) to 2^300, far beyond the NVFP4 model's i128 in units of 2^-20
//! (`model::exact`). Here the sum is a little-endian array of 32-bit limbs held in i64, so that
//! each addition touches at most three limbs without propagating carries; carries are settled
//! every 2^30 additions and at the end. Written by hand because the operation is a few lines and
//! the big-integer crates bring far more than an add at a bit offset.

use crate::formats::ExactValue;

const LIMB_BITS: i32 = 32;
const LIMB_MASK: u128 = (1 << LIMB_BITS) - 1;
/// Additions between carry propagations: each adds less than 2^32 to a limb, so limbs stay
/// below 2^62 in magnitude.
const ADDS_BETWEEN_CARRIES: u32 = 1 << 30;

/// A running exact sum, with IEEE semantics for infinities and NaN.
#[derive(Debug, Clone, Default)]
pub struct WideSum {
    /// `limbs[i]` weighs `2^(32 * (i + lowest))`.
    lowest: i32,
    limbs: Vec<i64>,
    pending: u32,
    nan: bool,
    positive_infinity: bool,
    negative_infinity: bool,
}

/// A finished sum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SumValue {
    /// The exact sum rounded to f64 with round-to-odd (the last bit set when anything was
    /// dropped), so that one further rounding to any format of at most 51 bits (f32, bf16, fp16)
    /// is the correctly rounded exact sum.
    Finite(f64),
    Infinite {
        negative: bool,
    },
    NaN,
}

impl WideSum {
    pub fn new() -> Self {
        WideSum::default()
    }

    pub fn add(&mut self, value: ExactValue) {
        match value {
            ExactValue::NaN => self.nan = true,
            ExactValue::Infinite { negative: true } => self.negative_infinity = true,
            ExactValue::Infinite { negative: false } => self.positive_infinity = true,
            ExactValue::Finite {
                negative,
                significand,
                exponent,
            } => {
                if significand != 0 {
                    self.add_finite(negative, significand, exponent);
                }
            }
        }
    }

    fn add_finite(&mut self, negative: bool, significand: u64, exponent: i32) {
        let limb = exponent.div_euclid(LIMB_BITS);
        let offset = exponent.rem_euclid(LIMB_BITS) as u32;
        self.cover(limb, limb + 2);
        let shifted = u128::from(significand) << offset;
        let base = (limb - self.lowest) as usize;
        for i in 0..3 {
            let chunk = ((shifted >> (32 * i)) & LIMB_MASK) as i64;
            if negative {
                self.limbs[base + i] -= chunk;
            } else {
                self.limbs[base + i] += chunk;
            }
        }
        self.pending += 1;
        if self.pending == ADDS_BETWEEN_CARRIES {
            self.propagate_carries();
        }
    }

    /// Grows the limb array to cover limbs `from..=to` (and one above for carries).
    fn cover(&mut self, from: i32, to: i32) {
        if self.limbs.is_empty() {
            self.lowest = from;
            self.limbs = vec![0; (to - from + 2) as usize];
            return;
        }
        if from < self.lowest {
            let grow = (self.lowest - from) as usize;
            self.limbs.splice(0..0, std::iter::repeat_n(0, grow));
            self.lowest = from;
        }
        let top = self.lowest + self.limbs.len() as i32 - 1;
        if to + 1 > top {
            self.limbs
                .extend(std::iter::repeat_n(0, (to + 1 - top) as usize));
        }
    }

    /// Moves each limb's bits above 32 into the next; the top limb keeps the sign.
    fn propagate_carries(&mut self) {
        for i in 0..self.limbs.len().saturating_sub(1) {
            let carry = self.limbs[i] >> LIMB_BITS;
            self.limbs[i] -= carry << LIMB_BITS;
            self.limbs[i + 1] += carry;
        }
        self.pending = 0;
        if let Some(&top) = self.limbs.last() {
            // Keep the top limb within 32 bits so that the value is read from limbs alone.
            if top >> LIMB_BITS != 0 && top >> LIMB_BITS != -1 {
                self.limbs.push(0);
                self.propagate_carries();
            }
        }
    }

    pub fn finish(mut self) -> SumValue {
        if self.nan || (self.positive_infinity && self.negative_infinity) {
            return SumValue::NaN;
        }
        if self.positive_infinity || self.negative_infinity {
            return SumValue::Infinite {
                negative: self.negative_infinity,
            };
        }
        self.propagate_carries();
        let negative = self.limbs.last().is_some_and(|&top| top < 0);
        if negative {
            for limb in &mut self.limbs {
                *limb = -*limb;
            }
            self.propagate_carries();
        }
        let magnitude = self.magnitude_round_to_odd();
        SumValue::Finite(if negative { -magnitude } else { magnitude })
    }

    /// The magnitude (all limbs now in 0..2^32) as f64, rounded to odd.
    fn magnitude_round_to_odd(&self) -> f64 {
        let Some(top) = self.limbs.iter().rposition(|&limb| limb != 0) else {
            return 0.0;
        };
        // The top three limbs (up to 96 bits) and whether anything below them is nonzero.
        let mut bits: u128 = 0;
        for i in (top.saturating_sub(2)..=top).rev() {
            bits = (bits << LIMB_BITS) | self.limbs[i] as u128;
        }
        let lowest_used = top.saturating_sub(2);
        let mut sticky = self.limbs[..lowest_used].iter().any(|&limb| limb != 0);
        let mut exponent = LIMB_BITS * (lowest_used as i32 + self.lowest);
        // Keep 53 significant bits, folding the rest into the sticky bit, and set the last kept
        // bit when anything was dropped: round to odd.
        let width = 128 - bits.leading_zeros() as i32;
        if width > 53 {
            let drop = width - 53;
            sticky |= bits & ((1u128 << drop) - 1) != 0;
            bits >>= drop;
            exponent += drop;
        }
        let significand = bits as u64 | u64::from(sticky);
        // Exact: a 53-bit integer times a power of two inside f64's normal range.
        significand as f64 * pow2(exponent)
    }
}

/// 2^e for e in -1074..=1023, exactly.
fn pow2(e: i32) -> f64 {
    if e < -1022 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        f64::from_bits(((e + 1023) as u64) << 52)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finite(negative: bool, significand: u64, exponent: i32) -> ExactValue {
        ExactValue::Finite {
            negative,
            significand,
            exponent,
        }
    }

    fn sum(values: &[ExactValue]) -> SumValue {
        let mut wide = WideSum::new();
        for &value in values {
            wide.add(value);
        }
        wide.finish()
    }

    #[test]
    fn cancellation_across_four_hundred_bits_is_exact() {
        let big = finite(false, 3, 200);
        let tiny = finite(false, 5, -200);
        assert_eq!(
            sum(&[big, tiny, finite(true, 3, 200)]),
            SumValue::Finite(5.0 * 2f64.powi(-200))
        );
        assert_eq!(
            sum(&[tiny, finite(true, 3, 200)]),
            // -(3 * 2^200 - 5 * 2^-200): the nearest f64 is -3 * 2^200; round to odd sets the
            // last bit below it in magnitude.
            SumValue::Finite(-(3.0 * 2f64.powi(200)) + 2f64.powi(201 - 52))
        );
        assert_eq!(sum(&[big, finite(true, 3, 200)]), SumValue::Finite(0.0));
    }

    #[test]
    fn round_to_odd_then_f32_is_the_correct_rounding() {
        // 1 + 2^-24 + 2^-300: above the f32 tie, so up; through a round-to-nearest f64 it
        // would be the tie and go to even (1).
        let value = sum(&[
            finite(false, 1, 0),
            finite(false, 1, -24),
            finite(false, 1, -300),
        ]);
        let SumValue::Finite(x) = value else { panic!() };
        assert_eq!(x as f32, 1.0 + 2f32.powi(-23));
    }

    #[test]
    fn special_values_follow_ieee() {
        let inf = ExactValue::Infinite { negative: false };
        let minus_inf = ExactValue::Infinite { negative: true };
        assert_eq!(
            sum(&[inf, finite(true, 1, 0)]),
            SumValue::Infinite { negative: false }
        );
        assert_eq!(sum(&[inf, minus_inf]), SumValue::NaN);
        assert_eq!(sum(&[finite(false, 1, 0), ExactValue::NaN]), SumValue::NaN);
        assert_eq!(sum(&[]), SumValue::Finite(0.0));
    }

    #[test]
    fn agrees_with_integer_arithmetic_on_random_terms() {
        use rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut below = |n: u64| rng.next_u64() % n;
        for _ in 0..2000 {
            let count = below(60) + 1;
            let mut exact: i128 = 0;
            let mut terms = Vec::new();
            for _ in 0..count {
                let significand = below(1 << 40);
                let exponent = below(90) as i32 - 70;
                let negative = below(2) == 1;
                // In units of 2^-70: below 2^(40 + 90) = 2^130 would overflow; keep < 2^126.
                let units = i128::from(significand) << (exponent + 70).min(85);
                if exponent + 70 > 85 {
                    continue;
                }
                exact += if negative { -units } else { units };
                terms.push(finite(negative, significand, exponent));
            }
            let SumValue::Finite(x) = sum(&terms) else {
                panic!()
            };
            // The f64 nearest to the exact integer, within round-to-odd's one ulp.
            let expected = exact as f64 * 2f64.powi(-70);
            let ulp = expected.abs() * 2f64.powi(-52);
            assert!((x - expected).abs() <= ulp, "{x} vs {expected}");
            assert_eq!(x == 0.0, exact == 0);
        }
    }
}
