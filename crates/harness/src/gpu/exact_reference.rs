//! The model's reference (answer and interval of every output element) computed on the GPU, in
//! the parent's own CUDA context, by a kernel of the harness's own
//! (`kernels/harness/exact_reference_kernel.cu`), compiled at run time for the GPU it finds.
//!
//! Why: a campaign's largest cost was the CPU model (about 1 s for 512 x 4096 x 7168 on 2
//! cores), which is why cases past 2^36 products were judged on sampled rows. The exact answer
//! is integer arithmetic that a GPU does at tens of tera-operations per second.
//!
//! Why it is trusted: it is not the definition. The CPU model stays the definition, and
//! [`crate::certify::reference_engine`] compares this reference with the CPU model on rows of
//! every case it computes; a difference is a harness error. It never runs in a worker: no code
//! of the kernel's shares its process or its context.
//!
//! Where the inputs and the output are on the device already (bench's batches), the reference
//! is computed from device memory and kept there ([`GpuReference::dual_gemm_on_device`]), and
//! the output judged against it there by the model's rule
//! ([`GpuReference::failed_elements_on_device`]): two numbers come back, not three fp16 arrays.

use super::staging::Staging;
use super::GpuError;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use half::f16;
use half::vec::HalfBitsVecExt;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::exact_grid::MAX_I64_BLOCKS;
use nvfp4_model::model::Reference;
use nvfp4_model::problem::{BlockScaledMatrix, ProblemInputs, Shape, SCALE_BLOCK};
use rayon::iter::ParallelExtend;
use std::sync::{Arc, Mutex};

const SOURCE: &str = include_str!("../../kernels/harness/exact_reference_kernel.cu");
const KERNEL: &str = "nvfp4_oracle_exact_reference";
const JUDGE_KERNEL: &str = "nvfp4_oracle_judge_output";
/// The output judge's grid: enough CTAs of 256 threads to keep every SM's loads in flight.
const JUDGE_GRID: (u32, u32) = (1024, 256);
/// The kernel's output tile and threads (TILE_M, TILE_N, THREADS_X, THREADS_Y in the source).
const TILE: u32 = 32;
const THREADS: (u32, u32) = (16, 16);
/// The most blocks a grid's third dimension (the kernel's batches) may have.
const MAX_GRID_Z: usize = 65_535;
/// What `problem` tells the kernel (PROBLEM_GEMM, PROBLEM_DUAL_GEMM).
const PROBLEM_GEMM: i32 = 0;
const PROBLEM_DUAL_GEMM: i32 = 1;
/// Of the GPU's free memory, the share one case may take: the rest is the kernel's, whose
/// worker shares the GPU.
const MEMORY_SHARE: f64 = 0.5;
/// Of the GPU's free memory, the most one case's reference may take while the kernel runs in
/// its worker at the same time. A larger one waits until the kernel's run has ended: a kernel
/// that runs out of memory because the harness held some would get a false verdict (seen on the
/// H100 with certify runs side by side: a worker's allocation failed while other runs' large
/// cases held gigabytes). The kernel's own tensors (inputs and an fp16 output) are fewer bytes
/// than the reference's (three fp16 outputs), so a quarter leaves the kernel at least three
/// times what its case holds.
const BESIDE_A_KERNEL_SHARE: f64 = 0.25;

/// The compile options: no fused multiply-add, so that every f64 operation of the interval
/// arithmetic is rounded as the CPU model's (Rust never fuses).
fn compile_options() -> CompileOptions {
    CompileOptions {
        name: Some("exact_reference_kernel.cu".into()),
        // dp4a needs sm_61; compute_80 PTX runs, JIT-compiled by the driver, on every GPU an
        // NVFP4 kernel targets.
        arch: Some("compute_80"),
        fmad: Some(false),
        ..Default::default()
    }
}

/// Compiles the kernel to PTX (no GPU needed): what the tests without a GPU check, and what
/// [`GpuReference::new`] loads.
pub fn compile() -> Result<Ptx, GpuError> {
    if !super::compile::nvrtc_present() {
        return Err(super::compile::NVRTC_MISSING.into());
    }
    compile_ptx_with_opts(SOURCE, compile_options()).map_err(|err| {
        GpuError(format!(
            "compiling kernels/harness/exact_reference_kernel.cu: {err:?}"
        ))
    })
}

/// The reference kernel loaded in the parent's context.
pub struct GpuReference {
    stream: Arc<CudaStream>,
    function: CudaFunction,
    judge: CudaFunction,
    device: String,
    /// Pinned host memory the operands and the reference's arrays go through
    /// (`super::staging`); None where it cannot be allocated (the driver's pageable copies).
    staging: Option<Mutex<Staging>>,
}

/// Why the GPU reference does not take a case (the CPU model does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Declined {
    /// K past the 64-bit proof (more than [`MAX_I64_BLOCKS`] scale blocks).
    KTooDeep,
    /// The case's tensors and outputs would take more than its share of free GPU memory.
    Memory { needed: usize, free: usize },
}

impl GpuReference {
    /// Opens device 0 in this process and compiles the kernel for it.
    pub fn new() -> Result<Self, GpuError> {
        let (ctx, info) = super::device::open_device()?;
        let ptx = compile()?;
        let module = ctx.load_module(ptx).map_err(|err| err.to_string())?;
        let function = module
            .load_function(KERNEL)
            .map_err(|err| err.to_string())?;
        let judge = module
            .load_function(JUDGE_KERNEL)
            .map_err(|err| err.to_string())?;
        Ok(GpuReference {
            stream: ctx.new_stream().map_err(|err| err.to_string())?,
            function,
            judge,
            device: info.describe(),
            staging: Staging::new(&ctx).ok().map(Mutex::new),
        })
    }

    /// The GPU it runs on, in words.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// Whether a case is one this reference takes, and if not why.
    pub fn declines(&self, inputs: &ProblemInputs) -> Option<Declined> {
        let (k, needed) = demand(inputs);
        if k / SCALE_BLOCK > MAX_I64_BLOCKS {
            return Some(Declined::KTooDeep);
        }
        let free = self.free_memory();
        (needed as f64 > MEMORY_SHARE * free as f64).then_some(Declined::Memory { needed, free })
    }

    /// Whether the reference of `inputs` is small enough to compute while the kernel runs (at
    /// most [`BESIDE_A_KERNEL_SHARE`] of the GPU's free memory); if not, it waits for the kernel.
    pub fn fits_beside_a_kernel(&self, inputs: &ProblemInputs) -> bool {
        let (_, needed) = demand(inputs);
        let free = self.free_memory();
        needed as f64 <= BESIDE_A_KERNEL_SHARE * free as f64
    }

    /// The GPU's free memory in bytes; 0 where the driver does not say (then every case is
    /// declined and none runs beside a kernel).
    fn free_memory(&self) -> usize {
        self.stream
            .context()
            .bind_to_thread()
            .ok()
            .and_then(|()| cudarc::driver::result::mem_get_info().ok())
            .map_or(0, |(free, _)| free)
    }

    /// The reference of `inputs` under `order`: the same bits as the CPU model's
    /// [`nvfp4_model::model::problem_reference`].
    pub fn reference(&self, inputs: &ProblemInputs, order: KOrder) -> Result<Reference, GpuError> {
        match inputs {
            ProblemInputs::DualGemm(d) => {
                self.run(&d.a, [&d.b1, &d.b2], PROBLEM_DUAL_GEMM, d.shape.l, order)
            }
            ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => {
                self.run(&g.a, [&g.b, &g.b], PROBLEM_GEMM, g.shape.l, order)
            }
            ProblemInputs::GroupGemm(g) => {
                let mut out = Reference {
                    expected: vec![],
                    lo: vec![],
                    hi: vec![],
                };
                for group in &g.groups {
                    let part = self.run(
                        &group.a,
                        [&group.b, &group.b],
                        PROBLEM_GEMM,
                        group.shape.l,
                        order,
                    )?;
                    out.expected.extend(part.expected);
                    out.lo.extend(part.lo);
                    out.hi.extend(part.hi);
                }
                Ok(out)
            }
        }
    }

    fn run(
        &self,
        a: &BlockScaledMatrix,
        bs: [&BlockScaledMatrix; 2],
        problem: i32,
        batches: usize,
        order: KOrder,
    ) -> Result<Reference, GpuError> {
        let (m, n, blocks) = (a.rows(), bs[0].rows(), a.k() / SCALE_BLOCK);
        if m * n * batches == 0 {
            return Ok(Reference {
                expected: vec![],
                lo: vec![],
                hi: vec![],
            });
        }
        let stream = &self.stream;
        bind(stream)?;
        let mut staging = self
            .staging
            .as_ref()
            .map(|staging| staging.lock().unwrap_or_else(|p| p.into_inner()));
        let mut upload = |bytes: &[u8]| -> Result<CudaSlice<u8>, GpuError> {
            let Some(staging) = staging.as_mut() else {
                return stream
                    .clone_htod(bytes)
                    .map_err(gpu("uploading an operand"));
            };
            // SAFETY: every byte is written by the upload below before a launch reads it.
            let mut slice = unsafe { stream.alloc::<u8>(bytes.len().max(1)) }
                .map_err(gpu("allocating an operand"))?;
            let (target, record) = slice.device_ptr_mut(stream);
            staging.upload(stream, target, bytes)?;
            drop(record);
            Ok(slice)
        };
        let a_data = upload(a.data())?;
        let a_scales = upload(a.scales())?;
        let b1_data = upload(bs[0].data())?;
        let b1_scales = upload(bs[0].scales())?;
        // A GEMM has one B: the kernel is given it twice, uploaded once.
        let b2 = if problem == PROBLEM_DUAL_GEMM {
            Some((upload(bs[1].data())?, upload(bs[1].scales())?))
        } else {
            None
        };
        let (b2_data, b2_scales) = b2.as_ref().map_or((&b1_data, &b1_scales), |(d, s)| (d, s));
        let operand = |data: &CudaSlice<u8>, scales: &CudaSlice<u8>| DeviceOperand {
            data: data.device_ptr(stream).0,
            scales: scales.device_ptr(stream).0,
        };
        let operands = [
            operand(&a_data, &a_scales),
            operand(&b1_data, &b1_scales),
            operand(b2_data, b2_scales),
        ];
        let dims = ReferenceDims {
            m,
            n,
            blocks,
            batches,
        };
        // SAFETY: the operands are the uploads above, alive until `compute` has synchronized.
        let reference = unsafe { self.compute(operands, dims, problem, order) }?;
        let mut download = |slice: &CudaSlice<u16>| -> Result<Vec<f16>, GpuError> {
            // Into memory written first on every core: a copy into fresh pages faults each in
            // on the way, one thread at a time (the 2^30-output case's three arrays are
            // 6 GB).
            let mut bits = Vec::new();
            bits.par_extend(rayon::iter::repeat_n(0u16, slice.len()));
            match staging.as_mut() {
                Some(staging) => {
                    let (source, _record) = slice.device_ptr(stream);
                    // SAFETY: u16 has no invalid bit patterns and no padding: its bytes.
                    let bytes = unsafe {
                        std::slice::from_raw_parts_mut(
                            bits.as_mut_ptr().cast::<u8>(),
                            2 * bits.len(),
                        )
                    };
                    staging.download(stream, source, bytes)?;
                }
                None => stream
                    .memcpy_dtoh(slice, &mut bits)
                    .map_err(gpu("reading the reference back"))?,
            }
            stream
                .synchronize()
                .map_err(gpu("reading the reference back"))?;
            // The same bits as f16 in place (f16 is a u16 underneath): no second array.
            Ok(bits.reinterpret_into())
        };
        Ok(Reference {
            expected: download(&reference.expected)?,
            lo: download(&reference.lo)?,
            hi: download(&reference.hi)?,
        })
    }

    /// The dual GEMM's reference of operands already in device memory of this reference's
    /// context, kept there for [`GpuReference::failed_elements_on_device`]. The caller checks
    /// [`GpuReference::declines`]-style limits first: K past the 64-bit proof is an error here.
    ///
    /// # Safety
    /// Each operand's `data` and `scales` must point at the packed data and plain scales of a
    /// `shape` operand (a: M rows, b1 and b2: N rows, every batch) in this context's memory,
    /// unchanged until this returns.
    pub unsafe fn dual_gemm_on_device(
        &self,
        shape: Shape,
        operands: [DeviceOperand; 3],
        order: KOrder,
    ) -> Result<DeviceReference, GpuError> {
        let blocks = shape.k / SCALE_BLOCK;
        if blocks > MAX_I64_BLOCKS {
            return Err(GpuError(format!(
                "K = {} is past the GPU reference's depth",
                shape.k
            )));
        }
        bind(&self.stream)?;
        let dims = ReferenceDims {
            m: shape.m,
            n: shape.n,
            blocks,
            batches: shape.l,
        };
        // SAFETY: the caller's promise.
        unsafe { self.compute(operands, dims, PROBLEM_DUAL_GEMM, order) }
    }

    /// How many elements of the output at `output` (fp16, `[L][M][N]` when `lmn`, else the
    /// reference's `[M][N][L]`) the reference does not accept, and the first of them in the
    /// reference's order, judged on the device by the model's rule: two numbers come back.
    ///
    /// # Safety
    /// `output` must point at the reference's element count of fp16 values in this context's
    /// memory.
    pub unsafe fn failed_elements_on_device(
        &self,
        reference: &DeviceReference,
        output: CUdeviceptr,
        lmn: bool,
    ) -> Result<(u64, Option<u64>), GpuError> {
        let stream = &self.stream;
        bind(stream)?;
        let ReferenceDims { m, n, batches, .. } = reference.dims;
        if m * n * batches == 0 {
            return Ok((0, None));
        }
        let mut counts = stream
            .clone_htod(&[0u64, u64::MAX])
            .map_err(gpu("allocating the judge's counts"))?;
        // [failed, first]: two u64 at `counts_ptr` and 8 bytes past it.
        let (counts_ptr, record) = counts.device_ptr_mut(stream);
        let (failed_ptr, first_ptr) = (counts_ptr, counts_ptr + 8);
        let (m32, n32, batches32, lmn32) = (m as i32, n as i32, batches as i32, i32::from(lmn));
        let mut launch = stream.launch_builder(&self.judge);
        launch
            .arg(&output)
            .arg(&reference.lo)
            .arg(&reference.hi)
            .arg(&m32)
            .arg(&n32)
            .arg(&batches32)
            .arg(&lmn32)
            .arg(&failed_ptr)
            .arg(&first_ptr);
        let config = LaunchConfig {
            grid_dim: (JUDGE_GRID.0, 1, 1),
            block_dim: (JUDGE_GRID.1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel's arguments in its order; every index is below m * n * batches,
        // the length of lo, hi and (the caller's promise) the output.
        unsafe { launch.launch(config) }.map_err(gpu("launching the output judge"))?;
        drop(record);
        let back = stream
            .clone_dtoh(&counts)
            .map_err(gpu("reading the judge's counts"))?;
        stream
            .synchronize()
            .map_err(gpu("waiting for the output judge"))?;
        Ok((back[0], (back[0] > 0).then_some(back[1])))
    }

    /// Launches the reference kernel on operands in device memory and waits for it.
    ///
    /// # Safety
    /// The operands must hold `dims`' data and plain scales (b1 twice for a GEMM) in this
    /// context's memory until this returns.
    unsafe fn compute(
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
        let alloc = || -> Result<CudaSlice<u16>, GpuError> {
            stream
                .alloc_zeros::<u16>(elements.max(1))
                .map_err(gpu("allocating the reference's outputs"))
        };
        let (mut expected, mut lo, mut hi) = (alloc()?, alloc()?, alloc()?);
        let mut unbounded = stream
            .alloc_zeros::<i32>(1)
            .map_err(gpu("allocating a flag"))?;
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
        let order_code: i32 = match order {
            KOrder::Contiguous => 0,
            KOrder::Any => 1,
            KOrder::PerProduct => 2,
        };
        let [a, b1, b2] = operands;
        for first_batch in (0..batches).step_by(MAX_GRID_Z) {
            let batches_here = MAX_GRID_Z.min(batches - first_batch);
            let first_batch = first_batch as i32;
            let mut launch = stream.launch_builder(&self.function);
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
                .arg(&problem)
                .arg(&order_code)
                .arg(&mut expected)
                .arg(&mut lo)
                .arg(&mut hi)
                .arg(&mut unbounded);
            // SAFETY: the arguments are the kernel's, in its order and types; the grid covers
            // m x n and every access is bounded by (m, n, blocks, batches), which the operands
            // hold (the caller's promise).
            unsafe { launch.launch(config(batches_here)) }
                .map_err(gpu("launching the reference kernel"))?;
        }
        let flag = stream
            .clone_dtoh(&unbounded)
            .map_err(gpu("reading a flag back"))?;
        stream
            .synchronize()
            .map_err(gpu("waiting for the reference"))?;
        if flag[0] != 0 {
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

/// An operand in device memory: its packed FP4 data and its plain (row-major) scales, the
/// bytes `BlockScaledMatrix::data` and `::scales` hold on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOperand {
    pub data: CUdeviceptr,
    pub scales: CUdeviceptr,
}

/// The dimensions a reference is computed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ReferenceDims {
    m: usize,
    n: usize,
    blocks: usize,
    batches: usize,
}

/// A reference kept in device memory (`[M][N][L]` fp16 bits): what an output on the device is
/// judged against without coming back to the host.
pub struct DeviceReference {
    expected: CudaSlice<u16>,
    lo: CudaSlice<u16>,
    hi: CudaSlice<u16>,
    dims: ReferenceDims,
}

fn bind(stream: &Arc<CudaStream>) -> Result<(), GpuError> {
    stream
        .context()
        .bind_to_thread()
        .map_err(gpu("binding the reference's context"))
}

/// A driver error with what was being done.
fn gpu(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuError {
    move |err| GpuError(format!("{what}: {err}"))
}

/// The deepest K of a case and the device bytes its reference takes (a grouped GEMM's largest
/// group: groups are computed one at a time).
fn demand(inputs: &ProblemInputs) -> (usize, usize) {
    match inputs {
        ProblemInputs::DualGemm(d) => (d.shape.k, bytes_needed(d.shape, 2)),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => (g.shape.k, bytes_needed(g.shape, 1)),
        ProblemInputs::GroupGemm(g) => {
            let deepest = g.groups.iter().map(|g| g.shape.k).max();
            let largest = g.groups.iter().map(|g| bytes_needed(g.shape, 1)).max();
            (deepest.unwrap_or(0), largest.unwrap_or(0))
        }
    }
}

/// Device bytes one case takes: its operands and three fp16 outputs.
fn bytes_needed(shape: nvfp4_model::problem::Shape, operands: usize) -> usize {
    let operand = |rows: usize| rows * shape.l * (shape.k / 2 + shape.k / SCALE_BLOCK);
    operand(shape.m) + operands * operand(shape.n) + 3 * 2 * shape.m * shape.n * shape.l
}
