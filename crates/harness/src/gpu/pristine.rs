//! Copies of a fenced buffer's body kept on the device, and the check that the body still holds
//! them, done there (the harness's own kernel, `kernels/harness/byte_compare_kernels.cu`): what
//! lets the parent check a shared run's inputs unchanged, and its output unchanged after the
//! worker answered, without reading gigabytes back to the host. A device-to-device copy and a
//! comparison run at the GPU's memory bandwidth; the host path they replace ran at the PCIe
//! link's, twice for the output.

use super::check;
use super::fenced::FencedBuffer;
use super::staging::Staging;
use super::GpuError;
use cudarc::driver::{sys, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use std::sync::{Arc, Mutex};

const SOURCE: &str = include_str!("../../kernels/harness/byte_compare_kernels.cu");

/// The comparison's grid: enough CTAs of 256 threads to keep every SM's loads in flight.
const COMPARE_GRID: (u32, u32) = (1024, 256);

/// A copy of one fenced buffer's body, in device memory of its own.
///
/// Why memory mapped for each copy (`FencedBuffer::uninitialized`) and not the stream's pool: an
/// allocation from the pool may reuse memory another stream freed and make the allocating
/// stream wait for that stream's work (the driver's internal dependencies). Beside the GPU
/// reference, which allocates and frees every case's arrays on its own stream, a shared run's
/// copies and uploads then waited for the reference's kernel (results/device-judge/README.md).
pub struct Pristine {
    copy: FencedBuffer,
}

impl Pristine {
    /// Copies `buffer`'s body into fresh device memory, enqueued on `stream` (ordered after the
    /// work already enqueued there, such as the body's upload).
    pub fn of(stream: &Arc<CudaStream>, buffer: &FencedBuffer) -> Result<Self, GpuError> {
        let copy = FencedBuffer::uninitialized(stream, buffer.body_len())?;
        if buffer.body_len() > 0 {
            // SAFETY: both ranges are `body_len` bytes of live device memory of this context.
            check("cuMemcpyDtoDAsync", unsafe {
                sys::cuMemcpyDtoDAsync_v2(
                    copy.body_ptr(),
                    buffer.body_ptr(),
                    buffer.body_len(),
                    stream.cu_stream(),
                )
            })?;
        }
        Ok(Pristine { copy })
    }

    /// Uploads `body` through `staging` into `buffer`'s body and into a new copy of it at once,
    /// both by the copy engines: the copy needs no kernel and no second pass over the body.
    pub fn uploaded(
        stream: &Arc<CudaStream>,
        staging: &mut Staging,
        buffer: &FencedBuffer,
        body: &[u8],
    ) -> Result<Self, GpuError> {
        if body.len() != buffer.body_len() {
            return Err(GpuError(format!(
                "{} bytes for a body of {}",
                body.len(),
                buffer.body_len()
            )));
        }
        let copy = FencedBuffer::uninitialized(stream, body.len())?;
        staging.upload_to_each(stream, &[buffer.body_ptr(), copy.body_ptr()], body)?;
        Ok(Pristine { copy })
    }

    /// The copy's length in bytes.
    fn len(&self) -> usize {
        self.copy.body_len()
    }

    /// Whether `buffer`'s body holds the copy's bytes now, compared on the device: one flag
    /// comes back.
    pub fn matches(
        &self,
        stream: &Arc<CudaStream>,
        buffer: &FencedBuffer,
    ) -> Result<bool, GpuError> {
        let n = buffer.body_len() as u64;
        if n == 0 {
            return Ok(true);
        }
        if n as usize > self.len() {
            return Ok(false);
        }
        let function = compare_function(stream)?;
        let differ = Flag::take(stream)?;
        // SAFETY: the flag is a live word of device memory that no other work uses.
        check("cuMemsetD8Async", unsafe {
            sys::cuMemsetD8Async(differ.0, 0, FLAG_BYTES, stream.cu_stream())
        })?;
        let body = buffer.body_ptr();
        let mut launch = stream.launch_builder(&function);
        let copy = self.device_ptr();
        launch.arg(&body).arg(&copy).arg(&n).arg(&differ.0);
        let config = LaunchConfig {
            grid_dim: (COMPARE_GRID.0, 1, 1),
            block_dim: (COMPARE_GRID.1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: (body, copy, n, differ) as the kernel takes them; both ranges hold n bytes.
        unsafe { launch.launch(config) }.map_err(|err| err.to_string())?;
        let mut flag = 0u32;
        // SAFETY: four bytes into a live u32 that outlives the synchronize below.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                (&mut flag as *mut u32).cast(),
                differ.0,
                FLAG_BYTES,
                stream.cu_stream(),
            )
        })?;
        stream.synchronize().map_err(GpuError::from)?;
        differ.give_back();
        Ok(flag == 0)
    }

    /// Where the copy lies in device memory (for a copy out enqueued on `stream`, after the
    /// work that made it).
    pub fn device_ptr(&self) -> sys::CUdeviceptr {
        self.copy.body_ptr()
    }

    /// The copy's bytes, into `bytes` (its length).
    pub fn download_into(
        &self,
        stream: &Arc<CudaStream>,
        bytes: &mut [u8],
    ) -> Result<(), GpuError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if bytes.len() > self.len() {
            return Err(GpuError(format!(
                "{} bytes of a copy of {}",
                bytes.len(),
                self.len()
            )));
        }
        let source = self.device_ptr();
        // SAFETY: the copy holds at least bytes.len() bytes (checked above); the host buffer
        // outlives the synchronize below.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                bytes.as_mut_ptr().cast(),
                source,
                bytes.len(),
                stream.cu_stream(),
            )
        })?;
        stream.synchronize().map_err(GpuError::from)
    }
}

/// Bytes of a comparison's flag (the kernel's `unsigned int`).
const FLAG_BYTES: usize = std::mem::size_of::<u32>();

/// Flags no comparison holds now, for the next ones: allocated with `cuMemAlloc` once and
/// reused, never freed, in the one context the parent uses (which the comparison kernel, loaded
/// once for the process before any flag is taken, keeps alive).
///
/// Why not the stream's pool (`alloc_zeros`): an allocation from the pool may reuse memory
/// another stream freed and then wait for that stream's work. The comparisons after a shared
/// run's answer waited so for the GPU reference's kernel beside them (0.1 s a 512 MB output's
/// case, results/device-copy/README.md). Nor `cuMemFree` after each: it waits for the device.
static FREE_FLAGS: Mutex<Vec<sys::CUdeviceptr>> = Mutex::new(Vec::new());

/// A comparison's flag, a word of device memory of its own while held. Given back only after
/// the work that used it has ended ([`Flag::give_back`]); one dropped on an error path is left
/// unused for good (four bytes), never handed to a comparison while work may still write it.
struct Flag(sys::CUdeviceptr);

impl Flag {
    fn take(stream: &Arc<CudaStream>) -> Result<Flag, GpuError> {
        let free = FREE_FLAGS.lock().unwrap_or_else(|p| p.into_inner()).pop();
        if let Some(ptr) = free {
            return Ok(Flag(ptr));
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(|err| err.to_string())?;
        // SAFETY: allocates FLAG_BYTES of device memory in the stream's (bound) context.
        let ptr = unsafe { cudarc::driver::result::malloc_sync(FLAG_BYTES) }
            .map_err(|err| format!("allocating a flag: {err}"))?;
        Ok(Flag(ptr))
    }

    /// For the next comparison: the caller's work on it has ended.
    fn give_back(self) {
        FREE_FLAGS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.0);
    }
}

/// The comparison kernel, compiled and loaded once for the context `stream` belongs to (the
/// parent has one).
fn compare_function(stream: &Arc<CudaStream>) -> Result<CudaFunction, GpuError> {
    static LOADED: Mutex<Option<Result<CudaFunction, String>>> = Mutex::new(None);
    let mut loaded = LOADED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if loaded.is_none() {
        *loaded = Some(load_compare_function(stream));
    }
    loaded.clone().expect("set above").map_err(GpuError)
}

/// The comparison kernel's PTX (NVRTC alone: no GPU needed).
pub fn compile() -> Result<Ptx, String> {
    compile_ptx_with_opts(
        SOURCE,
        CompileOptions {
            name: Some("byte_compare_kernels.cu".into()),
            ..Default::default()
        },
    )
    .map_err(|err| format!("compiling kernels/harness/byte_compare_kernels.cu: {err:?}"))
}

fn load_compare_function(stream: &Arc<CudaStream>) -> Result<CudaFunction, String> {
    let ptx = compile()?;
    let module = stream
        .context()
        .load_module(ptx)
        .map_err(|err| err.to_string())?;
    module
        .load_function("nvfp4_oracle_bytes_differ")
        .map_err(|err| err.to_string())
}
