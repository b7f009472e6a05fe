//! Block-scale layouts: where the scale of row `i`, scale column `j` (k / 16), batch `l` lives.
//!
//! - [`PlainScaleLayout`]: `(MN, K/16)` row-major, one matrix per batch, batch outermost.
//! - [`BlockedScaleLayout`]: the cuBLAS/CUTLASS layout that tensor cores read, logical shape
//!   `(32, 4, rest_mn, 4, rest_k, L)`. Each 128-row x 4-column block of scales is one contiguous
//!   512-byte atom; inside it, byte = `mm32 * 16 + mm4 * 4 + kk4` where `mm32 = i % 32`,
//!   `mm4 = (i % 128) / 32`, `kk4 = j % 4`. Atoms are ordered by (l, i / 128, j / 4).
//!
//! - [`Tiled8x4ScaleLayout`]: TensorRT-LLM's `R8c4` (FlashInfer's `layout_8x4`), for small token
//!   counts: 8-row x 4-column tiles of 32 bytes, contiguous, row-major inside; tiles ordered by
//!   (i / 8, j / 4).
//!
//! The blocked layout pads rows to a multiple of 128 and scale columns to a multiple of 4 (the
//! 8x4 layout rows to 8). Padding bytes get a caller-chosen fill and are never read back into a
//! plain layout or a result.

use rayon::prelude::*;

/// Bytes in one 128 x 4 atom of the blocked layout.
pub const ATOM_BYTES: usize = 512;
pub const ATOM_ROWS: usize = 128;
pub const ATOM_COLS: usize = 4;

/// Dimensions of one operand's scale tensor: `rows` (M or N), `cols` (K / 16), `batches` (L).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScaleDims {
    pub rows: usize,
    pub cols: usize,
    pub batches: usize,
}

/// `(MN, K/16)` row-major per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlainScaleLayout(pub ScaleDims);

impl PlainScaleLayout {
    pub fn len(&self) -> usize {
        self.0.rows * self.0.cols * self.0.batches
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn offset(&self, i: usize, j: usize, l: usize) -> usize {
        (l * self.0.rows + i) * self.0.cols + j
    }
}

/// The permuted 512-byte-atom layout of the tensor cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedScaleLayout(pub ScaleDims);

impl BlockedScaleLayout {
    /// `rest_mn`: number of 128-row atom rows.
    pub fn row_atoms(&self) -> usize {
        self.0.rows.div_ceil(ATOM_ROWS)
    }

    /// `rest_k`: number of 4-column atom columns.
    pub fn col_atoms(&self) -> usize {
        self.0.cols.div_ceil(ATOM_COLS)
    }

    /// Total bytes, padding included.
    pub fn len(&self) -> usize {
        self.row_atoms() * self.col_atoms() * ATOM_BYTES * self.0.batches
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn offset(&self, i: usize, j: usize, l: usize) -> usize {
        let (mm, mm32, mm4) = (i / ATOM_ROWS, i % 32, (i % ATOM_ROWS) / 32);
        let (kk, kk4) = (j / ATOM_COLS, j % ATOM_COLS);
        let atom = (l * self.row_atoms() + mm) * self.col_atoms() + kk;
        atom * ATOM_BYTES + mm32 * 16 + mm4 * 4 + kk4
    }

    /// The logical shape `(32, 4, rest_mn, 4, rest_k, L)` of docs/reference/problem.md, for tools that
    /// want it.
    pub fn logical_shape(&self) -> [usize; 6] {
        [32, 4, self.row_atoms(), 4, self.col_atoms(), self.0.batches]
    }

    /// The shape of the bytes in memory order, `[L, rest_mn, rest_k, 32, 4, 4]`: how case files
    /// store the blocked scales (`sfX_permuted`), and what GPU MODE permutes into the logical one.
    pub fn storage_shape(&self) -> [usize; 6] {
        [self.0.batches, self.row_atoms(), self.col_atoms(), 32, 4, 4]
    }
}

/// 8 x 4 tiles of 32 bytes (one batch): scale (i, j) at
/// `(i / 8) * ceil(cols / 4) * 32 + (j / 4) * 32 + (i % 8) * 4 + j % 4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tiled8x4ScaleLayout(pub ScaleDims);

impl Tiled8x4ScaleLayout {
    /// Total bytes, padding included.
    pub fn len(&self) -> usize {
        self.0.rows.div_ceil(8) * self.0.cols.div_ceil(4) * 32 * self.0.batches
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn offset(&self, i: usize, j: usize, l: usize) -> usize {
        let tiles_per_row = self.0.cols.div_ceil(4);
        let batch = self.0.rows.div_ceil(8) * tiles_per_row * 32;
        l * batch + (i / 8) * tiles_per_row * 32 + (j / 4) * 32 + (i % 8) * 4 + j % 4
    }
}

/// Reads the unpadded region of 8x4-tiled scales back into the plain layout.
pub fn tiled8x4_to_plain(tiled: &[u8], dims: ScaleDims) -> Vec<u8> {
    let layout = Tiled8x4ScaleLayout(dims);
    assert_eq!(
        tiled.len(),
        layout.len(),
        "8x4 scale buffer does not match {dims:?}"
    );
    gather_plain(dims, |i, j, l| tiled[layout.offset(i, j, l)])
}

/// Rewrites plain scales into the blocked layout, padding with `fill`.
pub fn plain_to_blocked(plain: &[u8], dims: ScaleDims, fill: u8) -> Vec<u8> {
    let (from, to) = (PlainScaleLayout(dims), BlockedScaleLayout(dims));
    assert_eq!(
        plain.len(),
        from.len(),
        "plain scale buffer does not match {dims:?}"
    );
    // One band of atoms (a batch's 128 rows, every column) after another, each on a core of
    // its own: a case of a few rows and many batches pads every batch to 128 rows, and its
    // blocked scales (1.5 GB for 1 x 3 x 127152 x 511) took seconds on one core.
    let band_bytes = to.col_atoms() * ATOM_BYTES;
    let mut blocked = vec![0u8; to.len()];
    if band_bytes == 0 {
        return blocked;
    }
    blocked
        .par_chunks_mut(band_bytes)
        .enumerate()
        .for_each(|(band, bytes)| {
            bytes.fill(fill);
            let (l, mm) = (band / to.row_atoms(), band % to.row_atoms());
            let band_start = band * band_bytes;
            for i in mm * ATOM_ROWS..dims.rows.min((mm + 1) * ATOM_ROWS) {
                for j in 0..dims.cols {
                    bytes[to.offset(i, j, l) - band_start] = plain[from.offset(i, j, l)];
                }
            }
        });
    blocked
}

/// Reads the unpadded region of blocked scales back into the plain layout.
pub fn blocked_to_plain(blocked: &[u8], dims: ScaleDims) -> Vec<u8> {
    let layout = BlockedScaleLayout(dims);
    assert_eq!(
        blocked.len(),
        layout.len(),
        "blocked scale buffer does not match {dims:?}"
    );
    gather_plain(dims, |i, j, l| blocked[layout.offset(i, j, l)])
}

/// The plain layout of the scale `at(i, j, l)` returns for every index.
fn gather_plain(dims: ScaleDims, at: impl Fn(usize, usize, usize) -> u8) -> Vec<u8> {
    let plain_layout = PlainScaleLayout(dims);
    let mut plain = vec![0; plain_layout.len()];
    for_each_index(dims, |i, j, l| {
        plain[plain_layout.offset(i, j, l)] = at(i, j, l)
    });
    plain
}

fn for_each_index(dims: ScaleDims, mut visit: impl FnMut(usize, usize, usize)) {
    for l in 0..dims.batches {
        for i in 0..dims.rows {
            for j in 0..dims.cols {
                visit(i, j, l);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets worked out by hand from docs/reference/problem.md's formula for a 300 x 10 x 2 scale tensor
    /// (rest_mn = 3, rest_k = 3, so one batch is 9 atoms = 4608 bytes).
    #[test]
    fn hand_checked_offsets() {
        let layout = BlockedScaleLayout(ScaleDims {
            rows: 300,
            cols: 10,
            batches: 2,
        });
        let table = [
            ((0, 0, 0), 0),
            ((1, 0, 0), 16),        // mm32 = 1
            ((32, 0, 0), 4),        // mm4 = 1
            ((0, 3, 0), 3),         // kk4 = 3
            ((0, 4, 0), 512),       // kk = 1: next atom along k
            ((128, 0, 0), 3 * 512), // mm = 1: skips rest_k atoms
            ((127, 7, 0), 512 + 31 * 16 + 3 * 4 + 3),
            ((299, 9, 1), 4608 + (2 * 3 + 2) * 512 + 11 * 16 + 4 + 1),
        ];
        for ((i, j, l), offset) in table {
            assert_eq!(layout.offset(i, j, l), offset, "(i={i}, j={j}, l={l})");
        }
        assert_eq!(layout.len(), 2 * 4608);
        assert_eq!(layout.logical_shape(), [32, 4, 3, 4, 3, 2]);
    }

    /// The 8x4 layout of a 20 x 10 scale tensor: 3 tile rows of 3 tiles, 288 bytes.
    #[test]
    fn hand_checked_8x4_offsets() {
        let dims = ScaleDims {
            rows: 20,
            cols: 10,
            batches: 1,
        };
        let layout = Tiled8x4ScaleLayout(dims);
        let table = [
            ((0, 0), 0),
            ((0, 3), 3),
            ((1, 0), 4),
            ((0, 4), 32),
            ((8, 0), 3 * 32),
            ((19, 9), 2 * 3 * 32 + 2 * 32 + 3 * 4 + 1),
        ];
        for ((i, j), offset) in table {
            assert_eq!(layout.offset(i, j, 0), offset, "(i={i}, j={j})");
        }
        assert_eq!(layout.len(), 288);
        let plain: Vec<u8> = (0..200).map(|x| x as u8).collect();
        let mut tiled = vec![0xEE; 288];
        for i in 0..20 {
            for j in 0..10 {
                tiled[layout.offset(i, j, 0)] = plain[i * 10 + j];
            }
        }
        assert_eq!(tiled8x4_to_plain(&tiled, dims), plain);
    }
}
