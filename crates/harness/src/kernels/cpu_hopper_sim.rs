//! CPU kernels that simulate a Hopper mma.sync kernel bit for bit, so that `certify --exact` can
//! be shown (and tested) without a GPU:
//! - `cpu-hopper-sim`: like `kernels/hopper/baseline.cu`: FP4 and the *blocked* scales decoded to
//!   fp16 operands `e2m1 * |scale|`, one `mma.sync m16n8k16` step per scale block
//!   ([`hopper_hmma_step_fast`], the H100-measured adder), K increasing from an accumulator of
//!   +0, then `x1 / (1 + exp(-x1)) * x2` in f64 with the platform's `exp` (not the model's, as a
//!   GPU's exp is not) and one round to nearest even fp16. Declares `HOPPER_F16_INCREASING_K`.
//! - `cpu-mutant-reordered-k`: the same, declaring the same schedule, but visiting the scale
//!   blocks last to first. Its outputs are correct (inside every interval: the intervals accept
//!   any contiguous K order), so only the replay notices that it does not do what it declares.

use super::interface::{KernelCase, KernelFailure, KernelUnderTest};
use half::f16;
use nvfp4_model::formats::{e2m1_at, fp16_from_f64_rne, E4m3};
use nvfp4_model::layout::BlockedScaleLayout;
use nvfp4_model::model::mma::fast::hopper_hmma_step_fast;
use nvfp4_model::model::mma::schedule::{Schedule, HOPPER_F16_INCREASING_K};
use nvfp4_model::problem::{BlockScaledMatrix, SCALE_BLOCK};
use rayon::prelude::*;

/// `cpu-hopper-sim`, or with `reversed_k` the mutant `cpu-mutant-reordered-k`.
pub struct CpuHopperSim {
    reversed_k: bool,
}

impl CpuHopperSim {
    pub fn correct() -> Self {
        CpuHopperSim { reversed_k: false }
    }

    pub fn reordered_k_mutant() -> Self {
        CpuHopperSim { reversed_k: true }
    }
}

/// One row's fp16 MMA operands, block by block, from the packed data and the blocked scales.
fn fp16_row(
    operand: &BlockScaledMatrix,
    blocked: &[u8],
    layout: &BlockedScaleLayout,
    row: usize,
    l: usize,
) -> Vec<[f16; SCALE_BLOCK]> {
    let packed = operand.row_data(row, l);
    (0..operand.k() / SCALE_BLOCK)
        .map(|j| {
            // UE4M3: the sign bit is ignored; a NaN code gives NaN operands.
            let scale =
                E4m3::from_bits(blocked[layout.offset(row, j, l)]).to_f32_as_unsigned_scale();
            std::array::from_fn(|k| {
                f16::from_f32(e2m1_at(packed, j * SCALE_BLOCK + k).to_f32() * scale)
            })
        })
        .collect()
}

impl CpuHopperSim {
    fn dot(&self, a: &[[f16; SCALE_BLOCK]], b: &[[f16; SCALE_BLOCK]]) -> f32 {
        let step = |c: f32, (x, y): (&[f16; SCALE_BLOCK], &[f16; SCALE_BLOCK])| {
            hopper_hmma_step_fast(c, x, y)
        };
        if self.reversed_k {
            a.iter().zip(b).rev().fold(0.0, step)
        } else {
            a.iter().zip(b).fold(0.0, step)
        }
    }
}

/// The Hopper kernels' epilogue, with the platform's f64 exp.
fn silu_mul_f64(x1: f32, x2: f32) -> f16 {
    let x = f64::from(x1);
    fp16_from_f64_rne(x / (1.0 + (-x).exp()) * f64::from(x2))
}

impl KernelUnderTest for CpuHopperSim {
    fn name(&self) -> &str {
        if self.reversed_k {
            "cpu-mutant-reordered-k"
        } else {
            "cpu-hopper-sim"
        }
    }

    fn description(&self) -> String {
        if self.reversed_k {
            "declares the Hopper schedule (K increasing) but accumulates K decreasing: correct \
             within the intervals, caught only by certify --exact"
                .to_string()
        } else {
            "correct CPU simulation of a Hopper mma.sync kernel (H100-measured adder, K \
             increasing, f64 epilogue); declares its schedule for certify --exact"
                .to_string()
        }
    }

    /// The hash of this file: a built-in kernel's source is compiled into the binary.
    fn source_hash(&self) -> Option<String> {
        Some(super::interface::source_hash_of(include_str!(
            "cpu_hopper_sim.rs"
        )))
    }

    fn is_deliberately_broken(&self) -> bool {
        self.reversed_k
    }

    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        let case = case.dual_or_refuse()?;
        let inputs = case.inputs;
        let shape = inputs.shape;
        let (layout_a, layout_b) = (
            BlockedScaleLayout(inputs.a.scale_dims()),
            BlockedScaleLayout(inputs.b1.scale_dims()),
        );
        let row_len = shape.n * shape.l;
        for l in 0..shape.l {
            let b1: Vec<_> = (0..shape.n)
                .map(|n| fp16_row(&inputs.b1, case.sfb1_blocked, &layout_b, n, l))
                .collect();
            let b2: Vec<_> = (0..shape.n)
                .map(|n| fp16_row(&inputs.b2, case.sfb2_blocked, &layout_b, n, l))
                .collect();
            output
                .par_chunks_mut(row_len)
                .enumerate()
                .for_each(|(m, row)| {
                    let a = fp16_row(&inputs.a, case.sfa_blocked, &layout_a, m, l);
                    for n in 0..shape.n {
                        let (x1, x2) = (self.dot(&a, &b1[n]), self.dot(&a, &b2[n]));
                        row[n * shape.l + l] = silu_mul_f64(x1, x2);
                    }
                });
        }
        Ok(())
    }

    fn schedule(&self) -> Option<Schedule> {
        Some(HOPPER_F16_INCREASING_K)
    }
}
