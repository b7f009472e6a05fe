//! A correct fp32 kernel that adds every product with its own fused multiply-add
//! (`cpu-fma-per-product`) against the intervals: the default contract (blocks of 16 summed
//! before each rounding) can reject it on inputs made to stagnate its accumulator; the
//! per-product contract it declares accepts it there and over a whole campaign, and still
//! rejects a kernel that accumulates in fp16.

use half::f16;
use nvfp4_harness::certify::{certify_variant, CampaignLimits};
use nvfp4_harness::certify::{stagnation_cases, CaseSpec};
use nvfp4_harness::kernels::cpu::{Bug, CpuKernel};
use nvfp4_harness::kernels::cpu_fma::CpuFmaPerProduct;
use nvfp4_harness::kernels::{KernelCase, KernelUnderTest, ShapeSupport};
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::reference::dual_gemm_reference;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::Distribution;

/// Elements of `kernel`'s output on a stagnation case outside `order`'s intervals.
fn failures(kernel: &dyn KernelUnderTest, spec: CaseSpec, order: KOrder) -> usize {
    let inputs = generate_dual_gemm(spec.shape, Distribution::Stagnation, spec.seed);
    let reference = dual_gemm_reference(&inputs, order);
    let (m, n, l) = (spec.shape.m, spec.shape.n, spec.shape.l);
    let case = KernelCase::new(inputs, 0);
    let mut output = vec![f16::NAN; m * n * l];
    kernel.run(&case, &mut output).unwrap();
    let verdict = judge(
        OutputShape { m, n, l },
        &output,
        &reference.expected,
        &reference.lo,
        &reference.hi,
    );
    verdict.failed
}

/// The campaign's stagnation cases (crates/model/src/problem/stagnation.rs): the block-sum intervals reject
/// the correct per-product kernel at K = 16384, the per-product intervals it declares hold it
/// everywhere, and a block-summing kernel passes the block-sum intervals.
#[test]
fn the_default_contract_rejects_a_correct_per_product_kernel_on_stagnating_inputs() {
    let cases = stagnation_cases(ShapeSupport::ANY);
    assert_eq!(cases.len(), 4);
    let mut rejected_somewhere = 0;
    for &spec in &cases {
        let rejected = failures(&CpuFmaPerProduct, spec, KOrder::Contiguous);
        eprintln!(
            "{}: {rejected} of {} outputs outside the block-sum intervals",
            spec.shape,
            spec.shape.m * spec.shape.n * spec.shape.l
        );
        if spec.shape.k == 16384 {
            assert!(rejected > 0, "{}: none outside", spec.shape);
        }
        rejected_somewhere += rejected;
        assert_eq!(failures(&CpuFmaPerProduct, spec, KOrder::PerProduct), 0);
        assert_eq!(failures(&CpuKernel::correct(), spec, KOrder::Contiguous), 0);
    }
    assert!(rejected_somewhere > 0);
}

fn limits(cases: usize, order: KOrder) -> CampaignLimits {
    CampaignLimits {
        cases,
        seed: 11,
        order,
        ..CampaignLimits::default()
    }
}

/// Certified with default flags (the `contiguous` order asked for: the kernel's declaration
/// wins) over 2,000 random cases besides the fixed ones, the stagnation cases among them; the
/// per-product intervals still reject a kernel that accumulates in fp16, and one whose epilogue
/// errs by one fp16 rounding (a truncating output conversion: an fp16 epilogue errs by more).
#[test]
fn the_per_product_contract_certifies_it_and_still_catches_fp16_accumulation() {
    let result = certify_variant(
        &CpuFmaPerProduct,
        limits(2000, KOrder::Contiguous),
        &[],
        |_, _| {},
    );
    assert!(
        result.failure.is_none(),
        "cpu-fma-per-product failed: {:?}",
        result.failure.map(|f| f.minimal.spec)
    );
    let coverage = &result.coverage;
    assert!(coverage.cases >= 2000 + 4);
    assert_eq!(coverage.by_distribution.get("stagnation"), Some(&4));
    assert_eq!(coverage.planned_stagnation_cases, 4);
    assert!(coverage.by_shape_class.contains_key("production"));
    for mutant in [Bug::Fp16Accumulation, Bug::TruncatedOutput] {
        let rejected = certify_variant(
            &CpuKernel::mutant(mutant),
            limits(300, KOrder::PerProduct),
            &[],
            |_, _| {},
        );
        assert!(
            rejected.failure.is_some(),
            "{} passed the per-product intervals",
            mutant.slug()
        );
    }
}
