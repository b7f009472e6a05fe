//! A block-scaled NVFP4 operand: packed e2m1 data plus one e4m3 scale per 16 elements of K.

use crate::error::{Error, Result};
use crate::formats::{e2m1_at, E2m1, E4m3};
use crate::layout::{plain_to_blocked, ScaleDims};
use crate::problem::shape::SCALE_BLOCK;

/// `rows x k` values per batch, `batches` batches. Bytes are in the order a GPU kernel reads them:
/// `data` is `[batches][rows][k / 2]` (K-major, low nibble = even k), `scales` is the plain layout
/// `[batches][rows][k / 16]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockScaledMatrix {
    rows: usize,
    k: usize,
    batches: usize,
    data: Vec<u8>,
    scales: Vec<u8>,
}

impl BlockScaledMatrix {
    /// Checks that both buffers match the dimensions; `name` goes into the error message.
    pub fn new(
        name: &str,
        rows: usize,
        k: usize,
        batches: usize,
        data: Vec<u8>,
        scales: Vec<u8>,
    ) -> Result<Self> {
        if k % SCALE_BLOCK != 0 {
            return Err(Error::InvalidShape {
                dimension: "K",
                value: k,
                requirement: "must be a multiple of 16 (one e4m3 scale covers 16 consecutive k)",
            });
        }
        let expect = |tensor: String, expected: usize, actual: usize| {
            if expected == actual {
                Ok(())
            } else {
                Err(Error::TensorSize {
                    name: tensor,
                    expected,
                    actual,
                })
            }
        };
        expect(name.to_string(), rows * k / 2 * batches, data.len())?;
        expect(
            format!("sf{name}"),
            rows * (k / SCALE_BLOCK) * batches,
            scales.len(),
        )?;
        Ok(BlockScaledMatrix {
            rows,
            k,
            batches,
            data,
            scales,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn k(&self) -> usize {
        self.k
    }

    pub fn batches(&self) -> usize {
        self.batches
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    pub fn scales(&self) -> &[u8] {
        &self.scales
    }

    /// The packed data as `[L, rows, K/2]` bytes, without a copy.
    pub fn data_array(&self) -> ndarray::ArrayView3<'_, u8> {
        ndarray::ArrayView3::from_shape((self.batches, self.rows, self.k / 2), &self.data)
            .expect("checked at construction")
    }

    /// The plain scales as `[L, rows, K/16]` e4m3 bytes, without a copy.
    pub fn scales_array(&self) -> ndarray::ArrayView3<'_, u8> {
        ndarray::ArrayView3::from_shape(
            (self.batches, self.rows, self.k / SCALE_BLOCK),
            &self.scales,
        )
        .expect("checked at construction")
    }

    pub fn scale_dims(&self) -> ScaleDims {
        ScaleDims {
            rows: self.rows,
            cols: self.k / SCALE_BLOCK,
            batches: self.batches,
        }
    }

    /// The scales in the blocked (permuted) layout, padding filled with `fill`.
    pub fn blocked_scales(&self, fill: u8) -> Vec<u8> {
        plain_to_blocked(&self.scales, self.scale_dims(), fill)
    }

    /// The packed data of one row.
    #[inline]
    pub fn row_data(&self, row: usize, batch: usize) -> &[u8] {
        let start = (batch * self.rows + row) * (self.k / 2);
        &self.data[start..start + self.k / 2]
    }

    /// The scales of one row, one per 16 values of K.
    #[inline]
    pub fn row_scales(&self, row: usize, batch: usize) -> &[u8] {
        let cols = self.k / SCALE_BLOCK;
        let start = (batch * self.rows + row) * cols;
        &self.scales[start..start + cols]
    }

    pub fn value(&self, row: usize, k: usize, batch: usize) -> E2m1 {
        e2m1_at(self.row_data(row, batch), k)
    }

    pub fn scale(&self, row: usize, k: usize, batch: usize) -> E4m3 {
        E4m3::from_bits(self.row_scales(row, batch)[k / SCALE_BLOCK])
    }

    /// Sets the FP4 code (4 bits) at (row, k, batch): data shrinking rewrites single inputs.
    pub fn set_code(&mut self, row: usize, k: usize, batch: usize, code: u8) {
        let byte = &mut self.data[(batch * self.rows + row) * (self.k / 2) + k / 2];
        *byte = if k % 2 == 0 {
            (*byte & 0xF0) | (code & 0x0F)
        } else {
            (*byte & 0x0F) | (code << 4)
        };
    }

    /// Sets the e4m3 scale byte of the block holding k at (row, k, batch).
    pub fn set_scale(&mut self, row: usize, k: usize, batch: usize, byte: u8) {
        let cols = self.k / SCALE_BLOCK;
        self.scales[(batch * self.rows + row) * cols + k / SCALE_BLOCK] = byte;
    }

    /// A copy holding batch `batch` alone.
    pub fn single_batch(&self, batch: usize) -> Self {
        let (row_bytes, cols) = (self.k / 2, self.k / SCALE_BLOCK);
        BlockScaledMatrix {
            rows: self.rows,
            k: self.k,
            batches: 1,
            data: self.data[batch * self.rows * row_bytes..][..self.rows * row_bytes].to_vec(),
            scales: self.scales[batch * self.rows * cols..][..self.rows * cols].to_vec(),
        }
    }

    /// A copy holding the listed rows, in that order, of every batch (the reference of sampled
    /// rows reads A's sampled rows alone).
    pub fn with_rows(&self, rows: &[usize]) -> Self {
        let every: Vec<usize> = (0..self.batches).collect();
        self.with_rows_in_batches(rows, &every)
    }

    /// A copy holding the listed rows of the listed batches, each in the order given (the GPU
    /// reference's cross-check reads sampled rows, columns and batches alone).
    pub fn with_rows_in_batches(&self, rows: &[usize], batches: &[usize]) -> Self {
        let (row_bytes, cols) = (self.k / 2, self.k / SCALE_BLOCK);
        let mut data = Vec::with_capacity(rows.len() * row_bytes * batches.len());
        let mut scales = Vec::with_capacity(rows.len() * cols * batches.len());
        for &batch in batches {
            for &row in rows {
                data.extend_from_slice(self.row_data(row, batch));
                scales.extend_from_slice(self.row_scales(row, batch));
            }
        }
        BlockScaledMatrix {
            rows: rows.len(),
            k: self.k,
            batches: batches.len(),
            data,
            scales,
        }
    }

    /// A copy with only the first `rows` rows and `k` values of K kept (used to shrink cases).
    pub fn truncated(&self, rows: usize, k: usize) -> Self {
        assert!(rows <= self.rows && k <= self.k && k % SCALE_BLOCK == 0);
        let mut data = Vec::with_capacity(rows * k / 2 * self.batches);
        let mut scales = Vec::with_capacity(rows * k / SCALE_BLOCK * self.batches);
        for batch in 0..self.batches {
            for row in 0..rows {
                data.extend_from_slice(&self.row_data(row, batch)[..k / 2]);
                scales.extend_from_slice(&self.row_scales(row, batch)[..k / SCALE_BLOCK]);
            }
        }
        BlockScaledMatrix {
            rows,
            k,
            batches: self.batches,
            data,
            scales,
        }
    }
}
