//! The model's reference (answer and interval of every output element) computed on the GPU, in
//! the parent's own CUDA context, by a kernel of the harness's own
//! (`kernels/harness/exact_reference_kernel.cu`), compiled at run time for the GPU it finds.
//!
//! Three kernels compute it: the tensor-core kernels (`exact_reference_mma_kernel.cu`, block
//! dots as int8 MMAs, statistics in f64; `super::tensor_core_reference`), tried first on a GPU
//! of compute capability 8.0 or later whose f64 is fast; the f64 kernels
//! (`exact_reference_f64_kernel.cu`, one per K order), tried first where only f64 is fast; and
//! the 64-bit integer kernel, which redoes a launch whose f64 statistics could not be proven
//! exact and runs alone where f64 is slow. The others stay as each other's cross-check
//! ([`GpuReference::f64_only`], [`GpuReference::integer_only`]).
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
//! A reference can stay on the device ([`GpuReference::reference_on_device`], or
//! [`GpuReference::dual_gemm_on_device`] from operands already there, as bench's batches have
//! them) and an output be judged against it there (`super::device_reference`): three numbers
//! come back, not three fp16 arrays of the output's size.

use super::staging::Staging;
use super::tensor_core_reference::{decoded_bytes, TensorCoreKernels};
use super::GpuError;
use cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::exact_grid::MAX_I64_BLOCKS;
use nvfp4_model::model::Reference;
use nvfp4_model::problem::{BlockScaledMatrix, ProblemInputs, Shape, SCALE_BLOCK};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The integer kernel with its formats, bounds and element; the f64 kernels; the judge and the
/// gather: one module, the later files using the first's definitions.
const SOURCE: &str = concat!(
    include_str!("../../kernels/harness/exact_reference_kernel.cu"),
    "\n",
    include_str!("../../kernels/harness/exact_reference_f64_kernel.cu"),
    "\n",
    include_str!("../../kernels/harness/reference_judge_kernel.cu"),
);
const KERNEL: &str = "nvfp4_oracle_exact_reference";
/// The f64 kernels, one per K order, in the order of `ORDER_CONTIGUOUS`, `ORDER_ANY`,
/// `ORDER_PER_PRODUCT`.
const F64_KERNELS: [&str; 3] = [
    "nvfp4_oracle_exact_reference_f64_contiguous",
    "nvfp4_oracle_exact_reference_f64_any",
    "nvfp4_oracle_exact_reference_f64_per_product",
];
/// The largest ratio of f32 to f64 throughput (the driver's
/// `SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO`) at which the f64 kernels run: 2 on the H100, H200
/// and B200; a GPU with slow f64 (32 or 64) runs the integer kernel, which is faster there.
const FAST_F64_RATIO: i32 = 2;
/// Whether the tensor-core kernels compute a case first where the GPU has them (sm_80 on, fast
/// f64); otherwise only a reference made [`GpuReference::with_tensor_cores`], or made with
/// [`TENSOR_CORES_ENV`] set to 1, runs them. On since their equality with the CPU model was seen
/// on an H100 (tests/oracle/gpu_reference.rs, results/tensor-core-reference/README.md): 1.7 to
/// 2.8 times the f64 kernel's speed at 8192 x 8192 x 16384, the same bits.
const TENSOR_CORES_FIRST: bool = true;
/// Set to 1: every GPU reference of the process tries the tensor-core kernels first (a
/// campaign's, say), where the GPU has them.
pub const TENSOR_CORES_ENV: &str = "NVFP4_ORACLE_TENSOR_CORE_REFERENCE";
const JUDGE_KERNEL: &str = "nvfp4_oracle_judge_output";
const GATHER_KERNEL: &str = "nvfp4_oracle_gather_reference";
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
    /// The reference kernels' stream.
    pub(super) stream: Arc<CudaStream>,
    /// The judge's, the gather's and the download's: a stream of the highest priority, so that
    /// judging one case's output does not queue behind the next case's reference kernel, which
    /// fills every SM (`super::device_reference`).
    pub(super) judge_stream: Arc<CudaStream>,
    pub(super) function: CudaFunction,
    /// The f64 kernels (`exact_reference_f64_kernel.cu`), tried first where they are here; None
    /// on a GPU with slow f64, or when asked for the integer kernel only.
    pub(super) f64_functions: Option<[CudaFunction; 3]>,
    /// The tensor-core kernels, tried before the f64 kernels where they are here; None on a
    /// GPU older than sm_80 or with slow f64, or when asked for another arithmetic.
    pub(super) tensor_core: Option<TensorCoreKernels>,
    /// How many launches the f64 kernel could not prove exact, which the integer kernel redid.
    pub(super) integer_reruns: AtomicUsize,
    /// The last reference's computation from operands on the device (decode, kernels, flags),
    /// in seconds as f64 bits: what the timing tests compare between kernels.
    compute_seconds: AtomicU64,
    /// The output judge and the gather of sampled elements (`super::device_reference`).
    pub(super) judge: CudaFunction,
    pub(super) gather: CudaFunction,
    device: String,
    /// Pinned host memory the operands and the reference's arrays go through
    /// (`super::staging`); None where it cannot be allocated (the driver's pageable copies).
    pub(super) staging: Option<Mutex<Staging>>,
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
        let gather = module
            .load_function(GATHER_KERNEL)
            .map_err(|err| err.to_string())?;
        let f64_ratio = ctx
            .attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO,
            )
            .unwrap_or(i32::MAX);
        let f64_functions = if f64_ratio <= FAST_F64_RATIO {
            let load = |name: &str| module.load_function(name).map_err(|err| err.to_string());
            Some([
                load(F64_KERNELS[0])?,
                load(F64_KERNELS[1])?,
                load(F64_KERNELS[2])?,
            ])
        } else {
            None
        };
        // Its statistics are f64 too: where f64 is slow the integer kernel alone is faster.
        let asked = std::env::var(TENSOR_CORES_ENV).is_ok_and(|value| value == "1");
        let tensor_core = if f64_functions.is_some() && (TENSOR_CORES_FIRST || asked) {
            TensorCoreKernels::load(&ctx)?
        } else {
            None
        };
        Ok(GpuReference {
            stream: ctx.new_stream().map_err(|err| err.to_string())?,
            judge_stream: super::device::urgent_stream(&ctx)?,
            function,
            f64_functions,
            tensor_core,
            integer_reruns: AtomicUsize::new(0),
            compute_seconds: AtomicU64::new(0),
            judge,
            gather,
            device: info.describe(),
            staging: Staging::new(&ctx).ok().map(Mutex::new),
        })
    }

    /// The GPU it runs on, in words.
    pub fn device(&self) -> &str {
        &self.device
    }

    /// This reference with the integer kernel only: what a GPU with slow f64 runs, and what the
    /// tests hold the other kernels against.
    pub fn integer_only(mut self) -> Self {
        self.f64_functions = None;
        self.tensor_core = None;
        self
    }

    /// This reference with the tensor-core kernels first, where the GPU has them (compute
    /// capability 8.0 on) and its f64 is fast; unchanged elsewhere.
    pub fn with_tensor_cores(mut self) -> Result<Self, GpuError> {
        if self.tensor_core.is_none() && self.f64_functions.is_some() {
            self.tensor_core = TensorCoreKernels::load(self.stream.context())?;
        }
        Ok(self)
    }

    /// This reference without the tensor-core kernels: the f64 kernels first (where f64 is
    /// fast), the cross-check of the tensor-core kernels and what they are timed against.
    pub fn f64_only(mut self) -> Self {
        self.tensor_core = None;
        self
    }

    /// Which kernel computes a case first: "tensor-core", "f64" (for both, the integer kernel
    /// where the f64 statistics are not proven exact) or "integer".
    pub fn arithmetic(&self) -> &'static str {
        if self.tensor_core.is_some() {
            "tensor-core"
        } else if self.f64_functions.is_some() {
            "f64"
        } else {
            "integer"
        }
    }

    /// How many launches the f64 kernel could not prove exact (the integer kernel redid them)
    /// since this reference was made.
    pub fn integer_reruns(&self) -> usize {
        self.integer_reruns.load(Ordering::Relaxed)
    }

    /// The seconds the last reference computed from uploaded operands took on the device: the
    /// decode and the kernels, the outputs' allocation and the flags read back, not the uploads.
    pub fn last_compute_seconds(&self) -> f64 {
        f64::from_bits(self.compute_seconds.load(Ordering::Relaxed))
    }

    /// Whether a case is one this reference takes, and if not why.
    pub fn declines(&self, inputs: &ProblemInputs) -> Option<Declined> {
        let (k, needed) = demand(inputs, self.tensor_core.is_some());
        if k / SCALE_BLOCK > MAX_I64_BLOCKS {
            return Some(Declined::KTooDeep);
        }
        let free = self.free_memory();
        (needed as f64 > MEMORY_SHARE * free as f64).then_some(Declined::Memory { needed, free })
    }

    /// Whether the reference of `inputs` is small enough to compute while the kernel runs (at
    /// most [`BESIDE_A_KERNEL_SHARE`] of the GPU's free memory); if not, it waits for the kernel.
    pub fn fits_beside_a_kernel(&self, inputs: &ProblemInputs) -> bool {
        let (_, needed) = demand(inputs, self.tensor_core.is_some());
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
            ProblemInputs::GroupGemm(g) => {
                let mut out = Reference {
                    expected: vec![],
                    lo: vec![],
                    hi: vec![],
                };
                for group in &g.groups {
                    let part = self.operands_reference(
                        &group.a,
                        [&group.b, &group.b],
                        PROBLEM_GEMM,
                        group.shape.l,
                        order,
                    )?;
                    let part = self.download(&part)?;
                    out.expected.extend(part.expected);
                    out.lo.extend(part.lo);
                    out.hi.extend(part.hi);
                }
                Ok(out)
            }
            _ => {
                let on_device = self.reference_on_device(inputs, order)?;
                self.download(&on_device.expect("every problem but a grouped GEMM"))
            }
        }
    }

    /// The reference of `inputs` under `order`, kept in device memory (`[M][N][L]`, as
    /// [`GpuReference::reference`] brings it back); None for a grouped GEMM, whose groups are
    /// computed one at a time.
    pub fn reference_on_device(
        &self,
        inputs: &ProblemInputs,
        order: KOrder,
    ) -> Result<Option<DeviceReference>, GpuError> {
        match inputs {
            ProblemInputs::DualGemm(d) => self
                .operands_reference(&d.a, [&d.b1, &d.b2], PROBLEM_DUAL_GEMM, d.shape.l, order)
                .map(Some),
            ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => self
                .operands_reference(&g.a, [&g.b, &g.b], PROBLEM_GEMM, g.shape.l, order)
                .map(Some),
            ProblemInputs::GroupGemm(_) => Ok(None),
        }
    }

    /// Uploads the operands and computes their reference, kept on the device.
    fn operands_reference(
        &self,
        a: &BlockScaledMatrix,
        bs: [&BlockScaledMatrix; 2],
        problem: i32,
        batches: usize,
        order: KOrder,
    ) -> Result<DeviceReference, GpuError> {
        let (m, n, blocks) = (a.rows(), bs[0].rows(), a.k() / SCALE_BLOCK);
        let dims = ReferenceDims {
            m,
            n,
            blocks,
            batches,
        };
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
        drop(staging);
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
        // The uploads done, so that the time below is the computation's alone.
        stream
            .synchronize()
            .map_err(gpu("waiting for the operands' upload"))?;
        let started = std::time::Instant::now();
        // SAFETY: the operands are the uploads above, alive until `compute` has synchronized.
        let reference = unsafe { self.compute(operands, dims, problem, order) }?;
        let seconds = started.elapsed().as_secs_f64();
        self.compute_seconds
            .store(seconds.to_bits(), Ordering::Relaxed);
        Ok(reference)
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
}

/// The dimensions a reference is computed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReferenceDims {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) blocks: usize,
    pub(super) batches: usize,
}

/// A reference kept in device memory (`[M][N][L]` fp16 bits): what an output is judged against
/// without the reference coming back to the host (`super::device_reference`).
pub struct DeviceReference {
    pub(super) expected: CudaSlice<u16>,
    pub(super) lo: CudaSlice<u16>,
    pub(super) hi: CudaSlice<u16>,
    pub(super) dims: ReferenceDims,
}

impl DeviceReference {
    /// A reference of no elements (one element allocated per array, never read).
    pub(super) fn empty(stream: &Arc<CudaStream>, dims: ReferenceDims) -> Result<Self, GpuError> {
        let alloc = || {
            stream
                .alloc_zeros::<u16>(1)
                .map_err(gpu("allocating an empty reference"))
        };
        Ok(DeviceReference {
            expected: alloc()?,
            lo: alloc()?,
            hi: alloc()?,
            dims,
        })
    }

    /// Its elements: M x N x L.
    pub fn len(&self) -> usize {
        self.dims.m * self.dims.n * self.dims.batches
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An operand in device memory: its packed FP4 data and its plain (row-major) scales, the
/// bytes `BlockScaledMatrix::data` and `::scales` hold on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceOperand {
    pub data: CUdeviceptr,
    pub scales: CUdeviceptr,
}

pub(super) fn bind(stream: &Arc<CudaStream>) -> Result<(), GpuError> {
    stream
        .context()
        .bind_to_thread()
        .map_err(gpu("binding the reference's context"))
}

/// A driver error with what was being done.
pub(super) fn gpu(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuError {
    move |err| GpuError(format!("{what}: {err}"))
}

/// The deepest K of a case and the device bytes its reference takes (a grouped GEMM's largest
/// group: groups are computed one at a time), with the tensor-core kernels' decoded operands
/// where they run.
fn demand(inputs: &ProblemInputs, decoded: bool) -> (usize, usize) {
    let needed = |shape, operands| bytes_needed(shape, operands, decoded);
    match inputs {
        ProblemInputs::DualGemm(d) => (d.shape.k, needed(d.shape, 2)),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => (g.shape.k, needed(g.shape, 1)),
        ProblemInputs::GroupGemm(g) => {
            let deepest = g.groups.iter().map(|g| g.shape.k).max();
            let largest = g.groups.iter().map(|g| needed(g.shape, 1)).max();
            (deepest.unwrap_or(0), largest.unwrap_or(0))
        }
    }
}

/// Device bytes one case takes: its operands (and their decoded copies) and three fp16 outputs.
fn bytes_needed(shape: Shape, operands: usize, decoded: bool) -> usize {
    let operand = |rows: usize| {
        let rows = rows * shape.l;
        let packed = rows * (shape.k / 2 + shape.k / SCALE_BLOCK);
        packed
            + if decoded {
                decoded_bytes(rows, shape.k)
            } else {
                0
            }
    };
    operand(shape.m) + operands * operand(shape.n) + 3 * 2 * shape.m * shape.n * shape.l
}
