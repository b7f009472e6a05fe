//! The reference kernels' launch: the tensor-core kernel of the case's K order first where
//! there is one, else the f64 kernel where there is one, the integer kernel where there is
//! neither or where the first could not prove every element exact
//! (`exact_reference_f64_kernel.cu` says why that is exact), the batches split over launches of
//! at most [`MAX_GRID_Z`], and the kernels' flags read back.

use super::exact_reference::{gpu, DeviceOperand, DeviceReference, GpuReference, ReferenceDims};
use super::tensor_core_reference::{Outputs, TensorCoreKernels};
use super::GpuError;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::SCALE_BLOCK;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The kernel's output tile and threads (TILE_M, TILE_N, THREADS_X, THREADS_Y in the source).
const TILE: u32 = 32;
const THREADS: (u32, u32) = (16, 16);
/// The most blocks a grid's third dimension (the kernel's batches) may have.
const MAX_GRID_Z: usize = 65_535;

/// One kernel the reference may run.
#[derive(Clone, Copy)]
enum Kernel<'a> {
    TensorCore(&'a TensorCoreKernels),
    F64(&'a CudaFunction),
    Integer,
}

impl GpuReference {
    /// Launches the reference kernel on operands in device memory and waits for it.
    ///
    /// # Safety
    /// The operands must hold `dims`' data and plain scales (b1 twice for a GEMM) in this
    /// context's memory until this returns.
    pub(super) unsafe fn compute(
        &self,
        operands: [DeviceOperand; 3],
        dims: ReferenceDims,
        problem: i32,
        order: KOrder,
    ) -> Result<DeviceReference, GpuError> {
        let ReferenceDims {
            m,
            n,
            blocks,
            batches,
        } = dims;
        let elements = m * n * batches;
        let stream = &self.stream;
        if elements == 0 {
            return DeviceReference::empty(stream, dims);
        }
        let alloc = || -> Result<CudaSlice<u16>, GpuError> {
            stream
                .alloc_zeros::<u16>(elements.max(1))
                .map_err(gpu("allocating the reference's outputs"))
        };
        let (mut expected, mut lo, mut hi) = (alloc()?, alloc()?, alloc()?);
        let flag = || {
            stream
                .alloc_zeros::<i32>(1)
                .map_err(gpu("allocating a flag"))
        };
        let (mut unbounded, mut inexact) = (flag()?, flag()?);
        // The first kernel, then the integer kernel where it could not prove every element
        // exact.
        let first = match (&self.tensor_core, &self.f64_functions) {
            (Some(kernels), _) => Kernel::TensorCore(kernels),
            (None, Some(functions)) => Kernel::F64(&functions[order_code(order) as usize]),
            (None, None) => Kernel::Integer,
        };
        for kernel in [first, Kernel::Integer] {
            let out = Outputs {
                expected: &mut expected,
                lo: &mut lo,
                hi: &mut hi,
                unbounded: &mut unbounded,
                inexact: &mut inexact,
            };
            match kernel {
                // SAFETY: the caller's promise.
                Kernel::TensorCore(kernels) => unsafe {
                    kernels.launch(
                        stream,
                        operands,
                        dims,
                        problem,
                        order_code(order),
                        MAX_GRID_Z,
                        out,
                    )?
                },
                // SAFETY: the caller's promise.
                Kernel::F64(function) => unsafe {
                    self.launch_classic(Some(function), operands, dims, problem, order, out)?
                },
                // SAFETY: the caller's promise.
                Kernel::Integer => unsafe {
                    self.launch_classic(None, operands, dims, problem, order, out)?
                },
            }
            let not_exact = !matches!(kernel, Kernel::Integer) && read_flag(stream, &inexact)? != 0;
            if !not_exact {
                break;
            }
            self.integer_reruns.fetch_add(1, Ordering::Relaxed);
            // The first run's flag is not to be trusted where its statistics were not exact.
            stream
                .memset_zeros(&mut unbounded)
                .map_err(gpu("clearing a flag"))?;
        }
        let unbounded = read_flag(stream, &unbounded)?;
        stream
            .synchronize()
            .map_err(gpu("waiting for the reference"))?;
        if unbounded != 0 {
            return Err(GpuError(format!(
                "K = {} is above the depth at which the error bound holds",
                blocks * SCALE_BLOCK
            )));
        }
        Ok(DeviceReference {
            expected,
            lo,
            hi,
            dims,
        })
    }
}

impl GpuReference {
    /// Launches the f64 kernel `f64_function`, or the integer kernel where it is None, over
    /// every batch.
    ///
    /// # Safety
    /// As [`GpuReference::compute`]'s.
    unsafe fn launch_classic(
        &self,
        f64_function: Option<&CudaFunction>,
        operands: [DeviceOperand; 3],
        dims: ReferenceDims,
        problem: i32,
        order: KOrder,
        out: Outputs<'_>,
    ) -> Result<(), GpuError> {
        let ReferenceDims {
            m,
            n,
            blocks,
            batches,
        } = dims;
        // The batches in the grid's third dimension, at most MAX_GRID_Z per launch.
        let config = |batches_here: usize| LaunchConfig {
            grid_dim: (
                n.div_ceil(TILE as usize) as u32,
                m.div_ceil(TILE as usize) as u32,
                batches_here as u32,
            ),
            block_dim: (THREADS.0, THREADS.1, 1),
            shared_mem_bytes: 0,
        };
        let (m32, n32, blocks32, batches32) = (m as i32, n as i32, blocks as i32, batches as i32);
        let order_code = order_code(order);
        let [a, b1, b2] = operands;
        for first_batch in (0..batches).step_by(MAX_GRID_Z) {
            let batches_here = MAX_GRID_Z.min(batches - first_batch);
            let first_batch = first_batch as i32;
            let mut launch = self
                .stream
                .launch_builder(f64_function.unwrap_or(&self.function));
            launch
                .arg(&a.data)
                .arg(&a.scales)
                .arg(&b1.data)
                .arg(&b1.scales)
                .arg(&b2.data)
                .arg(&b2.scales)
                .arg(&m32)
                .arg(&n32)
                .arg(&blocks32)
                .arg(&batches32)
                .arg(&first_batch)
                .arg(&problem);
            if f64_function.is_none() {
                launch.arg(&order_code);
            }
            launch
                .arg(&mut *out.expected)
                .arg(&mut *out.lo)
                .arg(&mut *out.hi)
                .arg(&mut *out.unbounded);
            if f64_function.is_some() {
                launch.arg(&mut *out.inexact);
            }
            // SAFETY: the arguments are the kernel's, in its order and types; the grid covers
            // m x n and every access is bounded by (m, n, blocks, batches), which the operands
            // hold (the caller's promise).
            unsafe { launch.launch(config(batches_here)) }
                .map_err(gpu("launching the reference kernel"))?;
        }
        Ok(())
    }
}

/// What the kernels call the K orders (ORDER_CONTIGUOUS, ORDER_ANY, ORDER_PER_PRODUCT).
fn order_code(order: KOrder) -> i32 {
    match order {
        KOrder::Contiguous => 0,
        KOrder::Any => 1,
        KOrder::PerProduct => 2,
    }
}

/// A one-int flag the kernels set, read back once they have run.
fn read_flag(stream: &Arc<CudaStream>, flag: &CudaSlice<i32>) -> Result<i32, GpuError> {
    let value = stream
        .clone_dtoh(flag)
        .map_err(gpu("reading a flag back"))?;
    Ok(value[0])
}
