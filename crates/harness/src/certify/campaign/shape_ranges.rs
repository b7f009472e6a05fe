//! The shape space a GPU campaign covers, cut into ranges: what a *cell* is, which cells a shape
//! lies in, and why bench refuses a shape whose cells a certificate never reached.
//!
//! A kernel's code path changes where a dimension crosses a boundary (a tile count, a table
//! size, a counter's width), and a bug often needs two or three of them at once: many experts
//! *and* a deep K, a mid M *and* a mid N. Listing such conjunctions one bug report at a time
//! never reaches the next one. Instead, each dimension is cut into octaves over the whole
//! deployment space (M 1..=131071, N 1..=262143, K 16..=131071, L 1..=511: every `[2^i,
//! 2^(i+1))`), and every campaign puts at least one case in every *pair* of octaves of every pair
//! of dimensions (M x N, M x K, M x L, N x K, N x L, K x L) that one case can hold: pairwise, or
//! combinatorial, testing. Triples of dimensions are covered more coarsely, in *bands* of two
//! octaves (`[4^b, 4^(b+1))`), as many as the campaign's budget allows (`range_draw.rs`).
//!
//! Cells are named by their dimensions and ranges: `M2^7 N2^12` is M in 128..=255 with N in
//! 4096..=8191; `M4^3 N4^6 K4^5` is M in 64..=255, N in 4096..=16383 and K in 1024..=4095.

use nvfp4_model::problem::Shape;
use std::collections::BTreeSet;

/// One dimension of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dim {
    M,
    N,
    K,
    L,
}

impl Dim {
    pub const ALL: [Dim; 4] = [Dim::M, Dim::N, Dim::K, Dim::L];

    pub fn name(self) -> &'static str {
        match self {
            Dim::M => "M",
            Dim::N => "N",
            Dim::K => "K",
            Dim::L => "L",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The dimension's value in `shape`.
    pub fn of(self, shape: Shape) -> usize {
        match self {
            Dim::M => shape.m,
            Dim::N => shape.n,
            Dim::K => shape.k,
            Dim::L => shape.l,
        }
    }

    /// The octaves the space spans: octave `i` holds the values `2^i..2^(i+1)`. K starts at 16
    /// (one scale block); L (experts, batches) ends past 256 experts.
    pub fn octaves(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Dim::M => 0..=16,
            Dim::N => 0..=17,
            Dim::K => 4..=16,
            Dim::L => 0..=8,
        }
    }

    /// The bands (two octaves each) the space spans: band `b` holds `4^b..4^(b+1)`.
    pub fn bands(self) -> std::ops::RangeInclusive<u32> {
        let octaves = self.octaves();
        octaves.start() / 2..=octaves.end() / 2
    }
}

/// The octave of a value (at least 1).
pub fn octave(value: usize) -> u32 {
    value.max(1).ilog2()
}

/// The values of octave `o`: `2^o..=2^(o+1)-1`.
pub fn octave_values(o: u32) -> (usize, usize) {
    (1 << o, (1 << (o + 1)) - 1)
}

/// How fine a cell's ranges are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Two dimensions, an octave each.
    Pair,
    /// Three dimensions, a band of two octaves each.
    Triple,
}

/// A cell of the shape space: a range in each of two (pairs) or three (triples) dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    pub level: Level,
    /// Per dimension (in [`Dim::ALL`] order): its octave (pairs) or band (triples), or `None`
    /// where the cell does not constrain it.
    pub at: [Option<u32>; 4],
}

/// The six pairs and four triples of dimensions.
pub const PAIRS: [[Dim; 2]; 6] = [
    [Dim::M, Dim::N],
    [Dim::M, Dim::K],
    [Dim::M, Dim::L],
    [Dim::N, Dim::K],
    [Dim::N, Dim::L],
    [Dim::K, Dim::L],
];
pub const TRIPLES: [[Dim; 3]; 4] = [
    [Dim::M, Dim::N, Dim::K],
    [Dim::M, Dim::N, Dim::L],
    [Dim::M, Dim::K, Dim::L],
    [Dim::N, Dim::K, Dim::L],
];

impl Cell {
    /// Its name in certificates: `M2^7 N2^12` (octaves), `M4^3 N4^6 K4^5` (bands).
    pub fn key(&self) -> String {
        let base = match self.level {
            Level::Pair => 2,
            Level::Triple => 4,
        };
        Dim::ALL
            .iter()
            .filter_map(|&d| Some(format!("{}{base}^{}", d.name(), self.at[d.index()]?)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The values each constrained dimension takes, inclusive: `M 128-255 x N 4096-8191`.
    pub fn describe(&self) -> String {
        Dim::ALL
            .iter()
            .filter_map(|&d| {
                let (lo, hi) = self.values(d)?;
                Some(format!("{} {lo}-{hi}", d.name()))
            })
            .collect::<Vec<_>>()
            .join(" x ")
    }

    /// The values of dimension `d` in the cell, inclusive (`None`: unconstrained).
    pub fn values(&self, d: Dim) -> Option<(usize, usize)> {
        let at = self.at[d.index()]?;
        Some(match self.level {
            Level::Pair => octave_values(at),
            Level::Triple => (octave_values(2 * at).0, octave_values(2 * at + 1).1),
        })
    }

    /// The dimensions the cell constrains.
    pub fn dims(&self) -> impl Iterator<Item = Dim> + '_ {
        Dim::ALL
            .into_iter()
            .filter(|d| self.at[d.index()].is_some())
    }
}

/// Whether `shape` lies in the space, dimension by dimension (a value past the last octave
/// lies in no cell).
fn position(shape: Shape) -> [Option<u32>; 4] {
    Dim::ALL.map(|d| {
        let o = octave(d.of(shape));
        d.octaves().contains(&o).then_some(o)
    })
}

/// The cells of `level` that `shape` lies in.
pub fn cells_of(shape: Shape, level: Level) -> Vec<Cell> {
    let at = position(shape);
    let mut cells = Vec::new();
    match level {
        Level::Pair => {
            for dims in PAIRS {
                let mut cell = [None; 4];
                for d in dims {
                    cell[d.index()] = at[d.index()];
                }
                if dims.iter().all(|d| cell[d.index()].is_some()) {
                    cells.push(Cell { level, at: cell });
                }
            }
        }
        Level::Triple => {
            for dims in TRIPLES {
                let mut cell = [None; 4];
                for d in dims {
                    cell[d.index()] = at[d.index()].map(|o| o / 2);
                }
                if dims.iter().all(|d| cell[d.index()].is_some()) {
                    cells.push(Cell { level, at: cell });
                }
            }
        }
    }
    cells
}

/// Every cell of `level` in the space.
pub fn all_cells(level: Level) -> Vec<Cell> {
    let span = |d: Dim| match level {
        Level::Pair => d.octaves(),
        Level::Triple => d.bands(),
    };
    let groups: Vec<&[Dim]> = match level {
        Level::Pair => PAIRS.iter().map(|p| &p[..]).collect(),
        Level::Triple => TRIPLES.iter().map(|t| &t[..]).collect(),
    };
    let mut cells = Vec::new();
    for dims in groups {
        let mut partial = vec![[None; 4]];
        for &d in dims {
            partial = partial
                .into_iter()
                .flat_map(|at| {
                    span(d).map(move |v| {
                        let mut at = at;
                        at[d.index()] = Some(v);
                        at
                    })
                })
                .collect();
        }
        cells.extend(partial.into_iter().map(|at| Cell { level, at }));
    }
    cells
}

/// What a campaign's cases reached of the shape space, as certificates carry it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RangeCoverage {
    /// Cases drawn to cover the cells (`certify --range-cases`), planned.
    pub planned_cases: usize,
    /// The cells of each level in the space, and how many some case of the campaign (whatever
    /// drew it) lay in.
    pub pairs_total: usize,
    pub pairs_covered: usize,
    pub triples_total: usize,
    pub triples_covered: usize,
    /// The keys ([`Cell::key`]) of every cell, pair or triple, some case lay in.
    pub covered: BTreeSet<String>,
    /// The cells no planned case could hold, `(cell, why)`: outside the kernel's shape support,
    /// past the per-case memory bound, or (triples) past the budget. Pairs listed one by one,
    /// triples counted by reason in [`RangeCoverage::triples_left`].
    pub pairs_left: Vec<(String, String)>,
    pub triples_left: std::collections::BTreeMap<String, usize>,
}

impl RangeCoverage {
    /// Counts `shape` (a case that ran) in the cells it lies in.
    pub fn record(&mut self, shape: Shape) {
        for level in [Level::Pair, Level::Triple] {
            for cell in cells_of(shape, level) {
                if self.covered.insert(cell.key()) {
                    match level {
                        Level::Pair => self.pairs_covered += 1,
                        Level::Triple => self.triples_covered += 1,
                    }
                }
            }
        }
    }

    /// Adds another shard's coverage of the same campaign.
    pub fn merge(&mut self, other: &RangeCoverage) {
        for key in &other.covered {
            if self.covered.insert(key.clone()) {
                if key.contains("4^") {
                    self.triples_covered += 1;
                } else {
                    self.pairs_covered += 1;
                }
            }
        }
    }
}

/// Why bench must not time `shape` on the strength of a certificate whose coverage (its JSON)
/// is `coverage`: a pair of ranges the shape lies in that no case of the campaign reached. None
/// for a certificate from before the ranges (its regimes still hold bench back).
pub fn uncovered_range(coverage: &serde_json::Value, shape: Shape) -> Option<String> {
    let covered = coverage["ranges"]["covered"].as_array()?;
    let covered: BTreeSet<&str> = covered.iter().filter_map(|k| k.as_str()).collect();
    let missing: Vec<String> = cells_of(shape, Level::Pair)
        .into_iter()
        .filter(|cell| !covered.contains(cell.key().as_str()))
        .map(|cell| cell.describe())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{shape} lies in ranges its certificate ran no case in ({}); certify it again with the \
             shape declared (a manifest's production shapes, or --model)",
            missing.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: usize, n: usize, k: usize, l: usize) -> Shape {
        Shape::new(m, n, k, l).unwrap()
    }

    #[test]
    fn a_shape_lies_in_one_cell_of_each_pair_and_triple() {
        let s = shape(512, 8192, 3072, 1);
        let pairs = cells_of(s, Level::Pair);
        assert_eq!(pairs.len(), 6);
        assert_eq!(pairs[0].key(), "M2^9 N2^13");
        assert_eq!(pairs[0].describe(), "M 512-1023 x N 8192-16383");
        let triples = cells_of(s, Level::Triple);
        assert_eq!(triples.len(), 4);
        assert_eq!(triples[0].key(), "M4^4 N4^6 K4^5");
        assert_eq!(
            triples[0].describe(),
            "M 256-1023 x N 4096-16383 x K 1024-4095"
        );
        // Every value of a cell's ranges lies back in the cell.
        for cell in pairs.iter().chain(&triples) {
            for d in cell.dims() {
                let (lo, hi) = cell.values(d).unwrap();
                assert!((lo..=hi).contains(&d.of(s)), "{cell:?} {d:?}");
            }
        }
        // Past the space's last octave: no cell in that dimension.
        assert_eq!(cells_of(shape(1, 1 << 18, 16, 1), Level::Pair).len(), 3);
    }

    #[test]
    fn the_space_is_every_octave_pair_and_band_triple() {
        let pairs = all_cells(Level::Pair);
        // M 17 octaves, N 18, K 13, L 9.
        assert_eq!(
            pairs.len(),
            17 * 18 + 17 * 13 + 17 * 9 + 18 * 13 + 18 * 9 + 13 * 9
        );
        let triples = all_cells(Level::Triple);
        // Bands: M 0..=8 (9), N 0..=8 (9), K 2..=8 (7), L 0..=4 (5).
        assert_eq!(triples.len(), 9 * 9 * 7 + 9 * 9 * 5 + 9 * 7 * 5 + 9 * 7 * 5);
        let keys: BTreeSet<String> = pairs.iter().chain(&triples).map(|c| c.key()).collect();
        assert_eq!(keys.len(), pairs.len() + triples.len());
    }

    #[test]
    fn bench_refuses_a_shape_in_a_pair_no_case_reached() {
        let mut ranges = RangeCoverage::default();
        ranges.record(shape(256, 4096, 7168, 1));
        let coverage = serde_json::json!({ "ranges": ranges });
        assert_eq!(uncovered_range(&coverage, shape(300, 5000, 5008, 1)), None);
        let why = uncovered_range(&coverage, shape(300, 40000, 5008, 1)).unwrap();
        assert!(why.contains("N 32768-65535"), "{why}");
        // A certificate from before the ranges: no refusal on this ground.
        assert_eq!(
            uncovered_range(&serde_json::json!({}), shape(1, 1, 16, 1)),
            None
        );
    }
}
