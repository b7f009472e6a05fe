//! The GPU reference's tensor-core kernels (crates/harness/kernels/harness/exact_reference_mma_kernel.cu):
//! compiled without a GPU (CI installs NVRTC), and on a GPU timed against the f64 and integer
//! kernels at 8192 x 8192 x 16384, where their references must be the same bits. Their
//! equality with the CPU model over every edge shape, distribution, problem and K order is
//! `gpu_reference::the_gpu_reference_is_the_cpu_model_bit_for_bit`.
//!
//!     cargo test --release --test oracle gpu_reference -- --include-ignored --nocapture

use crate::common;
use crate::gpu_reference::{bits, gpu_or_panic, tensor_cores_or_panic};
use nvfp4_harness::certify::cross_check;
use nvfp4_harness::gpu::compile::nvrtc_present;
use nvfp4_harness::gpu::exact_reference::GpuReference;
use nvfp4_harness::gpu::tensor_core_reference::compile;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::Reference;
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::{Distribution, ProblemInputs, ProblemKind, Shape};
use std::time::Instant;

#[test]
fn the_tensor_core_reference_compiles_to_int8_mma() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    let ptx = compile().unwrap_or_else(|err| panic!("{err}")).to_src();
    for entry in [
        "nvfp4_oracle_mma_decode",
        "nvfp4_oracle_exact_reference_mma_contiguous",
        "nvfp4_oracle_exact_reference_mma_any",
        "nvfp4_oracle_exact_reference_mma_per_product",
    ] {
        assert!(ptx.contains(entry), "{entry} missing");
    }
    // The block dots are int8 MMAs, not dp4a.
    assert!(
        ptx.contains("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32"),
        "the block dots are s8 MMAs"
    );
    assert!(
        ptx.contains("cp.async"),
        "the tiles are staged asynchronously"
    );
    assert!(
        ptx.contains("cvt.rn.f16.f64"),
        "one correctly rounded f64 -> fp16 conversion"
    );
}

/// Seconds of the computation from uploaded operands (decode, kernels, outputs' allocation,
/// flags), the fastest of `runs` after one to warm, and the whole call's (uploads and download
/// too), with the reference of the last.
fn timed(
    gpu: &GpuReference,
    inputs: &ProblemInputs,
    order: KOrder,
    runs: usize,
) -> (f64, f64, Reference) {
    let mut reference = gpu.reference(inputs, order).unwrap();
    let (mut compute, mut whole) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..runs {
        let started = Instant::now();
        reference = gpu.reference(inputs, order).unwrap();
        whole = whole.min(started.elapsed().as_secs_f64());
        compute = compute.min(gpu.last_compute_seconds());
    }
    (compute, whole, reference)
}

/// The three kernels at 8192 x 8192 x 16384 (L = 1), the dual GEMM in every K order and the
/// GEMM in the contiguous one, Full inputs: each reference the same bits as the integer
/// kernel's (the f64 statistics proven exact: no launch redone), rows of it the CPU model's,
/// and the table of times.
#[test]
#[ignore = "needs a GPU: cargo test --release --test oracle gpu_reference -- --include-ignored"]
fn tensor_core_reference_against_f64_and_integer_at_8192() {
    let kernels = [
        tensor_cores_or_panic(),
        gpu_or_panic().f64_only(),
        gpu_or_panic().integer_only(),
    ];
    assert_eq!(kernels[0].arithmetic(), "tensor-core");
    println!("GPU reference on {}", kernels[0].device());
    println!("| problem | K order | kernel | computation (s) | whole call (s) | f64 / this (computation) |");
    println!("|---|---|---|---|---|---|");
    let shape = Shape::new(8192, 8192, 16384, 1).unwrap();
    let cases = [
        (ProblemKind::DualGemm, KOrder::ALL.to_vec()),
        (ProblemKind::Gemm, vec![KOrder::Contiguous]),
    ];
    for (kind, orders) in cases {
        let started = Instant::now();
        let inputs = generate_problem(kind, shape, Distribution::Full, 7);
        println!(
            "({} {shape} inputs made in {:.1} s)",
            kind.name(),
            started.elapsed().as_secs_f64()
        );
        for order in orders {
            // One integer kernel serves every order: it is timed (and is the baseline of bits)
            // in each, its f64 and tensor-core results held against it.
            let results: Vec<_> = kernels
                .iter()
                .map(|gpu| (gpu.arithmetic(), timed(gpu, &inputs, order, 2)))
                .collect();
            let integer = &results[2].1 .2;
            let f64_seconds = results[1].1 .0;
            for (arithmetic, (compute, whole, reference)) in &results {
                assert!(
                    bits(reference) == bits(integer),
                    "{} {shape} {order:?}: the {arithmetic} kernel differs from the integer kernel",
                    kind.name()
                );
                println!(
                    "| {} | {order:?} | {arithmetic} | {compute:.4} | {whole:.3} | {:.1}x |",
                    kind.name(),
                    f64_seconds / compute
                );
            }
            let compared = cross_check(&inputs, order, integer, 5)
                .unwrap_or_else(|difference| panic!("{difference}"));
            println!("({compared} elements compared with the CPU model on sampled rows)");
        }
    }
    for gpu in &kernels[..2] {
        assert_eq!(
            gpu.integer_reruns(),
            0,
            "{}: Full inputs are exact in f64",
            gpu.arithmetic()
        );
    }
}

/// The one figure the tensor-core kernels exist for, in the time a short device call has: the
/// dual GEMM at 8192 x 8192 x 16384 in the contiguous K order, the tensor-core kernel against
/// the f64 kernel (each warmed once, then timed once), the same bits, neither handing a launch
/// to the integer kernel, and rows of it the CPU model's. The whole table over every K order
/// and the integer kernel is the test above.
#[test]
#[ignore = "needs a GPU: cargo test --release --test oracle gpu_reference -- --include-ignored"]
fn tensor_core_reference_against_f64_at_8192_one_order() {
    let kernels = [tensor_cores_or_panic(), gpu_or_panic().f64_only()];
    assert_eq!(kernels[0].arithmetic(), "tensor-core");
    println!("GPU reference on {}", kernels[0].device());
    let shape = Shape::new(8192, 8192, 16384, 1).unwrap();
    let started = Instant::now();
    let inputs = generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 7);
    println!(
        "(dual GEMM {shape} inputs made in {:.1} s)",
        started.elapsed().as_secs_f64()
    );
    let order = KOrder::Contiguous;
    let results: Vec<_> = kernels
        .iter()
        .map(|gpu| (gpu.arithmetic(), timed(gpu, &inputs, order, 1)))
        .collect();
    let f64_seconds = results[1].1 .0;
    println!("| problem | K order | kernel | computation (s) | whole call (s) | f64 / this (computation) |");
    println!("|---|---|---|---|---|---|");
    for (arithmetic, (compute, whole, _)) in &results {
        println!(
            "| dual GEMM {shape} | {order:?} | {arithmetic} | {compute:.4} | {whole:.3} | {:.2}x |",
            f64_seconds / compute
        );
    }
    assert!(
        bits(&results[0].1 .2) == bits(&results[1].1 .2),
        "dual GEMM {shape}: the tensor-core kernel differs from the f64 kernel"
    );
    for gpu in &kernels {
        assert_eq!(gpu.integer_reruns(), 0, "{}: Full inputs are exact in f64", gpu.arithmetic());
    }
    let compared = cross_check(&inputs, order, &results[0].1 .2, 5)
        .unwrap_or_else(|difference| panic!("{difference}"));
    println!("({compared} elements compared with the CPU model on sampled rows)");
}

/// The kernel's S for a UE4M3 scale byte (exact_reference_kernel.cu's `scale_integer`): the
/// scale in units of 2^-9; None for NaN.
fn scale_integer(byte: u8) -> Option<i64> {
    let magnitude = byte & 0x7F;
    let (field, mantissa) = (i64::from(magnitude >> 3), i64::from(magnitude & 7));
    match (magnitude, field) {
        (0x7F, _) => None,
        (_, 0) => Some(mantissa),
        _ => Some((mantissa | 8) << (field - 1)),
    }
}

/// The tensor-core kernels' block term, as their header argues (no GPU needed): for every pair
/// of finite scales and the dots at and near the extremes, the 64-bit multiply-add of the bits
/// and the fma give s * S_a * S_b exactly, and -(2^52 + 2^31) * S_a is exact. f64::mul_add is
/// the correctly rounded fma the kernel's __fma_rn is.
#[test]
fn the_tensor_core_block_term_is_exact_for_every_scale_pair() {
    const MAGIC: f64 = 4_503_601_774_854_144.0; // 2^52 + 2^31
    const MAGIC_BITS: i64 = 0x4330_0000_8000_0000;
    assert_eq!(MAGIC.to_bits() as i64, MAGIC_BITS);
    let dots = [-2304, -2303, -1153, -1, 0, 1, 2, 767, 1152, 2303, 2304];
    let mut checked = 0u32;
    for sa in (0..=0x7Eu8).filter_map(scale_integer) {
        let offset = -MAGIC * sa as f64;
        assert_eq!(
            offset as i128,
            -(MAGIC as i128) * i128::from(sa),
            "-(2^52 + 2^31) * {sa} is exact"
        );
        for sb in (0..=0x7Eu8).filter_map(scale_integer) {
            for s in dots {
                let x = s * sb;
                assert!(x.abs() < 1 << 30, "s * S_b below 2^30");
                let biased = f64::from_bits((x + MAGIC_BITS) as u64);
                assert_eq!(biased, MAGIC + x as f64, "the bits are 2^52 + 2^31 + x");
                let term = biased.mul_add(sa as f64, offset);
                assert_eq!(
                    term,
                    (x * sa) as f64,
                    "s = {s}, S_a = {sa}, S_b = {sb}: the term is exact"
                );
                assert_eq!(term as i64, x * sa, "and an integer below 2^53");
                checked += 1;
            }
        }
    }
    assert_eq!(
        checked,
        127 * 127 * dots.len() as u32,
        "every finite scale pair"
    );
}
