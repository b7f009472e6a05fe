//! How a reference the GPU computed is checked against the CPU model, which stays the
//! definition: every case's expected, lo and hi compared bit for bit on the elements of
//! [`CROSS_CHECK_ROWS`] rows drawn per case from an unpredictable seed plus the last row, and of
//! at most [`CROSS_CHECK_COLUMNS`] columns (every column of a narrower case): the first and
//! last, the two either side of each 128-column edge among the first four, the rest drawn; in
//! at most [`CROSS_CHECK_BATCHES`] batches (the first, the last, the rest drawn). What a
//! difference does is the reference engine's (`super::reference_engine`).
//!
//! Why columns and batches are sampled too: three whole rows of a case of N 2^17 and K 2^16 are
//! 2^35 products, and the cross-check of whole rows was a third of a default GPU campaign's
//! time; sampled columns and batches keep every case checked at a cost that depends on K alone.

use super::sampling::{elements_reference, RowSample};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::{problem_reference, Reference};
use nvfp4_model::problem::{ProblemInputs, Shape};

/// Rows of every GPU-computed case that the CPU model computes too (besides the last row).
pub const CROSS_CHECK_ROWS: usize = 2;
/// Columns of those rows the CPU model computes, at most (every column of a narrower case).
pub const CROSS_CHECK_COLUMNS: usize = 64;
/// Batches of those elements it computes, at most: the first, the last and drawn ones.
pub const CROSS_CHECK_BATCHES: usize = 4;

/// The elements of a case the CPU model recomputes: the rows, columns and batches, each
/// ascending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossCheckSample {
    pub rows: Vec<usize>,
    pub cols: Vec<usize>,
    pub batches: Vec<usize>,
}

/// The rows of a case the CPU model recomputes: [`CROSS_CHECK_ROWS`] distinct rows drawn from
/// `seed`, and the last one (the edge of a partial tile).
pub fn cross_check_rows(shape: Shape, seed: u64) -> RowSample {
    use rand_core::{RngCore, SeedableRng};
    let m = shape.m;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut rows = vec![m - 1];
    for _ in 0..CROSS_CHECK_ROWS.min(m - 1) {
        loop {
            let row = (rng.next_u64() % (m - 1) as u64) as usize;
            if !rows.contains(&row) {
                rows.push(row);
                break;
            }
        }
    }
    rows.sort_unstable();
    RowSample { rows, of: m }
}

/// The columns of those rows it recomputes: every column up to [`CROSS_CHECK_COLUMNS`];
/// past that the first and the last, the columns either side of the first four 128-column
/// edges (where a tiled kernel's and a tiled reference's indexing change), and the rest drawn
/// from `seed` (a different stream from the rows').
pub fn cross_check_columns(n: usize, seed: u64) -> Vec<usize> {
    use rand_core::{RngCore, SeedableRng};
    if n <= CROSS_CHECK_COLUMNS {
        return (0..n).collect();
    }
    let mut cols = vec![0, n - 1];
    for edge in (1..=4).map(|tile| tile * 128).filter(|&edge| edge < n) {
        cols.extend([edge - 1, edge]);
    }
    cols.sort_unstable();
    cols.dedup();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x636F_6C75_6D6E_73);
    while cols.len() < CROSS_CHECK_COLUMNS {
        let col = (rng.next_u64() % n as u64) as usize;
        if let Err(at) = cols.binary_search(&col) {
            cols.insert(at, col);
        }
    }
    cols
}

/// The batches of those elements it recomputes: every batch up to [`CROSS_CHECK_BATCHES`];
/// past that the first and the last and the rest drawn from `seed`.
pub fn cross_check_batches(l: usize, seed: u64) -> Vec<usize> {
    use rand_core::{RngCore, SeedableRng};
    if l <= CROSS_CHECK_BATCHES {
        return (0..l).collect();
    }
    let mut batches = vec![0, l - 1];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x6261_7463_6865_73);
    while batches.len() < CROSS_CHECK_BATCHES {
        let batch = (rng.next_u64() % l as u64) as usize;
        if let Err(at) = batches.binary_search(&batch) {
            batches.insert(at, batch);
        }
    }
    batches
}

/// The elements of a case of `shape` the cross-check computes, from `seed`.
pub fn cross_check_sample(shape: Shape, seed: u64) -> CrossCheckSample {
    CrossCheckSample {
        rows: cross_check_rows(shape, seed).rows,
        cols: cross_check_columns(shape.n, seed),
        batches: cross_check_batches(shape.l, seed),
    }
}

/// Compares `reference` with the CPU model on the elements drawn from `seed`
/// ([`cross_check_sample`]): the number of elements compared, or the first difference in words.
pub fn cross_check(
    inputs: &ProblemInputs,
    order: KOrder,
    reference: &Reference,
    seed: u64,
) -> Result<u64, String> {
    if matches!(inputs, ProblemInputs::GroupGemm(_)) {
        let cpu = problem_reference(inputs, order);
        return compare_all(&cpu, reference, "grouped GEMM");
    }
    model_sample(inputs, order, seed)?.compare(reference.len(), sampled_from(reference))
}

/// The elements of a reference on the host at the indices given, for [`ModelSample::compare`].
pub(super) fn sampled_from(
    reference: &Reference,
) -> impl FnOnce(&[u64]) -> Result<Reference, String> + '_ {
    |indices: &[u64]| {
        let pick = |values: &[half::f16]| indices.iter().map(|&i| values[i as usize]).collect();
        Ok(Reference {
            expected: pick(&reference.expected),
            lo: pick(&reference.lo),
            hi: pick(&reference.hi),
        })
    }
}

/// The CPU model's values of a case's sampled elements ([`cross_check_sample`]), to compare
/// with a GPU reference: computed on their own, so that a caller can compute them while the
/// GPU computes the whole.
pub(super) struct ModelSample {
    shape: Shape,
    name: &'static str,
    order: KOrder,
    /// The sampled elements' indices in the output, in the order `values` holds them.
    at: Vec<u64>,
    values: Reference,
}

/// The CPU model's [`ModelSample`] of `inputs` (not a grouped GEMM, compared whole) from `seed`.
pub(super) fn model_sample(
    inputs: &ProblemInputs,
    order: KOrder,
    seed: u64,
) -> Result<ModelSample, String> {
    let (shape, name) = match inputs {
        ProblemInputs::DualGemm(d) => (d.shape, "dual GEMM"),
        ProblemInputs::Gemm(g) => (g.shape, "GEMM"),
        ProblemInputs::Gemv(g) => (g.shape, "GEMV"),
        ProblemInputs::GroupGemm(_) => return Err("a grouped GEMM is compared whole".into()),
    };
    let sample = cross_check_sample(shape, seed);
    // The sampled elements, in the order the CPU model's array of them holds them.
    let mut at = Vec::new();
    for &row in &sample.rows {
        for &col in &sample.cols {
            for &batch in &sample.batches {
                at.push(((row * shape.n + col) * shape.l + batch) as u64);
            }
        }
    }
    // The sampled elements alone (a whole-output array would be gigabytes for the large cases).
    let values = elements_reference(
        inputs,
        order,
        &sample.rows,
        Some(&sample.cols),
        Some(&sample.batches),
    );
    Ok(ModelSample {
        shape,
        name,
        order,
        at,
        values,
    })
}

impl ModelSample {
    /// Compares the sample with the GPU reference of `elements` elements whose sampled
    /// elements `gpu_at` gives: the number of elements compared, or the first difference in
    /// words.
    pub(super) fn compare(
        &self,
        elements: usize,
        gpu_at: impl FnOnce(&[u64]) -> Result<Reference, String>,
    ) -> Result<u64, String> {
        let ModelSample {
            shape,
            name,
            order,
            at,
            values: cpu,
        } = self;
        if elements != shape.m * shape.n * shape.l {
            return Err(format!(
                "the GPU reference of a {name} of {shape} has {elements} elements"
            ));
        }
        let gpu = gpu_at(at)?;
        if gpu.len() != at.len() {
            return Err(format!(
                "{} sampled elements of the GPU reference for {}",
                gpu.len(),
                at.len()
            ));
        }
        for (j, &i) in at.iter().enumerate() {
            let i = i as usize;
            let pairs = [
                ("expected", cpu.expected[j], gpu.expected[j]),
                ("lo", cpu.lo[j], gpu.lo[j]),
                ("hi", cpu.hi[j], gpu.hi[j]),
            ];
            for (what, model, gpu) in pairs {
                if model.to_bits() != gpu.to_bits() {
                    let (row, col, batch) =
                        (i / shape.l / shape.n, i / shape.l % shape.n, i % shape.l);
                    return Err(format!(
                        "the GPU reference differs from the CPU model on a {name} of {shape} \
                         ({order:?} order) at row {row}, column {col}, batch {batch}: {what} \
                         is {gpu} (0x{:04X}) on the GPU and {model} (0x{:04X}) in the model",
                        gpu.to_bits(),
                        model.to_bits()
                    ));
                }
            }
        }
        Ok(at.len() as u64)
    }
}

fn compare_all(cpu: &Reference, gpu: &Reference, name: &str) -> Result<u64, String> {
    if cpu != gpu {
        let differing = cpu
            .expected
            .iter()
            .zip(&gpu.expected)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        return Err(format!(
            "the GPU reference of a {name} differs from the CPU model (first expected at {differing:?})"
        ));
    }
    Ok(cpu.len() as u64)
}
