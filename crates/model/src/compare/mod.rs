//! Verdicts: does a kernel's output lie inside the model's acceptance intervals, and if not,
//! where and by how much.

pub mod diagnosis;
pub mod element_sample;
pub mod field_checks;
pub mod identify;
pub mod nearby_problems;

use crate::model::bounds::fp16_ordinal;
use half::f16;
use rayon::prelude::*;
use serde::Serialize;
use std::fmt::Write;

/// Output tiles reported in the failure map are this many rows and columns.
pub const MAP_TILE: usize = 128;
/// How many failing elements a verdict lists individually.
const LISTED_FAILURES: usize = 10;

/// The logical shape of an output: `[M, N, L]`, L fastest in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct OutputShape {
    pub m: usize,
    pub n: usize,
    pub l: usize,
}

impl OutputShape {
    pub fn len(&self) -> usize {
        self.m * self.n * self.l
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (m, n, l) of a flat index.
    pub fn coords(&self, index: usize) -> (usize, usize, usize) {
        (
            index / (self.n * self.l),
            (index / self.l) % self.n,
            index % self.l,
        )
    }
}

/// Why one element failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// A number outside [lo, hi] (infinities included).
    OutsideInterval,
    /// NaN where a number was required.
    UnexpectedNan,
    /// A number where NaN was required (a NaN scale contributed).
    MissingNan,
}

/// One failing element.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Failure {
    pub m: usize,
    pub n: usize,
    pub l: usize,
    pub kind: FailureKind,
    pub got: f32,
    pub lo: f32,
    pub hi: f32,
    pub expected: f32,
    /// fp16 values between `got` and the nearest end of [lo, hi]; absent for NaN failures.
    pub ulps_outside: Option<u32>,
}

/// The verdict on one output.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub pass: bool,
    pub shape: OutputShape,
    pub elements: usize,
    pub failed: usize,
    pub outside_interval: usize,
    pub unexpected_nan: usize,
    pub missing_nan: usize,
    /// The failure farthest outside its interval (NaN failures rank above all numbers).
    pub worst: Option<Failure>,
    /// The first failing elements in memory order.
    pub first_failures: Vec<Failure>,
    /// Failures per 128 x 128 output tile, summed over L: `[tile_row][tile_col]`.
    pub tile_failures: Vec<Vec<usize>>,
    /// Failures per output row m and per column n, summed over the other dimensions.
    pub row_failures: Vec<usize>,
    pub col_failures: Vec<usize>,
}

impl Verdict {
    /// The verdict of an output of `shape` every element of which is accepted: what [`judge`]
    /// gives such an output, and what a judge elsewhere (the harness's, on the GPU) that found
    /// no failure reports.
    pub fn passing(shape: OutputShape) -> Verdict {
        let tiles = (shape.m.div_ceil(MAP_TILE), shape.n.div_ceil(MAP_TILE));
        Verdict {
            pass: true,
            shape,
            elements: shape.len(),
            failed: 0,
            outside_interval: 0,
            unexpected_nan: 0,
            missing_nan: 0,
            worst: None,
            first_failures: Vec::new(),
            tile_failures: vec![vec![0; tiles.1]; tiles.0],
            row_failures: vec![0; shape.m],
            col_failures: vec![0; shape.n],
        }
    }
}

/// Judges `got` against `[lo, hi]`; all four slices are `[M, N, L]`.
pub fn judge(shape: OutputShape, got: &[f16], expected: &[f16], lo: &[f16], hi: &[f16]) -> Verdict {
    assert!(
        got.len() == shape.len()
            && expected.len() == shape.len()
            && lo.len() == shape.len()
            && hi.len() == shape.len()
    );
    let mut verdict = Verdict::passing(shape);
    // Most outputs pass: that is checked on every core first (a large case has hundreds of
    // millions of elements); only a failing output takes the ordered loop that records where.
    // In chunks, each folded without a branch so that it vectorizes: a 2^30-element output
    // is judged in a fraction of a second.
    const CHUNK: usize = 1 << 16;
    let all_pass = got
        .par_chunks(CHUNK)
        .zip(lo.par_chunks(CHUNK))
        .zip(hi.par_chunks(CHUNK))
        .all(|((got, lo), hi)| {
            got.iter().zip(lo).zip(hi).fold(true, |ok, ((g, l), h)| {
                ok & accepted_bits(g.to_bits(), l.to_bits(), h.to_bits())
            })
        });
    if all_pass {
        return verdict;
    }
    let mut worst_rank = 0u64;
    for index in 0..shape.len() {
        let Some((kind, ulps)) = classify(got[index], lo[index], hi[index]) else {
            continue;
        };
        let (m, n, l) = shape.coords(index);
        let failure = Failure {
            m,
            n,
            l,
            kind,
            got: got[index].to_f32(),
            lo: lo[index].to_f32(),
            hi: hi[index].to_f32(),
            expected: expected[index].to_f32(),
            ulps_outside: ulps,
        };
        verdict.failed += 1;
        match kind {
            FailureKind::OutsideInterval => verdict.outside_interval += 1,
            FailureKind::UnexpectedNan => verdict.unexpected_nan += 1,
            FailureKind::MissingNan => verdict.missing_nan += 1,
        }
        verdict.tile_failures[m / MAP_TILE][n / MAP_TILE] += 1;
        verdict.row_failures[m] += 1;
        verdict.col_failures[n] += 1;
        if verdict.first_failures.len() < LISTED_FAILURES {
            verdict.first_failures.push(failure);
        }
        let rank = ulps.map_or(u64::MAX, u64::from);
        if verdict.worst.is_none() || rank > worst_rank {
            worst_rank = rank;
            verdict.worst = Some(failure);
        }
    }
    verdict.pass = verdict.failed == 0;
    verdict
}

/// Whether `got` is acceptable, on raw fp16 bits: what `classify(..).is_none()` says, without a
/// branch (a test holds the two equal; `classify` is the definition).
#[inline(always)]
fn accepted_bits(got: u16, lo: u16, hi: u16) -> bool {
    let is_nan = |bits: u16| (bits & 0x7FFF) > 0x7C00;
    // fp16_ordinal's order: -0 and +0 are one value.
    let ordinal = |bits: u16| {
        let magnitude = i32::from(bits & 0x7FFF);
        if bits & 0x8000 != 0 {
            -magnitude
        } else {
            magnitude
        }
    };
    let nan_required = is_nan(lo) | is_nan(hi);
    let g = ordinal(got);
    let inside = !is_nan(got) & (ordinal(lo) <= g) & (g <= ordinal(hi));
    (nan_required & is_nan(got)) | (!nan_required & inside)
}

/// `None` if `got` is acceptable, else why not and how many ulps outside.
fn classify(got: f16, lo: f16, hi: f16) -> Option<(FailureKind, Option<u32>)> {
    let nan_required = lo.is_nan() || hi.is_nan();
    match (nan_required, got.is_nan()) {
        (true, true) => None,
        (true, false) => Some((FailureKind::MissingNan, None)),
        (false, true) => Some((FailureKind::UnexpectedNan, None)),
        (false, false) => {
            let (g, low, high) = (fp16_ordinal(got)?, fp16_ordinal(lo)?, fp16_ordinal(hi)?);
            if g < low {
                Some((FailureKind::OutsideInterval, Some((low - g) as u32)))
            } else if g > high {
                Some((FailureKind::OutsideInterval, Some((g - high) as u32)))
            } else {
                None
            }
        }
    }
}

impl Verdict {
    /// A human-readable report: summary, worst element, first failures, and where failures are.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let s = self.shape;
        if self.pass {
            let _ = writeln!(
                out,
                "PASS: all {} elements of the {}x{}x{} output are inside their intervals",
                self.elements, s.m, s.n, s.l
            );
            return out;
        }
        let _ = writeln!(
            out,
            "FAIL: {} of {} elements outside their intervals ({} outside, {} NaN where a number was required, {} numbers where NaN was required)",
            self.failed, self.elements, self.outside_interval, self.unexpected_nan, self.missing_nan
        );
        if let Some(worst) = &self.worst {
            let _ = writeln!(out, "worst: {}", describe(worst));
        }
        let _ = writeln!(out, "first failures:");
        for failure in &self.first_failures {
            let _ = writeln!(out, "  {}", describe(failure));
        }
        let _ = writeln!(out, "failing rows m: {}", ranges(&self.row_failures));
        let _ = writeln!(out, "failing columns n: {}", ranges(&self.col_failures));
        let _ = writeln!(out, "failures by {MAP_TILE}x{MAP_TILE} tile (rows = m tiles, columns = n tiles; . none, 1-9 tenths failing, # all):");
        for (tile_m, row) in self.tile_failures.iter().enumerate() {
            let line: String = row
                .iter()
                .enumerate()
                .map(|(tile_n, &count)| density_glyph(count, self.tile_size(tile_m, tile_n)))
                .collect();
            let _ = writeln!(out, "  {tile_m:>4} {line}");
        }
        out
    }

    fn tile_size(&self, tile_m: usize, tile_n: usize) -> usize {
        let rows = (self.shape.m - tile_m * MAP_TILE).min(MAP_TILE);
        let cols = (self.shape.n - tile_n * MAP_TILE).min(MAP_TILE);
        rows * cols * self.shape.l
    }
}

fn describe(f: &Failure) -> String {
    let position = format!("c[m={}, n={}, l={}]", f.m, f.n, f.l);
    match f.kind {
        FailureKind::OutsideInterval => format!(
            "{position} = {} is {} fp16 ulps outside [{}, {}] (model: {})",
            f.got,
            f.ulps_outside.unwrap_or(0),
            f.lo,
            f.hi,
            f.expected
        ),
        // A NaN `expected` with a numeric interval: a row a large case did not sample, whose
        // element only had to be a number (crates/harness/src/certify/campaign/sampling.rs).
        FailureKind::UnexpectedNan if f.expected.is_nan() => format!(
            "{position} = NaN, expected a number (its row was not sampled: the model's answer \
             was not computed)"
        ),
        FailureKind::UnexpectedNan => format!(
            "{position} = NaN, expected a number in [{}, {}] (model: {})",
            f.lo, f.hi, f.expected
        ),
        FailureKind::MissingNan => format!(
            "{position} = {}, expected NaN (a NaN scale contributes)",
            f.got
        ),
    }
}

fn density_glyph(count: usize, size: usize) -> char {
    match count {
        0 => '.',
        c if c == size => '#',
        c => char::from_digit(((c * 10 / size) as u32).clamp(1, 9), 10).unwrap_or('#'),
    }
}

/// "0-127, 300" style listing of the indices with a nonzero count (at most 12 ranges shown).
fn ranges(counts: &[usize]) -> String {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for (i, _) in counts.iter().enumerate().filter(|(_, &c)| c > 0) {
        match spans.last_mut() {
            Some((_, end)) if *end + 1 == i => *end = i,
            _ => spans.push((i, i)),
        }
    }
    let shown: Vec<String> = spans
        .iter()
        .take(12)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    let more = if spans.len() > 12 {
        format!(" and {} more ranges", spans.len() - 12)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(x: f32) -> f16 {
        f16::from_f32(x)
    }

    /// What a judge elsewhere reports for an output it found no failure in (the harness's, on
    /// the GPU) is what `judge` gives such an output, maps and counts included, at a shape of
    /// several 128 x 128 tiles and batches.
    #[test]
    fn the_passing_verdict_is_judges_verdict_of_a_passing_output() {
        let shape = OutputShape {
            m: 130,
            n: 257,
            l: 2,
        };
        let lo = vec![h(-1.0); shape.len()];
        let hi = vec![h(1.0); shape.len()];
        let got: Vec<f16> = (0..shape.len())
            .map(|i| h((i % 3) as f32 * 0.5 - 0.5))
            .collect();
        let judged = judge(shape, &got, &got, &lo, &hi);
        assert!(judged.pass);
        // Every field, as its Debug form writes it (Verdict does not derive PartialEq).
        assert_eq!(
            format!("{judged:?}"),
            format!("{:?}", Verdict::passing(shape))
        );
        let mut wrong = got.clone();
        wrong[7] = h(2.0);
        assert_ne!(
            format!("{:?}", judge(shape, &wrong, &got, &lo, &hi)),
            format!("{:?}", Verdict::passing(shape))
        );
    }

    #[test]
    fn classifies_each_failure_kind() {
        let shape = OutputShape { m: 1, n: 4, l: 1 };
        let lo = [h(1.0), h(1.0), f16::NAN, h(1.0)];
        let hi = [h(2.0), h(2.0), f16::NAN, h(2.0)];
        let got = [
            h(1.5),
            f16::NAN,
            h(0.0),
            f16::from_bits(h(2.0).to_bits() + 3),
        ];
        let verdict = judge(shape, &got, &lo, &lo, &hi);
        assert!(!verdict.pass);
        assert_eq!(
            (
                verdict.outside_interval,
                verdict.unexpected_nan,
                verdict.missing_nan
            ),
            (1, 1, 1)
        );
        assert_eq!(verdict.col_failures, vec![0, 1, 1, 1]);
        let outside = verdict
            .first_failures
            .iter()
            .find(|f| f.kind == FailureKind::OutsideInterval)
            .unwrap();
        assert_eq!((outside.n, outside.ulps_outside), (3, Some(3)));
        assert!(verdict.render().contains("c[m=0, n=3, l=0]"));
    }

    #[test]
    fn the_branch_free_check_is_classify() {
        // Every edge of fp16 (zeros, subnormals, the largest finite, infinities, NaNs of both
        // signs and payloads) in every role, then random bit patterns.
        let edges: [u16; 20] = [
            0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x3C00, 0xBC00, 0x3C01, 0x7BFF,
            0xFBFF, 0x7C00, 0xFC00, 0x7C01, 0xFC01, 0x7E00, 0xFE00, 0x7FFF, 0xFFFF,
        ];
        let agree = |g: u16, l: u16, h: u16| {
            let (fg, fl, fh) = (f16::from_bits(g), f16::from_bits(l), f16::from_bits(h));
            assert_eq!(
                accepted_bits(g, l, h),
                classify(fg, fl, fh).is_none(),
                "got {g:#06x} lo {l:#06x} hi {h:#06x}"
            );
        };
        for &g in &edges {
            for &l in &edges {
                for &h in &edges {
                    agree(g, l, h);
                }
            }
        }
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 48) as u16
        };
        for _ in 0..1_000_000 {
            let (g, a, b) = (next(), next(), next());
            agree(g, a, b);
            // Near misses: got one ulp either side of a narrow interval.
            agree(g.wrapping_add(1), g, g);
            agree(g.wrapping_sub(1), g, g);
        }
    }

    #[test]
    fn negative_zero_equals_zero() {
        let shape = OutputShape { m: 1, n: 1, l: 1 };
        let verdict = judge(shape, &[f16::NEG_ZERO], &[h(0.0)], &[h(0.0)], &[h(0.0)]);
        assert!(verdict.pass);
    }

    #[test]
    fn ranges_are_compact() {
        assert_eq!(ranges(&[1, 1, 0, 1, 0, 0, 2, 2, 2]), "0-1, 3, 6-8");
    }
}
