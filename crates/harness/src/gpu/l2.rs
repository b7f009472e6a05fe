//! The L2 cache put into a known state by the parent, in its own CUDA context, before every
//! timed call of an external kernel.
//!
//! Why the parent: whatever runs in the worker's process is the kernel's, its own L2 flush
//! included. Why both steps: writing a buffer several times the L2's size evicts ordinary
//! lines, but not lines marked persisting (a kernel can set a carveout with
//! `cudaLimitPersistingL2CacheSize` and an access-policy window on its stream in one call and
//! find its data still in L2 in the next: measured on the H100, and in public harness fixes:
//! gpu-mode/pygpubench PR 49, karpathy/llm.c PR 851, NVIDIA/nvbench issue 458). So the parent
//! first demotes every persisting line to normal (`cuCtxResetPersistingL2Cache`, which acts on
//! the device's L2, not on one context's view of it), then writes its flush buffer.

use super::check;
use super::GpuError;
use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;

/// The flush writes this many times the L2's size.
const FLUSH_TIMES_L2: usize = 4;
/// The byte the flush writes (not zero: a compressible all-zero page could be handled without
/// touching every line on some GPUs).
const FLUSH_BYTE: u8 = 0x5A;

/// What the parent does before every timed call and every call without the kernel: put the
/// cache into a state no worker chose. [`L2Reset`] on a GPU; tests without one pass their own.
pub trait CacheReset {
    fn reset(&mut self) -> Result<(), GpuError>;
}

/// The parent's L2 reset: a flush buffer in its own context, made before any worker starts so
/// that a kernel holding the device's memory cannot keep the parent from making it.
pub struct L2Reset {
    stream: Arc<CudaStream>,
    flush: CudaSlice<u8>,
}

impl L2Reset {
    /// A reset for device 0, its flush buffer allocated now.
    pub fn new() -> Result<Self, GpuError> {
        let (ctx, info) = super::device::open_device()?;
        let stream = ctx.default_stream();
        let len = (FLUSH_TIMES_L2 * info.l2_bytes).max(1 << 20);
        let flush = stream.alloc_zeros::<u8>(len).map_err(|err| {
            format!("allocating the parent's L2 flush buffer ({len} bytes): {err}")
        })?;
        Ok(L2Reset { stream, flush })
    }
}

impl CacheReset for L2Reset {
    /// Demotes every persisting L2 line, evicts every line by writing the flush buffer, and
    /// waits until both are done.
    fn reset(&mut self) -> Result<(), GpuError> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| e.to_string())?;
        // SAFETY: a driver call on the context bound above; no pointers.
        let demoted = unsafe { sys::cuCtxResetPersistingL2Cache() };
        // GPUs before Ampere have no persisting lines to demote.
        if demoted != sys::CUresult::CUDA_ERROR_NOT_SUPPORTED {
            check("cuCtxResetPersistingL2Cache", demoted)?;
        }
        let len = self.flush.len();
        let (ptr, _guard) = self.flush.device_ptr(&self.stream);
        // SAFETY: `ptr` is `len` bytes of live device memory of this context.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(ptr, FLUSH_BYTE, len, self.stream.cu_stream())
        })?;
        drop(_guard);
        self.stream.synchronize().map_err(GpuError::from)
    }
}
