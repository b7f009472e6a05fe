//! How [`generate_dual_gemm`](super::generate_dual_gemm) draws a dual-GEMM case, for a
//! generator that makes its rows elsewhere and must give the same bytes (the harness's GPU
//! generator, crates/harness/src/gpu/input_generator.rs): read from the code that draws them.

use super::{
    Distribution, GpumodeScales, KBlockMode, KBlockPlan, OperandDraw, Role, Shape,
    DUAL_GEMM_STREAMS,
};

/// A dual-GEMM case's draws: the adversarial K-block plan, and where each operand's rows start
/// in its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DualGemmDraws {
    /// What each K-block is ([`KBlockMode::Random`] throughout but for the adversarial
    /// distributions); shared by the three operands.
    pub k_blocks: Vec<KBlockMode>,
    /// Per operand (a, b1, b2, on [`DUAL_GEMM_STREAMS`]): the stream word at which each of its
    /// rows x L rows starts (batch outermost), then the word where the last row ends.
    pub row_starts: [Vec<u128>; 3],
}

/// The draws of `generate_dual_gemm(shape, dist, seed)`, from the code that makes them (each
/// row's length read from the few words that decide it); `None` for
/// [`Distribution::Stagnation`], which is built whole, not drawn row by row.
pub fn dual_gemm_draws(shape: Shape, dist: Distribution, seed: u64) -> Option<DualGemmDraws> {
    if dist == Distribution::Stagnation {
        return None;
    }
    let plan = KBlockPlan::new(shape.scale_cols(), dist, seed);
    let starts = |role: Role, stream: u64| {
        let rows = if role == Role::A { shape.m } else { shape.n };
        let draw = OperandDraw {
            role,
            dist,
            gpumode_scales: GpumodeScales::UniformUnit,
            plan: &plan,
            seed,
            stream,
            row_bytes: shape.k / 2,
            blocks: shape.scale_cols(),
        };
        draw.row_starts(rows * shape.l, 1)
    };
    let [a_stream, b1_stream, b2_stream] = DUAL_GEMM_STREAMS;
    // Each operand's chain is its own: the three are walked at once on the machine's cores.
    let (a, (b1, b2)) = rayon::join(
        || starts(Role::A, a_stream),
        || rayon::join(|| starts(Role::B, b1_stream), || starts(Role::B, b2_stream)),
    );
    let row_starts = [a, b1, b2];
    Some(DualGemmDraws {
        k_blocks: plan.0,
        row_starts,
    })
}
