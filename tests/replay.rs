//! Replay mode: the full-matrix prediction under a declared schedule (`model::replay`) and
//! `certify --exact` on the CPU kernels that simulate a Hopper kernel.

use half::f16;
use nvfp4_oracle::formats::{pack_e2m1, E2m1};
use nvfp4_oracle::model::bounds::KOrder;
use nvfp4_oracle::model::dual_gemm_reference;
use nvfp4_oracle::model::mma::schedule::{
    KChunkOrder, MmaModel, OutputEpilogue, Schedule, HOPPER_F16_INCREASING_K,
};
use nvfp4_oracle::model::replay::{replay_dual_gemm, replay_dual_gemm_with_model_steps, same_fp16};
use nvfp4_oracle::problem::generate::generate_dual_gemm;
use nvfp4_oracle::problem::{BlockScaledMatrix, Distribution, DualGemmInputs, Shape};

fn schedule(mma: MmaModel, k_order: KChunkOrder) -> Schedule {
    Schedule {
        mma,
        k_order,
        epilogue: OutputEpilogue::SiluMulF64Rne,
    }
}

fn every_schedule() -> Vec<Schedule> {
    MmaModel::ALL
        .into_iter()
        .flat_map(|mma| {
            [KChunkOrder::Increasing, KChunkOrder::Decreasing].map(|order| schedule(mma, order))
        })
        .collect()
}

/// Accumulators equal bit for bit (NaN payloads included), outputs and alternatives too.
fn assert_same_replay(
    fast: &nvfp4_oracle::model::replay::Replay,
    slow: &nvfp4_oracle::model::replay::Replay,
    what: &str,
) {
    assert_eq!(fast.len(), slow.len());
    for (i, (f, s)) in fast.elements.iter().zip(&slow.elements).enumerate() {
        assert!(
            f.x1.to_bits() == s.x1.to_bits()
                && f.x2.to_bits() == s.x2.to_bits()
                && f.output.to_bits() == s.output.to_bits()
                && f.alternative.map(f16::to_bits) == s.alternative.map(f16::to_bits),
            "{what}, element {i}: fast {f:?}, model steps {s:?}"
        );
    }
}

#[test]
fn fast_replay_equals_the_model_step_functions() {
    // Every model and order, every distribution (NaN scales, cancelling blocks, maximal
    // magnitudes), K tails that leave the last Blackwell step 1, 2 or 3 blocks, L > 1.
    let cases = [
        ("5x7x16", Distribution::AdversarialNan, 1),
        ("9x6x80", Distribution::Full, 2),
        ("6x9x272x2", Distribution::Adversarial, 3),
        ("7x5x96", Distribution::Gpumode, 4),
        ("4x8x176", Distribution::AdversarialNan, 5),
        ("3x4x512", Distribution::Full, 6),
    ];
    // Tallies that keep the comparison meaningful: the models and orders disagree somewhere,
    // and NaN outputs occur.
    let (mut differ_from_exact, mut differ_by_order, mut nan) = (0, 0, 0);
    for (shape, dist, seed) in cases {
        let inputs = generate_dual_gemm(shape.parse().unwrap(), dist, seed);
        let exact = replay_dual_gemm(
            &inputs,
            schedule(MmaModel::ExactRne, KChunkOrder::Increasing),
        );
        for schedule in every_schedule() {
            let what = format!("{shape} {} {schedule:?}", dist.name());
            let fast = replay_dual_gemm(&inputs, schedule);
            assert_same_replay(
                &fast,
                &replay_dual_gemm_with_model_steps(&inputs, schedule),
                &what,
            );
            let reversed = replay_dual_gemm(
                &inputs,
                Schedule {
                    k_order: KChunkOrder::Decreasing,
                    ..schedule
                },
            );
            for ((f, e), r) in fast
                .elements
                .iter()
                .zip(&exact.elements)
                .zip(&reversed.elements)
            {
                differ_from_exact +=
                    usize::from(f.x1.to_bits() != e.x1.to_bits() && !f.x1.is_nan());
                differ_by_order += usize::from(f.x1.to_bits() != r.x1.to_bits() && !f.x1.is_nan());
                nan += usize::from(f.output.is_nan());
            }
        }
    }
    assert!(
        differ_from_exact > 20 && differ_by_order > 20 && nan > 20,
        "{differ_from_exact} {differ_by_order} {nan}"
    );
}

#[test]
fn the_exact_rne_replay_is_the_reference() {
    // exact-rne accumulators are the reference's f32 roundings and its epilogue is the
    // reference's, so the predicted output is `expected`, element for element.
    for (i, dist) in Distribution::ALL.into_iter().enumerate() {
        let shape: Shape = "33x40x1040".parse().unwrap();
        let inputs = generate_dual_gemm(shape, dist, 100 + i as u64);
        let reference = dual_gemm_reference(&inputs, KOrder::Contiguous);
        for order in [KChunkOrder::Increasing, KChunkOrder::Decreasing] {
            let replay = replay_dual_gemm(&inputs, schedule(MmaModel::ExactRne, order));
            for (e, &expected) in replay.elements.iter().zip(&reference.expected) {
                assert!(same_fp16(e.output, expected) && same_fp16(expected, e.output));
            }
        }
    }
}

/// One row of NVFP4 from (value, scale code) per 16-block: every element of block j is value j.
fn matrix(blocks: &[(f32, u8)]) -> BlockScaledMatrix {
    let values: Vec<E2m1> = blocks
        .iter()
        .flat_map(|&(v, _)| {
            let code = (0..16u8)
                .find(|&c| E2m1::from_bits(c).to_f32() == v)
                .unwrap();
            [E2m1::from_bits(code); 16]
        })
        .collect();
    let scales = blocks.iter().map(|&(_, s)| s).collect();
    BlockScaledMatrix::new(
        "x",
        1,
        16 * blocks.len(),
        1,
        pack_e2m1(&values).unwrap(),
        scales,
    )
    .unwrap()
}

#[test]
fn increasing_and_decreasing_orders_give_different_accumulators() {
    // Blocks: +X, -X, s with X = 16 * 36 * 448^2 (about 2^26.9) and s = 16 * 0.25 * 2^-18.
    // Increasing: X, then X - X = 0 exactly, then s: the accumulator is s. Decreasing: s, then
    // -X, against which s is below the 2^-25-relative quantum and cut: -X; then +X: 0.
    let (big, tiny) = (0x7E, 0x01); // 448, 2^-9
    let a = matrix(&[(6.0, big), (6.0, big), (0.5, tiny)]);
    let b1 = matrix(&[(6.0, big), (-6.0, big), (0.5, tiny)]);
    let b2 = matrix(&[(6.0, big), (0.0, big), (0.0, big)]);
    let shape = Shape::new(1, 1, 48, 1).unwrap();
    let inputs = DualGemmInputs::new(shape, a, b1, b2).unwrap();
    let s = 2f32.powi(-16);
    let increasing = replay_dual_gemm(&inputs, HOPPER_F16_INCREASING_K).elements[0];
    let decreasing = replay_dual_gemm(
        &inputs,
        schedule(MmaModel::HopperHmmaF16F32, KChunkOrder::Decreasing),
    )
    .elements[0];
    assert_eq!(increasing.x1, s);
    assert_eq!(decreasing.x1.to_bits(), 0);
    // x2 = X: silu(s) * X is about X * 2^-17 = 882, silu(0) * X = 0.
    assert_eq!(increasing.x2, decreasing.x2);
    assert_eq!(increasing.output.to_f32().round(), 882.0);
    assert_eq!(decreasing.output.to_bits(), 0);
    // The exact model has s for both, and the reference agrees.
    for order in [KChunkOrder::Increasing, KChunkOrder::Decreasing] {
        let exact = replay_dual_gemm(&inputs, schedule(MmaModel::ExactRne, order)).elements[0];
        assert_eq!(exact.x1, s);
    }
}
