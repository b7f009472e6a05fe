//! Which problem the kernel solved, at the minimal case and the larger runs that failed
//! (`compare::identify` holds the output against the model's answers to nearby problems). Where
//! two index maps fit the runs alike (batch l mod 32 and a ring of 32 agree up to L = 33), one
//! more run with four times the batches tells them apart.

use super::cases::{run_case, CaseOutcome, CaseSpec};
use super::sampling::{shape_products, FULL_REFERENCE_PRODUCTS};
use crate::kernels::KernelUnderTest;
use nvfp4_model::compare::diagnosis::Observation;
use nvfp4_model::compare::identify::{identify, Identification};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::Shape;
use std::time::Instant;

/// The identification of a failing output from `minimal` (judged whole) and `extra` failing
/// runs, with one more run where batch maps need separating; None for a crash or a hang, an
/// output right everywhere, another problem than the dual GEMM, or a case past the size the CPU
/// model judges whole.
pub(super) fn identified(
    kernel: &dyn KernelUnderTest,
    minimal: &CaseOutcome,
    extra: &[CaseOutcome],
    order: KOrder,
    deadline: Instant,
) -> Option<Identification> {
    let judged_whole = |o: &CaseOutcome| {
        o.result.is_ok()
            && o.sample.is_none()
            && o.case.dual().is_some()
            && shape_products(o.spec.shape, 2) <= FULL_REFERENCE_PRODUCTS
    };
    if !judged_whole(minimal) || Instant::now() >= deadline {
        return None;
    }
    let runs: Vec<&CaseOutcome> = std::iter::once(minimal)
        .chain(extra.iter().filter(|o| judged_whole(o)))
        .collect();
    let found = identify(&observations(&runs), order, Some(deadline))?;
    let ambiguous_batches =
        found.explains_all && found.family == "another-batch" && !found.also_consistent.is_empty();
    if !ambiguous_batches || Instant::now() >= deadline {
        return Some(found);
    }
    let Some(spec) = more_batches(kernel, minimal.spec) else {
        return Some(found);
    };
    let separating = run_case(kernel, spec, order, None);
    if !(separating.failed() && judged_whole(&separating)) {
        return Some(found);
    }
    let mut runs = runs;
    runs.push(&separating);
    identify(&observations(&runs), order, Some(deadline)).or(Some(found))
}

fn observations<'a>(runs: &[&'a CaseOutcome]) -> Vec<Observation<'a>> {
    runs.iter()
        .filter_map(|o| {
            Some(Observation {
                inputs: o.case.dual()?.inputs,
                fill: o.case.padding_fill,
                output: &o.output,
            })
        })
        .collect()
}

/// The minimal case with four times its batches, where the kernel takes it and the model
/// judges it whole.
fn more_batches(kernel: &dyn KernelUnderTest, spec: CaseSpec) -> Option<CaseSpec> {
    let s = spec.shape;
    let shape = Shape::new(s.m, s.n, s.k, s.l * 4).ok()?;
    (kernel.support().supports(shape) && shape_products(shape, 2) <= FULL_REFERENCE_PRODUCTS)
        .then_some(CaseSpec { shape, ..spec })
}
