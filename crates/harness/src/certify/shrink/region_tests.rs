//! The failing region of kernels wrong in known regions: the words, and the JSON's fields.

use super::*;
use crate::kernels::cpu::CpuKernel;
use crate::kernels::{KernelCase, KernelFailure};
use half::f16;
use nvfp4_model::problem::{Distribution, Shape};
use std::time::Duration;

/// Correct (the CPU kernel) except where `wrong(shape)`.
struct WrongWhere {
    correct: CpuKernel,
    wrong: fn(Shape) -> bool,
}

impl KernelUnderTest for WrongWhere {
    fn name(&self) -> &str {
        "wrong-where"
    }
    fn description(&self) -> String {
        "a large constant where its predicate holds".into()
    }
    fn is_deliberately_broken(&self) -> bool {
        true
    }
    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        if (self.wrong)(case.shape()) {
            output.fill(f16::from_f32(1000.0));
            return Ok(());
        }
        self.correct.run(case, output)
    }
}

fn region_of(wrong: fn(Shape) -> bool, minimal: Shape, bound: Duration) -> Region {
    let kernel = WrongWhere {
        correct: CpuKernel::correct(),
        wrong,
    };
    let spec = CaseSpec {
        shape: minimal,
        dist: Distribution::Gpumode,
        seed: 3,
    };
    let fails = |o: &CaseOutcome| o.failed();
    failing_region(
        &kernel,
        spec,
        KOrder::Contiguous,
        None,
        &fails,
        Instant::now() + bound,
    )
}

const FAR: Duration = Duration::from_secs(600);

fn dimension<'a>(region: &'a Region, name: &str) -> &'a DimensionBoundary {
    region
        .dimensions
        .iter()
        .find(|b| b.dimension == name)
        .unwrap()
}

#[test]
fn an_expert_table_of_32_fails_from_l_33_whatever_m_n_k() {
    let region = region_of(|s| s.l >= 33, Shape::new(1, 1, 16, 33).unwrap(), FAR);
    assert_eq!(
        region.words,
        "fails when L >= 33 (passes at L = 32; also fails at L = 34, 66), whatever M, N, K \
         (checked at M = 130, N = 130, K = 272, each with the others kept)"
    );
    assert_eq!(
        region.needs.as_deref(),
        Some("needs L >= 33 (each reset to its smallest value, the others kept, passes)")
    );
    let l = dimension(&region, "L");
    assert_eq!(l.kind, BoundaryKind::Threshold);
    assert_eq!(l.passes_below, Some(32));
    assert_eq!(l.needed, Some(true));
    assert_eq!(dimension(&region, "M").kind, BoundaryKind::Any);
    assert!(region.finished);
    let json = serde_json::to_value(&region).unwrap();
    assert_eq!(json["dimensions"][3]["kind"], "threshold");
    assert_eq!(json["dimensions"][3]["passes_below"], 32);
    assert_eq!(json["dimensions"][0]["kind"], "any");
}

#[test]
fn a_conjunction_of_two_thresholds_needs_both() {
    let region = region_of(
        |s| s.l >= 5 && s.k >= 2048,
        Shape::new(1, 1, 2048, 5).unwrap(),
        FAR,
    );
    assert_eq!(
        region.needs.as_deref(),
        Some("needs K >= 2048 and L >= 5 (each reset to its smallest value, the others kept, passes)")
    );
    assert!(
        region.words.starts_with(
            "fails when K >= 2048 (passes at K = 2032; also fails at K = 2064, 2304, 2320) and L >= 5 \
             (passes at L = 4; also fails at L = 6, 10), whatever M, N (checked at M = 130, \
             N = 130, each with the others kept)"
        ),
        "{}",
        region.words
    );
}

#[test]
fn a_region_that_is_not_an_interval_is_not_called_a_threshold() {
    let region = region_of(
        |s| s.n % 16 == 8 && s.n > 100,
        Shape::new(1, 104, 16, 1).unwrap(),
        FAR,
    );
    let n = dimension(&region, "N");
    assert_eq!(n.kind, BoundaryKind::NotAnInterval);
    assert_eq!(n.passes_below, Some(103));
    assert!(
        region.words.contains(
            "N = 104 but not every N above it: not an interval (passes at N = 103, 105, 128, 129)"
        ),
        "{}",
        region.words
    );
    assert_eq!(
        region.needs.as_deref(),
        Some("needs N = 104 (each reset to its smallest value, the others kept, passes)")
    );
}

#[test]
fn a_bug_at_the_smallest_m_only_is_not_called_whatever_m() {
    let region = region_of(|s| s.m % 128 == 1, Shape::new(1, 1, 16, 1).unwrap(), FAR);
    assert_eq!(dimension(&region, "M").kind, BoundaryKind::OnlySmall);
    assert!(
        region
            .words
            .starts_with("fails when M = 1 (passes at M = 130), whatever N, K, L"),
        "{}",
        region.words
    );
}

#[test]
fn a_region_out_of_time_states_nothing_it_did_not_check() {
    let region = region_of(
        |s| s.l >= 33,
        Shape::new(1, 1, 16, 33).unwrap(),
        Duration::ZERO,
    );
    assert!(!region.finished);
    assert_eq!(region.runs, 0);
    assert!(region
        .dimensions
        .iter()
        .all(|b| b.kind == BoundaryKind::Unresolved && b.needed.is_none()));
    assert!(!region.words.contains(">="), "{}", region.words);
    assert_eq!(region.needs, None);
}

/// A K tail bug fails past 256 except at multiples of 256: the boundary checked above the
/// minimal case is what keeps it from being called "K >= 272".
#[test]
fn a_k_tail_bug_is_not_called_a_threshold_because_the_next_chunk_boundary_passes() {
    let region = region_of(
        |s| s.k > 256 && s.k % 256 != 0,
        Shape::new(1, 1, 272, 1).unwrap(),
        FAR,
    );
    let k = dimension(&region, "K");
    assert_eq!(k.kind, BoundaryKind::NotAnInterval);
    assert!(
        region.words.starts_with(
            "fails when K = 272 but not every K above it: not an interval (passes at K = 256, \
             512; fails at K = 288, 528 too), whatever M, N, L"
        ),
        "{}",
        region.words
    );
}
