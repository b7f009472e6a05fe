//! The built-in GPU variants (their CUDA sources in this crate's `kernels/` folder, compiled with NVRTC at run time) as kernels under
//! test: each runs in a `nvfp4-oracle gpu-worker --variant NAME` process.

use super::command::{worker_program, WorkerCommand};
use super::isolated::{IsolatedKernel, KernelInfo};
use super::shared_run::OutputOrder;
use crate::gpu::device::device_info;
use crate::gpu::variants::{gpu_variants, Arch, GpuVariant};
use crate::kernels::{KernelUnderTest, Unavailable};
use nvfp4_model::problem::ProblemKind;
use std::time::Duration;

/// Why a kernel for `arch` (any GPU when `None`) cannot run here.
pub fn gpu_availability(arch: Option<Arch>) -> Result<(), Unavailable> {
    match device_info() {
        Err(reason) => Err(reason.clone().into()),
        Ok(info) => arch
            .and_then(|arch| info.cannot_run(arch))
            .map_or(Ok(()), |why| Err(Unavailable(why))),
    }
}

/// Time a gpu-worker gets to start (NVRTC compilation included).
const START_TIMEOUT: Duration = Duration::from_secs(180);
/// The base of a case's watchdog (see [`IsolatedKernel`]).
pub const CASE_TIMEOUT: Duration = Duration::from_secs(10);

pub fn nvrtc_kernel(variant: &GpuVariant) -> IsolatedKernel {
    let arch = variant.arch;
    IsolatedKernel::new(
        KernelInfo {
            name: variant.name.to_string(),
            description: format!(
                "{} ({}, {})",
                variant.description,
                variant.sources.last().map_or("", |f| f.path),
                variant.arch.target
            ),
            problem: ProblemKind::DualGemm,
            support: variant.support,
            schedule: variant.schedule,
            source_hash: variant.source_hash(),
            deliberately_broken: variant.test_kernel,
            nondeterministic: false,
            accumulation: None,
            source_path: None,
        },
        WorkerCommand {
            program: worker_program(),
            args: super::serve::WorkerTarget::Variant(variant.name.into()).worker_args(None),
            // Every worker's compilers get a cache of its own (super::isolated); the oracle's
            // own compiled variants stay where runs share them, named here before that.
            env: vec![(
                "NVFP4_ORACLE_CACHE".into(),
                crate::gpu::compile::cache_dir().display().to_string(),
            )],
            start_timeout: START_TIMEOUT,
            // The oracle's own kernels: not sandboxed.
            sandbox: None,
            clean_env: false,
        },
        std::sync::Arc::new(move || gpu_availability(Some(arch))),
        CASE_TIMEOUT,
    )
    .with_shared_runs(Some(OutputOrder::Mnl))
}

/// Every built-in GPU variant as a kernel under test.
pub fn nvrtc_kernels() -> Vec<Box<dyn KernelUnderTest>> {
    gpu_variants()
        .iter()
        .map(|v| Box::new(nvrtc_kernel(v)) as Box<dyn KernelUnderTest>)
        .collect()
}
