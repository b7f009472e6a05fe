//! What one judged case showed for a campaign's coverage tallies (`coverage.rs`): the FP4 codes
//! and scale exponents its inputs hold, NaN scales, and a passing output's worst distance from
//! the expected value on tight intervals.

use half::f16;
use nvfp4_model::model::bounds::fp16_position;
use nvfp4_model::model::Reference;
use nvfp4_model::problem::ProblemInputs;
use rayon::prelude::*;

/// Interval width (ulps) below which an element counts as tight for the worst-error figure.
pub const TIGHT_ULPS: u32 = 2;

/// What one case's inputs and output showed for the coverage tallies, found where the case is
/// judged (beside the next case's kernel run, off the thread that runs it: a deployment case's
/// inputs and output are gigabytes, and that thread waited for rayon's threads, busy making the
/// next case's inputs, between two cases) and added up by [`super::coverage::Coverage::record`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ValuesSeen {
    /// Bit c: FP4 code c appears in some operand's data.
    pub fp4_codes: u16,
    /// Bit e: some scale's exponent field is e (NaN scales aside).
    pub scale_exponents: u16,
    pub nan_scales: bool,
    /// A passing output's largest distance (fp16 ulps) from the expected value on elements
    /// whose interval is at most [`TIGHT_ULPS`] wide; 0 for a failing one.
    pub worst_tight_ulps: u32,
}

/// [`ValuesSeen`] of a judged case, scanned on every core. Why each scan is written for speed:
/// a deployment case's inputs and output are gigabytes, and a campaign's range class scans
/// tens of them; written as filters over indices, the scans took longer than the kernel's runs
/// (about 24 s of a torch campaign's 100 s range class on the H200).
pub(crate) fn values_seen(
    inputs: &ProblemInputs,
    output: &[f16],
    reference: &Reference,
    passed: bool,
) -> ValuesSeen {
    let mut seen = inputs_seen(inputs);
    if passed {
        seen.worst_tight_ulps = output
            .par_chunks(CHUNK)
            .zip(reference.expected.par_chunks(CHUNK))
            .zip(
                reference
                    .lo
                    .par_chunks(CHUNK)
                    .zip(reference.hi.par_chunks(CHUNK)),
            )
            .map(|((output, expected), (lo, hi))| worst_tight(output, expected, lo, hi))
            .max()
            .unwrap_or(0);
    }
    seen
}

/// What `inputs` showed ([`ValuesSeen`] with `worst_tight_ulps` 0): for an output judged where
/// its reference was, on the GPU, which gave the worst distance on tight intervals itself.
pub(crate) fn inputs_seen(inputs: &ProblemInputs) -> ValuesSeen {
    let mut seen = ValuesSeen::default();
    for (_, operand) in inputs.operands() {
        seen.fp4_codes |= fp4_codes(operand.data());
        let scales = bytes_present(operand.scales());
        for (byte, _) in scales.iter().enumerate().filter(|(_, &present)| present) {
            if byte & 0x7F == 0x7F {
                seen.nan_scales = true;
            } else {
                seen.scale_exponents |= 1 << ((byte >> 3) & 0xF);
            }
        }
    }
    seen
}

/// Elements or bytes one task scans.
const CHUNK: usize = 1 << 16;

/// Which byte values `bytes` holds, scanned on every core.
fn bytes_present(bytes: &[u8]) -> [bool; 256] {
    bytes
        .par_chunks(CHUNK)
        .map(|chunk| {
            let mut present = [false; 256];
            for &byte in chunk {
                present[usize::from(byte)] = true;
            }
            present
        })
        .reduce(
            || [false; 256],
            |x, y| std::array::from_fn(|i| x[i] || y[i]),
        )
}

/// The FP4 codes (both nibbles of each byte) packed data holds: from its start until all
/// sixteen are seen (random data shows them in its first bytes), the rest on every core only
/// where some code has not shown up in the first megabyte.
fn fp4_codes(data: &[u8]) -> u16 {
    let codes = |present: &[bool; 256]| {
        (0..256usize)
            .filter(|&byte| present[byte])
            .fold(0u16, |seen, byte| {
                seen | 1 << (byte & 0xF) | 1 << (byte >> 4)
            })
    };
    let head = data.len().min(1 << 20);
    let mut seen = 0u16;
    for chunk in data[..head].chunks(4096) {
        let mut present = [false; 256];
        for &byte in chunk {
            present[usize::from(byte)] = true;
        }
        seen |= codes(&present);
        if seen == 0xFFFF {
            return seen;
        }
    }
    seen | codes(&bytes_present(&data[head..]))
}

/// The largest distance (fp16 ulps) of `output` from `expected` over the elements whose
/// interval `[lo, hi]` is at most [`TIGHT_ULPS`] wide (NaN bounds or values count nothing):
/// what filtering with `width_ulps` and `fp16_ordinal` gives, without their `Option`s so that
/// it vectorizes.
fn worst_tight(output: &[f16], expected: &[f16], lo: &[f16], hi: &[f16]) -> u32 {
    output
        .iter()
        .zip(expected)
        .zip(lo.iter().zip(hi))
        .map(|((&out, &exp), (&lo, &hi))| {
            let ((out, out_nan), (exp, exp_nan)) = (fp16_position(out), fp16_position(exp));
            let ((lo, lo_nan), (hi, hi_nan)) = (fp16_position(lo), fp16_position(hi));
            let tight = !(lo_nan | hi_nan | out_nan | exp_nan)
                & ((hi.wrapping_sub(lo)) as u32 <= TIGHT_ULPS);
            if tight {
                out.abs_diff(exp)
            } else {
                0
            }
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::model::bounds::{width_ulps, KOrder};
    use nvfp4_model::model::problem_reference;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind, Shape};

    /// The branch-free scan gives what the model's `width_ulps` and `fp16_ordinal` give, on
    /// every kind of fp16 value: zeros of both signs, subnormals, infinities, NaNs.
    #[test]
    fn the_worst_tight_distance_is_the_models() {
        use nvfp4_model::model::bounds::fp16_ordinal;
        let specials = [
            0x0000u16, 0x8000, 0x0001, 0x8001, 0x03FF, 0x3C00, 0x3C01, 0x3C02, 0x3C03, 0xBC00,
            0xBC01, 0x7BFF, 0x7C00, 0xFC00, 0x7C01, 0x7E00, 0xFE00, 0xFFFF, 0x8002, 0x0002,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let pick = state as usize;
            f16::from_bits(if pick & 1 == 0 {
                specials[(pick >> 1) % specials.len()]
            } else {
                specials[(pick >> 1) % specials.len()].wrapping_add((pick >> 8) as u16 % 3)
            })
        };
        let n = 100_000;
        let column = |next: &mut dyn FnMut() -> f16| (0..n).map(|_| next()).collect::<Vec<_>>();
        let (output, expected, lo, hi) = (
            column(&mut next),
            column(&mut next),
            column(&mut next),
            column(&mut next),
        );
        let model = (0..n)
            .filter(|&i| width_ulps(lo[i], hi[i]).is_some_and(|w| w <= TIGHT_ULPS))
            .filter_map(|i| {
                Some((fp16_ordinal(output[i])? - fp16_ordinal(expected[i])?).unsigned_abs())
            })
            .max()
            .unwrap_or(0);
        assert!(model > 0, "some tight element is off");
        assert_eq!(worst_tight(&output, &expected, &lo, &hi), model);
    }

    /// Codes seen in the first bytes, and one seen only past the first megabyte.
    #[test]
    fn fp4_codes_past_the_first_megabyte_are_seen() {
        let mut data = vec![0x21u8; 3 << 20];
        assert_eq!(fp4_codes(&data), 0b110);
        *data.last_mut().unwrap() = 0xF0;
        assert_eq!(fp4_codes(&data), 0b1000_0000_0000_0111);
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(fp4_codes(&all), 0xFFFF);
    }

    /// Every code and a NaN scale of an adversarial case are seen; an output one fp16 step from
    /// the expected value on a tight element counts 1 ulp when it passed, nothing when it failed.
    #[test]
    fn a_cases_codes_scales_and_worst_distance_are_seen() {
        let shape = Shape::new(64, 48, 256, 1).unwrap();
        let inputs = generate_problem(
            ProblemKind::DualGemm,
            shape,
            Distribution::AdversarialNan,
            7,
        );
        let reference = problem_reference(&inputs, KOrder::Contiguous);
        let exact = values_seen(&inputs, &reference.expected, &reference, true);
        assert_eq!(exact.fp4_codes, 0xFFFF);
        assert!(exact.nan_scales && exact.scale_exponents != 0);
        assert_eq!(exact.worst_tight_ulps, 0);
        let tight = (0..reference.len())
            .find(|&i| {
                width_ulps(reference.lo[i], reference.hi[i]).is_some_and(|w| w <= TIGHT_ULPS)
                    && reference.expected[i].is_finite()
                    && reference.expected[i] != half::f16::ZERO
            })
            .expect("a tight, finite, nonzero element");
        let mut output = reference.expected.clone();
        output[tight] = f16::from_bits(output[tight].to_bits() + 1);
        assert_eq!(
            values_seen(&inputs, &output, &reference, true).worst_tight_ulps,
            1
        );
        assert_eq!(
            values_seen(&inputs, &output, &reference, false).worst_tight_ulps,
            0
        );
    }
}
