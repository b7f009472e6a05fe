//! Judging the largest cases on a sample of rows. The model computes every element of a case up
//! to [`FULL_REFERENCE_PRODUCTS`] products (every benchmark and competition test shape of the
//! dual GEMM is below it); past it, the answer and the interval of a random sample of output
//! rows, drawn after the kernel has returned, with every 128-row tile of M represented, so that
//! every 128 x 128 output tile has judged elements. Every other element still gets the checks that
//! cost nothing: a value where NaN is required (a NaN scale in its row or column) fails, and so
//! does NaN where none belongs, which includes the harness's poison left in an unwritten element.
//! What this can miss, and how likely: docs/reference/numerics.md section 8.

use half::f16;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::{problem_reference, Reference};
use nvfp4_model::problem::{BlockScaledMatrix, DualGemmInputs, GemmInputs, ProblemInputs, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use rayon::prelude::*;

/// Products (M N K L per GEMM, summed over the GEMMs) past which a case is judged on sampled
/// rows: about 3.5 s of the model on 2 cores, a fraction of a second on a GPU machine's.
pub const FULL_REFERENCE_PRODUCTS: u64 = 1 << 36;
/// Rows of M per sampled tile: every tile of this many rows gets at least one sampled row.
pub const SAMPLE_TILE_ROWS: usize = 128;

/// The rows of M a case was judged on exactly, when not all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSample {
    /// Sorted, distinct.
    pub rows: Vec<usize>,
    pub of: usize,
}

/// Products the model computes for the whole of `inputs`.
pub fn products(inputs: &ProblemInputs) -> u64 {
    let cost = |s: Shape, gemms: u64| (s.m * s.n * s.k * s.l) as u64 * gemms;
    match inputs {
        ProblemInputs::DualGemm(d) => cost(d.shape, 2),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => cost(g.shape, 1),
        ProblemInputs::GroupGemm(g) => g.groups.iter().map(|g| cost(g.shape, 1)).sum(),
    }
}

/// Products of a shape's case (what [`products`] gives for its inputs), before generating them.
pub fn shape_products(shape: Shape, gemms: u64) -> u64 {
    (shape.m * shape.n * shape.k * shape.l) as u64 * gemms
}

/// The rows to judge out of `m` when a row costs `row_products` and the whole case more than
/// `budget`: `None` (every row) when the whole fits. Otherwise as many rows as the budget
/// pays for, spread evenly over the 128-row tiles of M (at least one each, drawn uniformly and
/// without replacement within the tile), plus the last row (the edge of a partial tile).
pub fn sample_rows(m: usize, row_products: u64, budget: u64, seed: u64) -> Option<RowSample> {
    if m as u64 * row_products <= budget {
        return None;
    }
    let tiles = m.div_ceil(SAMPLE_TILE_ROWS);
    let affordable = (budget / row_products.max(1)) as usize;
    let per_tile = (affordable / tiles).max(1);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut rows = Vec::new();
    for tile in 0..tiles {
        let start = tile * SAMPLE_TILE_ROWS;
        // The last row is added below, whatever the draw: it is not a candidate, so that the
        // number of rows judged depends on the shape alone.
        let mut candidates: Vec<usize> = (start..(start + SAMPLE_TILE_ROWS).min(m - 1)).collect();
        // A partial Fisher-Yates shuffle: the first `take` candidates are a uniform sample.
        let take = per_tile.min(candidates.len());
        for i in 0..take {
            let j = i + (rng.next_u64() % (candidates.len() - i) as u64) as usize;
            candidates.swap(i, j);
        }
        rows.extend_from_slice(&candidates[..take]);
    }
    rows.push(m - 1);
    rows.sort_unstable();
    Some(RowSample { rows, of: m })
}

/// The sample of rows for `inputs` (`None`: judge every element): the grouped GEMM is always
/// judged whole (its groups are a few hundred rows each).
pub fn sample_for(inputs: &ProblemInputs, budget: u64, seed: u64) -> Option<RowSample> {
    let (shape, gemms) = match inputs {
        ProblemInputs::DualGemm(d) => (d.shape, 2),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => (g.shape, 1),
        ProblemInputs::GroupGemm(_) => return None,
    };
    sample_rows(
        shape.m,
        shape_products(Shape { m: 1, ..shape }, gemms),
        budget,
        seed,
    )
}

/// Whether row `row` of `matrix` in batch `batch` has a NaN scale (0x7F or 0xFF): every dot
/// product it takes part in is then NaN.
fn row_has_nan_scale(matrix: &BlockScaledMatrix, row: usize, batch: usize) -> bool {
    matrix
        .row_scales(row, batch)
        .iter()
        .any(|&s| s & 0x7F == 0x7F)
}

/// The model's answer and interval on `rows` of M alone (ascending, each below M), as a
/// reference of `rows.len()` rows: what sampled judging computes, without arrays the size of
/// the whole output. Not for the grouped GEMM (its callers judge it whole).
pub fn rows_reference(inputs: &ProblemInputs, order: KOrder, rows: &[usize]) -> Reference {
    elements_reference(inputs, order, rows, None, None)
}

/// The model's answer and interval on the elements of `rows` of M and, given them, those
/// `cols` of N and `batches` of L alone (each ascending and in range), as a reference of
/// `rows.len()` x `cols.len()` x `batches.len()`: what the GPU reference's cross-check
/// computes. An element depends on its row of A and its column of B in its batch alone (the K
/// order and the block sums are per element), so the smaller problem of those rows, columns
/// and batches gives the same bits. Not for the grouped GEMM.
pub fn elements_reference(
    inputs: &ProblemInputs,
    order: KOrder,
    rows: &[usize],
    cols: Option<&[usize]>,
    batches: Option<&[usize]>,
) -> Reference {
    let (shape, a) = match inputs {
        ProblemInputs::DualGemm(d) => (d.shape, &d.a),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => (g.shape, &g.a),
        ProblemInputs::GroupGemm(_) => panic!("a grouped GEMM has no rows of one M"),
    };
    let every: Vec<usize> = (0..shape.l).collect();
    let batches = batches.unwrap_or(&every);
    let n = cols.map_or(shape.n, <[usize]>::len);
    let sub_shape =
        Shape::new(rows.len(), n, shape.k, batches.len()).expect("fewer rows, columns, batches");
    let sub_a = a.with_rows_in_batches(rows, batches);
    let all_cols: Vec<usize> = (0..shape.n).collect();
    let sub_b = |b: &BlockScaledMatrix| {
        if cols.is_none() && batches.len() == shape.l {
            b.clone()
        } else {
            b.with_rows_in_batches(cols.unwrap_or(&all_cols), batches)
        }
    };
    let sub_inputs = match inputs {
        ProblemInputs::DualGemm(d) => ProblemInputs::DualGemm(
            DualGemmInputs::new(sub_shape, sub_a, sub_b(&d.b1), sub_b(&d.b2))
                .expect("the sampled elements' shape"),
        ),
        ProblemInputs::Gemm(g) => ProblemInputs::Gemm(
            GemmInputs::new(sub_shape, sub_a, sub_b(&g.b)).expect("the sampled elements' shape"),
        ),
        ProblemInputs::Gemv(g) => ProblemInputs::Gemv(
            GemmInputs::new(sub_shape, sub_a, sub_b(&g.b)).expect("the sampled elements' shape"),
        ),
        ProblemInputs::GroupGemm(_) => unreachable!("refused above"),
    };
    problem_reference(&sub_inputs, order)
}

/// The reference of `inputs` with the model's answer and interval on the rows of `sample`
/// alone. Elsewhere NaN is required exactly where the full reference requires it (a NaN scale in
/// the element's row of A or column of B), and any other number is accepted: `lo` = -inf,
/// `hi` = +inf, and `expected` NaN, since it was not computed (a NaN there is reported as "model
/// not computed").
pub fn sampled_reference(inputs: &ProblemInputs, order: KOrder, sample: &RowSample) -> Reference {
    let (shape, a, bs): (Shape, &BlockScaledMatrix, Vec<&BlockScaledMatrix>) = match inputs {
        ProblemInputs::DualGemm(d) => (d.shape, &d.a, vec![&d.b1, &d.b2]),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => (g.shape, &g.a, vec![&g.b]),
        ProblemInputs::GroupGemm(_) => return problem_reference(inputs, order),
    };
    let rows = &sample.rows;
    let sub = rows_reference(inputs, order, rows);
    let (n, l) = (shape.n, shape.l);
    let row_len = n * l;
    // NaN requirements of the unsampled elements, from the scales alone.
    let nan_cols: Vec<Vec<bool>> = (0..l)
        .map(|batch| {
            (0..n)
                .map(|col| bs.iter().any(|b| row_has_nan_scale(b, col, batch)))
                .collect()
        })
        .collect();
    // The arrays of a large case are gigabytes: filled, then written row by row, on every core.
    let len = shape.m * row_len;
    let filled = |value: f16| {
        let mut values = Vec::new();
        rayon::iter::repeat_n(value, len).collect_into_vec(&mut values);
        values
    };
    let mut out = Reference {
        expected: filled(f16::NAN),
        lo: filled(f16::NEG_INFINITY),
        hi: filled(f16::INFINITY),
    };
    out.expected
        .par_chunks_mut(row_len)
        .zip(out.lo.par_chunks_mut(row_len))
        .zip(out.hi.par_chunks_mut(row_len))
        .enumerate()
        .for_each(|(m, ((expected, lo), hi))| {
            if let Ok(i) = rows.binary_search(&m) {
                let from = i * row_len;
                expected.copy_from_slice(&sub.expected[from..from + row_len]);
                lo.copy_from_slice(&sub.lo[from..from + row_len]);
                hi.copy_from_slice(&sub.hi[from..from + row_len]);
                return;
            }
            for (batch, nan_in_col) in nan_cols.iter().enumerate() {
                let a_nan = row_has_nan_scale(a, m, batch);
                for (col, &col_nan) in nan_in_col.iter().enumerate() {
                    if a_nan || col_nan {
                        lo[col * l + batch] = f16::NAN;
                        hi[col * l + batch] = f16::NAN;
                    }
                }
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind};

    #[test]
    fn a_case_within_the_budget_is_judged_whole() {
        assert_eq!(sample_rows(100, 10, 1000, 1), None);
        assert!(sample_rows(101, 10, 1000, 1).is_some());
    }

    #[test]
    fn every_tile_of_m_gets_a_row_and_the_budget_is_kept() {
        let sample = sample_rows(8192, 1 << 30, FULL_REFERENCE_PRODUCTS, 7).unwrap();
        assert_eq!(sample.of, 8192);
        for tile in 0..64 {
            let range = tile * 128..(tile + 1) * 128;
            assert!(sample.rows.iter().any(|r| range.contains(r)), "tile {tile}");
        }
        assert!(sample.rows.contains(&8191));
        assert_eq!(sample.rows.len(), 65);
        assert!(sample.rows.windows(2).all(|w| w[0] < w[1]));
        // Another seed, other rows, as many.
        let other = sample_rows(8192, 1 << 30, FULL_REFERENCE_PRODUCTS, 8).unwrap();
        assert_ne!(sample.rows, other.rows);
        assert_eq!(other.rows.len(), 65);
        // A cheaper row buys more rows per tile: 128 rows over 3 tiles, 42 each, and the last.
        let cheap = sample_rows(300, 1 << 20, 1 << 27, 1).unwrap();
        assert_eq!(cheap.rows.len(), 127);
    }

    /// On the sampled rows the full reference's own elements; elsewhere NaN exactly where the
    /// full reference requires it and every number accepted.
    #[test]
    fn the_sampled_reference_agrees_with_the_full_one() {
        let shape = Shape::new(300, 40, 64, 2).unwrap();
        let inputs = generate_problem(
            ProblemKind::DualGemm,
            shape,
            Distribution::AdversarialNan,
            3,
        );
        let full = problem_reference(&inputs, KOrder::Contiguous);
        let row_cost = shape_products(Shape { m: 1, ..shape }, 2);
        let sample = sample_rows(300, row_cost, 20 * row_cost, 5).unwrap();
        assert!(sample.rows.len() < 300);
        let part = sampled_reference(&inputs, KOrder::Contiguous, &sample);
        let mut nan_required = 0;
        for i in 0..full.len() {
            let m = i / (shape.n * shape.l);
            if sample.rows.contains(&m) {
                assert_eq!(part.lo[i].to_bits(), full.lo[i].to_bits(), "{i}");
                assert_eq!(part.hi[i].to_bits(), full.hi[i].to_bits(), "{i}");
                assert_eq!(
                    part.expected[i].to_bits(),
                    full.expected[i].to_bits(),
                    "{i}"
                );
            } else if full.lo[i].is_nan() {
                nan_required += 1;
                assert!(part.lo[i].is_nan() && part.hi[i].is_nan(), "{i}");
            } else {
                assert_eq!(part.lo[i], f16::NEG_INFINITY, "{i}");
                assert_eq!(part.hi[i], f16::INFINITY, "{i}");
            }
        }
        assert!(nan_required > 0, "adversarial-nan requires NaN somewhere");
    }
}
