//! The dot grid (`model::exact_grid`, what the reference runs) against the pairwise i128
//! definition (`model::exact::exact_dot`), statistic for statistic: every compiled copy this CPU
//! can run, with and without the statistics, on every distribution (NaN scales, the largest
//! scales, subnormals, cancelling blocks), on shapes that leave partial row groups and column
//! tiles, and in batches.

use nvfp4_model::model::exact::{exact_dot, ExactDot, PreparedRow};
use nvfp4_model::model::exact_grid::{exact_dot_grid, Simd, LANES, ROWS};
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{BlockScaledMatrix, Distribution, Shape};

fn pairwise(a: &BlockScaledMatrix, b: &BlockScaledMatrix, batch: usize) -> Vec<ExactDot> {
    let (a, b) = (
        PreparedRow::all_rows(a, batch),
        PreparedRow::all_rows(b, batch),
    );
    a.iter()
        .flat_map(|row| b.iter().map(move |col| exact_dot(row, col)))
        .collect()
}

#[test]
fn the_grid_equals_the_pairwise_definition() {
    let shapes = [
        (1, 1, 16, 1),
        (ROWS + 1, LANES + 3, 48, 1),
        (37, 70, 256, 2),
        (128, 33, 1024, 1),
        (5, 2 * LANES, 7168, 1),
        // A few rows across many column tiles (the last partial): the grid splits the
        // columns among tasks instead of the rows.
        (3, 40 * LANES + 7, 64, 2),
    ];
    let mut checked = 0;
    for (i, &(m, n, k, l)) in shapes.iter().enumerate() {
        for dist in [
            Distribution::Gpumode,
            Distribution::Full,
            Distribution::Adversarial,
            Distribution::AdversarialNan,
        ] {
            let inputs = generate_dual_gemm(Shape::new(m, n, k, l).unwrap(), dist, 90 + i as u64);
            for batch in 0..l {
                let want1 = pairwise(&inputs.a, &inputs.b1, batch);
                let want2 = pairwise(&inputs.a, &inputs.b2, batch);
                for simd in Simd::ALL.into_iter().filter(|s| s.available()) {
                    for statistics in [true, false] {
                        let got = exact_dot_grid(
                            &inputs.a,
                            &[&inputs.b1, &inputs.b2],
                            batch,
                            statistics,
                            Some(simd),
                            |_, _, d| (d[0], d[1]),
                        );
                        for (index, ((g1, g2), (w1, w2))) in
                            got.iter().zip(want1.iter().zip(&want2)).enumerate()
                        {
                            let at = format!(
                                "{m}x{n}x{k}x{l} {dist:?} batch {batch} {simd:?} statistics {statistics}: m {} n {}",
                                index / n,
                                index % n
                            );
                            if statistics {
                                assert_eq!(g1, w1, "B1 {at}");
                                assert_eq!(g2, w2, "B2 {at}");
                            } else {
                                assert_eq!((g1.sum, g1.nan), (w1.sum, w1.nan), "B1 {at}");
                                assert_eq!((g2.sum, g2.nan), (w2.sum, w2.nan), "B2 {at}");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    println!("{checked} dot pairs compared");
    assert!(checked > 10_000);
}

#[test]
fn the_grid_hands_out_every_element_once_in_row_major_order() {
    let inputs = generate_dual_gemm(Shape::new(9, 35, 32, 1).unwrap(), Distribution::Full, 5);
    let got = exact_dot_grid(&inputs.a, &[&inputs.b1], 0, true, None, |m, n, _| (m, n));
    let want: Vec<(usize, usize)> = (0..9).flat_map(|m| (0..35).map(move |n| (m, n))).collect();
    assert_eq!(got, want);
}

#[test]
fn past_the_i64_bound_the_grid_takes_the_i128_path() {
    use nvfp4_model::model::exact_grid::MAX_I64_BLOCKS;
    let k = (MAX_I64_BLOCKS + 1) * 16;
    let inputs = generate_dual_gemm(Shape::new(1, 2, k, 1).unwrap(), Distribution::Full, 3);
    let got = exact_dot_grid(&inputs.a, &[&inputs.b1], 0, true, None, |_, _, d| d[0]);
    assert_eq!(got, pairwise(&inputs.a, &inputs.b1, 0));
}
