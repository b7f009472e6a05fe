//! Property tests (proptest, with shrinking) of the exact model's algebra.

use nvfp4_model::formats::E2M1_MAX;
use nvfp4_model::model::exact::{exact_dot, PreparedRow};
use nvfp4_model::quant::{dequantize_nvfp4, quantize_nvfp4, QuantRecipe, TorchDevice};
use proptest::prelude::*;

/// A row of `blocks` scale blocks: packed data and normal scales below 2^4 (exponent field at
/// most 10), so that scaling by up to 2^4 stays finite and exact.
fn row(blocks: usize) -> impl Strategy<Value = Row> {
    (
        proptest::collection::vec(any::<u8>(), blocks * 8),
        proptest::collection::vec(0x08u8..0x58, blocks),
    )
}

/// (packed data, scales) of one row.
type Row = (Vec<u8>, Vec<u8>);

fn pair() -> impl Strategy<Value = (Row, Row)> {
    (1usize..24).prop_flat_map(|blocks| (row(blocks), row(blocks)))
}

fn dot(a: &Row, b: &Row) -> i128 {
    let d = exact_dot(&PreparedRow::new(&a.0, &a.1), &PreparedRow::new(&b.0, &b.1));
    assert!(!d.nan);
    d.sum
}

fn block(row: &Row, j: usize) -> Row {
    (row.0[j * 8..(j + 1) * 8].to_vec(), vec![row.1[j]])
}

proptest! {
    #[test]
    fn negating_a_negates_the_dot((a, b) in pair()) {
        let negated = (a.0.iter().map(|byte| byte ^ 0x88).collect::<Vec<u8>>(), a.1.clone());
        prop_assert_eq!(dot(&negated, &b), -dot(&a, &b));
    }

    #[test]
    fn the_dot_is_the_sum_of_its_blocks((a, b) in pair()) {
        let blocks = a.1.len();
        let sum: i128 = (0..blocks).map(|j| dot(&block(&a, j), &block(&b, j))).sum();
        prop_assert_eq!(dot(&a, &b), sum);
    }

    #[test]
    fn scaling_a_blocks_scale_by_2_to_the_j_scales_its_contribution((a, b) in pair(), pick in any::<prop::sample::Index>(), power in 1u8..=4) {
        let j = pick.index(a.1.len());
        let mut scaled = a.clone();
        scaled.1[j] += 0x08 * power; // exponent field + power: exactly 2^power for a normal e4m3
        let contribution = dot(&block(&a, j), &block(&b, j));
        prop_assert_eq!(dot(&scaled, &b), dot(&a, &b) + ((1i128 << power) - 1) * contribution);
    }

    #[test]
    fn permuting_k_blocks_leaves_the_dot_unchanged((a, b) in pair(), seed in any::<u64>()) {
        let blocks = a.1.len();
        let mut order: Vec<usize> = (0..blocks).collect();
        let mut state = seed;
        for i in (1..blocks).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            order.swap(i, (state >> 33) as usize % (i + 1));
        }
        let permute = |r: &Row| {
            let data = order.iter().flat_map(|&j| r.0[j * 8..(j + 1) * 8].to_vec()).collect();
            let scales = order.iter().map(|&j| r.1[j]).collect();
            (data, scales)
        };
        prop_assert_eq!(dot(&permute(&a), &permute(&b)), dot(&a, &b));
    }

    #[test]
    fn an_all_zero_block_contributes_nothing((a, b) in pair(), pick in any::<prop::sample::Index>()) {
        let j = pick.index(a.1.len());
        let mut zeroed = a.clone();
        zeroed.0[j * 8..(j + 1) * 8].fill(0);
        prop_assert_eq!(dot(&zeroed, &b), dot(&a, &b) - dot(&block(&a, j), &block(&b, j)));
        prop_assert_eq!(dot(&block(&zeroed, j), &block(&b, j)), 0);
    }

    /// Swapping B1 and B2 swaps D1 and D2: the reference of the swapped problem is exactly the
    /// "silu on the second GEMM" wrong problem of the original (computed by another code path).
    #[test]
    fn swapping_b1_and_b2_swaps_d1_and_d2(shape in (1usize..5, 1usize..5, 1usize..6), seed in any::<u64>()) {
        use nvfp4_model::compare::diagnosis::{acceptance, WrongProblem};
        use nvfp4_model::model::bounds::KOrder;
        use nvfp4_model::model::dual_gemm_reference;
        use nvfp4_model::problem::generate::generate_dual_gemm;
        use nvfp4_model::problem::{Distribution, Shape};
        let inputs = generate_dual_gemm(Shape::new(shape.0, shape.1, shape.2 * 16, 1).unwrap(), Distribution::Full, seed);
        let mut swapped = inputs.clone();
        std::mem::swap(&mut swapped.b1, &mut swapped.b2);
        let reference = dual_gemm_reference(&swapped, KOrder::Contiguous);
        let wrong = acceptance(WrongProblem::SiluOnSecondGemm, &inputs, 0, KOrder::Contiguous).unwrap();
        let bits = |v: &[half::f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
        prop_assert_eq!(bits(&reference.lo), bits(&wrong.lo));
        prop_assert_eq!(bits(&reference.hi), bits(&wrong.hi));
    }

    #[test]
    fn quantize_then_dequantize_is_within_half_an_e2m1_step(values in proptest::collection::vec(-1e4f32..1e4, 16..=64)) {
        let k = values.len() / 16 * 16;
        let values = &values[..k];
        let quantized = quantize_nvfp4(values, 1, k, QuantRecipe::SingleLevel, TorchDevice::Cpu).unwrap();
        let restored = dequantize_nvfp4(&quantized, QuantRecipe::SingleLevel);
        for (i, (&x, &y)) in values.iter().zip(&restored).enumerate() {
            let scale = nvfp4_model::formats::E4m3::from_bits(quantized.scales[i / 16]).to_f32();
            let scaled = (x / scale).abs().min(E2M1_MAX);
            // Half the e2m1 spacing where x lands: 0.25 below 2, 0.5 below 4, 1 up to 6.
            let half_step = if scaled < 2.0 { 0.25 } else if scaled < 4.0 { 0.5 } else { 1.0 };
            let clamped = (x.abs() - E2M1_MAX * scale).max(0.0);
            let bound = (half_step * scale + clamped) * (1.0 + 1e-6);
            prop_assert!((x - y).abs() <= bound, "x = {x}, dequantized {y}, scale {scale}");
        }
    }
}
