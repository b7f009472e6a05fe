//! A minimal failing case explained: judged on every element (a failure's repro and diagnosis
//! must describe all of it), then, for a wrong dual-GEMM output, held against the model's
//! catalogue of known bugs (`compare::diagnosis`) with a few larger runs that separate
//! look-alike bug classes.

use super::cases::{run_case, CaseOutcome, CaseSpec};
use super::fixed_cases::round_up;
use super::reference_engine;
use super::sampling::{shape_products, FULL_REFERENCE_PRODUCTS};
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::compare::diagnosis::{diagnose, Diagnosis, Observation};
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::{Distribution, Shape};
use std::time::Instant;

/// `minimal` judged whole, its diagnosis, and the larger runs that failed: from the minimal
/// case plus larger runs (the `first` failing case, and a 192x160x784 case in the failing and
/// in the gpumode distribution), of which the runs that fail count. No diagnosis for a crash or
/// a hang, for another problem than the dual GEMM (the catalogue is the dual GEMM's), past the
/// size the CPU model judges whole (the catalogue computes a dozen wrong problems in full on
/// the CPU: a bug that needs 2^30 outputs stays that large), and once `deadline` has passed
/// (the failure's time bound).
pub(super) fn diagnosed(
    kernel: &dyn KernelUnderTest,
    minimal: CaseOutcome,
    first: CaseSpec,
    order: KOrder,
    deadline: Instant,
) -> (CaseOutcome, Option<Diagnosis>, Vec<CaseOutcome>) {
    // Judging whole changes neither the spec, nor whether the kernel gave an output.
    let diagnosable = minimal.result.is_ok()
        && minimal.case.dual().is_some()
        && shape_products(minimal.spec.shape, 2) <= FULL_REFERENCE_PRODUCTS
        && Instant::now() < deadline;
    let separating = if diagnosable {
        separating_cases(kernel.support(), minimal.spec, first)
    } else {
        Vec::new()
    };
    let minimal = judged_whole(minimal, order);
    if !diagnosable {
        return (minimal, None, Vec::new());
    }
    let extra: Vec<CaseOutcome> = separating
        .into_iter()
        .take_while(|_| Instant::now() < deadline)
        .map(|spec| run_case(kernel, spec, order, None))
        // A run the kernel gets right is no evidence for any class (a bug that shows only at
        // some depths or widths would contradict every class there).
        .filter(|outcome| outcome.result.is_ok() && outcome.failed())
        .collect();
    let observations: Vec<Observation> = std::iter::once(&minimal)
        .chain(&extra)
        .filter_map(|o| {
            Some(Observation {
                inputs: o.case.dual()?.inputs,
                fill: o.case.padding_fill,
                output: &o.output,
                reference: None,
            })
        })
        .collect();
    let diagnosis = diagnose(&observations, order);
    (minimal, Some(diagnosis), extra)
}

/// The larger runs that separate look-alike bug classes: the first failing case, and a
/// 192x160x784 case (fitted to `support`) in its distribution and in gpumode's; none that is
/// the minimal case, none past the size judged whole (the catalogue computes a dozen wrong
/// problems in full on each run).
fn separating_cases(support: ShapeSupport, minimal: CaseSpec, first: CaseSpec) -> Vec<CaseSpec> {
    let larger = Shape::new(
        round_up(192, support.m_multiple),
        round_up(160, support.n_multiple),
        round_up(784, support.k_multiple),
        1,
    )
    .expect("valid shape");
    [
        first,
        CaseSpec {
            shape: larger,
            ..first
        },
        CaseSpec {
            shape: larger,
            dist: Distribution::Gpumode,
            seed: first.seed,
        },
    ]
    .into_iter()
    .filter(|spec| *spec != minimal)
    .filter(|spec| shape_products(spec.shape, 2) <= FULL_REFERENCE_PRODUCTS)
    .collect()
}

/// The outcome judged on every element: a sampled case's verdict and reference redone with the
/// model on the whole output.
fn judged_whole(mut outcome: CaseOutcome, order: KOrder) -> CaseOutcome {
    if outcome.sample.take().is_none() {
        return outcome;
    }
    outcome.reference = reference_engine::whole_reference(&outcome.case.inputs, order);
    let (m, n, l) = outcome.case.inputs.output_dims();
    if let Ok(verdict) = &mut outcome.result {
        *verdict = judge(
            OutputShape { m, n, l },
            &outcome.output,
            &outcome.reference.expected,
            &outcome.reference.lo,
            &outcome.reference.hi,
        );
    }
    outcome
}
