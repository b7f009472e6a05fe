//! The problems next to the one asked, that a kernel with an indexing or epilogue bug solves
//! instead: the same inputs read through another batch, row or column index (another batch,
//! index mod 2^j, +-1, batch 0 past a ring), B1's and B2's scales confused over a K range, a K
//! chunk scaled with the chunk before it, or an fp16 epilogue. Each is computed exactly, with
//! the model's own acceptance intervals, so that an output can be held against it element by
//! element (`identify.rs`).

use crate::compare::element_sample::ElementSample;
use crate::formats::fp16_from_f64_rne;
use crate::model::bounds::{
    accumulator_range_in, epilogue_range, fp16_interval, Accumulator, Epilogue, KOrder, Range,
};
use crate::model::exact_grid::exact_dot_grid;
use crate::problem::{BlockScaledMatrix, DualGemmInputs, SCALE_BLOCK};
use half::f16;

/// The operands a misread index takes from elsewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operands {
    Sfa,
    /// SFB1 alone (B1's data, and B2 whole, its own).
    Sfb1,
    /// SFB2 alone.
    Sfb2,
    Sfb,
    Scales,
    A,
    /// B1 and SFB1 alone (B2 its own): a pointer table of one operand.
    B1,
    /// B2 and SFB2 alone.
    B2,
    B,
    All,
}

impl Operands {
    /// Narrowest first: the first that fits is the most specific claim.
    pub const ALL: [Operands; 10] = [
        Operands::Sfa,
        Operands::Sfb1,
        Operands::Sfb2,
        Operands::Sfb,
        Operands::Scales,
        Operands::A,
        Operands::B1,
        Operands::B2,
        Operands::B,
        Operands::All,
    ];

    fn words(self) -> &'static str {
        match self {
            Operands::Sfa => "SFA (A's scale factors)",
            Operands::Sfb1 => "SFB1 (B1's scale factors)",
            Operands::Sfb2 => "SFB2 (B2's scale factors)",
            Operands::Sfb => "SFB1 and SFB2",
            Operands::Scales => "scale factors (SFA, SFB1, SFB2)",
            Operands::A => "A and SFA",
            Operands::B1 => "B1 and SFB1",
            Operands::B2 => "B2 and SFB2",
            Operands::B => "B1, B2 and their scale factors",
            Operands::All => "operands (A, B1, B2 and their scale factors)",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Operands::Sfa => "sfa",
            Operands::Sfb1 => "sfb1",
            Operands::Sfb2 => "sfb2",
            Operands::Sfb => "sfb",
            Operands::Scales => "scales",
            Operands::A => "a",
            Operands::B1 => "b1",
            Operands::B2 => "b2",
            Operands::B => "b",
            Operands::All => "operands",
        }
    }

    /// Whether the (data, scales) of A, of B1 and of B2 are taken from elsewhere.
    fn parts(self) -> [(bool, bool); 3] {
        const OWN: (bool, bool) = (false, false);
        const SCALES: (bool, bool) = (false, true);
        const BOTH: (bool, bool) = (true, true);
        match self {
            Operands::Sfa => [SCALES, OWN, OWN],
            Operands::Sfb1 => [OWN, SCALES, OWN],
            Operands::Sfb2 => [OWN, OWN, SCALES],
            Operands::Sfb => [OWN, SCALES, SCALES],
            Operands::Scales => [SCALES, SCALES, SCALES],
            Operands::A => [BOTH, OWN, OWN],
            Operands::B1 => [OWN, BOTH, OWN],
            Operands::B2 => [OWN, OWN, BOTH],
            Operands::B => [OWN, BOTH, BOTH],
            Operands::All => [BOTH, BOTH, BOTH],
        }
    }
}

/// Which index a misread index reads instead of `i` (of `len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMap {
    /// `i mod 2^j` (j = 0: index 0 for every i).
    Mod(u32),
    /// `i - 1` (index 0 itself).
    Minus1,
    /// `i + 1` (the last index itself).
    Plus1,
    /// Index 0 for `i >= t`, `i` itself below: a ring of `t` entries that wraps to its first.
    ZeroFrom(usize),
    /// Index 0 for the last index alone (a last entry's pointer never set: it keeps the first).
    LastFromZero,
}

impl IndexMap {
    pub fn apply(self, i: usize, len: usize) -> usize {
        match self {
            IndexMap::Mod(j) => i % (1usize << j),
            IndexMap::Minus1 => i.saturating_sub(1),
            IndexMap::Plus1 if i + 1 < len => i + 1,
            IndexMap::Plus1 => i,
            IndexMap::ZeroFrom(t) if i >= t => 0,
            IndexMap::ZeroFrom(_) => i,
            IndexMap::LastFromZero if i + 1 == len => 0,
            IndexMap::LastFromZero => i,
        }
    }

    /// "l mod 32", "0", "n - 1", "0 for l >= 4".
    pub fn words(self, index: &str) -> String {
        match self {
            IndexMap::Mod(0) => "0".into(),
            IndexMap::Mod(j) => format!("{index} mod {}", 1usize << j),
            IndexMap::Minus1 => format!("{index} - 1"),
            IndexMap::Plus1 => format!("{index} + 1"),
            IndexMap::ZeroFrom(t) => format!("0 for {index} >= {t}"),
            IndexMap::LastFromZero => format!("0 for the last {index}"),
        }
    }

    fn slug(self) -> String {
        match self {
            IndexMap::Mod(0) => "0".into(),
            IndexMap::Mod(j) => format!("mod-{}", 1usize << j),
            IndexMap::Minus1 => "minus-1".into(),
            IndexMap::Plus1 => "plus-1".into(),
            IndexMap::ZeroFrom(t) => format!("0-from-{t}"),
            IndexMap::LastFromZero => "0-for-the-last".into(),
        }
    }

    /// The maps worth trying over `len` indices, simplest first, none the identity there and
    /// none equal to an earlier one on `0..len`. `rings` adds "0 from t" for every t (batches:
    /// a table of experts or a ring of buffers); rows and columns only get the others.
    pub fn candidates(len: usize, rings: bool) -> Vec<IndexMap> {
        let mut maps: Vec<IndexMap> = (0..usize::BITS)
            .take_while(|&j| (1usize << j) < len)
            .map(IndexMap::Mod)
            .collect();
        maps.reverse();
        maps.extend([IndexMap::Minus1, IndexMap::Plus1]);
        let mut rings_from = Vec::new();
        if rings {
            // Past 64 entries, rings of powers of two only: each one costs a whole reference.
            // A ring from 1 is batch 0 for every l, already there.
            let ts: Vec<usize> = if len <= 64 {
                (2..len).collect()
            } else {
                (1..usize::BITS)
                    .map(|j| 1usize << j)
                    .take_while(|&t| t < len)
                    .collect()
            };
            rings_from = ts;
        }
        let mut tables: Vec<Vec<usize>> = Vec::new();
        maps.retain(|map| {
            let table: Vec<usize> = (0..len).map(|i| map.apply(i, len)).collect();
            let identity = table.iter().enumerate().all(|(i, &s)| i == s);
            let seen = tables.contains(&table);
            tables.push(table);
            !identity && !seen
        });
        // Rings are kept even where a shorter run makes one equal to a map above (a ring of 32
        // and l mod 32 agree up to L = 33): both are then named as consistent, and a longer run
        // tells them apart.
        maps.extend(rings_from.into_iter().map(IndexMap::ZeroFrom));
        // The last entry alone from the first: at the campaign's L the same table as the ring
        // of L - 1, and told apart from it by a run of more batches.
        if rings && len > 2 {
            maps.push(IndexMap::LastFromZero);
        }
        maps
    }
}

/// A range of K, in scale blocks of 16.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KRange {
    All,
    /// The second half of the K blocks (a split-K's second half).
    SecondHalf,
    /// The last chunk of `chunk` elements of K, where there is a chunk before it.
    Tail {
        chunk: usize,
    },
}

impl KRange {
    /// The blocks of the range and the length of the chunk before it, if it has one.
    fn blocks(self, blocks: usize) -> Option<(std::ops::Range<usize>, usize)> {
        match self {
            KRange::All => Some((0..blocks, 0)),
            KRange::SecondHalf => (blocks >= 2).then(|| (blocks / 2..blocks, blocks / 2)),
            KRange::Tail { chunk } => {
                let per = chunk / SCALE_BLOCK;
                let start = (blocks - 1) / per * per;
                (start > 0).then(|| (start..blocks, per))
            }
        }
    }

    fn words(self, blocks: usize) -> String {
        let k = |block: usize| block * SCALE_BLOCK;
        match (self, self.blocks(blocks)) {
            (KRange::All, _) => "over all of K".into(),
            (KRange::SecondHalf, Some((range, _))) => {
                format!("over the second half of K (k >= {})", k(range.start))
            }
            (KRange::Tail { chunk }, Some((range, _))) => {
                format!("over the last K chunk of {chunk} (k >= {})", k(range.start))
            }
            _ => String::new(),
        }
    }

    fn slug(self) -> String {
        match self {
            KRange::All => "all-k".into(),
            KRange::SecondHalf => "second-half-of-k".into(),
            KRange::Tail { chunk } => format!("k-tail-of-{chunk}"),
        }
    }
}

/// How scales are misread over a K range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KMisread {
    B2WithSfb1,
    B1WithSfb2,
    SfbSwapped,
    /// Every operand's scales of block j read from block j minus the chunk's length.
    PreviousChunkScales,
}

/// One nearby problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearbyProblem {
    /// Batch l reads `operands` from batch `map(l)`.
    Batches { operands: Operands, map: IndexMap },
    /// Column n reads B1's and B2's rows (or only their scales) from row `map(n)`.
    Columns { scales_only: bool, map: IndexMap },
    /// Row m reads A's row (or only its scales) from row `map(m)`.
    Rows { scales_only: bool, map: IndexMap },
    /// Scales misread over a K range.
    KRange { misread: KMisread, range: KRange },
    /// silu(A@B1) rounded to fp16 before the product.
    Fp16Silu,
    /// A@B1 and A@B2 rounded to fp16 before the epilogue.
    Fp16Accumulators,
}

impl NearbyProblem {
    /// Every nearby problem worth trying on `shape`, simplest first within each family.
    pub fn candidates(shape: crate::problem::Shape) -> Vec<NearbyProblem> {
        let mut out = Vec::new();
        if shape.l > 1 {
            for operands in Operands::ALL {
                for map in IndexMap::candidates(shape.l, true) {
                    out.push(NearbyProblem::Batches { operands, map });
                }
            }
        }
        for scales_only in [true, false] {
            for map in IndexMap::candidates(shape.n, false) {
                out.push(NearbyProblem::Columns { scales_only, map });
            }
            for map in IndexMap::candidates(shape.m, false) {
                out.push(NearbyProblem::Rows { scales_only, map });
            }
        }
        let blocks = shape.k / SCALE_BLOCK;
        let mut ranges = vec![KRange::All, KRange::SecondHalf];
        ranges.extend(
            (6..usize::BITS)
                .map(|j| 1usize << j)
                .take_while(|&chunk| chunk < shape.k)
                .map(|chunk| KRange::Tail { chunk }),
        );
        for range in ranges {
            if range.blocks(blocks).is_none() {
                continue;
            }
            for misread in [
                KMisread::B2WithSfb1,
                KMisread::B1WithSfb2,
                KMisread::SfbSwapped,
                KMisread::PreviousChunkScales,
            ] {
                if !(range == KRange::All && misread == KMisread::PreviousChunkScales) {
                    out.push(NearbyProblem::KRange { misread, range });
                }
            }
        }
        out.extend([NearbyProblem::Fp16Silu, NearbyProblem::Fp16Accumulators]);
        out
    }

    /// What the kernel computed instead, in words, on a problem of `blocks` K blocks.
    pub fn words(self, blocks: usize) -> String {
        let what = match self {
            NearbyProblem::Batches { operands, map } => format!(
                "batch l's {} taken from batch {}",
                operands.words(),
                map.words("l")
            ),
            NearbyProblem::Columns { scales_only, map } => format!(
                "column n's {} taken from row {} of B1 and B2",
                if scales_only {
                    "SFB1 and SFB2 rows"
                } else {
                    "B1 and B2 rows (and their scale factors)"
                },
                map.words("n")
            ),
            NearbyProblem::Rows { scales_only, map } => format!(
                "row m's {} taken from row {} of A",
                if scales_only {
                    "SFA row"
                } else {
                    "A row (and its scale factors)"
                },
                map.words("m")
            ),
            NearbyProblem::KRange { misread, range } => {
                let misread = match misread {
                    KMisread::B2WithSfb1 => "B2 scaled with SFB1 (B1's scale factors)",
                    KMisread::B1WithSfb2 => "B1 scaled with SFB2 (B2's scale factors)",
                    KMisread::SfbSwapped => "SFB1 and SFB2 swapped",
                    KMisread::PreviousChunkScales => {
                        "every operand scaled with the scale factors of the K chunk before"
                    }
                };
                format!("{misread} {}", range.words(blocks))
            }
            NearbyProblem::Fp16Silu => {
                "silu(A@B1) rounded to fp16 before the product (an fp16 epilogue)".into()
            }
            NearbyProblem::Fp16Accumulators => {
                "A@B1 and A@B2 rounded to fp16 before the epilogue (an fp16 epilogue)".into()
            }
        };
        format!("the exact answer with {what}")
    }

    /// A stable name for the JSON: "batches-scales-mod-32", "k-range-b2-with-sfb1-second-half-of-k".
    pub fn slug(self) -> String {
        match self {
            NearbyProblem::Batches { operands, map } => {
                format!("batches-{}-from-{}", operands.slug(), map.slug())
            }
            NearbyProblem::Columns { scales_only, map } => format!(
                "columns-{}-from-{}",
                if scales_only { "sfb" } else { "b" },
                map.slug()
            ),
            NearbyProblem::Rows { scales_only, map } => format!(
                "rows-{}-from-{}",
                if scales_only { "sfa" } else { "a" },
                map.slug()
            ),
            NearbyProblem::KRange { misread, range } => format!(
                "k-range-{}-{}",
                match misread {
                    KMisread::B2WithSfb1 => "b2-with-sfb1",
                    KMisread::B1WithSfb2 => "b1-with-sfb2",
                    KMisread::SfbSwapped => "sfb-swapped",
                    KMisread::PreviousChunkScales => "previous-chunk-scales",
                },
                range.slug()
            ),
            NearbyProblem::Fp16Silu => "fp16-silu-epilogue".into(),
            NearbyProblem::Fp16Accumulators => "fp16-accumulators-epilogue".into(),
        }
    }

    /// The family, as the JSON names it.
    pub fn family(self) -> &'static str {
        match self {
            NearbyProblem::Batches { .. } => "another-batch",
            NearbyProblem::Columns { .. } => "another-column",
            NearbyProblem::Rows { .. } => "another-row",
            NearbyProblem::KRange { .. } => "k-range-scales",
            NearbyProblem::Fp16Silu | NearbyProblem::Fp16Accumulators => "fp16-epilogue",
        }
    }

    /// The inputs as this problem reads them at the sample's rows, columns and batches (a
    /// problem of the sample's shape), or `None` where it cannot differ from the problem asked.
    fn read_inputs(self, inputs: &DualGemmInputs, at: &ElementSample) -> Option<DualGemmInputs> {
        let shape = inputs.shape;
        let same = |i: usize| i;
        // An operand read through (batch map, row map) for its data and/or scales; its rows
        // are the sample's rows (A) or columns (B1, B2).
        let read = |op: &BlockScaledMatrix,
                    rows: &[usize],
                    batch: &dyn Fn(usize) -> usize,
                    row: &dyn Fn(usize) -> usize,
                    (data, scales): (bool, bool)| {
            gather(op, rows, &at.batches, batch, row, data, scales)
        };
        let own = (false, false);
        let (rows, columns) = (&at.rows[..], &at.columns[..]);
        let read_at = |(a, b1, b2): ((bool, bool), (bool, bool), (bool, bool)),
                       batch: &dyn Fn(usize) -> usize,
                       a_row: &dyn Fn(usize) -> usize,
                       b_row: &dyn Fn(usize) -> usize| DualGemmInputs {
            shape: at.shape(shape.k),
            a: read(&inputs.a, rows, batch, a_row, a),
            b1: read(&inputs.b1, columns, batch, b_row, b1),
            b2: read(&inputs.b2, columns, batch, b_row, b2),
        };
        match self {
            NearbyProblem::Batches { operands, map } => {
                let [a, b1, b2] = operands.parts();
                let batches = |l: usize| map.apply(l, shape.l);
                Some(read_at((a, b1, b2), &batches, &same, &same))
            }
            NearbyProblem::Columns { scales_only, map } => {
                let b_rows = |n: usize| map.apply(n, shape.n);
                let b = (!scales_only, true);
                Some(read_at((own, b, b), &same, &same, &b_rows))
            }
            NearbyProblem::Rows { scales_only, map } => {
                let a_rows = |m: usize| map.apply(m, shape.m);
                Some(read_at(
                    ((!scales_only, true), own, own),
                    &same,
                    &a_rows,
                    &same,
                ))
            }
            NearbyProblem::KRange { misread, range } => {
                let (blocks, before) = range.blocks(shape.k / SCALE_BLOCK)?;
                let sampled = read_at((own, own, own), &same, &same, &same);
                Some(misread_k_range(&sampled, misread, blocks, before))
            }
            NearbyProblem::Fp16Silu | NearbyProblem::Fp16Accumulators => {
                Some(read_at((own, own, own), &same, &same, &same))
            }
        }
    }

    /// This problem's acceptance intervals on `inputs` (`[M, N, L]`, L fastest), or `None`
    /// where it cannot differ from the problem asked.
    pub fn intervals(self, inputs: &DualGemmInputs, order: KOrder) -> Option<Intervals> {
        self.intervals_at(inputs, order, &ElementSample::whole(inputs.shape))
    }

    /// This problem's acceptance intervals at the sample's elements of `inputs` (in the
    /// sample's order: [`ElementSample::index_in`] says where each lies), or `None` where it
    /// cannot differ from the problem asked. Each element's intervals are those of the whole
    /// problem: a nearby problem reads each element's operands through its maps from the whole
    /// inputs, whichever other elements are computed.
    pub fn intervals_at(
        self,
        inputs: &DualGemmInputs,
        order: KOrder,
        at: &ElementSample,
    ) -> Option<Intervals> {
        let read = self.read_inputs(inputs, at)?;
        let shape = read.shape;
        let blocks = shape.scale_cols();
        let len = shape.m * shape.n * shape.l;
        let mut out = Intervals {
            lo: vec![f16::ZERO; len],
            hi: vec![f16::ZERO; len],
            unbounded: vec![false; len],
        };
        for l in 0..shape.l {
            let elements =
                exact_dot_grid(&read.a, &[&read.b1, &read.b2], l, true, None, |_, _, d| {
                    let x1 = accumulator_range_in(&d[0], blocks, order, Accumulator::F32);
                    let x2 = accumulator_range_in(&d[1], blocks, order, Accumulator::F32);
                    let range = self.epilogue(x1, x2);
                    let (lo, hi) = fp16_interval(range);
                    (lo, hi, range == Range::Unbounded)
                });
            for (i, (lo, hi, unbounded)) in elements.into_iter().enumerate() {
                let index = i * shape.l + l;
                out.lo[index] = lo;
                out.hi[index] = hi;
                out.unbounded[index] = unbounded;
            }
        }
        Some(out)
    }

    /// The epilogue's range, with this problem's fp16 roundings inside it.
    fn epilogue(self, x1: Range, x2: Range) -> Range {
        match self {
            NearbyProblem::Fp16Silu => {
                let silu = epilogue_range(Epilogue::SiluMul, x1, Range::Real { lo: 1.0, hi: 1.0 });
                epilogue_range(Epilogue::Mul, rounded_to_fp16(silu), x2)
            }
            NearbyProblem::Fp16Accumulators => {
                epilogue_range(Epilogue::SiluMul, rounded_to_fp16(x1), rounded_to_fp16(x2))
            }
            _ => epilogue_range(Epilogue::SiluMul, x1, x2),
        }
    }
}

/// Per-element acceptance of a nearby problem.
pub struct Intervals {
    pub lo: Vec<f16>,
    pub hi: Vec<f16>,
    /// The model cannot bound these elements.
    pub unbounded: Vec<bool>,
}

/// A range rounded to fp16 (round to nearest even is monotone: the ends map to the ends).
fn rounded_to_fp16(range: Range) -> Range {
    match range {
        Range::Real { lo, hi } => Range::Real {
            lo: fp16_from_f64_rne(lo).to_f64(),
            hi: fp16_from_f64_rne(hi).to_f64(),
        },
        other => other,
    }
}

/// The rows `rows` of `op` in the batches `batches`, each (batch, row)'s data and/or scales
/// read from (`batch(l)`, `row(r)`) instead (a matrix of `rows.len()` rows and
/// `batches.len()` batches).
fn gather(
    op: &BlockScaledMatrix,
    rows: &[usize],
    batches: &[usize],
    batch: &dyn Fn(usize) -> usize,
    row: &dyn Fn(usize) -> usize,
    data: bool,
    scales: bool,
) -> BlockScaledMatrix {
    let count = rows.len() * batches.len();
    let mut new_data = Vec::with_capacity(count * op.k() / 2);
    let mut new_scales = Vec::with_capacity(count * op.k() / SCALE_BLOCK);
    for &l in batches {
        for &r in rows {
            let (sl, sr) = (batch(l), row(r));
            new_data.extend_from_slice(if data {
                op.row_data(sr, sl)
            } else {
                op.row_data(r, l)
            });
            new_scales.extend_from_slice(if scales {
                op.row_scales(sr, sl)
            } else {
                op.row_scales(r, l)
            });
        }
    }
    BlockScaledMatrix::new("x", rows.len(), op.k(), batches.len(), new_data, new_scales)
        .expect("same dimensions")
}

/// The inputs with the scales of `blocks` misread as `misread` says (`before`: the length in
/// blocks of the chunk before the range).
fn misread_k_range(
    inputs: &DualGemmInputs,
    misread: KMisread,
    blocks: std::ops::Range<usize>,
    before: usize,
) -> DualGemmInputs {
    let cols = inputs.shape.scale_cols();
    // Each scale byte of `target` in the range, from `source` at block `shift` earlier.
    let copy = |target: &BlockScaledMatrix, source: &BlockScaledMatrix, shift: usize| {
        let mut scales = target.scales().to_vec();
        for (row, from) in scales
            .chunks_exact_mut(cols)
            .zip(source.scales().chunks_exact(cols))
        {
            for j in blocks.clone() {
                row[j] = from[j - shift];
            }
        }
        BlockScaledMatrix::new(
            "x",
            target.rows(),
            target.k(),
            target.batches(),
            target.data().to_vec(),
            scales,
        )
        .expect("same dimensions")
    };
    let (a, b1, b2) = (&inputs.a, &inputs.b1, &inputs.b2);
    let (a, b1, b2) = match misread {
        KMisread::B2WithSfb1 => (a.clone(), b1.clone(), copy(b2, b1, 0)),
        KMisread::B1WithSfb2 => (a.clone(), copy(b1, b2, 0), b2.clone()),
        KMisread::SfbSwapped => (a.clone(), copy(b1, b2, 0), copy(b2, b1, 0)),
        KMisread::PreviousChunkScales => (
            copy(a, a, before),
            copy(b1, b1, before),
            copy(b2, b2, before),
        ),
    };
    DualGemmInputs {
        shape: inputs.shape,
        a,
        b1,
        b2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_maps_skip_the_identity_and_repeats() {
        // Over 3 indices: mod 2 (0, 1, 0), 0 (0, 0, 0), -1 (0, 0, 1), +1 (1, 2, 2), then the
        // ring of 2 and the last from 0, each equal to mod 2 here but not on longer runs.
        let maps = IndexMap::candidates(3, true);
        assert_eq!(
            maps,
            vec![
                IndexMap::Mod(1),
                IndexMap::Mod(0),
                IndexMap::Minus1,
                IndexMap::Plus1,
                IndexMap::ZeroFrom(2),
                IndexMap::LastFromZero
            ]
        );
        assert_eq!(
            (0..5)
                .map(|i| IndexMap::LastFromZero.apply(i, 5))
                .collect::<Vec<_>>(),
            vec![0, 1, 2, 3, 0]
        );
        assert_eq!(IndexMap::LastFromZero.words("l"), "0 for the last l");
        assert_eq!(IndexMap::candidates(3, false).len(), 4);
        assert_eq!(IndexMap::ZeroFrom(4).apply(5, 9), 0);
        assert_eq!(IndexMap::ZeroFrom(4).apply(3, 9), 3);
        assert_eq!(IndexMap::Mod(5).words("l"), "l mod 32");
    }

    #[test]
    fn a_k_tail_exists_only_past_its_first_chunk() {
        assert_eq!(KRange::Tail { chunk: 256 }.blocks(16), None);
        assert_eq!(KRange::Tail { chunk: 256 }.blocks(17), Some((16..17, 16)));
        assert_eq!(KRange::SecondHalf.blocks(33), Some((16..33, 16)));
        assert_eq!(
            KRange::Tail { chunk: 256 }.words(17),
            "over the last K chunk of 256 (k >= 256)"
        );
    }
}
