//! A correct fp32 kernel that adds every product with its own fused multiply-add
//! (`cpu-fma-per-product`) against the intervals: the default contract (blocks of 16 summed
//! before each rounding) can reject it on inputs made to stagnate its accumulator; the
//! per-product contract it declares accepts it there and over a whole campaign, and still
//! rejects a kernel that accumulates in fp16.

use half::f16;
use nvfp4_oracle::certify::{certify_variant, CampaignLimits};
use nvfp4_oracle::compare::{judge, OutputShape};
use nvfp4_oracle::kernels::cpu::{Bug, CpuKernel};
use nvfp4_oracle::kernels::cpu_fma::CpuFmaPerProduct;
use nvfp4_oracle::kernels::{KernelCase, KernelUnderTest};
use nvfp4_oracle::model::bounds::KOrder;
use nvfp4_oracle::model::reference::dual_gemm_reference;
use nvfp4_oracle::problem::{BlockScaledMatrix, DualGemmInputs, Shape};

const K: usize = 16384;
const N: usize = 64;
/// e2m1 codes and e4m3 bytes used below.
const FP4_HALF: u8 = 0x1;
const FP4_ONE: u8 = 0x2;
const FP4_MINUS_THREE: u8 = 0xD;
const FP4_MINUS_SIX: u8 = 0xF;
const E4M3_ONE: u8 = 0x38;
const E4M3_448: u8 = 0x7E;
const E4M3_15_16: u8 = 0x37;
/// A subnormal: 2 * 2^-9.
const E4M3_2_POW_MINUS_8: u8 = 0x02;

fn packed(codes: &[u8]) -> Vec<u8> {
    codes.chunks(2).map(|p| p[0] | (p[1] << 4)).collect()
}

/// FP4 codes 0..=7 and their values.
const FP4_VALUES: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];

/// The worst case of per-product rounding. The first block makes the partial sum of A@B1
/// between 2^23 and about 1.2 * 2^23, where an f32 ulp is 1; every later product is 15/32
/// (0.5 * 1.0 * 15/16), just under half an ulp, so each fused multiply-add rounds it away: the
/// error grows by 15/32 a product, nearly the most one rounding to nearest allows, always in the
/// same direction. The last block cancels the first (42 * 448^2), so the answer is small and the
/// lost 7,665 is most of it, while the block-sum intervals allow an error proportional to the
/// large partial (6.4e-4 of it). Each column's first block differs; A@B2 is 2^-10.
fn stagnation_inputs() -> DualGemmInputs {
    let blocks = K / 16;
    let mut a = vec![FP4_HALF; K];
    a[..16].fill(0);
    // A's first block: 6, 6, 1, 0.5, then zeros; its last: 6, 2, then zeros.
    a[..4].copy_from_slice(&[0x7, 0x7, FP4_ONE, FP4_HALF]);
    a[K - 16..].fill(0);
    a[K - 16..K - 14].copy_from_slice(&[0x7, 0x4]);
    let mut sa = vec![E4M3_ONE; blocks];
    sa[0] = E4M3_448;
    sa[blocks - 1] = E4M3_448;
    let a = BlockScaledMatrix::new("a", 1, K, 1, packed(&a), sa).unwrap();
    // Columns whose first-block products sum to distinct values in [42, 59] (times 448^2).
    let mut firsts: Vec<([u8; 4], f64)> = Vec::new();
    for code in 0..8u32.pow(4) {
        let c = [0, 1, 2, 3].map(|i| ((code >> (3 * i)) & 7) as u8);
        let v = c.map(|x| FP4_VALUES[usize::from(x)]);
        let sum = 6.0 * v[0] + 6.0 * v[1] + v[2] + 0.5 * v[3];
        if (42.0..=59.0).contains(&sum) && firsts.iter().all(|&(_, s)| s != sum) {
            firsts.push((c, sum));
        }
    }
    assert!(firsts.len() >= N);
    let (mut b1_rows, mut b2_rows, mut sb1_rows, mut sb2_rows) = (vec![], vec![], vec![], vec![]);
    for (first, _) in firsts.iter().take(N) {
        let mut b1 = vec![FP4_ONE; K];
        b1[..16].fill(0);
        b1[..4].copy_from_slice(first);
        // The last block takes 42 * 448^2 away again (-6 * 6 - 3 * 2): what is left is the
        // column's first-block excess and the stagnated products.
        b1[K - 16..].fill(0);
        b1[K - 16..K - 14].copy_from_slice(&[FP4_MINUS_SIX, FP4_MINUS_THREE]);
        b1_rows.extend(packed(&b1));
        let mut sb1 = vec![E4M3_15_16; blocks];
        sb1[0] = E4M3_448;
        sb1[blocks - 1] = E4M3_448;
        sb1_rows.extend(sb1);
        let mut b2 = vec![0u8; K];
        b2[16] = FP4_HALF;
        b2_rows.extend(packed(&b2));
        let mut sb2 = vec![E4M3_ONE; blocks];
        sb2[1] = E4M3_2_POW_MINUS_8;
        sb2_rows.extend(sb2);
    }
    let b1 = BlockScaledMatrix::new("b1", N, K, 1, b1_rows, sb1_rows).unwrap();
    let b2 = BlockScaledMatrix::new("b2", N, K, 1, b2_rows, sb2_rows).unwrap();
    DualGemmInputs::new(Shape::new(1, N, K, 1).unwrap(), a, b1, b2).unwrap()
}

fn failures(kernel: &dyn KernelUnderTest, order: KOrder) -> usize {
    let inputs = stagnation_inputs();
    let reference = dual_gemm_reference(&inputs, order);
    let case = KernelCase::new(inputs, 0);
    let mut output = vec![f16::NAN; N];
    kernel.run(&case, &mut output).unwrap();
    let verdict = judge(
        OutputShape { m: 1, n: N, l: 1 },
        &output,
        &reference.expected,
        &reference.lo,
        &reference.hi,
    );
    verdict.failed
}

#[test]
fn the_default_contract_rejects_a_correct_per_product_kernel_on_stagnating_inputs() {
    let rejected = failures(&CpuFmaPerProduct, KOrder::Contiguous);
    assert!(rejected > 0, "no element outside the block-sum intervals");
    // The per-product intervals it declares hold every element, and the block-summing kernel
    // passes both.
    assert_eq!(failures(&CpuFmaPerProduct, KOrder::PerProduct), 0);
    assert_eq!(failures(&CpuKernel::correct(), KOrder::Contiguous), 0);
    eprintln!("{rejected} of {N} outputs outside the block-sum intervals");
}

fn limits(cases: usize, order: KOrder) -> CampaignLimits {
    CampaignLimits {
        cases,
        seed: 11,
        time_budget: None,
        order,
        exact: false,
        only_gpumode: false,
    }
}

#[test]
fn the_per_product_contract_certifies_it_and_still_catches_fp16_accumulation() {
    let result = certify_variant(
        &CpuFmaPerProduct,
        limits(300, KOrder::Contiguous),
        &[],
        |_, _| {},
    );
    assert!(
        result.failure.is_none(),
        "cpu-fma-per-product failed: {:?}",
        result.failure.map(|f| f.minimal.spec)
    );
    assert!(result.coverage.by_shape_class.contains_key("production"));
    let fp16 = certify_variant(
        &CpuKernel::mutant(Bug::Fp16Accumulation),
        limits(300, KOrder::PerProduct),
        &[],
        |_, _| {},
    );
    assert!(
        fp16.failure.is_some(),
        "fp16 accumulation passed the per-product intervals"
    );
}
