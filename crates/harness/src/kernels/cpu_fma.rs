//! `cpu-fma-per-product`: the accumulation a plain fp32 kernel does (cuBLAS SGEMM, torch's fp32
//! matmul on dequantized operands, a CUDA-core loop with `fmaf`): every operand dequantized to
//! f32 (`e2m1 * |scale|`, exact), every product added into one f32 accumulator by its own fused
//! multiply-add rounded to nearest, K in increasing order; then `x1 / (1 + exp(-x1)) * x2` in f32
//! and one round to nearest even fp16, as `cpu-tiled` ends.
//!
//! It is correct, but outside the default contract (which sums each 16-block before one rounding):
//! it declares [`KOrder::PerProduct`], whose intervals account for one rounding per product
//! (docs/reference/numerics.md section 3).

use super::interface::{KernelCase, KernelFailure, KernelUnderTest};
use half::f16;
use nvfp4_model::formats::{e2m1_at, E4m3};
use nvfp4_model::layout::BlockedScaleLayout;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::{BlockScaledMatrix, SCALE_BLOCK};
use rayon::prelude::*;

pub struct CpuFmaPerProduct;

/// One row dequantized to f32 from the packed data and the blocked scales (NaN scales give NaN).
fn f32_row(
    operand: &BlockScaledMatrix,
    blocked: &[u8],
    layout: &BlockedScaleLayout,
    row: usize,
    l: usize,
) -> Vec<f32> {
    let packed = operand.row_data(row, l);
    (0..operand.k())
        .map(|k| {
            let scale = E4m3::from_bits(blocked[layout.offset(row, k / SCALE_BLOCK, l)])
                .to_f32_as_unsigned_scale();
            e2m1_at(packed, k).to_f32() * scale
        })
        .collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .fold(0f32, |acc, (&x, &y)| x.mul_add(y, acc))
}

impl KernelUnderTest for CpuFmaPerProduct {
    fn name(&self) -> &str {
        "cpu-fma-per-product"
    }

    fn description(&self) -> String {
        "correct CPU kernel: f32, one fused multiply-add per product, K in order (like an fp32 \
         GEMM on dequantized operands)"
            .to_string()
    }

    fn source_hash(&self) -> Option<String> {
        Some(super::interface::source_hash_of(include_str!("cpu_fma.rs")))
    }

    fn declared_order(&self) -> Option<KOrder> {
        Some(KOrder::PerProduct)
    }

    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        let case = case.dual_or_refuse()?;
        let inputs = case.inputs;
        let shape = inputs.shape;
        let layout_a = BlockedScaleLayout(inputs.a.scale_dims());
        let layout_b = BlockedScaleLayout(inputs.b1.scale_dims());
        for l in 0..shape.l {
            let b1: Vec<Vec<f32>> = (0..shape.n)
                .map(|n| f32_row(&inputs.b1, case.sfb1_blocked, &layout_b, n, l))
                .collect();
            let b2: Vec<Vec<f32>> = (0..shape.n)
                .map(|n| f32_row(&inputs.b2, case.sfb2_blocked, &layout_b, n, l))
                .collect();
            output
                .par_chunks_mut(shape.n * shape.l)
                .enumerate()
                .for_each(|(m, row)| {
                    let a = f32_row(&inputs.a, case.sfa_blocked, &layout_a, m, l);
                    for n in 0..shape.n {
                        let (x1, x2) = (dot(&a, &b1[n]), dot(&a, &b2[n]));
                        row[n * shape.l + l] = f16::from_f32(x1 / (1.0 + (-x1).exp()) * x2);
                    }
                });
        }
        Ok(())
    }
}
