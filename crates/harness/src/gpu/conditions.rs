//! The conditions a determinism check runs a case under ([`RunConditions`]), made in the worker
//! with two small kernels of the harness's own (kernels/harness/conditions_kernels.cu): shared memory
//! filled with a byte just before the launch (on the launch's stream), and CTAs that spin on
//! another stream while the kernel runs. Compiled the first time a run asks for them.

use super::device::DeviceInfo;
use super::GpuError;
use crate::kernels::RunConditions;
use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use std::sync::Arc;

const SOURCE: &str = include_str!("../../kernels/harness/conditions_kernels.cu");

/// How long the other work spins: longer than the kernel under test runs on the shapes the
/// determinism check draws (well under a millisecond on a Hopper GPU).
const BUSY_MICROSECONDS: u64 = 3_000;

pub struct Conditions {
    fill: CudaFunction,
    busy: CudaFunction,
    side: Arc<CudaStream>,
    fill_bytes: i32,
    sm_count: u32,
    clock_mhz: u64,
}

impl Conditions {
    pub fn new(stream: &Arc<CudaStream>, info: &DeviceInfo) -> Result<Self, GpuError> {
        let ctx = stream.context();
        let ptx = compile_ptx_with_opts(
            SOURCE,
            CompileOptions {
                name: Some("conditions_kernels.cu".into()),
                ..Default::default()
            },
        )
        .map_err(|err| format!("compiling kernels/harness/conditions_kernels.cu: {err:?}"))?;
        let module = ctx.load_module(ptx).map_err(|err| err.to_string())?;
        let fill = module
            .load_function("nvfp4_oracle_fill_shared_memory")
            .map_err(|err| err.to_string())?;
        let busy = module
            .load_function("nvfp4_oracle_busy")
            .map_err(|err| err.to_string())?;
        let fill_bytes = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|err| err.to_string())?;
        fill.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            fill_bytes,
        )
        .map_err(|err| err.to_string())?;
        let clock_khz = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .map_err(|err| err.to_string())?;
        Ok(Conditions {
            fill,
            busy,
            side: ctx.new_stream().map_err(|err| err.to_string())?,
            fill_bytes,
            sm_count: info.sm_count as u32,
            clock_mhz: (clock_khz.max(1000) / 1000) as u64,
        })
    }

    /// Enqueues what `conditions` ask for, right before the kernel is launched on `stream`.
    pub fn before_launch(
        &self,
        stream: &Arc<CudaStream>,
        conditions: RunConditions,
    ) -> Result<(), GpuError> {
        if let Some(fill) = conditions.shared_memory_fill {
            let config = LaunchConfig {
                grid_dim: (2 * self.sm_count, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: self.fill_bytes as u32,
            };
            let (fill, bytes) = (u32::from(fill), self.fill_bytes);
            let mut launch = stream.launch_builder(&self.fill);
            launch.arg(&fill).arg(&bytes);
            // SAFETY: the kernel takes (unsigned int, int) and writes only its own shared memory.
            unsafe { launch.launch(config) }.map_err(|err| err.to_string())?;
        }
        if conditions.concurrent_load {
            // Half the SMs' worth of spinning CTAs, started just before the kernel: it then
            // begins on the other half and gets the rest as they free up.
            let cycles = (BUSY_MICROSECONDS * self.clock_mhz) as i64;
            let config = LaunchConfig {
                grid_dim: (self.sm_count / 2, 1, 1),
                block_dim: (32, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut launch = self.side.launch_builder(&self.busy);
            launch.arg(&cycles);
            // SAFETY: the kernel takes one long long and touches no memory.
            unsafe { launch.launch(config) }.map_err(|err| err.to_string())?;
        }
        Ok(())
    }

    /// Waits for the other work (before the buffers of the run are read back and freed).
    pub fn finish(&self) -> Result<(), GpuError> {
        self.side.synchronize().map_err(GpuError::from)
    }
}
