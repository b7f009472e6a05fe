//! Timing of GPU variants, in process (only certified variants are timed, so no isolation is
//! needed): CUDA events around each launch, warm-up, L2 flushed between iterations, inputs rotated
//! among enough sets to exceed L2, median and spread over the repetitions.

pub use super::timing::Timing;
use crate::error::{Error, Result};
use crate::gpu::compile::compile_variant;
use crate::gpu::device::{open_device, DeviceInfo};
use crate::gpu::launch::{configure_function, LaunchBuffers, PreparedLaunch};
use crate::gpu::variants::GpuVariant;
use crate::kernels::KernelCase;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};

const WARM_UP: usize = 3;

/// How many input sets a timing rotates over so that each call's inputs are out of L2: enough
/// to fill twice the L2, at least 2.
pub fn input_sets(case: &KernelCase, l2_bytes: usize) -> usize {
    let set_bytes: usize = case
        .inputs
        .operands()
        .iter()
        .map(|(_, operand)| operand.data().len())
        .chain(case.blocked.iter().map(Vec::len))
        .sum();
    (2 * l2_bytes).div_ceil(set_bytes).max(2)
}

fn gpu(err: impl std::fmt::Display) -> Error {
    Error::Gpu(err.to_string())
}

/// Times `variant` on each shape (gpumode inputs).
pub fn bench_variant(
    variant: &GpuVariant,
    shapes: &[Shape],
    reps: usize,
) -> Result<(DeviceInfo, Vec<Timing>)> {
    let (ctx, info) = open_device()?;
    if let Some(reason) = info.cannot_run(variant.arch) {
        return Err(Error::Gpu(format!("{}: {reason}", variant.name)));
    }
    let module = ctx.load_module(compile_variant(variant)?).map_err(gpu)?;
    let function = module.load_function(variant.entry).map_err(gpu)?;
    configure_function(variant, &function)?;
    let stream = ctx.default_stream();
    let sm_count = info.sm_count as u32;
    let l2_bytes = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(gpu)? as usize;
    let mut flush: CudaSlice<u8> = stream.alloc_zeros(4 * l2_bytes).map_err(gpu)?;
    let mut timings = Vec::new();
    for &shape in shapes {
        let first = KernelCase::new(generate_dual_gemm(shape, Distribution::Gpumode, 1111), 0);
        let sets = input_sets(&first, l2_bytes);
        let mut uploaded = Vec::new();
        for set in 0..sets {
            let owned = if set == 0 {
                KernelCase::new(first.inputs.clone(), 0)
            } else {
                KernelCase::new(
                    generate_dual_gemm(shape, Distribution::Gpumode, 1111 + set as u64),
                    0,
                )
            };
            let case = owned.dual().expect("a dual-GEMM case");
            let buffers: Vec<CudaSlice<u8>> = [
                case.inputs.a.data(),
                case.inputs.b1.data(),
                case.inputs.b2.data(),
                case.sfa_blocked,
                case.sfb1_blocked,
                case.sfb2_blocked,
            ]
            .iter()
            .map(|bytes| stream.clone_htod(*bytes))
            .collect::<std::result::Result<_, _>>()
            .map_err(gpu)?;
            uploaded.push(buffers);
        }
        let mut output: CudaSlice<u16> = stream
            .alloc_zeros(shape.m * shape.n * shape.l)
            .map_err(gpu)?;
        // Every set's launch prepared before timing (tensor maps are host work). The raw
        // pointers outlive their guards, which is sound here: one stream, synchronised per rep.
        let output_ptr = output.device_ptr_mut(&stream).0;
        let launches: Vec<PreparedLaunch> = uploaded
            .iter()
            .map(|set| {
                let buffers = LaunchBuffers {
                    inputs: std::array::from_fn(|i| set[i].device_ptr(&stream).0),
                    // The NVRTC variants read only the blocked scales.
                    plain_scales: [0; 3],
                    output: output_ptr,
                };
                PreparedLaunch::new(variant, buffers, shape, sm_count)
            })
            .collect::<std::result::Result<_, _>>()?;
        let start = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(gpu)?;
        let end = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(gpu)?;
        let mut samples = Vec::with_capacity(reps);
        for rep in 0..WARM_UP + reps {
            stream.memset_zeros(&mut flush).map_err(gpu)?;
            start.record(&stream).map_err(gpu)?;
            launches[rep % sets].launch(&stream, &function)?;
            end.record(&stream).map_err(gpu)?;
            end.synchronize().map_err(gpu)?;
            if rep >= WARM_UP {
                samples.push(f64::from(start.elapsed_ms(&end).map_err(gpu)?) * 1000.0);
            }
        }
        timings.push(Timing::from_samples(variant.name, shape, samples, sets));
    }
    Ok((info, timings))
}

/// Times a built-in variant on the `shapes` it supports and its certificate in `report_dir`
/// covers, into `report` (without a certificate only with `force_untrusted`, and the report says
/// so). Returns false where the variant cannot run on this machine (said on stderr).
pub fn bench_certified(
    variant: &GpuVariant,
    shapes: &[Shape],
    reps: usize,
    report_dir: &std::path::Path,
    force_untrusted: bool,
    report: &mut super::report::BenchReport,
) -> Result<bool> {
    if let Err(reason) = crate::worker::nvrtc::gpu_availability(Some(variant.arch)) {
        eprintln!("skipping {}: cannot run here: {reason}", variant.name);
        return Ok(false);
    }
    let certified = super::report::trusted(report_dir, variant.name, &variant.source_hash());
    let is_trusted = certified.is_some();
    if !is_trusted && !force_untrusted {
        eprintln!(
            "skipping {}: no certificate of this source in {} (run `nvfp4-oracle certify --kernel {}` first, or --force-untrusted)",
            variant.name,
            report_dir.display(),
            variant.name
        );
        return Ok(true);
    }
    let unsupported: Vec<String> = shapes
        .iter()
        .filter(|s| !variant.support.supports(**s))
        .map(|s| s.to_string())
        .collect();
    if !unsupported.is_empty() {
        eprintln!(
            "skipping {} on {}: outside its declared support",
            variant.name,
            unsupported.join(", ")
        );
    }
    let supported: Vec<Shape> = shapes
        .iter()
        .copied()
        .filter(|s| variant.support.supports(*s))
        .filter(|s| super::report::regime_covered(certified.as_ref(), variant.name, *s))
        .collect();
    let (info, timings) = bench_variant(variant, &supported, reps)?;
    report.device = info.describe();
    report
        .timings
        .extend(timings.into_iter().map(|t| (t, is_trusted)));
    Ok(true)
}
