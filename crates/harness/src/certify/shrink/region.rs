//! The failing region around a minimal case: for each dimension, the largest passing value
//! below it and whether values above fail too (a threshold, "L >= 33") or not (a region that
//! is not an interval, "N = 16512 but not 16513"), and which dimensions the failure needs (the
//! dimension reset to its smallest value, the others kept: does it pass?). Each claim is checked
//! by a run at a second point before it is stated; a dimension the time bound left unchecked is
//! said to be unresolved, never guessed.

use super::cases::{run_case, CaseOutcome, CaseSpec};
use super::shrink_shape::Dimension;
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::Schedule;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What the runs showed of one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BoundaryKind {
    /// At its smallest value, and failing at a larger one too: the failure does not depend on it.
    Any,
    /// At its smallest value, passing at a larger one: the failure needs this small value.
    OnlySmall,
    /// Passing just below, failing at the minimal value and at the points checked above.
    Threshold,
    /// Passing just below and at a point checked above: not an interval.
    NotAnInterval,
    /// Failing just below too (the shrink did not reach its boundary), or not checked in time.
    Unresolved,
}

/// One dimension's boundary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimensionBoundary {
    /// "M", "N", "K" or "L".
    pub dimension: String,
    /// The minimal case's value.
    pub minimal: usize,
    /// The kernel's smallest value of the dimension.
    pub smallest: usize,
    pub kind: BoundaryKind,
    /// The largest value below the minimal one, seen to pass.
    pub passes_below: Option<usize>,
    /// Whether the failure needs this dimension: the minimal case with it reset to its smallest
    /// value, the others kept, passes (None where not checked).
    pub needed: Option<bool>,
    /// Other values run, the others kept: those that failed and those that passed.
    pub fails_at: Vec<usize>,
    pub passes_at: Vec<usize>,
}

/// The failing region of a minimal case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    pub dimensions: Vec<DimensionBoundary>,
    /// "fails when L >= 33 (passes at L = 32; also fails at L = 34, 66), whatever M, N, K
    /// (checked at M = 130, N = 130, K = 272)".
    pub words: String,
    /// "needs L >= 5 and K >= 2048", where some dimension is needed.
    pub needs: Option<String>,
    /// Whether every dimension was checked (false when the time bound stopped it).
    pub finished: bool,
    /// Kernel runs made.
    pub runs: usize,
}

/// The runs of one region, with the failure's predicate and deadline.
struct Prober<'a> {
    kernel: &'a dyn KernelUnderTest,
    minimal: CaseSpec,
    order: KOrder,
    schedule: Option<Schedule>,
    fails: &'a dyn Fn(&CaseOutcome) -> bool,
    deadline: Instant,
    runs: usize,
    out_of_time: bool,
}

impl Prober<'_> {
    /// Whether the minimal case with `dimension` at `value` fails; None where the kernel does
    /// not support that shape or the time is over.
    fn fails_at(&mut self, dimension: Dimension, value: usize) -> Option<bool> {
        let spec = dimension.with(self.minimal, value, self.kernel.support())?;
        if Instant::now() >= self.deadline {
            self.out_of_time = true;
            return None;
        }
        self.runs += 1;
        let outcome = run_case(self.kernel, spec, self.order, self.schedule);
        let failed = (self.fails)(&outcome);
        super::trace(format_args!(
            "region run {}: {} {}",
            self.runs,
            spec.shape,
            if failed { "fails" } else { "passes" }
        ));
        Some(failed)
    }
}

/// The failing region around `minimal` (a case for which `fails` holds), checked by runs of
/// `kernel` until `deadline`.
pub(crate) fn failing_region(
    kernel: &dyn KernelUnderTest,
    minimal: CaseSpec,
    order: KOrder,
    schedule: Option<Schedule>,
    fails: &dyn Fn(&CaseOutcome) -> bool,
    deadline: Instant,
) -> Region {
    let mut prober = Prober {
        kernel,
        minimal,
        order,
        schedule,
        fails,
        deadline,
        runs: 0,
        out_of_time: false,
    };
    let support = kernel.support();
    let dimensions: Vec<DimensionBoundary> = Dimension::ALL
        .into_iter()
        .map(|dimension| boundary(&mut prober, dimension, support))
        .collect();
    let finished = !prober.out_of_time;
    Region {
        words: region_words(&dimensions),
        needs: needs_words(&dimensions),
        dimensions,
        finished,
        runs: prober.runs,
    }
}

/// The values above `value` at which a threshold is checked: the next one on the grid, the
/// next tile boundary (128 rows or columns, a K chunk of 256) and one past it, or, for L, twice
/// as many batches. A boundary catches the regions that skip aligned values (M = 1 mod 128, a
/// K tail), the value past it those that need a partial tile.
fn points_above(dimension: Dimension, value: usize, unit: usize) -> Vec<usize> {
    let aligned = |tile: usize| (value / tile + 1) * tile;
    let mut points = match dimension {
        Dimension::M | Dimension::N => {
            let boundary = aligned(128 * unit);
            vec![value + unit, boundary, boundary + unit]
        }
        Dimension::K => {
            let boundary = aligned(256).next_multiple_of(unit);
            vec![value + unit, boundary, boundary + unit]
        }
        Dimension::L => vec![value + 1, 2 * value],
    };
    points.dedup();
    points
}

/// A second point for a dimension at its smallest value: past a tile and K chunk boundary.
fn second_point(dimension: Dimension, unit: usize) -> usize {
    match dimension {
        Dimension::M | Dimension::N => 130usize.next_multiple_of(unit),
        Dimension::K => 272usize.next_multiple_of(unit),
        Dimension::L => 3,
    }
}

fn boundary(prober: &mut Prober, dimension: Dimension, support: ShapeSupport) -> DimensionBoundary {
    let unit = dimension.unit(support);
    let smallest = dimension.smallest(support);
    let minimal = dimension.of(prober.minimal.shape);
    let mut out = DimensionBoundary {
        dimension: dimension.name().into(),
        minimal,
        smallest,
        kind: BoundaryKind::Unresolved,
        passes_below: None,
        needed: None,
        fails_at: Vec::new(),
        passes_at: Vec::new(),
    };
    let record = |out: &mut DimensionBoundary, value: usize, failed: bool| {
        if failed {
            out.fails_at.push(value);
        } else {
            out.passes_at.push(value);
        }
    };
    if minimal <= smallest {
        let point = second_point(dimension, unit);
        if let Some(failed) = prober.fails_at(dimension, point) {
            record(&mut out, point, failed);
            out.needed = Some(false);
            out.kind = if failed {
                BoundaryKind::Any
            } else {
                BoundaryKind::OnlySmall
            };
        }
        return out;
    }
    let below = minimal - unit;
    match prober.fails_at(dimension, below) {
        Some(false) => out.passes_below = Some(below),
        Some(true) => {
            record(&mut out, below, true);
            return out;
        }
        None => return out,
    }
    out.needed = if smallest == below {
        Some(true)
    } else {
        match prober.fails_at(dimension, smallest) {
            Some(failed) => {
                record(&mut out, smallest, failed);
                Some(!failed)
            }
            None => return out,
        }
    };
    for point in points_above(dimension, minimal, unit) {
        match prober.fails_at(dimension, point) {
            Some(failed) => record(&mut out, point, failed),
            None => return out,
        }
    }
    let above_pass = out.passes_at.iter().any(|&v| v > minimal);
    out.kind = if above_pass {
        BoundaryKind::NotAnInterval
    } else if out.fails_at.iter().any(|&v| v > minimal) {
        BoundaryKind::Threshold
    } else {
        BoundaryKind::Unresolved
    };
    out
}

fn list(values: &[usize]) -> String {
    let words: Vec<String> = values.iter().map(usize::to_string).collect();
    words.join(", ")
}

/// One dimension's clause, or None for a dimension the failure does not depend on.
fn clause(b: &DimensionBoundary) -> Option<String> {
    let d = &b.dimension;
    let above = |values: &[usize]| -> Vec<usize> {
        values.iter().copied().filter(|&v| v > b.minimal).collect()
    };
    Some(match b.kind {
        BoundaryKind::Any => return None,
        BoundaryKind::OnlySmall => format!(
            "{d} = {} (passes at {d} = {})",
            b.minimal,
            list(&b.passes_at)
        ),
        BoundaryKind::Threshold => format!(
            "{d} >= {} (passes at {d} = {}; also fails at {d} = {})",
            b.minimal,
            b.passes_below.unwrap_or_default(),
            list(&above(&b.fails_at))
        ),
        BoundaryKind::NotAnInterval => {
            let mut passes: Vec<usize> = b.passes_below.into_iter().collect();
            passes.extend(above(&b.passes_at));
            let fails_above = above(&b.fails_at);
            let also = if fails_above.is_empty() {
                String::new()
            } else {
                format!("; fails at {d} = {} too", list(&fails_above))
            };
            format!(
                "{d} = {} but not every {d} above it: not an interval (passes at {d} = {}{also})",
                b.minimal,
                list(&passes)
            )
        }
        BoundaryKind::Unresolved => match b.fails_at.iter().find(|&&v| v < b.minimal) {
            Some(below) => format!(
                "{d} = {} (unresolved: it fails at {d} = {below} too, the shrink did not reach \
                 the boundary)",
                b.minimal
            ),
            None => format!(
                "{d} = {} (unresolved: not checked, out of time or outside the kernel's shapes)",
                b.minimal
            ),
        },
    })
}

/// "fails when L >= 33 (passes at L = 32; ...), whatever M, N, K (checked at M = 130, ...)".
fn region_words(dimensions: &[DimensionBoundary]) -> String {
    let clauses: Vec<String> = dimensions.iter().filter_map(clause).collect();
    let any: Vec<&DimensionBoundary> = dimensions
        .iter()
        .filter(|b| b.kind == BoundaryKind::Any)
        .collect();
    let whatever = if any.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = any.iter().map(|b| b.dimension.as_str()).collect();
        let checked: Vec<String> = any
            .iter()
            .map(|b| format!("{} = {}", b.dimension, list(&b.fails_at)))
            .collect();
        format!(
            "whatever {} (checked at {}, each with the others kept)",
            names.join(", "),
            checked.join(", ")
        )
    };
    match (clauses.is_empty(), whatever.is_empty()) {
        (true, _) => format!("fails {whatever}"),
        (false, true) => format!("fails when {}", clauses.join(" and ")),
        (false, false) => format!("fails when {}, {whatever}", clauses.join(" and ")),
    }
}

/// "needs L >= 5 and K >= 2048": the dimensions whose reset to their smallest value passes.
fn needs_words(dimensions: &[DimensionBoundary]) -> Option<String> {
    let needed: Vec<String> = dimensions
        .iter()
        .filter(|b| b.needed == Some(true))
        .map(|b| match b.kind {
            BoundaryKind::Threshold => format!("{} >= {}", b.dimension, b.minimal),
            _ => format!("{} = {}", b.dimension, b.minimal),
        })
        .collect();
    (!needed.is_empty()).then(|| {
        format!(
            "needs {} (each reset to its smallest value, the others kept, passes)",
            needed.join(" and ")
        )
    })
}

#[cfg(test)]
#[path = "region_tests.rs"]
mod tests;
