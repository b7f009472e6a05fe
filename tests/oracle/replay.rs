//! Replay mode: the full-matrix prediction under a declared schedule (`model::replay`) and
//! `certify --exact` on the CPU kernels that simulate a Hopper kernel.

use half::f16;
use nvfp4_model::formats::{pack_e2m1, E2m1};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::dual_gemm_reference;
use nvfp4_model::model::mma::schedule::{
    KChunkOrder, MmaModel, OutputEpilogue, Schedule, HOPPER_F16_INCREASING_K,
};
use nvfp4_model::model::replay::{replay_dual_gemm, replay_dual_gemm_with_model_steps, same_fp16};
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{BlockScaledMatrix, Distribution, DualGemmInputs, Shape};

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
        .flat_map(|mma| KChunkOrder::ALL.map(|order| schedule(mma, order)))
        .collect()
}

/// Accumulators equal bit for bit (NaN payloads included), outputs and alternatives too.
fn assert_same_replay(
    fast: &nvfp4_model::model::replay::Replay,
    slow: &nvfp4_model::model::replay::Replay,
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
        for order in KChunkOrder::ALL {
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
    for order in KChunkOrder::ALL {
        let exact = replay_dual_gemm(&inputs, schedule(MmaModel::ExactRne, order)).elements[0];
        assert_eq!(exact.x1, s);
    }
}

mod certify_exact {
    use nvfp4_harness::certify::{certify_variant, CampaignLimits};
    use nvfp4_harness::certify::{Certificate, ExactOutcome, Status};
    use nvfp4_harness::kernels::cpu_hopper_sim::CpuHopperSim;
    use nvfp4_harness::kernels::KernelUnderTest;
    use nvfp4_model::model::mma::schedule::{KChunkOrder, MmaModel, HOPPER_F16_INCREASING_K};

    fn limits(cases: usize, exact: bool) -> CampaignLimits {
        CampaignLimits {
            cases,
            seed: 7,
            exact,
            ..CampaignLimits::default()
        }
    }

    #[test]
    fn the_hopper_simulation_is_certified_exact() {
        let sim = CpuHopperSim::correct();
        assert_eq!(sim.schedule(), Some(HOPPER_F16_INCREASING_K));
        let result = certify_variant(&sim, limits(10, true), &[], |_, _| {});
        assert!(result.failure.is_none());
        let exact = result.exact.clone().expect("exact mode");
        assert!(exact.mismatch.is_none(), "{:?}", exact.mismatch);
        let coverage = result.coverage.exact.expect("replayed");
        assert_eq!(coverage.cases_replayed, result.coverage.cases);
        assert!(coverage.elements_compared > 100_000);
        assert_eq!(coverage.elements_mismatching, 0);
        let dir = std::env::temp_dir().join(format!("nvfp4-oracle-exact-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let certificate =
            Certificate::from_campaign(&sim, &limits(10, true), result, &dir).unwrap();
        assert_eq!(certificate.status, Status::Certified);
        assert_eq!(
            certificate.exact.unwrap().outcome,
            ExactOutcome::CertifiedExact
        );
    }

    #[test]
    fn the_reordered_k_mutant_is_correct_within_intervals_but_not_its_declared_schedule() {
        let mutant = CpuHopperSim::reordered_k_mutant();
        // The intervals accept it: any contiguous K order is correct.
        let plain = certify_variant(&mutant, limits(5, false), &[], |_, _| {});
        assert!(plain.failure.is_none() && plain.exact.is_none());
        // The replay does not.
        let result = certify_variant(&mutant, limits(10, true), &[], |_, _| {});
        assert!(result.failure.is_none(), "inside every interval");
        let mismatch = result.exact.clone().unwrap().mismatch.expect("caught");
        let difference = mismatch.comparison.first_mismatch.unwrap();
        assert_ne!(difference.predicted, difference.observed);
        assert!(
            mismatch.minimal.shape.m * mismatch.minimal.shape.n <= 4,
            "shrunk: {}",
            mismatch.minimal.shape
        );
        // What it does instead is named: the Hopper adder with K decreasing.
        let reversed = mismatch
            .matching_schedules
            .iter()
            .find(|s| s.mma == MmaModel::HopperHmmaF16F32)
            .expect("a Hopper schedule matches");
        assert_eq!(reversed.k_order, KChunkOrder::Decreasing);
        let dir =
            std::env::temp_dir().join(format!("nvfp4-oracle-exact-mutant-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let certificate =
            Certificate::from_campaign(&mutant, &limits(10, true), result, &dir).unwrap();
        certificate.write(&dir).unwrap();
        assert_eq!(certificate.status, Status::ScheduleDiffers);
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("cpu-mutant-reordered-k.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(json["status"], "schedule-differs");
        assert_eq!(json["exact"]["outcome"], "schedule-differs");
        assert!(json["exact"]["mismatch"]["first_difference"]["observed"].is_u64());
    }

    #[test]
    fn certify_exact_exit_codes_and_outcomes() {
        let dir =
            std::env::temp_dir().join(format!("nvfp4-oracle-exact-cli-{}", std::process::id()));
        let run = |kernels: &[&str]| {
            let mut command = crate::common::oracle_command();
            command.args([
                "certify",
                "--exact",
                "--cases",
                "0",
                "--seed",
                "7",
                "--no-golden",
            ]);
            for kernel in kernels {
                command.args(["--kernel", kernel]);
            }
            let out = command.arg("--report-dir").arg(&dir).output().unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).to_string(),
            )
        };
        let (code, stdout) = run(&["cpu-hopper-sim"]);
        assert_eq!(code, Some(0), "{stdout}");
        assert!(stdout.contains("| certified exact |"), "{stdout}");
        let (code, stdout) = run(&["cpu-mutant-reordered-k"]);
        assert_eq!(code, Some(3), "{stdout}");
        assert!(
            stdout.contains("schedule differs from declared"),
            "{stdout}"
        );
        let (code, stdout) = run(&["cpu-tiled"]);
        assert_eq!(code, Some(3), "{stdout}");
        assert!(stdout.contains("no schedule declared"), "{stdout}");
        // An interval failure outranks a schedule difference.
        let (code, stdout) = run(&["cpu-mutant-gemm-only", "cpu-mutant-reordered-k"]);
        assert_eq!(code, Some(1), "{stdout}");
    }
}
