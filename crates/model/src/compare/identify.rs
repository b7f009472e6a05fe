//! Which problem did a failing kernel solve? Its output held against the model's answers to the
//! nearby problems (`nearby_problems.rs`): another batch, row or column of an operand, B1's and
//! B2's scales confused over a K range, an fp16 epilogue, rows never written. These bugs are
//! partial: only the batches, tiles or K ranges past some index are wrong, each read from
//! another place. A nearby problem is the answer when it holds every element of every failing
//! run (the right ones too: an index map is the identity where the kernel is right), and
//! the first such in the candidates' order (narrowest operands, simplest map) is named.

use super::diagnosis::{inside, plural, unwritten_where, Observation};
use super::element_sample::ElementSample;
use super::nearby_problems::NearbyProblem;
use crate::model::bounds::KOrder;
use crate::problem::{Shape, POISON, SCALE_BLOCK};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Most products (M N K L, both GEMMs) one nearby problem may cost on one run: past it, the
/// problem is computed on a sample of the run's elements (`element_sample.rs`) of that cost.
const MAX_PRODUCTS_PER_PROBLEM: usize = 1 << 26;

/// What the kernel's output answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identification {
    /// The family: "another-batch", "another-column", "another-row", "k-range-scales",
    /// "fp16-epilogue", "never-written", or "none" where no nearby problem explains it.
    pub family: String,
    /// The nearby problem that explains the output, or the nearest one ("batches-scales-from-mod-32").
    pub problem: String,
    /// In words: "the exact answer with batch l's ... taken from batch l mod 32".
    pub words: String,
    /// Whether it explains every element (every wrong one, and holds every right one).
    pub explains_all: bool,
    /// Wrong elements over the runs judged, and how many of them it explains.
    pub wrong_elements: usize,
    pub explained_elements: usize,
    /// Other nearby problems that also explain every element (the runs cannot tell them apart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_consistent: Vec<String>,
    /// The runs judged, the minimal case first.
    pub runs: Vec<Shape>,
    /// Those of the runs too large to compute a nearby problem whole: on each, the counts are
    /// over a sample of its rows, columns and batches (every combination), its wrong elements
    /// among them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sampled: Vec<Shape>,
    /// Whether every nearby problem was tried (false when the time bound stopped it).
    pub finished: bool,
}

impl Identification {
    /// One sentence for the certificate.
    pub fn sentence(&self) -> String {
        let mut at = runs_in_words(&self.runs);
        if !self.sampled.is_empty() {
            let on = runs_in_words(&self.sampled);
            at = format!("{at}; {on}: sampled rows, columns and batches");
        }
        let unfinished = if self.finished {
            ""
        } else {
            "; not every nearby problem was tried in the time"
        };
        if self.explains_all {
            let also = if self.also_consistent.is_empty() {
                String::new()
            } else {
                format!(" (also consistent: {})", self.also_consistent.join(", "))
            };
            format!(
                "{} (all {} explained, {at}){also}{unfinished}",
                self.words,
                plural(self.wrong_elements, "wrong element")
            )
        } else {
            format!(
                "no known bug class explains all of it; the nearest: {} ({} of {} explained, \
                 {at}){unfinished}",
                self.words,
                self.explained_elements,
                plural(self.wrong_elements, "wrong element")
            )
        }
    }
}

/// "at 1x1x16x33", "at 1x1x16x33 and 1x1x16x70", "at 65x1x16, 128x128x256 and 192x160x784 (2
/// runs)": each shape once, with its count (other runs differ by data, not shape).
fn runs_in_words(runs: &[Shape]) -> String {
    let mut shapes: Vec<(Shape, usize)> = Vec::new();
    for shape in runs {
        match shapes.iter_mut().find(|(s, _)| s == shape) {
            Some((_, count)) => *count += 1,
            None => shapes.push((*shape, 1)),
        }
    }
    let words: Vec<String> = shapes
        .iter()
        .map(|(shape, count)| match count {
            1 => shape.to_string(),
            _ => format!("{shape} ({count} runs)"),
        })
        .collect();
    match words.split_last() {
        Some((last, [])) => format!("at {last}"),
        Some((last, rest)) => format!("at {} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// One run's wrong elements against the problem asked.
struct Judged<'a> {
    observation: &'a Observation<'a>,
    wrong: Vec<bool>,
    /// Where the run is too large to compute a nearby problem whole: the elements it is
    /// computed on.
    sample: Option<ElementSample>,
}

/// Names the problem the kernel's failing runs answer (the minimal case first), or `None` where
/// no run is wrong. `deadline` stops the search: what was tried is still reported, marked
/// unfinished.
pub fn identify(
    observations: &[Observation],
    order: KOrder,
    deadline: Option<Instant>,
) -> Option<Identification> {
    let judged: Vec<Judged> = observations
        .iter()
        .map(|observation| {
            let correct = observation.reference(order);
            let wrong: Vec<bool> = (0..observation.output.len())
                .map(|i| !inside(observation.output[i], correct.lo[i], correct.hi[i]))
                .collect();
            let shape = observation.inputs.shape;
            let sample = (products(shape) > MAX_PRODUCTS_PER_PROBLEM).then(|| {
                ElementSample::of_run(shape, &wrong, MAX_PRODUCTS_PER_PROBLEM / (2 * shape.k))
            });
            Judged {
                observation,
                wrong,
                sample,
            }
        })
        .collect();
    let first = judged.first()?;
    if !first.wrong.iter().any(|&w| w) {
        return None;
    }
    if let Some(unwritten) = never_written(first) {
        return Some(Identification {
            runs: vec![first.observation.inputs.shape],
            ..unwritten
        });
    }
    let shape = first.observation.inputs.shape;
    let mut fitting: Vec<(NearbyProblem, Score)> = Vec::new();
    // The nearest so far: most wrong elements explained, then fewest right ones broken.
    let mut nearest: Option<(NearbyProblem, Score)> = None;
    let mut finished = true;
    for problem in NearbyProblem::candidates(shape) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            finished = false;
            break;
        }
        let Some(score) = score(problem, &judged, order) else {
            continue;
        };
        let key = |s: &Score| (s.explained, std::cmp::Reverse(s.broken));
        if nearest
            .as_ref()
            .is_none_or(|(_, best)| key(&score) > key(best))
        {
            nearest = Some((problem, score.clone()));
        }
        if score.explained == score.wrong && score.broken == 0 {
            fitting.push((problem, score));
        }
    }
    let blocks = shape.k / SCALE_BLOCK;
    let ((problem, score), explains_all) = match fitting.first() {
        Some(found) => (found.clone(), true),
        None => (nearest?, false),
    };
    Some(Identification {
        family: if explains_all {
            problem.family()
        } else {
            "none"
        }
        .into(),
        problem: problem.slug(),
        words: problem.words(blocks),
        explains_all,
        wrong_elements: score.wrong,
        explained_elements: score.explained,
        also_consistent: fitting
            .iter()
            .skip(1)
            .take(4)
            .map(|(p, _)| p.slug())
            .collect(),
        runs: score.runs,
        sampled: score.sampled,
        finished,
    })
}

/// Products (M N K L, both GEMMs) of a problem of `shape`.
fn products(shape: Shape) -> usize {
    2 * shape.m * shape.n * shape.k * shape.l
}

/// How a nearby problem fares over the runs it could be computed on.
#[derive(Clone)]
struct Score {
    /// Wrong elements of those runs, and how many of them it explains.
    wrong: usize,
    explained: usize,
    /// Right elements it does not hold.
    broken: usize,
    /// The runs it was computed on, the minimal case first.
    runs: Vec<Shape>,
    /// Those of them it was computed on a sample of.
    sampled: Vec<Shape>,
}

/// How `problem` fares over the runs it can be computed on (a run too large for it is no
/// evidence either way); `None` where it cannot differ from the problem asked on the minimal
/// case, or costs too much there.
fn score(problem: NearbyProblem, judged: &[Judged], order: KOrder) -> Option<Score> {
    let mut score = Score {
        wrong: 0,
        explained: 0,
        broken: 0,
        runs: Vec::new(),
        sampled: Vec::new(),
    };
    for (index, run) in judged.iter().enumerate() {
        let inputs = run.observation.inputs;
        let shape = inputs.shape;
        let intervals = match &run.sample {
            None => problem.intervals(inputs, order),
            Some(sample) => problem.intervals_at(inputs, order, sample),
        };
        let Some(intervals) = intervals else {
            if index == 0 {
                return None;
            }
            continue;
        };
        score.runs.push(shape);
        let whole;
        let sample = match &run.sample {
            Some(sample) => {
                score.sampled.push(shape);
                sample
            }
            None => {
                whole = ElementSample::whole(shape);
                &whole
            }
        };
        for i in 0..sample.len() {
            let at = if run.sample.is_some() {
                sample.index_in(i, shape)
            } else {
                i
            };
            let value = run.observation.output[at];
            let holds = !intervals.unbounded[i] && inside(value, intervals.lo[i], intervals.hi[i]);
            score.wrong += usize::from(run.wrong[at]);
            match (run.wrong[at], holds) {
                (true, true) => score.explained += 1,
                (false, false) => score.broken += 1,
                _ => {}
            }
        }
    }
    Some(score)
}

/// Where the minimal case's only wrong elements are ones still holding the poison the harness
/// wrote: the rows or columns never written, in words.
fn never_written(run: &Judged) -> Option<Identification> {
    let output = run.observation.output;
    let shape = run.observation.inputs.shape;
    let poisoned = |i: usize| output[i].to_bits() == POISON.to_bits();
    let wrong: Vec<usize> = (0..output.len()).filter(|&i| run.wrong[i]).collect();
    if !wrong.iter().all(|&i| poisoned(i)) {
        return None;
    }
    let elements: Vec<(usize, usize)> = wrong
        .iter()
        .map(|&i| (i / (shape.n * shape.l), i / shape.l % shape.n))
        .collect();
    let rows: Vec<usize> = elements.iter().map(|e| e.0).collect();
    let columns: Vec<usize> = elements.iter().map(|e| e.1).collect();
    let tile = |indices: &[usize], len: usize| {
        const TILE: usize = 128;
        let (lo, hi) = (*indices.iter().min()?, *indices.iter().max()?);
        let last = (len - 1) / TILE * TILE;
        (lo == last && hi == len - 1 && len % TILE != 0).then_some(len / TILE)
    };
    let whole_rows = columns
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == shape.n;
    let whole_columns = rows.iter().collect::<std::collections::BTreeSet<_>>().len() == shape.m;
    let tile_words = match (tile(&rows, shape.m), tile(&columns, shape.n)) {
        (Some(t), _) if whole_rows => format!(" (row tile {t}, the last and partial one)"),
        (_, Some(t)) if whole_columns => format!(" (column tile {t}, the last and partial one)"),
        _ => String::new(),
    };
    Some(Identification {
        family: "never-written".into(),
        problem: "never-written".into(),
        words: format!(
            "the exact answer wherever it wrote; {}{tile_words} never written (still the poison \
             the harness wrote)",
            unwritten_where(&elements, shape)
        ),
        explains_all: true,
        wrong_elements: wrong.len(),
        explained_elements: wrong.len(),
        also_consistent: Vec::new(),
        runs: Vec::new(),
        sampled: Vec::new(),
        finished: true,
    })
}

#[cfg(test)]
#[path = "identify_tests.rs"]
mod tests;
