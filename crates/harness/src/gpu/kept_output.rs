//! A case's output left on the GPU by its run: the parent's private copy of what a shared run's
//! kernel wrote (`crate::worker::shared_run`), judged there against a reference kept on the
//! device (`crate::gpu::device_reference`), read back only where it failed.
//!
//! Why: a deployment-size case's output is hundreds of megabytes. Read back to be judged, it
//! went down the PCIe link and up again into the judge's buffer: on a traced H200 campaign,
//! 26 GB of outputs took 10.5 s of a 36 s class to come down alone.

use super::pristine::Pristine;
use super::GpuError;
use cudarc::driver::{sys::CUdeviceptr, CudaStream};
use half::f16;
use nvfp4_model::problem::Shape;
use std::sync::Arc;

/// An output in this process's GPU memory, written by work that has ended: the copy the parent
/// made after the worker answered, which no worker can map.
pub struct KeptOutput {
    copy: Pristine,
    /// The stream that made the copy, for reading it back.
    stream: Arc<CudaStream>,
    shape: Shape,
    /// Stored `[L][M][N]` (the C ABI's order) rather than the harness's `[M][N][L]`.
    lmn: bool,
}

impl KeptOutput {
    /// `copy` holds the output of `shape`, in `[L][M][N]` order when `lmn`; the work that wrote
    /// it was enqueued on `stream`, which has been synchronized since.
    pub(crate) fn new(copy: Pristine, stream: Arc<CudaStream>, shape: Shape, lmn: bool) -> Self {
        KeptOutput {
            copy,
            stream,
            shape,
            lmn,
        }
    }

    /// Where it lies, and whether it is stored `[L][M][N]` (the judge reads either order).
    pub fn device_ptr(&self) -> (CUdeviceptr, bool) {
        (self.copy.device_ptr(), self.lmn && self.shape.l > 1)
    }

    /// Its elements.
    pub fn len(&self) -> usize {
        self.shape.m * self.shape.n * self.shape.l
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The output read back, `[M][N][L]`: for an output that failed, or one judged on the host.
    pub fn download(&self) -> Result<Vec<f16>, GpuError> {
        let mut bytes = vec![0u8; 2 * self.len()];
        self.copy.download_into(&self.stream, &mut bytes)?;
        if self.lmn && self.shape.l > 1 {
            bytes = super::library::lmn_to_mnl(bytes, self.shape);
        }
        Ok(nvfp4_model::case_file::fp16_from_bytes(&bytes))
    }
}
