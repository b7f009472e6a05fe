//! Exact dot products of block-scaled NVFP4 rows.
//!
//! Every term a * sa * b * sb is a dyadic rational: e2m1 values are (half units) / 2, e4m3 scales
//! are `sig * 2^e` with `sig <= 15` and `e >= -9`, so each term is an integer times 2^-20
//! ([`FIXED_POINT_EXPONENT`]). A 16-element block's products sum to a small integer (at most
//! 16 * 144 in magnitude), which is multiplied by the two scales' significands and shifted left by
//! their exponents: an integer below 2^50. Summing any K of those in an i128 is exact.
//!
//! The block dot product is written over fixed-size arrays of i8 so that the compiler vectorises
//! it; that is where the time goes.

use super::portable_math::pow2;
use crate::formats::{E2m1, E4m3};
use crate::problem::{BlockScaledMatrix, SCALE_BLOCK};

/// Value of one unit of the fixed-point accumulator: 2^-20.
pub const FIXED_POINT_EXPONENT: i32 = -20;

/// The exact dot product of two block-scaled rows, with the magnitudes the error bounds need.
/// All integers are in units of 2^-20.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExactDot {
    /// The exact sum.
    pub sum: i128,
    /// Largest and smallest prefix sum over the 16-blocks in K order (the empty prefix, 0,
    /// included): every contiguous run of blocks sums to a difference of two prefixes.
    pub prefix_max: i128,
    pub prefix_min: i128,
    /// Sum of the positive 16-block sums (each block sum exact, scaled).
    pub positive_blocks: i128,
    /// Sum of the magnitudes of the negative 16-block sums.
    pub negative_blocks: i128,
    /// Sum of |term| over every individual product.
    pub abs_terms: i128,
    /// The largest sum of |term| over the products of one 16-block: a partial sum inside a
    /// block differs from the block's prefix by at most this (the per-product bound's runs).
    pub max_block_abs: i128,
    /// A NaN scale took part: the tensor cores give NaN, whatever the data.
    pub nan: bool,
    /// Blocks whose term is zero, and the largest `Z` among them, `Z` the sum of their two scales'
    /// alignment exponents ([`scale_alignment`]): Blackwell's block-scaled adder (as MMA-Sim
    /// models it) aligns a block at `Z` whatever its value, so a zero block can raise the step's
    /// maximum above every operand and cut the accumulator (docs/reference/numerics.md, section 10). The
    /// bound needs every block below 2^(Z - 10) (above it the cut is under 2^-25 of the block);
    /// with UE4M3 scales those are exactly the zero ones: a nonzero block is at least
    /// 1/4 * 2^(Za - 3) * 2^(Zb - 3) = 2^(Z - 8) (a subnormal scale, aligned at -6, is at least
    /// 2^-9). A NaN block counts as a zero one of zero scale.
    pub raised_blocks: u32,
    pub raised_alignment: i32,
}

/// The alignment exponent MMA-Sim's Blackwell adder gives a UE4M3 scale `S` (the integer
/// `sig << (e + 9)`, units of 2^-9): floor(log2) of its value, -6 for a subnormal, -126 for zero.
#[inline(always)]
pub fn scale_alignment(s: i64) -> i32 {
    if s == 0 {
        -126
    } else {
        (63 - s.leading_zeros() as i32 - 9).max(-6)
    }
}

impl ExactDot {
    /// Records one block that raises the maximum (see [`ExactDot::raised_blocks`]).
    #[inline(always)]
    pub fn raise(&mut self, z: i32) {
        self.raised_alignment = if self.raised_blocks == 0 {
            z
        } else {
            self.raised_alignment.max(z)
        };
        self.raised_blocks += 1;
    }

    /// The largest magnitude that a sum of any subset of 16-blocks can have.
    pub fn max_subset_sum(&self) -> i128 {
        self.positive_blocks.max(self.negative_blocks)
    }

    /// The largest magnitude that a sum of a contiguous run of 16-blocks can have.
    pub fn max_run_sum(&self) -> i128 {
        self.prefix_max - self.prefix_min
    }
}

/// One operand row prepared for fast exact dots: values as half units, scales split into
/// significand and exponent.
#[derive(Debug, Clone)]
pub struct PreparedRow {
    half_units: Vec<[i8; SCALE_BLOCK]>,
    scales: Vec<ScaleParts>,
}

#[derive(Debug, Clone, Copy)]
struct ScaleParts {
    significand: i64,
    /// Exponent + 9, so never negative; `u8::MAX` marks NaN. A term's value is
    /// `(half_a * half_b / 4) * sig_a * sig_b * 2^(e_a + e_b)`, which in units of 2^-20 is the
    /// integer `half_a * half_b * sig_a * sig_b << ((e_a + 9) + (e_b + 9))`.
    exponent: u8,
}

const NAN_EXPONENT: u8 = u8::MAX;

impl ScaleParts {
    /// `S`, the scale in units of 2^-9 (0 for NaN, as the grid stores it).
    fn integer(self) -> i64 {
        if self.exponent == NAN_EXPONENT {
            0
        } else {
            self.significand << self.exponent
        }
    }
}

impl PreparedRow {
    pub fn new(packed: &[u8], scales: &[u8]) -> Self {
        let half_units = packed
            .chunks_exact(SCALE_BLOCK / 2)
            .map(|block| {
                let mut out = [0i8; SCALE_BLOCK];
                for (i, &byte) in block.iter().enumerate() {
                    out[2 * i] = E2m1::from_bits(byte & 0xF).to_half_units() as i8;
                    out[2 * i + 1] = E2m1::from_bits(byte >> 4).to_half_units() as i8;
                }
                out
            })
            .collect();
        let scales = scales
            .iter()
            .map(|&bits| match E4m3::from_bits(bits).unsigned_scale_parts() {
                Some((significand, exponent)) => ScaleParts {
                    significand: i64::from(significand),
                    exponent: (exponent + 9) as u8,
                },
                None => ScaleParts {
                    significand: 0,
                    exponent: NAN_EXPONENT,
                },
            })
            .collect();
        PreparedRow { half_units, scales }
    }

    /// Every row of one batch of an operand.
    pub fn all_rows(operand: &BlockScaledMatrix, batch: usize) -> Vec<PreparedRow> {
        (0..operand.rows())
            .map(|row| {
                PreparedRow::new(operand.row_data(row, batch), operand.row_scales(row, batch))
            })
            .collect()
    }
}

/// Sum and sum of magnitudes of the 16 products of one block, in quarter units.
#[inline(always)]
fn block_dot(a: &[i8; SCALE_BLOCK], b: &[i8; SCALE_BLOCK]) -> (i32, i32) {
    let mut sum = 0i32;
    let mut abs = 0i32;
    for i in 0..SCALE_BLOCK {
        let product = i32::from(a[i]) * i32::from(b[i]);
        sum += product;
        abs += product.abs();
    }
    (sum, abs)
}

/// The exact dot product of two prepared rows of the same K.
pub fn exact_dot(a: &PreparedRow, b: &PreparedRow) -> ExactDot {
    debug_assert_eq!(a.half_units.len(), b.half_units.len());
    let mut out = ExactDot::default();
    for j in 0..a.half_units.len() {
        let (sa, sb) = (a.scales[j], b.scales[j]);
        let z = scale_alignment(sa.integer()) + scale_alignment(sb.integer());
        if sa.exponent == NAN_EXPONENT || sb.exponent == NAN_EXPONENT {
            out.nan = true;
            out.raise(z);
            continue;
        }
        let (sum, abs) = block_dot(&a.half_units[j], &b.half_units[j]);
        let significand = sa.significand * sb.significand;
        let shift = u32::from(sa.exponent) + u32::from(sb.exponent);
        let term = (i64::from(sum) * significand) << shift;
        if term == 0 {
            out.raise(z);
        }
        let block = i128::from(term);
        out.sum += block;
        out.prefix_max = out.prefix_max.max(out.sum);
        out.prefix_min = out.prefix_min.min(out.sum);
        if block > 0 {
            out.positive_blocks += block;
        } else {
            out.negative_blocks -= block;
        }
        let block_abs = i128::from((i64::from(abs) * significand) << shift);
        out.abs_terms += block_abs;
        out.max_block_abs = out.max_block_abs.max(block_abs);
    }
    out
}

/// `n * 2^exponent` rounded to the nearest f32, ties to even. Overflow gives +-inf.
pub fn fixed_to_f32_rne(n: i128, exponent: i32) -> f32 {
    let negative = n < 0;
    let magnitude = n.unsigned_abs();
    let rounded = if magnitude == 0 {
        0.0
    } else {
        let top_bit = 127 - magnitude.leading_zeros() as i32; // magnitude in [2^top, 2^(top+1))
        let value_exponent = top_bit + exponent;
        // f32 keeps 24 significant bits; below 2^-126 the quantum is fixed at 2^-149.
        let quantum_exponent = (value_exponent - 23).max(-149);
        let shift = quantum_exponent - exponent;
        let quanta = if shift <= 0 {
            magnitude << (-shift) as u32
        } else {
            let kept = magnitude >> shift as u32;
            let remainder = magnitude - (kept << shift as u32);
            let half = 1u128 << (shift - 1) as u32;
            if remainder > half || (remainder == half && kept & 1 == 1) {
                kept + 1
            } else {
                kept
            }
        };
        // quanta <= 2^24 and 2^-149 is a normal f64, so this product is exact.
        let value = quanta as f64 * pow2(quantum_exponent);
        if value >= f64::from(f32::MAX) * (1.0 + f64::EPSILON) {
            f32::INFINITY
        } else {
            value as f32
        }
    };
    if negative {
        -rounded
    } else {
        rounded
    }
}

/// `n * 2^exponent` as f64 (rounded to nearest; exact below 2^53 units). Used for error bounds,
/// which carry their own margin for this rounding.
pub fn fixed_to_f64(n: i128, exponent: i32) -> f64 {
    n as f64 * pow2(exponent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_rounding_to_f32() {
        assert_eq!(fixed_to_f32_rne(1, -20), 2f32.powi(-20));
        assert_eq!(fixed_to_f32_rne(-3, 0), -3.0);
        // 2^24 + 1 is a tie between 2^24 and 2^24 + 2: even wins.
        assert_eq!(fixed_to_f32_rne((1 << 24) + 1, 0), 16_777_216.0);
        assert_eq!(fixed_to_f32_rne((1 << 24) + 3, 0), 16_777_220.0);
        assert_eq!(fixed_to_f32_rne(0, -20), 0.0);
        assert_eq!(fixed_to_f32_rne(1, 200), f32::INFINITY);
    }

    #[test]
    fn one_block_by_hand() {
        // a = [6, 0.5, 0...], scale 2; b = [-1, 1.5, 0...], scale 0.5  =>  (-6 + 0.75) * 1 = -5.25
        let a = PreparedRow::new(&[0x17, 0, 0, 0, 0, 0, 0, 0], &[0x40]);
        let b = PreparedRow::new(&[0x3A, 0, 0, 0, 0, 0, 0, 0], &[0x30]);
        let dot = exact_dot(&a, &b);
        assert_eq!(fixed_to_f32_rne(dot.sum, FIXED_POINT_EXPONENT), -5.25);
        assert_eq!(fixed_to_f64(dot.abs_terms, FIXED_POINT_EXPONENT), 6.75);
        assert_eq!(dot.negative_blocks, -dot.sum);
        assert_eq!((dot.prefix_min, dot.prefix_max), (dot.sum, 0));
        assert_eq!(dot.max_run_sum(), dot.max_subset_sum());
        assert!(!dot.nan);
    }

    #[test]
    fn nan_scale_poisons_even_zero_data() {
        let a = PreparedRow::new(&[0; 8], &[0x7F]);
        let b = PreparedRow::new(&[0; 8], &[0x38]);
        assert!(exact_dot(&a, &b).nan);
    }
}
