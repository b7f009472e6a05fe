//! How a GPU campaign draws its range cases (crates/harness/src/certify/campaign/shape_ranges.rs): a
//! greedy covering array, in the manner of AETG and NIST's ACTS, over the octaves of M, N, K and
//! L.
//!
//! - **Every pair a case can hold.** Each case is built around one pair cell no case has reached
//!   yet; its other two dimensions take the octaves that reach the most cells still uncovered
//!   (pairs first, then band triples), the cheaper octave on a tie. Cases are drawn until every
//!   pair cell is reached, whatever the budget.
//! - **Then triples, up to the budget** ([`DEFAULT_GPU_RANGE_CASES`] cases in all): cases built
//!   around band triples (two octaves a dimension) no case has reached, every triple a case
//!   within the per-case bound can hold, the largest first (a conjunction of three dimensions
//!   at deployment size is where deployments run and where the random cases never go; the
//!   small ones are the ones a budget may leave).
//! - **Values where code branches.** Inside its octave a value is drawn at a multiple of 64, 128,
//!   256 or 1024, or one either side of it (16 for K), at an odd count of 128-wide tiles, at the
//!   octave's ends, K at a multiple of 16 that is not one of 64, or log-uniformly, each
//!   dimension taking these kinds in turn; then rounded to the kernel's declared multiples.
//! - **The public models' own points** (`model_strata.rs`) before the drawn cases: experts,
//!   width and depth at once, at every token range.
//! - **Within a per-case bound.** Every operand (A, B1, B2) and the output at most
//!   [`RANGE_ELEMENTS_BOUND`] elements, the products at most [`RANGE_PRODUCTS_BOUND`]: a cell no
//!   case within the bound (or within the kernel's shape support) can hold is listed, with why,
//!   never silently skipped.
//!
//! The draw is a function of the campaign's seed alone: every shard draws the same cases, and
//! `certify --plan` lists them without running anything.

use super::cases::CaseSpec;
use super::model_strata::model_strata;
use super::shape_ranges::{
    all_cells, cells_of, octave_values, Cell, Dim, Level, RangeCoverage, PAIRS, TRIPLES,
};
use crate::kernels::ShapeSupport;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// The most elements of one operand or of the output of a range case: 512 MiB of packed FP4, 2
/// GiB of fp16 output. Public models' largest weights (Llama-3.1-405B's gate and up, 53248 x
/// 16384) are within it; a bound of 2^26 left out every weight past 8192 x 8192.
pub const RANGE_ELEMENTS_BOUND: usize = 1 << 28;
/// The most multiply-adds (M N K L) of one range case: about a second of the GPU reference on an
/// H100.
pub const RANGE_PRODUCTS_BOUND: usize = 1 << 39;
/// Range cases of a campaign whose reference is computed on the GPU (`certify --range-cases`):
/// enough to reach every pair, the rest on triples.
pub const DEFAULT_GPU_RANGE_CASES: usize = 1200;
/// Candidates weighed for each case: the one that reaches the most uncovered cells is drawn.
const CANDIDATES: usize = 12;
/// A case whose least shape moves at most this many elements is cheap (a few milliseconds of an
/// H100 campaign), whatever cell it was drawn for.
const CHEAP_CASE: usize = 1 << 24;
/// A case drawn for a larger cell may move this many times the least its cell needs.
const COST_HEADROOM: usize = 2;
/// Cases a band triple wants, each in another of its eight octave corners: a conjunction one
/// octave wide in a dimension lies in half a band, and two draws reach it three times in four.
const TRIPLE_DRAWS: usize = 2;
/// A pair cell reached counts this many triple cells in a candidate's score.
const PAIR_WEIGHT: usize = 16;

/// Why a cell has no case.
const OUTSIDE_SUPPORT: &str = "outside the kernel's declared shape support";
const PAST_BOUND: &str =
    "past the per-case bound (an operand or the output past 2^28 elements, or \
                          past 2^39 multiply-adds)";

/// A campaign's range cases and what they leave uncovered.
#[derive(Debug, Clone, Default)]
pub struct RangePlan {
    /// Each case with the cell it was drawn for, cheapest first.
    pub cases: Vec<(Cell, CaseSpec)>,
    /// The space's totals and the cells left (with why); the cells reached are filled in as the
    /// campaign's cases run.
    pub coverage: RangeCoverage,
}

/// The smallest values a shape with these octaves (`None`: the dimension's least) takes within
/// `support`, or why there is none.
fn least_shape(at: &[Option<u32>; 4], support: ShapeSupport) -> Result<[usize; 4], &'static str> {
    let multiple = |d: Dim| match d {
        Dim::M => support.m_multiple,
        Dim::N => support.n_multiple,
        Dim::K => support.k_multiple.max(16),
        Dim::L => 1,
    };
    let mut values = [0; 4];
    for d in Dim::ALL {
        let m = multiple(d);
        values[d.index()] = match at[d.index()] {
            Some(o) => {
                let (lo, hi) = octave_values(o);
                let v = lo.div_ceil(m) * m;
                if v > hi {
                    return Err(OUTSIDE_SUPPORT);
                }
                v
            }
            None => m.max(if d == Dim::K { 16 } else { 1 }),
        };
    }
    if values[Dim::L.index()] > support.max_l {
        return Err(OUTSIDE_SUPPORT);
    }
    if !within_bound(values) {
        return Err(PAST_BOUND);
    }
    Ok(values)
}

/// Whether a case of these dimensions (M, N, K, L) keeps to the per-case bound.
fn within_bound([m, n, k, l]: [usize; 4]) -> bool {
    let elements = |a: usize, b: usize| a.checked_mul(b).and_then(|x| x.checked_mul(l));
    let bounded = |x: Option<usize>| x.is_some_and(|x| x <= RANGE_ELEMENTS_BOUND);
    bounded(elements(m, k))
        && bounded(elements(n, k))
        && bounded(elements(m, n))
        && elements(m, n)
            .and_then(|x| x.checked_mul(k))
            .is_some_and(|x| x <= RANGE_PRODUCTS_BOUND)
}

/// The elements a case of these dimensions moves (A, B1, B2 and the output): its cost.
fn cost([m, n, k, l]: [usize; 4]) -> usize {
    (m * k + 2 * n * k + m * n) * l
}

/// The kinds of value a dimension takes in turn ([`branch_value`]): a tile multiple one past,
/// one short and on it, an odd count of 128-wide tiles, the octave's ends, K at a multiple of 16
/// that is not one of 64, and log-uniform. Taken in turn, not at random, so that every octave a
/// dozen cases reach sees each kind, a tile +-1 at every scale.
const VALUE_KINDS: usize = 8;

/// A value of octave `o` of `d` of kind `kind` (of [`VALUE_KINDS`]) where code branches, a
/// multiple of `multiple` (None: the draw left the octave).
fn branch_value(
    rng: &mut ChaCha8Rng,
    d: Dim,
    o: u32,
    multiple: usize,
    kind: usize,
) -> Option<usize> {
    let (lo, hi) = octave_values(o);
    let mut pick = |n: usize| (rng.next_u64() % n.max(1) as u64) as usize;
    let step = if d == Dim::K { 16 } else { 1 };
    let near = |v: usize, side: usize| match side {
        0 => v.saturating_sub(step),
        1 => v,
        _ => v + step,
    };
    let v = match kind % VALUE_KINDS {
        kind @ 0..=2 => {
            // One past a tile multiple, one short of it, on it.
            let side = [2, 0, 1][kind];
            let g = [64, 128, 256, 1024][pick(4)];
            let first = lo.div_ceil(g);
            let last = hi / g;
            if last < first {
                lo + pick(hi - lo + 1)
            } else {
                near((first + pick(last - first + 1)) * g, side)
            }
        }
        3 => {
            // An odd count of 128-wide tiles.
            let first = lo.div_ceil(128);
            let last = hi / 128;
            let odd: Vec<usize> = (first..=last)
                .filter(|t| t % 2 == 1)
                .take(1 << 12)
                .collect();
            match odd.len() {
                0 => lo + pick(hi - lo + 1),
                n => {
                    let side = pick(3);
                    near(odd[pick(n)] * 128, side)
                }
            }
        }
        4 => lo,
        5 => hi,
        6 if d == Dim::K => {
            // A multiple of 16 that is not one of 64.
            let blocks = (lo.div_ceil(16)..=hi / 16).filter(|b| b % 4 != 0);
            let blocks: Vec<usize> = blocks.take(1 << 12).collect();
            if blocks.is_empty() {
                lo
            } else {
                blocks[pick(blocks.len())] * 16
            }
        }
        _ => {
            let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            ((lo as f64) * ((hi as f64 + 1.0) / lo as f64).powf(unit)) as usize
        }
    };
    let v = v.clamp(lo, hi);
    let rounded = v.div_ceil(multiple) * multiple;
    let rounded = if rounded > hi {
        hi / multiple * multiple
    } else {
        rounded
    };
    (rounded >= lo && rounded > 0).then_some(rounded)
}

/// The octaves of `at` in the dimensions a triple `cell` constrains: which of its eight
/// corners a case lies in.
fn corner_of(cell: &Cell, at: &[Option<u32>; 4]) -> [Option<u32>; 4] {
    let mut corner = [None; 4];
    for d in cell.dims() {
        corner[d.index()] = at[d.index()];
    }
    corner
}

/// The uncovered cells a case of octaves `at` (every dimension set) would reach, weighted.
fn gain(
    at: &[Option<u32>; 4],
    pairs: &BTreeSet<Cell>,
    triples: &BTreeSet<Cell>,
    corners: &BTreeMap<Cell, BTreeSet<[Option<u32>; 4]>>,
    pair_weight: usize,
) -> usize {
    let mut score = 0;
    for dims in PAIRS {
        let mut cell = [None; 4];
        for d in dims {
            cell[d.index()] = at[d.index()];
        }
        if dims.iter().all(|d| cell[d.index()].is_some())
            && pairs.contains(&Cell {
                level: Level::Pair,
                at: cell,
            })
        {
            score += pair_weight;
        }
    }
    for dims in TRIPLES {
        let mut cell = [None; 4];
        for d in dims {
            cell[d.index()] = at[d.index()].map(|o| o / 2);
        }
        let cell = Cell {
            level: Level::Triple,
            at: cell,
        };
        if dims.iter().all(|d| cell.at[d.index()].is_some())
            && triples.contains(&cell)
            && !corners
                .get(&cell)
                .is_some_and(|reached| reached.contains(&corner_of(&cell, at)))
        {
            score += 1;
        }
    }
    score
}

/// Marks the cells `shape` lies in as reached: its pairs, and its triples once as many of
/// their corners as `needed` are.
fn record_reached(
    shape: Shape,
    pairs: &mut BTreeSet<Cell>,
    triples: &mut BTreeSet<Cell>,
    corners: &mut BTreeMap<Cell, BTreeSet<[Option<u32>; 4]>>,
    needed: &BTreeMap<Cell, usize>,
) {
    for cell in cells_of(shape, Level::Pair) {
        pairs.remove(&cell);
    }
    let octaves = Dim::ALL.map(|d| Some(super::shape_ranges::octave(d.of(shape))));
    for cell in cells_of(shape, Level::Triple) {
        let reached = corners.entry(cell).or_default();
        reached.insert(corner_of(&cell, &octaves));
        if reached.len() >= needed.get(&cell).copied().unwrap_or(0) {
            triples.remove(&cell);
        }
    }
}

/// The range cases of a campaign of `seed`: every pair cell the support and the bound allow,
/// then band triples up to `budget` cases in all. None for the grouped GEMM and the GEMV (their
/// campaigns draw their shapes otherwise) or with a budget of 0.
pub fn range_cases(
    problem: ProblemKind,
    support: ShapeSupport,
    dists: &[Distribution],
    seed: u64,
    budget: usize,
) -> RangePlan {
    let pair_cells = all_cells(Level::Pair);
    let triple_cells = all_cells(Level::Triple);
    let mut plan = RangePlan::default();
    plan.coverage.pairs_total = pair_cells.len();
    plan.coverage.triples_total = triple_cells.len();
    if budget == 0
        || dists.is_empty()
        || !matches!(problem, ProblemKind::DualGemm | ProblemKind::Gemm)
    {
        return plan;
    }
    let mut pairs = BTreeSet::new();
    for cell in pair_cells {
        match least_shape(&cell.at, support) {
            Ok(_) => {
                pairs.insert(cell);
            }
            Err(why) => plan
                .coverage
                .pairs_left
                .push((cell.describe(), why.to_string())),
        }
    }
    // A band triple is held if one of its octave corners is.
    let triple_corners = |cell: &Cell| -> Vec<[Option<u32>; 4]> {
        let mut corners = vec![[None; 4]];
        for d in cell.dims() {
            let band = cell.at[d.index()].expect("a constrained dimension");
            corners = corners
                .into_iter()
                .flat_map(|at| {
                    [2 * band, 2 * band + 1]
                        .into_iter()
                        .filter(move |o| d.octaves().contains(o))
                        .map(move |o| {
                            let mut at = at;
                            at[d.index()] = Some(o);
                            at
                        })
                })
                .collect();
        }
        corners
    };
    let mut triples = BTreeSet::new();
    // Per triple, the corners cases must reach (up to TRIPLE_DRAWS) and those they have.
    let mut needed: BTreeMap<Cell, usize> = BTreeMap::new();
    let mut corners: BTreeMap<Cell, BTreeSet<[Option<u32>; 4]>> = BTreeMap::new();
    let mut triples_left: BTreeMap<String, usize> = BTreeMap::new();
    // Per triple, the octave of the elements its least case moves: the largest are drawn for
    // first.
    let mut size_of: BTreeMap<Cell, u32> = BTreeMap::new();
    for cell in triple_cells {
        let corners = triple_corners(&cell);
        let reasons: Vec<Result<_, &str>> =
            corners.iter().map(|at| least_shape(at, support)).collect();
        let cheapest = reasons
            .iter()
            .filter_map(|least| least.ok().map(cost))
            .min();
        if let Some(cheapest) = cheapest {
            let held = reasons.iter().filter(|least| least.is_ok()).count();
            needed.insert(cell, held.min(TRIPLE_DRAWS));
            size_of.insert(cell, cheapest.ilog2());
            triples.insert(cell);
        } else {
            let why = if reasons.contains(&Err(PAST_BOUND)) {
                PAST_BOUND
            } else {
                OUTSIDE_SUPPORT
            };
            *triples_left.entry(why.to_string()).or_default() += 1;
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7a9e_c0fe_7a9e_0000);
    let mut cases: Vec<(Cell, Shape, usize)> = Vec::new();
    // Each dimension's next kind of value, from a place of the seed's.
    let mut value_kinds = [0; 4].map(|_: usize| rng.next_u64() as usize % VALUE_KINDS);
    // The public models' own points first: the draw then covers what they leave.
    for (_, shape) in model_strata(problem, support, seed, within_bound) {
        let triples_of = cells_of(shape, Level::Triple);
        let Some(&cell) = (if shape.l > 1 {
            triples_of.last()
        } else {
            triples_of.first()
        }) else {
            continue;
        };
        record_reached(shape, &mut pairs, &mut triples, &mut corners, &needed);
        cases.push((cell, shape, cost([shape.m, shape.n, shape.k, shape.l])));
    }
    while !pairs.is_empty() || (!triples.is_empty() && cases.len() < budget) {
        let pair_phase = !pairs.is_empty();
        let mut best: Option<(usize, usize, Cell, [Option<u32>; 4])> = None;
        for _ in 0..CANDIDATES {
            let target = if pair_phase {
                *pairs
                    .iter()
                    .nth(rng.next_u64() as usize % pairs.len())
                    .expect("not empty")
            } else {
                let largest = triples.iter().map(|c| size_of[c]).max().expect("not empty");
                let at_largest: Vec<&Cell> =
                    triples.iter().filter(|c| size_of[*c] == largest).collect();
                *at_largest[rng.next_u64() as usize % at_largest.len()]
            };
            let mut at = match target.level {
                Level::Pair => target.at,
                Level::Triple => {
                    let reached = corners.get(&target);
                    let held: Vec<_> = triple_corners(&target)
                        .into_iter()
                        .filter(|at| {
                            least_shape(at, support).is_ok()
                                && !reached.is_some_and(|r| r.contains(at))
                        })
                        .collect();
                    if held.is_empty() {
                        continue;
                    }
                    held[rng.next_u64() as usize % held.len()]
                }
            };
            // The free dimensions, in a random order, each at its best octave among those that
            // keep the case near the least its target needs: a cell of large ranges makes a
            // large case, every other a cheap one.
            let cap = least_shape(&at, support)
                .map_or(0, |least| (CHEAP_CASE).max(cost(least) * COST_HEADROOM));
            let mut free: Vec<Dim> = Dim::ALL
                .into_iter()
                .filter(|d| at[d.index()].is_none())
                .collect();
            if free.len() == 2 && rng.next_u64() % 2 == 1 {
                free.swap(0, 1);
            }
            for d in free {
                let mut chosen: Option<(usize, u64, u32)> = None;
                for o in d.octaves() {
                    let mut trial = at;
                    trial[d.index()] = Some(o);
                    let Ok(least) = least_shape(&trial, support) else {
                        continue;
                    };
                    let c = cost(least);
                    if c > cap {
                        continue;
                    }
                    // Ties broken at random (a tie-break by cost put every large weight's
                    // case at M = 1 and L = 1, where no conjunction with them lies).
                    let score = gain(&trial, &pairs, &triples, &corners, PAIR_WEIGHT);
                    let tie_break = rng.next_u64();
                    if chosen.is_none_or(|(s, t, _)| score > s || (score == s && tie_break < t)) {
                        chosen = Some((score, tie_break, o));
                    }
                }
                at[d.index()] = chosen.map(|(_, _, o)| o);
            }
            let Ok(least) = least_shape(&at, support) else {
                continue;
            };
            let score = gain(&at, &pairs, &triples, &corners, PAIR_WEIGHT);
            let c = cost(least);
            if best.is_none_or(|(s, cc, _, _)| score > s || (score == s && c < cc)) {
                best = Some((score, c, target, at));
            }
        }
        let Some((_, _, target, at)) = best else {
            break;
        };
        let least = least_shape(&at, support).expect("the best candidate is held");
        let multiple = |d: Dim| match d {
            Dim::M => support.m_multiple,
            Dim::N => support.n_multiple,
            Dim::K => support.k_multiple.max(16),
            Dim::L => 1,
        };
        // Values where code branches, within the bound; the least shape of the octaves if no
        // draw keeps to it.
        let values = (0..16)
            .find_map(|_| {
                let mut values = [0; 4];
                for d in Dim::ALL {
                    let kind = value_kinds[d.index()];
                    value_kinds[d.index()] += 1;
                    values[d.index()] =
                        branch_value(&mut rng, d, at[d.index()]?, multiple(d), kind)?;
                }
                (within_bound(values) && values[Dim::L.index()] <= support.max_l).then_some(values)
            })
            .unwrap_or(least);
        let [m, n, k, l] = values;
        let shape = problem.normalize(Shape::new(m, n, k, l).expect("range shapes are valid"));
        record_reached(shape, &mut pairs, &mut triples, &mut corners, &needed);
        // Never drawn for again, reached or not (a rounding that left the cell).
        pairs.remove(&target);
        if target.level == Level::Triple && !cells_of(shape, Level::Triple).contains(&target) {
            triples.remove(&target);
        }
        cases.push((target, shape, cost(values)));
    }
    if !triples.is_empty() {
        *triples_left
            .entry(format!("past the campaign's {budget} range cases"))
            .or_default() += triples.len();
    }
    cases.sort_by_key(|&(_, _, c)| c);
    plan.coverage.planned_cases = cases.len();
    plan.coverage.triples_left = triples_left;
    plan.cases = cases
        .into_iter()
        .enumerate()
        .map(|(i, (cell, shape, _))| {
            (
                cell,
                CaseSpec {
                    shape,
                    dist: dists[i % dists.len()],
                    seed: rng.next_u64(),
                },
            )
        })
        .collect();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drawn(seed: u64, support: ShapeSupport) -> RangePlan {
        range_cases(
            ProblemKind::DualGemm,
            support,
            &Distribution::ALL,
            seed,
            DEFAULT_GPU_RANGE_CASES,
        )
    }

    #[test]
    fn every_pair_the_bound_holds_is_reached_and_the_rest_are_listed() {
        for seed in 0..3 {
            let plan = drawn(seed, ShapeSupport::ANY);
            let mut reached = RangeCoverage::default();
            for (_, case) in &plan.cases {
                let s = case.shape;
                assert!(within_bound([s.m, s.n, s.k, s.l]), "{s:?}");
                reached.record(s);
            }
            let left = plan.coverage.pairs_left.len();
            assert_eq!(reached.pairs_covered + left, plan.coverage.pairs_total);
            assert!(plan
                .coverage
                .pairs_left
                .iter()
                .all(|(_, why)| why == PAST_BOUND));
            // Past the bound: the largest corners only (M 2^16 with N 2^11 and more, ...).
            assert!(left < 100, "{left}: {:?}", plan.coverage.pairs_left);
            assert!(plan.cases.len() <= DEFAULT_GPU_RANGE_CASES.max(plan.coverage.planned_cases));
            // Triples up to the budget.
            assert!(reached.triples_covered > plan.coverage.triples_total / 2);
        }
        // The seed draws the cases.
        let shapes = |seed| -> Vec<Shape> {
            drawn(seed, ShapeSupport::ANY)
                .cases
                .iter()
                .map(|(_, c)| c.shape)
                .collect()
        };
        assert_eq!(shapes(5), shapes(5));
        assert_ne!(shapes(5), shapes(6));
    }

    #[test]
    fn a_restricted_support_is_kept_and_what_it_excludes_is_said() {
        let support = ShapeSupport {
            m_multiple: 128,
            n_multiple: 128,
            k_multiple: 256,
            max_l: 1,
        };
        let plan = drawn(1, support);
        assert!(plan.cases.iter().all(|(_, c)| support.supports(c.shape)));
        let outside = plan
            .coverage
            .pairs_left
            .iter()
            .filter(|(_, why)| why == OUTSIDE_SUPPORT)
            .count();
        // M below 128, N below 128, K below 256, L past 1: outside.
        assert!(outside > 100, "{outside}");
        assert!(plan
            .coverage
            .pairs_left
            .iter()
            .any(|(cell, _)| cell.contains("L 2-3")));
    }

    /// What the draw costs: `cargo test --release -p nvfp4-harness range_draw_cost -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn range_draw_cost() {
        for seed in 0..3 {
            let started = std::time::Instant::now();
            let plan = drawn(seed, ShapeSupport::ANY);
            let costs: Vec<usize> = plan
                .cases
                .iter()
                .map(|(_, c)| {
                    let s = c.shape;
                    cost([s.m, s.n, s.k, s.l])
                })
                .collect();
            let big = costs.iter().filter(|&&c| c > 1 << 24).count();
            let pair_cost: usize = plan
                .cases
                .iter()
                .filter(|(cell, _)| cell.level == Level::Pair)
                .map(|(_, c)| {
                    let s = c.shape;
                    cost([s.m, s.n, s.k, s.l])
                })
                .sum();
            let pair_cases = plan
                .cases
                .iter()
                .filter(|(cell, _)| cell.level == Level::Pair)
                .count();
            println!("pair phase: {pair_cases} cases, {pair_cost} elements");
            println!("seed {seed}: {} cases in {:?}, {} elements in all ({} past 2^24), pairs left {}, triples left {:?}", plan.cases.len(), started.elapsed(), costs.iter().sum::<usize>(), big, plan.coverage.pairs_left.len(), plan.coverage.triples_left);
        }
    }

    #[test]
    fn the_reasons_name_the_bounds_in_force() {
        let elements = format!("2^{} elements", RANGE_ELEMENTS_BOUND.ilog2());
        let products = format!("2^{} multiply-adds", RANGE_PRODUCTS_BOUND.ilog2());
        assert!(PAST_BOUND.contains(&elements) && PAST_BOUND.contains(&products));
    }

    #[test]
    fn values_fall_where_kernels_branch() {
        let plan = drawn(2, ShapeSupport::ANY);
        let ks: Vec<usize> = plan.cases.iter().map(|(_, c)| c.shape.k).collect();
        assert!(ks.iter().all(|k| k % 16 == 0));
        assert!(ks.iter().any(|k| k % 64 != 0));
        assert!(ks.iter().any(|k| *k >= 1024 && k % 1024 == 0));
        let ns: Vec<usize> = plan.cases.iter().map(|(_, c)| c.shape.n).collect();
        assert!(ns.iter().any(|n| *n > 128 && n % 128 == 1));
        assert!(ns
            .iter()
            .any(|n| *n > 256 && n % 128 == 0 && (n / 128) % 2 == 1));
    }
}
