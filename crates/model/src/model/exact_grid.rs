//! Every exact dot product of an operand pair at once: the same [`ExactDot`]s as
//! [`exact_dot`], bit for bit, at the speed of a vectorized integer GEMM.
//!
//! Why this is exact in 64 bits. A block's 16 products `half_a * half_b` are integers of at most
//! 12 * 12 = 144 in magnitude, so a block sum `s` (and the sum of magnitudes `u`) is at most
//! 16 * 144 = 2304 < 2^15: an i16. A scale `sig * 2^e` (UE4M3: `sig <= 15`, `e >= -9`) is the
//! integer `S = sig << (e + 9)` in units of 2^-9, at most 448 * 2^9 = 229,376 < 2^18, and a block
//! term in units of 2^-20 is `s * S_a * S_b`, at most 2304 * 229,376^2 < 1.22 * 10^14 in magnitude.
//! Every statistic (the sum, its prefix maximum and minimum, the sum of |term|, the sum of the
//! products' magnitudes; the blocks that raise Blackwell's maximum are a count and a maximum) is a sum of at most `blocks` such terms, so it fits an i64 (below
//! 9.2 * 10^18) while `blocks` <= [`MAX_I64_BLOCKS`] = 65,536 (K <= 1,048,576; every benchmark's
//! K is at most 7,168). Longer K takes the i128 path ([`exact_dot`] per pair), which is checked.
//!
//! How it is fast. B is laid out in tiles of [`LANES`] columns, `[tile][block][k][lane]`, so that
//! for one row of A the 16 products of a block, for 32 columns at once, are 16 multiply-adds of
//! 32 i16 lanes: one 512-bit (or two 256-bit) vector operation each, which the compiler emits
//! from the plain loops below. [`ROWS`] rows of A share each load of B. The per-block statistics
//! are i64 lanes. A NaN scale is stored as 0 (its block then adds nothing to any statistic, as in
//! `exact_dot`, which skips it) with the row or column marked NaN. Tasks of [`CHUNK_ROWS`] rows
//! run on rayon; inside one, the B tiles of every operand stay in L2 while the rows go by. The
//! loops are compiled three times (AVX-512, AVX2, portable) and the best one the CPU has is
//! chosen at run time; all three give the same integers.

use super::exact::{exact_dot, scale_alignment, ExactDot, PreparedRow};
use crate::formats::E4m3;
use crate::problem::{BlockScaledMatrix, SCALE_BLOCK};
use rayon::prelude::*;

/// Columns of B per tile: 32 i16 lanes, one AVX-512 register.
pub const LANES: usize = 32;
/// Rows of A that share each load of B: 4 for the sums alone; 2 with the statistics, whose
/// running values for 2 x 32 pairs stay closer to registers (measured on this project's 2-core
/// AVX-512 machine, 512x4096x7168: 4 rows 1.24 s, 2 rows 1.00 s with the statistics; without
/// them 4 rows 0.48 s, 2 rows 2.2 s). A's rows are padded to a multiple of `ROWS`.
pub const ROWS: usize = 4;
const ROWS_WITH_STATISTICS: usize = 2;
/// Rows of A per rayon task.
pub const CHUNK_ROWS: usize = 32;
/// Most 16-blocks whose statistics are proven to fit an i64 (module comment).
pub const MAX_I64_BLOCKS: usize = 65_536;

/// e2m1 code -> half units (value * 2), sign included; `E2m1::to_half_units` as a table the
/// preparation loops index (a unit test checks the two agree).
const HALF_UNITS: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// A scale byte as the integer `S` (units of 2^-9) and whether it is NaN.
fn scale_integer(bits: u8) -> (i32, bool) {
    match E4m3::from_bits(bits).unsigned_scale_parts() {
        Some((significand, exponent)) => ((significand as i32) << (exponent + 9), false),
        None => (0, true),
    }
}

/// Hands each scale integer of one row to `put(block, S)`; whether the row has a NaN scale.
fn store_scales(
    operand: &BlockScaledMatrix,
    row: usize,
    batch: usize,
    mut put: impl FnMut(usize, i32),
) -> bool {
    let mut nan_row = false;
    for (j, &bits) in operand.row_scales(row, batch).iter().enumerate() {
        let (s, nan) = scale_integer(bits);
        put(j, s);
        nan_row |= nan;
    }
    nan_row
}

/// The alignment exponent of every scale integer.
fn alignments_of(scales: &[i32]) -> Vec<i32> {
    scales
        .par_iter()
        .map(|&s| scale_alignment(i64::from(s)))
        .collect()
}

/// One batch of an operand, as the grid reads it: values as i8 half units and scale integers,
/// rows padded with zeros to a multiple of `group` (`ROWS` for A, `LANES` for B), laid out so
/// that `group` consecutive rows of one block are adjacent (`[group][block][k][row in group]`
/// for B, plain `[row][block][k]` for A, where `group` only pads).
struct GridOperand<V> {
    rows: usize,
    blocks: usize,
    values: Vec<V>,
    /// Scale integers `S` (below 2^18, so `s * S_a` of a block sum fits an i32).
    scales: Vec<i32>,
    /// Their alignment exponents ([`scale_alignment`]), laid out as `scales`.
    alignments: Vec<i32>,
    nan_rows: Vec<bool>,
}

impl GridOperand<i16> {
    /// A's rows, values widened to i16 so that each is broadcast straight from memory. Rows are
    /// prepared in parallel (each writes its own slices).
    fn rows_major(operand: &BlockScaledMatrix, batch: usize) -> Self {
        let (rows, blocks) = (operand.rows(), operand.k() / SCALE_BLOCK);
        let padded = rows.div_ceil(ROWS) * ROWS;
        let mut values = vec![0i16; padded * blocks * SCALE_BLOCK];
        let mut scales = vec![0i32; padded * blocks];
        let mut nan_rows = vec![false; rows];
        values
            .par_chunks_mut(blocks * SCALE_BLOCK)
            .zip(scales.par_chunks_mut(blocks))
            .zip(nan_rows.par_iter_mut())
            .enumerate()
            .for_each(|(row, ((values, scales), nan_row))| {
                for (pair, &byte) in values.chunks_exact_mut(2).zip(operand.row_data(row, batch)) {
                    pair[0] = i16::from(HALF_UNITS[usize::from(byte & 0xF)]);
                    pair[1] = i16::from(HALF_UNITS[usize::from(byte >> 4)]);
                }
                *nan_row = store_scales(operand, row, batch, |j, s| scales[j] = s);
            });
        GridOperand {
            rows,
            blocks,
            values,
            alignments: alignments_of(&scales),
            scales,
            nan_rows,
        }
    }
}

impl GridOperand<i8> {
    /// B's rows (the output's columns) in tiles of `LANES`, the tiles prepared in parallel
    /// (each writes its own `[block][k][lane]` slice).
    fn column_tiles(operand: &BlockScaledMatrix, batch: usize) -> Self {
        let (rows, blocks) = (operand.rows(), operand.k() / SCALE_BLOCK);
        let tiles = rows.div_ceil(LANES);
        let mut values = vec![0i8; tiles * blocks * SCALE_BLOCK * LANES];
        let mut scales = vec![0i32; tiles * blocks * LANES];
        let mut nan_rows = vec![false; rows];
        values
            .par_chunks_mut(blocks * SCALE_BLOCK * LANES)
            .zip(scales.par_chunks_mut(blocks * LANES))
            .zip(nan_rows.par_chunks_mut(LANES))
            .enumerate()
            .for_each(|(tile, ((values, scales), nan_rows))| {
                for (lane, nan_row) in nan_rows.iter_mut().enumerate() {
                    let row = tile * LANES + lane;
                    for (kk, &byte) in operand.row_data(row, batch).iter().enumerate() {
                        for (half, nibble) in [(0, byte & 0xF), (1, byte >> 4)] {
                            let k = 2 * kk + half;
                            let (j, within) = (k / SCALE_BLOCK, k % SCALE_BLOCK);
                            values[(j * SCALE_BLOCK + within) * LANES + lane] =
                                HALF_UNITS[usize::from(nibble)];
                        }
                    }
                    *nan_row =
                        store_scales(operand, row, batch, |j, s| scales[j * LANES + lane] = s);
                }
            });
        GridOperand {
            rows,
            blocks,
            values,
            alignments: alignments_of(&scales),
            scales,
            nan_rows,
        }
    }
}

/// The running statistics of an `R` x `LANES` tile, one i64 lane per pair.
struct TileStats<const R: usize> {
    sum: [[i64; LANES]; R],
    prefix_max: [[i64; LANES]; R],
    prefix_min: [[i64; LANES]; R],
    abs_blocks: [[i64; LANES]; R],
    abs_terms: [[i64; LANES]; R],
    max_block_abs: [[i64; LANES]; R],
    raised_blocks: [[u32; LANES]; R],
    raised_alignment: [[i32; LANES]; R],
}

impl<const R: usize> TileStats<R> {
    const ZERO: TileStats<R> = TileStats {
        sum: [[0; LANES]; R],
        prefix_max: [[0; LANES]; R],
        prefix_min: [[0; LANES]; R],
        abs_blocks: [[0; LANES]; R],
        abs_terms: [[0; LANES]; R],
        max_block_abs: [[0; LANES]; R],
        raised_blocks: [[0; LANES]; R],
        raised_alignment: [[i32::MIN; LANES]; R],
    };

    fn dot(&self, r: usize, lane: usize, nan: bool) -> ExactDot {
        let (sum, abs_blocks) = (self.sum[r][lane], self.abs_blocks[r][lane]);
        ExactDot {
            sum: i128::from(sum),
            prefix_max: i128::from(self.prefix_max[r][lane]),
            prefix_min: i128::from(self.prefix_min[r][lane]),
            // |t| summed is P + N and t summed is P - N: both halves are exact integers.
            positive_blocks: i128::from((abs_blocks + sum) / 2),
            negative_blocks: i128::from((abs_blocks - sum) / 2),
            abs_terms: i128::from(self.abs_terms[r][lane]),
            max_block_abs: i128::from(self.max_block_abs[r][lane]),
            nan,
            raised_blocks: self.raised_blocks[r][lane],
            raised_alignment: match self.raised_blocks[r][lane] {
                0 => 0,
                _ => self.raised_alignment[r][lane],
            },
        }
    }
}

/// The statistics of rows `m0..m0 + R` of `a` against column tile `tile` of `b`. With
/// `STATS = false` only the sums are computed (the expected output needs nothing else).
#[inline(always)]
fn tile_kernel<const STATS: bool, const R: usize>(
    a: &GridOperand<i16>,
    m0: usize,
    b: &GridOperand<i8>,
    tile: usize,
) -> TileStats<R> {
    let blocks = a.blocks;
    let mut st = TileStats::ZERO;
    let a_values = &a.values[m0 * blocks * SCALE_BLOCK..(m0 + R) * blocks * SCALE_BLOCK];
    let b_values = &b.values[tile * blocks * SCALE_BLOCK * LANES..][..blocks * SCALE_BLOCK * LANES];
    for j in 0..blocks {
        let mut s = [[0i16; LANES]; R];
        let mut u = [[0i16; LANES]; R];
        let b_block = &b_values[j * SCALE_BLOCK * LANES..(j + 1) * SCALE_BLOCK * LANES];
        for k in 0..SCALE_BLOCK {
            // Plain loops, not iterator adapters: they must inline into the target-feature copies.
            let mut b_k = [0i16; LANES];
            for lane in 0..LANES {
                b_k[lane] = i16::from(b_block[k * LANES + lane]);
            }
            for r in 0..R {
                let a_rk = a_values[(r * blocks + j) * SCALE_BLOCK + k];
                for lane in 0..LANES {
                    let product = a_rk * b_k[lane];
                    s[r][lane] += product;
                    if STATS {
                        u[r][lane] += product.abs();
                    }
                }
            }
        }
        let lanes = (tile * blocks + j) * LANES..(tile * blocks + j + 1) * LANES;
        let (b_scales, b_alignments) = (&b.scales[lanes.clone()], &b.alignments[lanes]);
        for r in 0..R {
            let a_scale = a.scales[(m0 + r) * blocks + j];
            let a_alignment = a.alignments[(m0 + r) * blocks + j];
            for lane in 0..LANES {
                // |s * S_a| <= 2304 * 229,376 < 2^31: one i32 product, then a 32 x 32 -> 64-bit
                // one (a single instruction, where a 64 x 64 one is several).
                let b_scale = i64::from(b_scales[lane]);
                let term = i64::from(i32::from(s[r][lane]) * a_scale) * b_scale;
                let sum = st.sum[r][lane] + term;
                st.sum[r][lane] = sum;
                if STATS {
                    st.prefix_max[r][lane] = st.prefix_max[r][lane].max(sum);
                    st.prefix_min[r][lane] = st.prefix_min[r][lane].min(sum);
                    st.abs_blocks[r][lane] += term.abs();
                    let block_abs = i64::from(i32::from(u[r][lane]) * a_scale) * b_scale;
                    st.abs_terms[r][lane] += block_abs;
                    st.max_block_abs[r][lane] = st.max_block_abs[r][lane].max(block_abs);
                    let z = a_alignment + b_alignments[lane];
                    let raised = term == 0;
                    st.raised_blocks[r][lane] += u32::from(raised);
                    let candidate = if raised { z } else { i32::MIN };
                    st.raised_alignment[r][lane] = st.raised_alignment[r][lane].max(candidate);
                }
            }
        }
    }
    st
}

/// One task: rows `m0..m0 + rows` against every column, for every B operand; `element` turns
/// the dots of one (m, n) into an output written to `out` (`[rows][n]`).
#[inline(always)]
fn chunk<T: Copy, const STATS: bool>(
    a: &GridOperand<i16>,
    bs: &[GridOperand<i8>],
    m0: usize,
    tiles: std::ops::Range<usize>,
    out: &mut [T],
    element: &(impl Fn(usize, usize, &[ExactDot]) -> T + Sync),
) {
    if STATS {
        chunk_of::<T, true, ROWS_WITH_STATISTICS>(a, bs, m0, tiles, out, element)
    } else {
        chunk_of::<T, false, ROWS>(a, bs, m0, tiles, out, element)
    }
}

#[inline(always)]
fn chunk_of<T: Copy, const STATS: bool, const R: usize>(
    a: &GridOperand<i16>,
    bs: &[GridOperand<i8>],
    m0: usize,
    tiles: std::ops::Range<usize>,
    out: &mut [T],
    element: &(impl Fn(usize, usize, &[ExactDot]) -> T + Sync),
) {
    let n = bs[0].rows;
    // `out` holds the chunk's rows of the columns of `tiles` alone.
    let first = tiles.start * LANES;
    let width = n.min(tiles.end * LANES) - first;
    let rows = out.len() / width;
    let mut dots = vec![ExactDot::default(); bs.len()];
    let mut stats: Vec<TileStats<R>> = Vec::with_capacity(bs.len());
    for tile in tiles {
        for r0 in (0..rows).step_by(R) {
            stats.clear();
            // A plain loop (an iterator adapter here would keep the kernel out of the
            // target-feature copy that calls this function).
            for b in bs {
                stats.push(tile_kernel::<STATS, R>(a, m0 + r0, b, tile));
            }
            for r in 0..R.min(rows - r0) {
                let m = m0 + r0 + r;
                for lane in 0..LANES.min(n - tile * LANES) {
                    let col = tile * LANES + lane;
                    for ((dot, st), b) in dots.iter_mut().zip(&stats).zip(bs) {
                        *dot = st.dot(r, lane, a.nan_rows[m] || b.nan_rows[col]);
                    }
                    out[(r0 + r) * width + col - first] = element(m, col, &dots);
                }
            }
        }
    }
}

// The same loops compiled for two instruction sets: two thin wrappers rather than a macro, so
// that each reads as what it is.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
fn chunk_avx512<T: Copy, const STATS: bool>(
    a: &GridOperand<i16>,
    bs: &[GridOperand<i8>],
    m0: usize,
    tiles: std::ops::Range<usize>,
    out: &mut [T],
    element: &(impl Fn(usize, usize, &[ExactDot]) -> T + Sync),
) {
    chunk::<T, STATS>(a, bs, m0, tiles, out, element)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn chunk_avx2<T: Copy, const STATS: bool>(
    a: &GridOperand<i16>,
    bs: &[GridOperand<i8>],
    m0: usize,
    tiles: std::ops::Range<usize>,
    out: &mut [T],
    element: &(impl Fn(usize, usize, &[ExactDot]) -> T + Sync),
) {
    chunk::<T, STATS>(a, bs, m0, tiles, out, element)
}

/// Which compiled copy of the loops this CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Simd {
    Avx512,
    Avx2,
    Portable,
}

impl Simd {
    pub const ALL: [Simd; 3] = [Simd::Avx512, Simd::Avx2, Simd::Portable];

    /// Whether this CPU can run this copy.
    pub fn available(self) -> bool {
        match self {
            Simd::Portable => true,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512vl")
            }
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The fastest copy this CPU can run.
    pub fn detect() -> Simd {
        Simd::ALL
            .into_iter()
            .find(|simd| simd.available())
            .unwrap_or(Simd::Portable)
    }
}

/// `element(m, n, dots)` for every row m of `a` and every column n (every row of each operand in
/// `bs`, which share their shape), `dots[i]` being the exact dot of A's row m with `bs[i]`'s row
/// n in batch `batch`; returned `[m][n]`. With `with_statistics = false` only `dots[i].sum` and
/// `.nan` are filled in (the other statistics are 0). `simd` picks the compiled copy (`None`:
/// the best this CPU has; a copy this CPU cannot run is replaced by the portable one; tests
/// compare them).
pub fn exact_dot_grid<T: Copy + Default + Send>(
    a: &BlockScaledMatrix,
    bs: &[&BlockScaledMatrix],
    batch: usize,
    with_statistics: bool,
    simd: Option<Simd>,
    element: impl Fn(usize, usize, &[ExactDot]) -> T + Sync,
) -> Vec<T> {
    let (m, n, blocks) = (a.rows(), bs[0].rows(), a.k() / SCALE_BLOCK);
    let mut out = vec![T::default(); m * n];
    if m == 0 || n == 0 {
        return out;
    }
    if blocks > MAX_I64_BLOCKS {
        // Past the i64 proof: one i128 exact_dot per pair.
        let a_rows = PreparedRow::all_rows(a, batch);
        let b_rows: Vec<Vec<PreparedRow>> =
            bs.iter().map(|b| PreparedRow::all_rows(b, batch)).collect();
        out.par_chunks_mut(n).enumerate().for_each(|(row, out)| {
            let mut dots = vec![ExactDot::default(); bs.len()];
            for (col, slot) in out.iter_mut().enumerate() {
                for (dot, b) in dots.iter_mut().zip(&b_rows) {
                    *dot = exact_dot(&a_rows[row], &b[col]);
                }
                *slot = element(row, col, &dots);
            }
        });
        return out;
    }
    let a_grid = GridOperand::rows_major(a, batch);
    let b_grids: Vec<GridOperand<i8>> = bs
        .iter()
        .map(|b| GridOperand::column_tiles(b, batch))
        .collect();
    let simd = match simd {
        Some(simd) if simd.available() => simd,
        Some(_) => Simd::Portable,
        None => Simd::detect(),
    };
    let run = |m0: usize, tiles: std::ops::Range<usize>, out: &mut [T]| {
        let (a, bs, element) = (&a_grid, &b_grids[..], &element);
        match (simd, with_statistics) {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Simd::Avx512 is only chosen when the CPU has these features.
            (Simd::Avx512, true) => unsafe {
                chunk_avx512::<T, true>(a, bs, m0, tiles, out, element)
            },
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx512, false) => unsafe {
                chunk_avx512::<T, false>(a, bs, m0, tiles, out, element)
            },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: Simd::Avx2 is only chosen when the CPU has AVX2.
            (Simd::Avx2, true) => unsafe { chunk_avx2::<T, true>(a, bs, m0, tiles, out, element) },
            #[cfg(target_arch = "x86_64")]
            (Simd::Avx2, false) => unsafe {
                chunk_avx2::<T, false>(a, bs, m0, tiles, out, element)
            },
            (_, true) => chunk::<T, true>(a, bs, m0, tiles, out, element),
            (_, false) => chunk::<T, false>(a, bs, m0, tiles, out, element),
        }
    };
    let tiles = n.div_ceil(LANES);
    if m <= CHUNK_ROWS {
        // A few rows (a decode step, the cross-check's rows of a large case): one task would
        // hold every column. Split the columns instead, each task into its own rows x columns
        // block, then placed.
        let per_task = tiles.div_ceil(rayon::current_num_threads() * 4).max(1);
        let blocks: Vec<(usize, Vec<T>)> = (0..tiles)
            .step_by(per_task)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|start| {
                let range = start..(start + per_task).min(tiles);
                let width = n.min(range.end * LANES) - start * LANES;
                let mut block = vec![T::default(); m * width];
                run(0, range, &mut block);
                (start * LANES, block)
            })
            .collect();
        for (first, block) in blocks {
            let width = block.len() / m;
            for (row, values) in block.chunks(width).enumerate() {
                out[row * n + first..][..width].copy_from_slice(values);
            }
        }
        return out;
    }
    out.par_chunks_mut(CHUNK_ROWS * n)
        .enumerate()
        .for_each(|(task, out)| run(task * CHUNK_ROWS, 0..tiles, out));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::E2m1;

    #[test]
    fn the_half_unit_table_is_e2m1() {
        for code in 0..16u8 {
            assert_eq!(
                i32::from(HALF_UNITS[usize::from(code)]),
                E2m1::from_bits(code).to_half_units()
            );
        }
    }
}
