//! Finding the GPU: the CUDA driver is loaded at run time, so a machine without one gets a reason,
//! not a crash.

use super::variants::Arch;
use super::GpuError;
#[cfg(feature = "gpu")]
use cudarc::driver::sys::CUdevice_attribute;
#[cfg(feature = "gpu")]
use cudarc::driver::CudaContext;
#[cfg(feature = "gpu")]
use std::sync::Arc;
use std::sync::OnceLock;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub memory_bytes: usize,
    /// The driver's release (e.g. "580.159.04", from /proc/driver/nvidia/version) and the CUDA
    /// version its API implements (cuDriverGetVersion, e.g. "13.0").
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// The SM clock the driver reports (maximum boost), MHz.
    pub sm_clock_mhz: Option<i32>,
    pub l2_bytes: usize,
    /// Peak DRAM bandwidth, bytes per second: twice the memory clock (double data rate) times
    /// the bus width, as the driver reports them.
    pub memory_bandwidth: Option<f64>,
}

/// The NVIDIA kernel module's release, where Linux shows it.
#[cfg(feature = "gpu")]
fn driver_release() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
    // the first word made of digits and dots with a dot in it.
    text.lines()
        .next()?
        .split_whitespace()
        .find(|word| word.contains('.') && word.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        .map(str::to_string)
}

#[cfg(feature = "gpu")]
fn cuda_driver_version() -> Option<String> {
    let mut version = 0i32;
    // SAFETY: writes one int; the library was loaded by the caller's successful context creation.
    let result = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    (result == cudarc::driver::sys::CUresult::CUDA_SUCCESS)
        .then(|| format!("{}.{}", version / 1000, (version % 1000) / 10))
}

impl DeviceInfo {
    pub fn describe(&self) -> String {
        format!(
            "{} (sm_{}{}, {} SMs, {:.0} GiB)",
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.sm_count,
            self.memory_bytes as f64 / (1u64 << 30) as f64
        )
    }

    /// Why `arch` cannot run here, if it cannot.
    pub fn cannot_run(&self, arch: Arch) -> Option<String> {
        let (major, minor) = self.compute_capability;
        ((major, minor) != (arch.major, arch.minor))
            .then(|| format!("needs {}; this GPU is sm_{major}{minor}", arch.target))
    }
}

/// A non-blocking stream of the highest priority on `ctx`'s device: the block scheduler starts
/// its work's blocks before those of streams of lower priority that are waiting. For the
/// parent's short work that must not queue behind a long kernel of its own on another stream
/// (the GPU reference's fills every SM): a device-to-device copy is a kernel there too, and
/// beside a 160 ms matmul a 512 MB copy waited 156 ms on a stream of default priority and took
/// 0.5 ms on one of the highest (results/device-copy/README.md).
#[cfg(feature = "gpu")]
pub fn urgent_stream(ctx: &Arc<CudaContext>) -> Result<Arc<cudarc::driver::CudaStream>, String> {
    ctx.bind_to_thread().map_err(|err| err.to_string())?;
    // (least, greatest): the greatest priority is the lowest number.
    let (_, highest) =
        cudarc::driver::result::stream::get_priority_range().map_err(|err| err.to_string())?;
    ctx.new_stream_with_priority(highest)
        .map_err(|err| err.to_string())
}

/// Opens device 0. Errors are sentences for the user.
#[cfg(feature = "gpu")]
pub fn open_device() -> Result<(Arc<CudaContext>, DeviceInfo), GpuError> {
    // SAFETY: only probes whether the shared library can be loaded.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver found (libcuda.so could not be loaded)".into());
    }
    let ctx = CudaContext::new(0).map_err(|err| format!("no usable GPU: {err}"))?;
    let info = DeviceInfo {
        name: ctx.name().map_err(|err| err.to_string())?,
        compute_capability: ctx.compute_capability().map_err(|err| err.to_string())?,
        sm_count: ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|err| err.to_string())?,
        memory_bytes: ctx.total_mem().map_err(|err| err.to_string())?,
        driver: driver_release(),
        cuda: cuda_driver_version(),
        sm_clock_mhz: ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .ok()
            .map(|khz| khz / 1000),
        l2_bytes: ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(|err| err.to_string())? as usize,
        memory_bandwidth: match (
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        ) {
            (Ok(khz), Ok(bits)) if khz > 0 && bits > 0 => {
                Some(2.0 * khz as f64 * 1e3 * bits as f64 / 8.0)
            }
            _ => None,
        },
    };
    Ok((ctx, info))
}

/// The device, probed once per process (the parent uses it to say which variants can run).
pub fn device_info() -> &'static Result<DeviceInfo, GpuError> {
    static INFO: OnceLock<Result<DeviceInfo, GpuError>> = OnceLock::new();
    #[cfg(feature = "gpu")]
    let probe = || open_device().map(|(_, info)| info);
    #[cfg(not(feature = "gpu"))]
    let probe = || {
        Err(GpuError::from(
            "this build has no GPU backend (nvfp4-harness without its `gpu` feature)",
        ))
    };
    INFO.get_or_init(probe)
}

/// How many GPUs the driver sees (`CUDA_VISIBLE_DEVICES` applied), or why none can be counted.
#[cfg(feature = "gpu")]
pub fn device_count() -> Result<usize, GpuError> {
    // SAFETY: only probes whether the shared library can be loaded.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver found (libcuda.so could not be loaded)".into());
    }
    CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .map_err(|err| GpuError(format!("counting GPUs: {err}")))
}
