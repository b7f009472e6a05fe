//! What one judged case showed for a campaign's coverage tallies (`coverage.rs`): the FP4 codes
//! and scale exponents its inputs hold, NaN scales, and a passing output's worst distance from
//! the expected value on tight intervals.

use half::f16;
use nvfp4_model::model::bounds::fp16_ordinal;
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

/// [`ValuesSeen`] of a judged case, scanned on every core.
pub(crate) fn values_seen(
    inputs: &ProblemInputs,
    output: &[f16],
    reference: &Reference,
    passed: bool,
) -> ValuesSeen {
    let mut seen = ValuesSeen::default();
    for (_, operand) in inputs.operands() {
        seen.fp4_codes |= operand
            .data()
            .par_chunks(1 << 16)
            .map(|chunk| {
                chunk.iter().fold(0u16, |seen, &byte| {
                    seen | 1 << (byte & 0xF) | 1 << (byte >> 4)
                })
            })
            .reduce(|| 0, |x, y| x | y);
        let (nan, exponents) = operand
            .scales()
            .par_chunks(1 << 16)
            .map(|chunk| {
                chunk.iter().fold((false, 0u16), |(nan, seen), &scale| {
                    if scale & 0x7F == 0x7F {
                        (true, seen)
                    } else {
                        (nan, seen | 1 << ((scale >> 3) & 0xF))
                    }
                })
            })
            .reduce(|| (false, 0), |x, y| (x.0 || y.0, x.1 | y.1));
        seen.nan_scales |= nan;
        seen.scale_exponents |= exponents;
    }
    if passed {
        seen.worst_tight_ulps = (0..output.len())
            .into_par_iter()
            .filter(|&i| {
                nvfp4_model::model::bounds::width_ulps(reference.lo[i], reference.hi[i])
                    .is_some_and(|w| w <= TIGHT_ULPS)
            })
            .filter_map(|i| {
                Some(
                    (fp16_ordinal(output[i])? - fp16_ordinal(reference.expected[i])?)
                        .unsigned_abs(),
                )
            })
            .max()
            .unwrap_or(0);
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::model::bounds::{width_ulps, KOrder};
    use nvfp4_model::model::problem_reference;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind, Shape};

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
