//! The hardened launch, run inside the worker process: a kernel under test may be buggy or
//! dishonest, so every launch gets fresh allocations that end at unmapped memory (fenced.rs),
//! the output starts as poison, canary bytes surround every buffer, and inputs are compared
//! before and after.

use super::fenced::{overwritten_canary, FencedBuffer};
use super::variants::GpuVariant;
use super::GpuError;
use crate::kernels::{DualGemmCase, KernelFailure};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaFunction, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg};
use nvfp4_model::problem::Shape;
use nvfp4_model::problem::POISON;
use std::sync::Arc;

fn crashed(err: impl std::fmt::Display) -> KernelFailure {
    KernelFailure::Crashed(err.to_string())
}

/// Runs `launch` on `case`'s inputs in fresh guarded buffers and returns the output's bytes,
/// little-endian fp16 bits in the order the kernel wrote them (`[M, N, L]` for the NVRTC
/// variants, `[L, M, N]` for the C ABI). `launch` enqueues the kernel on `stream`; the launch
/// is then synchronized, the canaries around the output and every input checked, and the
/// inputs compared with what was uploaded.
pub fn hardened_launch(
    stream: &Arc<CudaStream>,
    case: DualGemmCase<'_>,
    launch: impl FnOnce(&LaunchBuffers) -> Result<(), KernelFailure>,
) -> Result<Vec<u8>, KernelFailure> {
    let inputs = case.inputs;
    let shape = inputs.shape;
    let named_inputs = case.abi_inputs();
    let guarded: Vec<FencedBuffer> = named_inputs
        .iter()
        .map(|(_, bytes)| FencedBuffer::upload(stream, bytes))
        .collect::<Result<_, _>>()
        .map_err(crashed)?;
    let elements = shape.m * shape.n * shape.l;
    let output = FencedBuffer::filled_u16(stream, elements, POISON.to_bits()).map_err(crashed)?;
    let buffers = LaunchBuffers {
        inputs: std::array::from_fn(|i| guarded[i].body_ptr()),
        plain_scales: std::array::from_fn(|i| guarded[6 + i].body_ptr()),
        output: output.body_ptr(),
    };
    // The buffers outlive the launch: they are dropped after this synchronize (or, when the
    // launch fails, with a context that is no longer used).
    launch(&buffers)?;
    stream.synchronize().map_err(crashed)?;

    // The output as the caller reads it: after its stream, and only its stream, is done.
    let after = output.download_window(stream).map_err(crashed)?;
    stream.context().synchronize().map_err(crashed)?;
    let settled = output.download_window(stream).map_err(crashed)?;
    if settled != after {
        let changed = settled.iter().zip(&after).filter(|(a, b)| a != b).count();
        return Err(KernelFailure::Unordered(format!(
            "{changed} bytes of c changed after the caller's stream had finished: the kernel's \
             work continued on another stream"
        )));
    }
    let lead = output.lead();
    let body_end = lead + output.body_len();
    // Only the canaries are scanned, not the body (which may be gigabytes).
    if let Some(place) = overwritten_canary(&after[..lead], &after[body_end..]) {
        return Err(KernelFailure::OutOfBounds(format!(
            "the canary around c was overwritten ({place})"
        )));
    }
    for ((name, body), buffer) in named_inputs.iter().zip(&guarded) {
        let now = buffer.download_window(stream).map_err(crashed)?;
        let expected = buffer.expected_window(body);
        if now != expected {
            let lead = buffer.lead();
            let body_changed = now[lead..lead + body.len()] != expected[lead..lead + body.len()];
            let kind = if body_changed {
                "its contents changed"
            } else {
                "its canary was overwritten"
            };
            return Err(KernelFailure::ModifiedInputs(format!(
                "input {name}: {kind}"
            )));
        }
    }
    // The body's bytes, moved to the front of the window's allocation (no copy of gigabytes
    // into another).
    let mut body = after;
    body.truncate(body_end);
    body.drain(..lead);
    Ok(body)
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
) -> Result<TensorMapArg, GpuError> {
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
        return Err(GpuError(format!(
            "cuTensorMapEncodeTiled failed: {result:?}"
        )));
    }
    // SAFETY: initialised by the successful call.
    let map = unsafe { map.assume_init() };
    Ok(TensorMapArg(map.opaque))
}

/// What a loaded function needs set once before its first launch: the variant's dynamic shared
/// memory, where it exceeds the 48 KiB default.
pub fn configure_function(variant: &GpuVariant, function: &CudaFunction) -> Result<(), GpuError> {
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
    ) -> Result<Self, GpuError> {
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
    pub fn launch(
        &self,
        stream: &Arc<CudaStream>,
        function: &CudaFunction,
    ) -> Result<(), GpuError> {
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
            .map_err(GpuError::from)
    }
}
