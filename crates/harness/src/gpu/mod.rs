//! The GPU backend: device discovery, NVRTC compilation with a cache, the variant registry, the
//! hardened launch, the C-ABI library loader, the determinism check's conditions, device copies
//! to check buffers against ([`pristine`]), the parent's L2 reset before a worker's timed calls
//! ([`l2`]) (timing itself is `crate::bench`'s), the dual GEMM's inputs made on the GPU
//! ([`input_generator`]), host-device copies through pinned memory ([`staging`]), fills by
//! copies from pinned patterns ([`device_fill`]) and outputs judged against a reference kept
//! on the device ([`device_reference`]), a run's output left there to be judged
//! ([`kept_output`]), a shared run's buffers made before its turn ([`shared_buffers`]). CUDA is loaded at run time: on a machine without
//! it every GPU variant reports why it cannot run. The worker processes that run each GPU kernel
//! in isolation, and the `gpu-worker` serving loop built on this module, are in the `worker`
//! module, which uses this one.

/// What went wrong on the GPU (a driver call, an allocation, a module), in words for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GpuError(pub String);

impl From<String> for GpuError {
    fn from(message: String) -> Self {
        GpuError(message)
    }
}

impl From<&str> for GpuError {
    fn from(message: &str) -> Self {
        GpuError(message.to_string())
    }
}

/// `Ok`, or the failed driver call named with its result.
#[cfg(feature = "gpu")]
pub(crate) fn check(what: &str, result: cudarc::driver::sys::CUresult) -> Result<(), GpuError> {
    if result == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError(format!("{what} failed: {result:?}")))
    }
}

#[cfg(feature = "gpu")]
impl From<cudarc::driver::DriverError> for GpuError {
    fn from(err: cudarc::driver::DriverError) -> Self {
        GpuError(err.to_string())
    }
}

/// A GPU that cannot be used is why a kernel on it cannot run here.
impl From<GpuError> for crate::kernels::Unavailable {
    fn from(err: GpuError) -> Self {
        crate::kernels::Unavailable(err.0)
    }
}

impl From<GpuError> for crate::error::Error {
    fn from(err: GpuError) -> Self {
        crate::error::Error::Gpu(err.0)
    }
}

#[cfg(feature = "gpu")]
pub mod compile;
#[cfg(feature = "gpu")]
pub mod conditions;
pub mod device;
#[cfg(feature = "gpu")]
pub mod device_fill;
#[cfg(feature = "gpu")]
pub mod device_reference;
#[cfg(feature = "gpu")]
pub mod exact_reference;
#[cfg(feature = "gpu")]
pub mod fenced;
#[cfg(feature = "gpu")]
pub mod input_generator;
#[cfg(feature = "gpu")]
pub mod kept_output;
#[cfg(feature = "gpu")]
pub mod l2;
#[cfg(feature = "gpu")]
pub mod launch;
#[cfg(feature = "gpu")]
pub mod library;
#[cfg(feature = "gpu")]
pub mod pristine;
#[cfg(feature = "gpu")]
mod reference_launch;
#[cfg(feature = "gpu")]
pub mod shared_buffers;
#[cfg(feature = "gpu")]
pub mod staging;
#[cfg(feature = "gpu")]
pub mod tensor_core_reference;
pub mod variants;

// What the command line and the examples name of the GPU backend.
#[cfg(feature = "gpu")]
pub use compile::{compile_variant, nvrtc_present};
#[cfg(feature = "gpu")]
pub use device::device_count;
pub use device::device_info;
pub use variants::gpu_variants;
