//! The identification on outputs made by the nearby problems themselves: each is named, in
//! words and by its JSON name, and a wrong problem outside the list is not made up.

use super::*;
use crate::compare::nearby_problems::{IndexMap, KMisread, KRange, NearbyProblem, Operands};
use crate::model::reference::dual_gemm_reference;
use crate::problem::generate::generate_dual_gemm;
use crate::problem::{Distribution, DualGemmInputs};
use half::f16;

fn inputs(m: usize, n: usize, k: usize, l: usize, seed: u64) -> DualGemmInputs {
    generate_dual_gemm(Shape::new(m, n, k, l).unwrap(), Distribution::Gpumode, seed)
}

/// The output a kernel solving `problem` could give: the low end of each of its intervals.
fn output_of(problem: NearbyProblem, inputs: &DualGemmInputs) -> Vec<f16> {
    problem.intervals(inputs, KOrder::Contiguous).unwrap().lo
}

fn identified(runs: &[(&DualGemmInputs, &[f16])]) -> Identification {
    let observations: Vec<Observation> = runs
        .iter()
        .map(|&(inputs, output)| Observation {
            inputs,
            fill: 0,
            output,
            reference: None,
        })
        .collect();
    identify(&observations, KOrder::Contiguous, None).expect("the output is wrong")
}

#[test]
fn scales_of_batch_l_mod_32_are_named_once_a_larger_run_separates_them_from_a_ring() {
    let problem = NearbyProblem::Batches {
        operands: Operands::Scales,
        map: IndexMap::Mod(5),
    };
    let minimal = inputs(1, 1, 16, 33, 3);
    let first = inputs(1, 1, 16, 70, 4);
    let (out_minimal, out_first) = (output_of(problem, &minimal), output_of(problem, &first));
    // At L = 33 alone, batch 0 for l >= 32 is the same problem.
    let alone = identified(&[(&minimal, &out_minimal)]);
    assert!(alone.explains_all);
    assert_eq!(alone.problem, "batches-scales-from-mod-32");
    assert!(alone
        .also_consistent
        .contains(&"batches-scales-from-0-from-32".to_string()));
    let both = identified(&[(&minimal, &out_minimal), (&first, &out_first)]);
    assert_eq!(both.problem, "batches-scales-from-mod-32");
    assert_eq!(both.family, "another-batch");
    assert!(
        both.also_consistent.is_empty(),
        "{:?}",
        both.also_consistent
    );
    let sentence = both.sentence();
    assert!(
        sentence.starts_with(
            "the exact answer with batch l's scale factors (SFA, SFB1, SFB2) taken from batch \
             l mod 32 (all "
        ),
        "{sentence}"
    );
    assert!(sentence.contains("wrong elements explained, at 1x1x16x33 and 1x1x16x70)"));
    assert_eq!(both.runs.len(), 2);
}

/// One operand's pointer for the last batch left at batch 0 (B1 and SFB1; B2 its own): at
/// L = 5 alone the ring of 4 fits as well; a run of 20 batches names the last batch.
#[test]
fn the_last_batchs_b1_from_batch_0_is_named_once_a_longer_run_separates_it_from_a_ring() {
    let problem = NearbyProblem::Batches {
        operands: Operands::B1,
        map: IndexMap::LastFromZero,
    };
    let minimal = inputs(1, 3, 32, 5, 11);
    let longer = inputs(1, 3, 32, 20, 12);
    let (out_minimal, out_longer) = (output_of(problem, &minimal), output_of(problem, &longer));
    let alone = identified(&[(&minimal, &out_minimal)]);
    assert!(alone.explains_all);
    let names: Vec<&str> = std::iter::once(alone.problem.as_str())
        .chain(alone.also_consistent.iter().map(String::as_str))
        .collect();
    assert!(
        names.contains(&"batches-b1-from-0-for-the-last"),
        "{names:?}"
    );
    assert!(names.contains(&"batches-b1-from-0-from-4"), "{names:?}");
    let both = identified(&[(&minimal, &out_minimal), (&longer, &out_longer)]);
    assert_eq!(both.problem, "batches-b1-from-0-for-the-last");
    assert!(
        both.also_consistent.is_empty(),
        "{:?}",
        both.also_consistent
    );
    assert!(
        both.words
            .contains("batch l's B1 and SFB1 taken from batch 0 for the last l"),
        "{}",
        both.words
    );
}

#[test]
fn a_ring_of_four_that_wraps_to_batch_0_for_sfa_only_is_named() {
    let problem = NearbyProblem::Batches {
        operands: Operands::Sfa,
        map: IndexMap::ZeroFrom(4),
    };
    let minimal = inputs(2, 3, 64, 9, 8);
    let out = output_of(problem, &minimal);
    let found = identified(&[(&minimal, &out)]);
    assert_eq!(found.problem, "batches-sfa-from-0-from-4");
    assert!(found
        .words
        .contains("batch l's SFA (A's scale factors) taken from batch 0 for l >= 4"));
}

#[test]
fn columns_past_an_index_that_wraps_read_the_rows_it_wraps_to() {
    let problem = NearbyProblem::Columns {
        scales_only: false,
        map: IndexMap::Mod(9),
    };
    let minimal = inputs(1, 513, 16, 1, 5);
    let out = output_of(problem, &minimal);
    let found = identified(&[(&minimal, &out)]);
    assert_eq!(found.problem, "columns-b-from-mod-512");
    assert!(found
        .words
        .contains("column n's B1 and B2 rows (and their scale factors) taken from row n mod 512"));
}

#[test]
fn a_split_k_half_that_scales_b2_with_sfb1_is_named() {
    let problem = NearbyProblem::KRange {
        misread: KMisread::B2WithSfb1,
        range: KRange::SecondHalf,
    };
    let minimal = inputs(3, 4, 512, 1, 6);
    let out = output_of(problem, &minimal);
    let found = identified(&[(&minimal, &out)]);
    assert_eq!(found.problem, "k-range-b2-with-sfb1-second-half-of-k");
    assert_eq!(found.family, "k-range-scales");
    assert!(found
        .words
        .contains("B2 scaled with SFB1 (B1's scale factors) over the second half of K (k >= 256)"));
}

#[test]
fn a_k_tail_scaled_with_the_previous_chunk_is_named() {
    let problem = NearbyProblem::KRange {
        misread: KMisread::PreviousChunkScales,
        range: KRange::Tail { chunk: 256 },
    };
    let minimal = inputs(2, 2, 272, 1, 7);
    let out = output_of(problem, &minimal);
    let found = identified(&[(&minimal, &out)]);
    assert_eq!(found.problem, "k-range-previous-chunk-scales-k-tail-of-256");
}

#[test]
fn an_fp16_silu_epilogue_is_named() {
    let minimal = inputs(8, 64, 256, 1, 9);
    let out = output_of(NearbyProblem::Fp16Silu, &minimal);
    let found = identified(&[(&minimal, &out)]);
    assert_eq!(found.problem, "fp16-silu-epilogue");
    assert_eq!(found.family, "fp16-epilogue");
}

#[test]
fn the_last_partial_row_tile_left_as_poison_is_named() {
    let minimal = inputs(130, 2, 16, 1, 10);
    let reference = dual_gemm_reference(&minimal, KOrder::Contiguous);
    let mut out = reference.expected.clone();
    out[128 * 2..].fill(POISON);
    let found = identified(&[(&minimal, &out)]);
    assert_eq!(found.family, "never-written");
    assert!(
        found.words.contains(
            "the exact answer wherever it wrote; rows m 128 to 129, every column (row tile 1, \
             the last and partial one) never written (still the poison"
        ),
        "{}",
        found.words
    );
}

#[test]
fn an_output_no_nearby_problem_gives_is_not_named_but_its_nearest_is_said() {
    let minimal = inputs(2, 3, 32, 2, 11);
    let reference = dual_gemm_reference(&minimal, KOrder::Contiguous);
    let mut out = reference.expected.clone();
    out[0] = f16::from_f32(1234.0);
    let found = identified(&[(&minimal, &out)]);
    assert!(!found.explains_all);
    assert_eq!(found.family, "none");
    assert!(found
        .sentence()
        .starts_with("no known bug class explains all of it; the nearest: "));
    assert!(
        found.sentence().contains("of 1 wrong element explained"),
        "{}",
        found.sentence()
    );
}

#[test]
fn a_right_output_is_not_identified() {
    let minimal = inputs(2, 3, 32, 2, 12);
    let reference = dual_gemm_reference(&minimal, KOrder::Contiguous);
    let observation = Observation {
        inputs: &minimal,
        fill: 0,
        output: &reference.expected,
        reference: None,
    };
    assert_eq!(identify(&[observation], KOrder::Contiguous, None), None);
}

/// A run too large to compute a nearby problem whole is still evidence, on a sample of its
/// elements that holds its wrong ones: a larger run the problem explains confirms it, one it
/// does not (another element wrong there) is counted against it.
#[test]
fn a_run_too_large_for_a_whole_nearby_problem_counts_on_its_sample() {
    let problem = NearbyProblem::Columns {
        scales_only: false,
        map: IndexMap::Mod(9),
    };
    let minimal = inputs(1, 513, 16, 1, 13);
    // 2 x 1024 x 4096 x 9 products: past what one nearby problem may cost whole (2^26).
    let large = inputs(1, 1024, 4096, 9, 14);
    let out_minimal = output_of(problem, &minimal);
    let out_large = output_of(problem, &large);
    let found = identified(&[(&minimal, &out_minimal), (&large, &out_large)]);
    assert!(found.explains_all, "{}", found.sentence());
    assert_eq!(found.problem, "columns-b-from-mod-512");
    assert_eq!(found.runs, vec![minimal.shape, large.shape]);
    assert_eq!(found.sampled, vec![large.shape]);
    // Another element wrong on the large run, in a column the problem leaves alone.
    let mut out_other = dual_gemm_reference(&large, KOrder::Contiguous).expected;
    out_other[3] = f16::from_f32(-777.0);
    let found = identified(&[(&minimal, &out_minimal), (&large, &out_other)]);
    assert!(!found.explains_all, "{}", found.sentence());
}

/// A run too large to compute each nearby problem whole (1 x 512 x 1024 x 65: an expert table
/// of 64 for SFA) is judged on a sample of its elements, and the problem still named, the
/// sentence saying the run was sampled.
#[test]
fn a_run_too_large_for_whole_nearby_problems_is_named_on_a_sample() {
    let problem = NearbyProblem::Batches {
        operands: Operands::Sfa,
        map: IndexMap::Mod(6),
    };
    let run = inputs(1, 512, 1024, 65, 31);
    let out = output_of(problem, &run);
    let found = identified(&[(&run, &out)]);
    assert!(found.explains_all, "{}", found.sentence());
    let names: Vec<&str> = std::iter::once(found.problem.as_str())
        .chain(found.also_consistent.iter().map(String::as_str))
        .collect();
    assert!(names.contains(&"batches-sfa-from-mod-64"), "{names:?}");
    assert!(!names.contains(&"batches-sfa-from-mod-32"), "{names:?}");
    assert_eq!(found.sampled, vec![run.shape]);
    assert!(found.wrong_elements > 0 && found.wrong_elements < 512);
    assert!(
        found
            .sentence()
            .contains("1x512x1024x65: sampled rows, columns and batches"),
        "{}",
        found.sentence()
    );
}

/// One scale tensor alone from another batch (SFB2 from batch l mod 4, B2's data its own).
#[test]
fn sfb2_alone_from_batch_l_mod_4_is_named() {
    let problem = NearbyProblem::Batches {
        operands: Operands::Sfb2,
        map: IndexMap::Mod(2),
    };
    let (minimal, longer) = (inputs(2, 3, 32, 5, 41), inputs(2, 3, 32, 20, 42));
    let (out_minimal, out_longer) = (output_of(problem, &minimal), output_of(problem, &longer));
    let found = identified(&[(&minimal, &out_minimal), (&longer, &out_longer)]);
    assert_eq!(found.problem, "batches-sfb2-from-mod-4");
    assert!(found
        .words
        .contains("batch l's SFB2 (B2's scale factors) taken from batch l mod 4"));
}

/// The caller's reference of a run (the GPU's, past the CPU model's budget) is the one the
/// output is judged against: the model does not compute its own.
#[test]
fn the_callers_reference_of_a_run_is_used() {
    let problem = NearbyProblem::Fp16Silu;
    let run = inputs(3, 5, 32, 1, 51);
    let out = output_of(problem, &run);
    let own = identified(&[(&run, &out)]);
    assert_eq!(own.problem, "fp16-silu-epilogue");
    // A reference that holds the output itself: nothing is wrong against it.
    let fake = crate::model::Reference {
        expected: out.clone(),
        lo: out.clone(),
        hi: out.clone(),
    };
    let observation = Observation {
        inputs: &run,
        fill: 0,
        output: &out,
        reference: Some(&fake),
    };
    assert_eq!(identify(&[observation], KOrder::Contiguous, None), None);
}
