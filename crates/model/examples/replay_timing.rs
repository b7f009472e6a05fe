//! Times the full-matrix replay (`model::replay::replay_dual_gemm`) under each MMA model, K
//! increasing, on one dual GEMM (default: the 256x4096x7168 benchmark shape, gpumode inputs),
//! and the reference (exact dots and intervals) for comparison:
//!
//!     cargo run --release --example replay_timing [-- SHAPE [DIST]]
//!
//! docs/reference/tensor-core-models.md records the times measured with it.

use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::dual_gemm_reference;
use nvfp4_model::model::mma::schedule::{KChunkOrder, MmaModel, OutputEpilogue, Schedule};
use nvfp4_model::model::replay::replay_dual_gemm;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let shape: Shape = args
        .next()
        .unwrap_or_else(|| "256x4096x7168".to_string())
        .parse()
        .expect("a shape MxNxK[xL]");
    let dist: Distribution = args
        .next()
        .unwrap_or_else(|| "gpumode".to_string())
        .parse()
        .expect("a distribution");
    let threads = rayon::current_num_threads();
    let inputs = generate_dual_gemm(shape, dist, 1111);
    println!(
        "dual GEMM {shape} ({dist}, seed 1111): 2 x {} dot products of K = {}, {threads} threads\n",
        shape.m * shape.n * shape.l,
        shape.k,
        dist = dist.name()
    );
    println!("| model | time (s) | ambiguous elements | NaN outputs |\n|---|---|---|---|");
    for mma in MmaModel::ALL {
        let schedule = Schedule {
            mma,
            k_order: KChunkOrder::Increasing,
            epilogue: OutputEpilogue::SiluMulF64Rne,
        };
        let started = Instant::now();
        let replay = replay_dual_gemm(&inputs, schedule);
        let seconds = started.elapsed().as_secs_f64();
        let nan = replay.elements.iter().filter(|e| e.output.is_nan()).count();
        println!(
            "| {} | {seconds:.1} | {} | {nan} |",
            mma.name(),
            replay.ambiguous_count()
        );
    }
    let started = Instant::now();
    let reference = dual_gemm_reference(&inputs, KOrder::Contiguous);
    println!(
        "| (reference: exact dots + intervals) | {:.1} | | |",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(reference.len(), shape.m * shape.n * shape.l);
}
