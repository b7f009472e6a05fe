//! Which problem the kernel solved, at the minimal case and the larger runs that failed
//! (`compare::identify` holds the output against the model's answers to nearby problems). Where
//! an index map is named from the minimal case alone (often a single wrong element), or two fit
//! the runs alike (batch l mod 32 and a ring of 32 agree up to L = 33), one more run along that
//! index (four times the batches, twice the rows or columns) confirms it or tells them apart.

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
/// output right everywhere, another problem than the dual GEMM, or a case judged on sampled
/// rows (past the size the CPU model judges whole, with no whole reference from the GPU).
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
            && (shape_products(o.spec.shape, 2) <= FULL_REFERENCE_PRODUCTS || has_reference(o))
    };
    if !judged_whole(minimal) || Instant::now() >= deadline {
        return None;
    }
    let runs: Vec<&CaseOutcome> = std::iter::once(minimal)
        .chain(extra.iter().filter(|o| judged_whole(o)))
        .collect();
    let found = identify(&observations(&runs), order, Some(deadline))?;
    let unconfirmed =
        found.explains_all && (found.runs.len() == 1 || !found.also_consistent.is_empty());
    if !unconfirmed || Instant::now() >= deadline {
        return Some(found);
    }
    let Some(spec) = along_the_index(kernel, minimal.spec, &found.family) else {
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
                // The reference the run was judged against (the GPU's past the CPU model's
                // budget): computed once, not again here.
                reference: has_reference(o).then_some(&o.reference),
            })
        })
        .collect()
}

/// Whether `outcome` holds its whole reference on the host (a failing case judged whole does,
/// on the CPU or the GPU).
fn has_reference(outcome: &CaseOutcome) -> bool {
    !outcome.output.is_empty() && outcome.reference.expected.len() == outcome.output.len()
}

/// The minimal case grown along the index an index map reads (four times the batches, twice
/// the rows or columns), where the kernel takes it and the model judges it whole.
fn along_the_index(kernel: &dyn KernelUnderTest, spec: CaseSpec, family: &str) -> Option<CaseSpec> {
    let s = spec.shape;
    let (m, n, l) = match family {
        "another-batch" => (s.m, s.n, s.l * 4),
        "another-row" => (s.m * 2, s.n, s.l),
        "another-column" => (s.m, s.n * 2, s.l),
        _ => return None,
    };
    let shape = Shape::new(m, n, s.k, l).ok()?;
    (kernel.support().supports(shape) && shape_products(shape, 2) <= FULL_REFERENCE_PRODUCTS)
        .then_some(CaseSpec { shape, ..spec })
}
