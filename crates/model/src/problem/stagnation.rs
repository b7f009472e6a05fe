//! The `stagnation` inputs: per-product rounding at its worst. A kernel that adds every product
//! into one f32 accumulator with its own rounding (an fp32 GEMM, `acc = fmaf(a, b, acc)`) loses
//! up to half an ulp per product; these inputs make it lose nearly that much on every product,
//! always in the same direction, and leave the loss as most of the answer.
//!
//! Per row of A and column of B (each batch alike): the first 16-block puts the partial sum just
//! above 2^23 (products of 6 and 448-scales, sums in [42, 59] x 448^2, where an f32 ulp is 1);
//! every middle product is 0.5 x 1.0 x 15/16 = 15/32, just under half an ulp, so each fused
//! multiply-add rounds it away; the last block takes 42 x 448^2 away again. `A @ B1` is then the
//! column's first-block excess plus 15/32 per middle product, and a per-product kernel returns
//! the excess alone. `A @ B2` is one small product (a power of two near 2^-10). Kernels that sum
//! each block before rounding (tensor cores, `cpu-tiled`) lose at most half an ulp per block.
//! The seed picks each column's first block, the signs of A's rows and B2's nonzero position.

use super::{BlockScaledMatrix, DualGemmInputs, GemmInputs, Shape, SCALE_BLOCK};
use crate::formats::{E4M3_MAX_CODE, E4M3_ONE_CODE};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

const FP4_HALF: u8 = 0x1;
const FP4_ONE: u8 = 0x2;
const FP4_TWO: u8 = 0x4;
const FP4_SIX: u8 = 0x7;
const FP4_SIGN: u8 = 0x8;
const E4M3_15_16: u8 = 0x37;
/// 2 x 2^-9, a subnormal.
const E4M3_2_POW_MINUS_8: u8 = 0x02;
const FP4_VALUES: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// Four FP4 codes whose products with A's first block (6, 6, 1, 0.5) sum to a distinct value
/// in [42, 59] (times 448^2): every partial between 2^23 and 1.41 x 2^23.
fn first_blocks() -> Vec<[u8; 4]> {
    let mut firsts: Vec<([u8; 4], f64)> = Vec::new();
    for code in 0..8u32.pow(4) {
        let c = [0, 1, 2, 3].map(|i| ((code >> (3 * i)) & 7) as u8);
        let v = c.map(|x| FP4_VALUES[usize::from(x)]);
        let sum = 6.0 * v[0] + 6.0 * v[1] + v[2] + 0.5 * v[3];
        if (42.0..=59.0).contains(&sum) && firsts.iter().all(|&(_, s)| s != sum) {
            firsts.push((c, sum));
        }
    }
    firsts.into_iter().map(|(c, _)| c).collect()
}

fn packed(codes: &[u8]) -> Vec<u8> {
    codes.chunks(2).map(|p| p[0] | (p[1] << 4)).collect()
}

/// One operand, row by row: `row(r)` gives a row's FP4 codes and scales (the same in every
/// batch).
fn operand(
    name: &str,
    rows: usize,
    shape: Shape,
    row: impl Fn(usize) -> (Vec<u8>, Vec<u8>),
) -> BlockScaledMatrix {
    let per_batch: Vec<(Vec<u8>, Vec<u8>)> = (0..rows).map(row).collect();
    let (mut data, mut scales) = (Vec::new(), Vec::new());
    for _ in 0..shape.l {
        for (codes, row_scales) in &per_batch {
            data.extend(packed(codes));
            scales.extend_from_slice(row_scales);
        }
    }
    BlockScaledMatrix::new(name, rows, shape.k, shape.l, data, scales)
        .expect("stagnation operands match their shape")
}

/// A and B1 (the stagnating pair) and B2 (one small product per column).
fn operands(shape: Shape, seed: u64) -> [BlockScaledMatrix; 3] {
    let (k, blocks) = (shape.k, shape.scale_cols());
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x57a6_a710_4e55_0000);
    let firsts = first_blocks();
    let a_signs: Vec<u8> = (0..shape.m)
        .map(|_| if rng.next_u32() % 2 == 0 { 0 } else { FP4_SIGN })
        .collect();
    let b1_firsts: Vec<[u8; 4]> = (0..shape.n)
        .map(|_| firsts[rng.next_u32() as usize % firsts.len()])
        .collect();
    let last = (blocks >= 3).then(|| k - SCALE_BLOCK);
    // B2's product lands in a middle block, where A holds +-0.5: A @ B2 = +-2^-10.
    let middle = if last.is_some() {
        SCALE_BLOCK..k - SCALE_BLOCK
    } else {
        0..k
    };
    let b2_positions: Vec<usize> = (0..shape.n)
        .map(|_| middle.start + rng.next_u32() as usize % middle.len())
        .collect();
    let a = operand("a", shape.m, shape, |r| {
        let mut codes = vec![FP4_HALF; k];
        codes[..SCALE_BLOCK].fill(0);
        codes[..4].copy_from_slice(&[FP4_SIX, FP4_SIX, FP4_ONE, FP4_HALF]);
        let mut scales = vec![E4M3_ONE_CODE; blocks];
        scales[0] = E4M3_MAX_CODE;
        if let Some(last) = last {
            codes[last..].fill(0);
            codes[last..last + 2].copy_from_slice(&[FP4_SIX, FP4_TWO]);
            scales[blocks - 1] = E4M3_MAX_CODE;
        }
        codes
            .iter_mut()
            .for_each(|c| *c |= a_signs[r] * u8::from(*c != 0));
        (codes, scales)
    });
    let b1 = operand("b1", shape.n, shape, |n| {
        let mut codes = vec![FP4_ONE; k];
        codes[..SCALE_BLOCK].fill(0);
        codes[..4].copy_from_slice(&b1_firsts[n]);
        let mut scales = vec![E4M3_15_16; blocks];
        scales[0] = E4M3_MAX_CODE;
        if let Some(last) = last {
            // -6 x 6 - 3 x 2 = -42: what is left is the first block's excess and the middle.
            codes[last..].fill(0);
            codes[last..last + 2].copy_from_slice(&[FP4_SIX | FP4_SIGN, 0x5 | FP4_SIGN]);
            scales[blocks - 1] = E4M3_MAX_CODE;
        }
        (codes, scales)
    });
    let b2 = operand("b2", shape.n, shape, |n| {
        let mut codes = vec![0u8; k];
        codes[b2_positions[n]] = FP4_HALF;
        let mut scales = vec![E4M3_ONE_CODE; blocks];
        scales[b2_positions[n] / SCALE_BLOCK] = E4M3_2_POW_MINUS_8;
        (codes, scales)
    });
    [a, b1, b2]
}

pub fn dual_gemm(shape: Shape, seed: u64) -> DualGemmInputs {
    let [a, b1, b2] = operands(shape, seed);
    DualGemmInputs::new(shape, a, b1, b2).expect("stagnation operands match their shape")
}

/// The plain GEMM's: A and B1 of the dual GEMM's.
pub fn gemm(shape: Shape, seed: u64) -> GemmInputs {
    let [a, b, _] = operands(shape, seed);
    GemmInputs::new(shape, a, b).expect("stagnation operands match their shape")
}
