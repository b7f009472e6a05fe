//! The reference's tensor-core kernels (`kernels/harness/exact_reference_mma_kernel.cu`): the
//! operands decoded once to int8 half units, then each output's block dots and magnitude dots
//! as int8 MMAs and its statistics in f64, one kernel per K order. What the GPU reference runs
//! first on a GPU of compute capability 8.0 or later with fast f64 (A100, H100, H200, B200);
//! the f64 and integer kernels stay as the cross-check, and the integer kernel redoes a launch
//! whose statistics the f64 sums could not prove exact, as for the f64 kernels.
//!
//! A module of its own: its statistics fuse a multiply-add (exact, the kernel's header says
//! why), and the other kernels' module is checked to have none.

use super::exact_reference::{gpu, DeviceOperand, ReferenceDims};
use super::GpuError;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use std::sync::Arc;

/// The integer kernel's file (formats, bounds, element) and the tensor-core kernels.
const SOURCE: &str = concat!(
    include_str!("../../kernels/harness/exact_reference_kernel.cu"),
    "\n",
    include_str!("../../kernels/harness/exact_reference_mma_kernel.cu"),
);
const DECODE_KERNEL: &str = "nvfp4_oracle_mma_decode";
/// One per K order, in the order of `ORDER_CONTIGUOUS`, `ORDER_ANY`, `ORDER_PER_PRODUCT`.
const KERNELS: [&str; 3] = [
    "nvfp4_oracle_exact_reference_mma_contiguous",
    "nvfp4_oracle_exact_reference_mma_any",
    "nvfp4_oracle_exact_reference_mma_per_product",
];
/// The kernel's tile and threads (MMA_TILE_M, MMA_TILE_N, MMA_THREADS in the source): a
/// GEMM's CTA covers TILE_M x TILE_N outputs, a dual GEMM's half the rows.
const TILE_M: usize = 64;
const TILE_N: usize = 32;
const THREADS: u32 = 512;
const DECODE_THREADS: u32 = 256;
/// What `problem` tells the kernel for a dual GEMM (PROBLEM_DUAL_GEMM).
const PROBLEM_DUAL_GEMM: i32 = 1;
/// The oldest compute capability with the s8 m16n8k16 MMA.
const MIN_MAJOR: i32 = 8;

/// The compile options: sm_80 PTX (the MMA), no contraction of the element's arithmetic.
fn compile_options() -> CompileOptions {
    CompileOptions {
        name: Some("exact_reference_mma_kernel.cu".into()),
        arch: Some("compute_80"),
        fmad: Some(false),
        ..Default::default()
    }
}

/// Compiles the tensor-core kernels to PTX (no GPU needed): what the tests without a GPU check.
pub fn compile() -> Result<Ptx, GpuError> {
    if !super::compile::nvrtc_present() {
        return Err(super::compile::NVRTC_MISSING.into());
    }
    compile_ptx_with_opts(SOURCE, compile_options()).map_err(|err| {
        GpuError(format!(
            "compiling kernels/harness/exact_reference_mma_kernel.cu: {err:?}"
        ))
    })
}

/// The decode and the three kernels, loaded.
pub(super) struct TensorCoreKernels {
    decode: CudaFunction,
    functions: [CudaFunction; 3],
}

impl TensorCoreKernels {
    /// Loads them where the GPU has the MMA; None on an older GPU.
    pub(super) fn load(ctx: &Arc<CudaContext>) -> Result<Option<Self>, GpuError> {
        let major = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            .unwrap_or(0);
        if major < MIN_MAJOR {
            return Ok(None);
        }
        let module = ctx.load_module(compile()?).map_err(|err| err.to_string())?;
        let load = |name: &str| module.load_function(name).map_err(|err| err.to_string());
        Ok(Some(TensorCoreKernels {
            decode: load(DECODE_KERNEL)?,
            functions: [load(KERNELS[0])?, load(KERNELS[1])?, load(KERNELS[2])?],
        }))
    }
}

/// Device bytes the decode takes beyond the operands: int8 values (twice the packed bytes) and
/// one NaN flag a row.
pub(super) fn decoded_bytes(rows: usize, k: usize) -> usize {
    rows * k + rows * std::mem::size_of::<i32>()
}

/// An operand decoded: its values, its rows' NaN flags, and its scale bytes (not copied).
struct Decoded {
    values: CudaSlice<u8>,
    nan_rows: CudaSlice<i32>,
    scales: u64,
}

/// The outputs and flags of one reference, and the batches of one launch.
pub(super) struct Outputs<'a> {
    pub(super) expected: &'a mut CudaSlice<u16>,
    pub(super) lo: &'a mut CudaSlice<u16>,
    pub(super) hi: &'a mut CudaSlice<u16>,
    pub(super) unbounded: &'a mut CudaSlice<i32>,
    pub(super) inexact: &'a mut CudaSlice<i32>,
}

impl TensorCoreKernels {
    /// Decodes `rows` (every batch) of an operand.
    ///
    /// # Safety
    /// `operand` must hold `rows` x `blocks` packed blocks and scales in `stream`'s context.
    unsafe fn decode(
        &self,
        stream: &Arc<CudaStream>,
        operand: DeviceOperand,
        rows: usize,
        blocks: usize,
    ) -> Result<Decoded, GpuError> {
        let units = rows * blocks;
        // SAFETY: every byte is written by the decode below before the kernel reads it.
        let mut values = unsafe { stream.alloc::<u8>((units * 16).max(16)) }
            .map_err(gpu("allocating decoded values"))?;
        let mut nan_rows = stream
            .alloc_zeros::<i32>(rows.max(1))
            .map_err(gpu("allocating NaN flags"))?;
        if units > 0 {
            let (units64, blocks32) = (units as u64, blocks as i32);
            let mut launch = stream.launch_builder(&self.decode);
            launch
                .arg(&operand.data)
                .arg(&operand.scales)
                .arg(&units64)
                .arg(&blocks32)
                .arg(&mut values)
                .arg(&mut nan_rows);
            let config = LaunchConfig {
                grid_dim: (units.div_ceil(DECODE_THREADS as usize) as u32, 1, 1),
                block_dim: (DECODE_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the decode reads units x 8 data bytes and units scale bytes, which the
            // operand holds (the caller's promise), and writes the buffers just allocated.
            unsafe { launch.launch(config) }.map_err(gpu("launching the decode"))?;
        }
        Ok(Decoded {
            values,
            nan_rows,
            scales: operand.scales,
        })
    }

    /// Decodes the operands and launches the kernel of `order_code` over every batch, at most
    /// `max_grid_z` a launch; the caller reads the flags.
    ///
    /// # Safety
    /// The operands must hold `dims`' data and plain scales (b1 twice for a GEMM) in `stream`'s
    /// context until the stream has run the launches.
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn launch(
        &self,
        stream: &Arc<CudaStream>,
        operands: [DeviceOperand; 3],
        dims: ReferenceDims,
        problem: i32,
        order_code: i32,
        max_grid_z: usize,
        out: Outputs<'_>,
    ) -> Result<(), GpuError> {
        let ReferenceDims {
            m,
            n,
            blocks,
            batches,
        } = dims;
        let [a, b1, b2] = operands;
        // SAFETY: the caller's promise.
        let a = unsafe { self.decode(stream, a, m * batches, blocks)? };
        let b1_decoded = unsafe { self.decode(stream, b1, n * batches, blocks)? };
        // A GEMM's two B operands are one: decoded once.
        let b2_decoded = if b2 == b1 {
            None
        } else {
            Some(unsafe { self.decode(stream, b2, n * batches, blocks)? })
        };
        let b2 = b2_decoded.as_ref().unwrap_or(&b1_decoded);
        let pointers = |d: &Decoded| {
            (
                d.values.device_ptr(stream).0,
                d.scales,
                d.nan_rows.device_ptr(stream).0,
            )
        };
        let [(av, as_, an), (b1v, b1s, b1n), (b2v, b2s, b2n)] =
            [pointers(&a), pointers(&b1_decoded), pointers(b2)];
        let (m32, n32, blocks32, batches32) = (m as i32, n as i32, blocks as i32, batches as i32);
        let tile_m = if problem == PROBLEM_DUAL_GEMM {
            TILE_M / 2
        } else {
            TILE_M
        };
        for first_batch in (0..batches).step_by(max_grid_z) {
            let batches_here = max_grid_z.min(batches - first_batch) as u32;
            let first_batch = first_batch as i32;
            let mut launch = stream.launch_builder(&self.functions[order_code as usize]);
            launch
                .arg(&av)
                .arg(&as_)
                .arg(&an)
                .arg(&b1v)
                .arg(&b1s)
                .arg(&b1n)
                .arg(&b2v)
                .arg(&b2s)
                .arg(&b2n)
                .arg(&m32)
                .arg(&n32)
                .arg(&blocks32)
                .arg(&batches32)
                .arg(&first_batch)
                .arg(&problem)
                .arg(&mut *out.expected)
                .arg(&mut *out.lo)
                .arg(&mut *out.hi)
                .arg(&mut *out.unbounded)
                .arg(&mut *out.inexact);
            let config = LaunchConfig {
                grid_dim: (
                    n.div_ceil(TILE_N) as u32,
                    m.div_ceil(tile_m) as u32,
                    batches_here,
                ),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the arguments are the kernel's, in its order and types; the grid covers
            // m x n, every access is bounded by (m, n, blocks, batches), which the decoded
            // buffers and the operands' scales hold.
            unsafe { launch.launch(config) }.map_err(gpu("launching the tensor-core reference"))?;
        }
        // The decoded buffers are freed on the stream, after the launches that read them.
        drop((a, b1_decoded, b2_decoded));
        Ok(())
    }
}
