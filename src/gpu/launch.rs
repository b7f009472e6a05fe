//! The hardened launch, run inside the worker process: a kernel under test may be buggy or
//! dishonest, so every launch gets fresh allocations, the output starts as poison, canary bytes
//! surround every buffer, and inputs are compared before and after.

use super::variants::GpuVariant;
use crate::compare::diagnosis::POISON;
use crate::kernels::{DualGemmCase, KernelFailure};
use crate::problem::Shape;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use std::sync::Arc;

/// Guard bytes before and after every buffer.
const CANARY_BYTES: usize = 4096;
const CANARY_BYTE: u8 = 0xA5;

/// Set in a worker's environment when it runs under compute-sanitizer: every buffer is then an
/// allocation of exactly its size, with no canaries, so that memcheck sees a read one byte past
/// a tensor (inside a canary it would be a read of valid memory).
pub const EXACT_ALLOCATIONS_ENV: &str = "NVFP4_ORACLE_EXACT_ALLOCATIONS";

fn canary_len() -> usize {
    if std::env::var_os(EXACT_ALLOCATIONS_ENV).is_some() {
        0
    } else {
        CANARY_BYTES
    }
}

fn crashed(err: impl std::fmt::Display) -> KernelFailure {
    KernelFailure::Crashed(err.to_string())
}

/// Host bytes with canaries around `body`, and the device copy.
struct Guarded {
    host: Vec<u8>,
    device: CudaSlice<u8>,
    canary: usize,
}

impl Guarded {
    fn upload(stream: &Arc<CudaStream>, body: &[u8]) -> Result<Self, KernelFailure> {
        let canary = canary_len();
        let mut host = vec![CANARY_BYTE; body.len() + 2 * canary];
        host[canary..canary + body.len()].copy_from_slice(body);
        let device = stream.clone_htod(&host).map_err(crashed)?;
        Ok(Guarded {
            host,
            device,
            canary,
        })
    }

    fn body_len(&self) -> usize {
        self.host.len() - 2 * self.canary
    }

    /// The device bytes after the launch.
    fn download(&self, stream: &Arc<CudaStream>) -> Result<Vec<u8>, KernelFailure> {
        stream.clone_dtoh(&self.device).map_err(crashed)
    }
}

/// Runs `launch` on `case`'s inputs in fresh guarded buffers and returns the output's fp16 bits
/// (in the order the kernel wrote them: `[M, N, L]` for the NVRTC variants, `[L, M, N]` for the
/// C ABI). `launch` enqueues the kernel on `stream`; the launch is then synchronized, the
/// canaries around the output and every input checked, and the inputs compared with what was
/// uploaded.
pub fn hardened_launch(
    stream: &Arc<CudaStream>,
    case: DualGemmCase<'_>,
    launch: impl FnOnce(&LaunchBuffers) -> Result<(), KernelFailure>,
) -> Result<Vec<u16>, KernelFailure> {
    let inputs = case.inputs;
    let shape = inputs.shape;
    let named_inputs = [
        ("a", inputs.a.data()),
        ("b1", inputs.b1.data()),
        ("b2", inputs.b2.data()),
        ("sfa_permuted", case.sfa_blocked),
        ("sfb1_permuted", case.sfb1_blocked),
        ("sfb2_permuted", case.sfb2_blocked),
        ("sfa", inputs.a.scales()),
        ("sfb1", inputs.b1.scales()),
        ("sfb2", inputs.b2.scales()),
    ];
    let guarded: Vec<Guarded> = named_inputs
        .iter()
        .map(|(_, bytes)| Guarded::upload(stream, bytes))
        .collect::<Result<_, _>>()?;
    let elements = shape.m * shape.n * shape.l;
    let poison: Vec<u8> = std::iter::repeat_n(POISON.to_bits().to_le_bytes(), elements)
        .flatten()
        .collect();
    let mut output = Guarded::upload(stream, &poison)?;

    let output_len = output.body_len();
    let canary = output.canary;
    {
        // The pointers (and the stream-ordering guards) live only for the launch.
        let views: Vec<_> = guarded
            .iter()
            .map(|g| g.device.slice(g.canary..g.canary + g.body_len()))
            .collect();
        let mut output_view = output.device.slice_mut(canary..canary + output_len);
        let input_ptrs: Vec<_> = views.iter().map(|v| v.device_ptr(stream)).collect();
        let (output_ptr, _output_guard) = output_view.device_ptr_mut(stream);
        let buffers = LaunchBuffers {
            inputs: std::array::from_fn(|i| input_ptrs[i].0),
            plain_scales: std::array::from_fn(|i| input_ptrs[6 + i].0),
            output: output_ptr,
        };
        launch(&buffers)?;
    }
    stream.synchronize().map_err(crashed)?;

    let after = output.download(stream)?;
    let canaries_intact = |bytes: &[u8]| {
        bytes[..canary]
            .iter()
            .chain(&bytes[bytes.len() - canary..])
            .all(|&b| b == CANARY_BYTE)
    };
    if !canaries_intact(&after) {
        let first = after
            .iter()
            .enumerate()
            .find(|&(i, &b)| (i < canary || i >= after.len() - canary) && b != CANARY_BYTE)
            .map(|(i, _)| i);
        let position = first.map_or(String::new(), |i| {
            if i < canary {
                format!(" ({} bytes before c)", canary - i)
            } else {
                format!(" (byte {} past the end of c)", i - (after.len() - canary))
            }
        });
        return Err(KernelFailure::OutOfBounds(format!(
            "the canary around c was overwritten{position}"
        )));
    }
    for ((name, _), buffer) in named_inputs.iter().zip(&guarded) {
        let now = buffer.download(stream)?;
        if now != buffer.host {
            let kind = if canaries_intact(&now) {
                "its contents changed"
            } else {
                "its canary was overwritten"
            };
            return Err(KernelFailure::ModifiedInputs(format!(
                "input {name}: {kind}"
            )));
        }
    }
    output.host = after;
    Ok(output.host[canary..canary + output_len]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect())
}

/// Device pointers of one launch's buffers.
#[derive(Debug, Clone, Copy)]
pub struct LaunchBuffers {
    /// a, b1, b2 and the blocked scales of A, B1, B2: the NVRTC variants' argument order.
    pub inputs: [CUdeviceptr; 6],
    /// The plain scales of A, B1, B2 (the C ABI passes them too; 0 where not uploaded).
    pub plain_scales: [CUdeviceptr; 3],
    pub output: CUdeviceptr,
}

/// A CUtensorMap passed by value (`const __grid_constant__ TensorMap` in hopper_async.cuh).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct TensorMapArg([u64; 16]);
// SAFETY: plain bytes, laid out as the kernel parameter expects.
unsafe impl DeviceRepr for TensorMapArg {}

/// A 3-D u8 tensor map over packed FP4 rows: (K/2 bytes, rows, L), box (k_bytes, box_rows, 1).
fn fp4_tensor_map(
    base: CUdeviceptr,
    shape: Shape,
    rows: usize,
    k_bytes: u32,
    box_rows: u32,
) -> Result<TensorMapArg, String> {
    let row_bytes = (shape.k / 2) as u64;
    let dims = [row_bytes, rows as u64, shape.l as u64];
    let strides = [row_bytes, row_bytes * rows as u64];
    let boxes = [k_bytes, box_rows, 1];
    let element_strides = [1u32; 3];
    let mut map = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    // SAFETY: every array has the length the rank (3) implies; the address is a live allocation
    // of at least the size the dimensions describe.
    let result = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            3,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if result != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuTensorMapEncodeTiled failed: {result:?}"));
    }
    // SAFETY: initialised by the successful call.
    let map = unsafe { map.assume_init() };
    Ok(TensorMapArg(map.opaque))
}

/// What a loaded function needs set once before its first launch: the variant's dynamic shared
/// memory, where it exceeds the 48 KiB default.
pub fn configure_function(variant: &GpuVariant, function: &CudaFunction) -> Result<(), String> {
    if variant.dynamic_smem > 48 * 1024 {
        function
            .set_attribute(
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                variant.dynamic_smem as i32,
            )
            .map_err(|err| {
                format!(
                    "asking for {} B of shared memory: {err}",
                    variant.dynamic_smem
                )
            })?;
    }
    Ok(())
}

/// One launch of a variant on given buffers, with its host-side work done in advance (grid, and
/// the TMA tensor maps, which are encoded on the host): `launch` then only enqueues the kernel,
/// so a timed launch times the kernel and not this preparation.
pub struct PreparedLaunch {
    buffers: LaunchBuffers,
    sizes: [i32; 4],
    maps: Vec<TensorMapArg>,
    config: LaunchConfig,
}

impl PreparedLaunch {
    pub fn new(
        variant: &GpuVariant,
        buffers: LaunchBuffers,
        shape: Shape,
        sm_count: u32,
    ) -> Result<Self, String> {
        let (grid_dim, block_dim) = variant.launch_dims(shape, sm_count);
        let maps = match variant.tensor_maps {
            Some(boxes) => [
                (buffers.inputs[0], shape.m, boxes.a_rows),
                (buffers.inputs[1], shape.n, boxes.b_rows),
                (buffers.inputs[2], shape.n, boxes.b_rows),
            ]
            .into_iter()
            .map(|(base, rows, box_rows)| {
                fp4_tensor_map(base, shape, rows, boxes.k_bytes, box_rows)
            })
            .collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(PreparedLaunch {
            buffers,
            sizes: [shape.m, shape.n, shape.k, shape.l].map(|x| x as i32),
            maps,
            config: LaunchConfig {
                grid_dim,
                block_dim,
                shared_mem_bytes: variant.dynamic_smem,
            },
        })
    }

    /// Enqueues the kernel on `stream` (asynchronous).
    pub fn launch(&self, stream: &Arc<CudaStream>, function: &CudaFunction) -> Result<(), String> {
        let mut launch = stream.launch_builder(function);
        for pointer in &self.buffers.inputs {
            launch.arg(pointer);
        }
        launch.arg(&self.buffers.output);
        for size in &self.sizes {
            launch.arg(size);
        }
        for map in &self.maps {
            launch.arg(map);
        }
        // SAFETY: the argument list is the variants' shared signature (plus the tensor maps the
        // variant declares); every pointer is a live device allocation of the size the shape
        // implies, and the function was configured by `configure_function`.
        unsafe { launch.launch(self.config) }
            .map(|_| ())
            .map_err(|err| err.to_string())
    }
}
