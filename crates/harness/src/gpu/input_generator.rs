//! A dual-GEMM case's nine input tensors made on the GPU, straight into device buffers the
//! caller owns, byte for byte what the CPU gives: `abi_inputs()` of
//! `KernelCase::new(generate_dual_gemm(shape, dist, seed), dist.blocked_padding_fill())` (a,
//! b1, b2, the three blocked scale tensors with their padding, the three plain scale tensors).
//! The kernels are the harness's own (`kernels/harness/input_generator_kernel.cu`), compiled at
//! run time by NVRTC and kept in the compile cache.
//!
//! Why: the CPU makes a case's inputs on the parent's cores (about 0.3 s for 2048 x 4096 x 7168
//! on 2 cores, `nvfp4-oracle generate`), which the parent then uploads; on the GPU every run of
//! K-blocks of a row is one thread that seeks its operand's ChaCha8 stream to its words (the
//! CPU's tasks do the same on its cores), and the bytes are already where a launch reads them.
//!
//! What the host does: the CPU generator's own [`dual_gemm_draws`] gives where each row starts
//! in its stream. A row's length is decided by words at its own start (a wide row, an
//! adversarial row's tail), so the starts are one sequential chain, up to three peeks a row
//! (none for gpumode): walked on a GPU it would be one thread; on the host it is the code that
//! defines it (a peek a short way ahead reads up to its word). The kernels check the chain (each row ends where the
//! next starts); a break is a harness error, never other bytes.
//!
//! Not on the GPU: the `stagnation` distribution (built whole by `problem::stagnation`, not drawn
//! row by row); [`InputGenerator::generate_dual_gemm`] answers "not on the GPU: ..." for it. The
//! grouped and plain GEMMs are not made here either.

use super::GpuError;
use crate::kernels::interface::ABI_INPUT_KEYS;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtrMut, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};
use nvfp4_model::formats::{E4m3, E4m3Overflow, E4M3_ONE_CODE};
use nvfp4_model::layout::{BlockedScaleLayout, ScaleDims};
use nvfp4_model::problem::generate::{dual_gemm_draws, KBlockMode, DUAL_GEMM_STREAMS};
use nvfp4_model::problem::{Distribution, Shape, SCALE_BLOCK};
use std::sync::Arc;

const SOURCE: &str = include_str!("../../kernels/harness/input_generator_kernel.cu");
const SOURCE_NAME: &str = "input_generator_kernel.cu";
const ROWS_KERNEL: &str = "nvfp4_oracle_generate_rows";
const TAILS_KERNEL: &str = "nvfp4_oracle_generate_row_tails";
/// Integer code only: compute_80 PTX runs, JIT-compiled by the driver, on every GPU an NVFP4
/// kernel targets.
pub const ARCH: &str = "compute_80";
/// K-blocks one thread makes: 64 data words and 8 scale words, a few ChaCha blocks, so that the
/// block a thread seeks into but only partly uses is a small share of its work.
const SEGMENT_BLOCKS: u32 = 8;
const THREADS: u32 = 256;
/// The most thread blocks a launch has; the kernels stride over whatever is left.
const MAX_GRID: u64 = 1 << 16;
/// A row's tail fields in the kernels (TAIL_FIELDS).
const TAIL_FIELDS: usize = 3;
/// Thresholds of e4m3 codes 1 ..= 1.0 (UNIT_SCALE_THRESHOLDS in the source).
const UNIT_SCALE_THRESHOLDS: usize = E4M3_ONE_CODE as usize;
/// A uniform draw's bits (`Source::unit_f32`): the word's top 24.
const UNIT_BITS: u32 = 24;

/// The kernels' numbering of distributions (DISTRIBUTION_* in the source); `None`: not drawn
/// row by row.
fn distribution_code(dist: Distribution) -> Option<i32> {
    match dist {
        Distribution::Gpumode => Some(0),
        Distribution::Full => Some(1),
        Distribution::Adversarial => Some(2),
        Distribution::AdversarialNan => Some(3),
        Distribution::Stagnation => None,
    }
}

/// The kernels' numbering of K-block modes (K_BLOCK_* in the source).
fn mode_code(mode: KBlockMode) -> u8 {
    match mode {
        KBlockMode::Random => 0,
        KBlockMode::Zero => 1,
        KBlockMode::CancelFirst => 2,
        KBlockMode::CancelSecond => 3,
        // Only a row's tail makes a maximal block; no plan holds one.
        KBlockMode::Max => unreachable!("a K-block plan has no maximal block"),
    }
}

/// Which operand's draw: A's rows have a tail that B's lack, and A's zero blocks draw no bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperandRole {
    A,
    B,
}

/// Where each K-block of an adversarial row starts, in words from the row's start, and how many
/// words the K-blocks take (where the tail starts): the CPU's `adversarial_block` draws.
pub fn k_block_words(modes: &[KBlockMode], role: OperandRole) -> (Vec<u32>, u32) {
    let block_bytes = (SCALE_BLOCK / 2) as u32;
    let mut starts = Vec::with_capacity(modes.len());
    let mut at = 0u32;
    for &mode in modes {
        starts.push(at);
        at += match (mode, role) {
            // Eight bytes, then a scale.
            (KBlockMode::Random, _) | (KBlockMode::Zero, OperandRole::B) => block_bytes + 1,
            // A's zero block: its scale alone.
            (KBlockMode::Zero, OperandRole::A) => 1,
            // Eight bytes; its scale is fixed.
            (KBlockMode::CancelFirst | KBlockMode::Max, _) => block_bytes,
            // A copy of the block before it.
            (KBlockMode::CancelSecond, _) => 0,
        };
    }
    (starts, at)
}

/// For each e4m3 code c in 1 ..= 1.0, the least 24-bit uniform draw u that the gpumode scale
/// `E4m3::from_f32_rne(u / 2^24)` rounds to c or above: the rounding found with the model's own
/// conversion, which is monotone, so a draw's code is the number of thresholds at or below it.
pub fn unit_scale_thresholds() -> Vec<u32> {
    let code = |u: u32| {
        let unit = u as f32 * (1.0 / (1u32 << UNIT_BITS) as f32);
        E4m3::from_f32_rne(unit, E4m3Overflow::Saturate).to_bits()
    };
    (1..=UNIT_SCALE_THRESHOLDS as u8)
        .map(|c| {
            // The least u in [0, 2^24) with code(u) >= c; 2^24 where none is.
            let (mut low, mut high) = (0u32, 1u32 << UNIT_BITS);
            while low < high {
                let mid = low + (high - low) / 2;
                if code(mid) >= c {
                    high = mid;
                } else {
                    low = mid + 1;
                }
            }
            low
        })
        .collect()
}

/// The byte lengths of the nine tensors, in `abi_inputs()` order.
pub fn abi_input_lens(shape: Shape) -> [usize; 9] {
    let dims = |rows: usize| ScaleDims {
        rows,
        cols: shape.scale_cols(),
        batches: shape.l,
    };
    let data = |rows: usize| rows * shape.l * shape.k / 2;
    let plain = |rows: usize| rows * shape.l * shape.scale_cols();
    let blocked = |rows: usize| BlockedScaleLayout(dims(rows)).len();
    let (m, n) = (shape.m, shape.n);
    [
        data(m),
        data(n),
        data(n),
        blocked(m),
        blocked(n),
        blocked(n),
        plain(m),
        plain(n),
        plain(n),
    ]
}

/// A device buffer the generator writes: `len` bytes at `ptr`, in the generator's stream's
/// context (a `FencedBuffer`'s body, a `CudaSlice<u8>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceBytes {
    pub ptr: CUdeviceptr,
    pub len: usize,
}

impl DeviceBytes {
    /// The whole of `slice`, which must outlive the generation that writes it. (cudarc's
    /// stream-ordering record of the write is made here, before the generation; the generation
    /// has ended when [`InputGenerator::generate_dual_gemm`] returns.)
    pub fn of_slice(slice: &mut CudaSlice<u8>, stream: &Arc<CudaStream>) -> Self {
        let len = slice.len();
        let (ptr, _record) = slice.device_ptr_mut(stream);
        DeviceBytes { ptr, len }
    }
}

/// Compiles the kernels to PTX for `arch` (no GPU needed), through the compile cache.
pub fn compile(arch: &'static str) -> Result<Ptx, GpuError> {
    let cached = super::compile::cache_dir().join(format!(
        "input-generator-{}-{arch}.ptx",
        crate::kernels::interface::source_hash_of(SOURCE)
    ));
    if let Ok(text) = std::fs::read_to_string(&cached) {
        return Ok(Ptx::from_src(text));
    }
    let ptx = compile_uncached(arch)?;
    if std::fs::create_dir_all(cached.parent().expect("cache file has a parent")).is_ok() {
        // A failed cache write only costs a compilation next time.
        let _ = std::fs::write(&cached, ptx.to_src());
    }
    Ok(ptx)
}

/// Compiles the kernels to PTX for `arch` with NVRTC, past the cache: what a test that must
/// really compile calls.
pub fn compile_uncached(arch: &'static str) -> Result<Ptx, GpuError> {
    if !super::compile::nvrtc_present() {
        return Err(super::compile::NVRTC_MISSING.into());
    }
    let options = CompileOptions {
        name: Some(SOURCE_NAME.into()),
        arch: Some(arch),
        ..Default::default()
    };
    compile_ptx_with_opts(SOURCE, options).map_err(|err| {
        GpuError(format!(
            "compiling kernels/harness/{SOURCE_NAME} for {arch}: {err:?}"
        ))
    })
}

/// The generator's kernels, loaded in one context.
pub struct InputGenerator {
    rows: CudaFunction,
    tails: CudaFunction,
    /// [`unit_scale_thresholds`], found once.
    unit_scale_thresholds: Vec<u32>,
}

impl InputGenerator {
    /// Compiles (or takes from the cache) and loads the kernels in `ctx`.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, GpuError> {
        let module = ctx
            .load_module(compile(ARCH)?)
            .map_err(gpu("loading the input generator"))?;
        let function = |name| {
            module
                .load_function(name)
                .map_err(|err| GpuError(format!("{name}: {err}")))
        };
        Ok(InputGenerator {
            rows: function(ROWS_KERNEL)?,
            tails: function(TAILS_KERNEL)?,
            unit_scale_thresholds: unit_scale_thresholds(),
        })
    }

    /// Writes the nine tensors of `generate_dual_gemm(shape, dist, seed)`'s kernel case into
    /// `outputs` ([`abi_input_lens`] bytes each, in `abi_inputs()` order), on `stream` (of the
    /// context the generator was loaded in), and waits for them. `stagnation` is refused: "not
    /// on the GPU: ...".
    ///
    /// # Safety
    /// Each output must be `len` writable bytes of device memory in `stream`'s context, none
    /// overlapping another, and not in use by other work until this returns.
    pub unsafe fn generate_dual_gemm(
        &self,
        stream: &Arc<CudaStream>,
        shape: Shape,
        dist: Distribution,
        seed: u64,
        outputs: [DeviceBytes; 9],
    ) -> Result<(), GpuError> {
        let operands = operand_draws(shape, dist, seed)?;
        for ((output, expected), name) in outputs
            .iter()
            .zip(abi_input_lens(shape))
            .zip(ABI_INPUT_KEYS)
        {
            if output.len != expected {
                return Err(GpuError(format!(
                    "{name}: a buffer of {} bytes for a tensor of {expected}",
                    output.len
                )));
            }
        }
        stream
            .context()
            .bind_to_thread()
            .map_err(gpu("binding the generator's context"))?;
        let thresholds = stream
            .clone_htod(&self.unit_scale_thresholds)
            .map_err(gpu("uploading"))?;
        let mut mismatch = stream
            .alloc_zeros::<i32>(1)
            .map_err(gpu("allocating a flag"))?;
        for (operand, draw) in operands.iter().enumerate() {
            let blocked = outputs[3 + operand];
            if blocked.len > 0 {
                // The padding's fill; the kernel writes the scales over the rest.
                super::check("cuMemsetD8Async", unsafe {
                    sys::cuMemsetD8Async(
                        blocked.ptr,
                        draw.padding_fill,
                        blocked.len,
                        stream.cu_stream(),
                    )
                })?;
            }
            let written = [outputs[operand], outputs[6 + operand], blocked];
            self.launch(stream, draw, &thresholds, &mut mismatch, written)?;
        }
        let flag = stream
            .clone_dtoh(&mismatch)
            .map_err(gpu("reading the generator's flag"))?;
        stream
            .synchronize()
            .map_err(gpu("waiting for the generator"))?;
        if flag[0] != 0 {
            return Err(GpuError(format!(
                "harness error: the GPU generator's rows of {} ({}, seed {seed}) ended elsewhere than the CPU's row starts",
                dist.name(),
                shape
            )));
        }
        Ok(())
    }

    /// The tails kernel, then the rows kernel, for one operand; `written`: its data, plain and
    /// blocked scales.
    fn launch(
        &self,
        stream: &Arc<CudaStream>,
        draw: &OperandDraw,
        thresholds: &CudaSlice<u32>,
        mismatch: &mut CudaSlice<i32>,
        written: [DeviceBytes; 3],
    ) -> Result<(), GpuError> {
        let all_rows = u64::from(draw.rows) * u64::from(draw.batches);
        let segments = u64::from(draw.blocks.div_ceil(draw.segment_blocks));
        if all_rows == 0 || draw.blocks == 0 {
            return Ok(());
        }
        let config = |items: u64| LaunchConfig {
            grid_dim: (
                items.div_ceil(u64::from(THREADS)).min(MAX_GRID) as u32,
                1,
                1,
            ),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let starts = stream
            .clone_htod(&draw.starts)
            .map_err(gpu("uploading row starts"))?;
        // A kernel argument must point somewhere even where the plan is empty.
        let modes = stream
            .clone_htod(&[draw.modes.as_slice(), &[0]].concat())
            .map_err(gpu("uploading the K-block plan"))?;
        let block_words = stream
            .clone_htod(&[draw.block_words.as_slice(), &[0]].concat())
            .map_err(gpu("uploading the K-block plan"))?;
        let tails = stream
            .alloc_zeros::<i32>(all_rows as usize * TAIL_FIELDS)
            .map_err(gpu("allocating row tails"))?;
        let mut launch = stream.launch_builder(&self.tails);
        launch
            .arg(&draw.seed)
            .arg(&draw.stream_id)
            .arg(&draw.distribution)
            .arg(&draw.role)
            .arg(&draw.row_bytes)
            .arg(&draw.blocks)
            .arg(&all_rows)
            .arg(&starts)
            .arg(&draw.plan_words)
            .arg(&tails)
            .arg(mismatch);
        // SAFETY: the arguments are the kernel's, in its order and types; it reads all_rows + 1
        // starts and writes TAIL_FIELDS ints a row, as allocated.
        unsafe { launch.launch(config(all_rows)) }.map_err(gpu("launching the row tails"))?;
        let [data, plain, blocked] = written;
        let mut launch = stream.launch_builder(&self.rows);
        launch
            .arg(&draw.seed)
            .arg(&draw.stream_id)
            .arg(&draw.distribution)
            .arg(&draw.role)
            .arg(&draw.rows)
            .arg(&draw.batches)
            .arg(&draw.blocks)
            .arg(&draw.segment_blocks)
            .arg(&starts)
            .arg(thresholds)
            .arg(&modes)
            .arg(&block_words)
            .arg(&draw.plan_words)
            .arg(&tails)
            .arg(&data.ptr)
            .arg(&plain.ptr)
            .arg(&blocked.ptr);
        // SAFETY: as above; the outputs' lengths were checked against the shape, and the caller
        // of `generate_dual_gemm` vouches for their memory.
        unsafe { launch.launch(config(all_rows * segments)) }.map_err(gpu("launching the rows"))?;
        Ok(())
    }
}

/// What the kernels are given for one operand, all made on the host (no GPU): the arguments of
/// `nvfp4_oracle_generate_row_tails` and `nvfp4_oracle_generate_rows`, in the source's numbering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperandDraw {
    pub seed: u64,
    /// The operand's ChaCha stream.
    pub stream_id: u64,
    /// DISTRIBUTION_* of the source.
    pub distribution: i32,
    /// ROLE_A or ROLE_B of the source.
    pub role: i32,
    /// Rows per batch (M or N), and L.
    pub rows: u32,
    pub batches: u32,
    /// K / 16, and K / 2.
    pub blocks: u32,
    pub row_bytes: u32,
    /// K-blocks a thread makes.
    pub segment_blocks: u32,
    /// Where a row's tail starts, in words from the row's start (adversarial).
    pub plan_words: u32,
    /// The blocked scales' padding byte.
    pub padding_fill: u8,
    /// The word of the stream at which each row starts, then where the last ends.
    pub starts: Vec<u64>,
    /// The adversarial plan's K-block modes (K_BLOCK_*), and where each block's words start in
    /// a row of this role.
    pub modes: Vec<u8>,
    pub block_words: Vec<u32>,
}

/// The three operands' draws of `generate_dual_gemm(shape, dist, seed)` (a, b1, b2), or "not on
/// the GPU: ..." for a distribution or a shape the kernels do not make.
pub fn operand_draws(
    shape: Shape,
    dist: Distribution,
    seed: u64,
) -> Result<[OperandDraw; 3], GpuError> {
    let not_on_gpu = || {
        GpuError(format!(
            "not on the GPU: the {} distribution is built whole by the CPU (problem::stagnation), not drawn row by row",
            dist.name()
        ))
    };
    let distribution = distribution_code(dist).ok_or_else(not_on_gpu)?;
    let draws = dual_gemm_draws(shape, dist, seed).ok_or_else(not_on_gpu)?;
    let modes: Vec<u8> = draws.k_blocks.iter().map(|&mode| mode_code(mode)).collect();
    let operand = |operand: usize| -> Result<OperandDraw, GpuError> {
        let (role, rows) = if operand == 0 {
            (OperandRole::A, shape.m)
        } else {
            (OperandRole::B, shape.n)
        };
        let (block_words, plan_words) = k_block_words(&draws.k_blocks, role);
        let starts = draws.row_starts[operand]
            .iter()
            .map(|&word| u64::try_from(word))
            .collect::<Result<Vec<u64>, _>>()
            .map_err(|_| GpuError("not on the GPU: a row starts past word 2^64".into()))?;
        Ok(OperandDraw {
            seed,
            stream_id: DUAL_GEMM_STREAMS[operand],
            distribution,
            role: if role == OperandRole::A { 0 } else { 1 },
            rows: to_u32("rows", rows)?,
            batches: to_u32("L", shape.l)?,
            blocks: to_u32("K / 16", shape.scale_cols())?,
            row_bytes: to_u32("K / 2", shape.k / 2)?,
            segment_blocks: SEGMENT_BLOCKS,
            plan_words,
            padding_fill: dist.blocked_padding_fill(),
            starts,
            modes: modes.clone(),
            block_words,
        })
    };
    Ok([operand(0)?, operand(1)?, operand(2)?])
}

fn to_u32(what: &str, value: usize) -> Result<u32, GpuError> {
    u32::try_from(value)
        .map_err(|_| GpuError(format!("not on the GPU: {what} = {value} is past 2^32")))
}

/// A driver error with what was being done.
fn gpu(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuError {
    move |err| GpuError(format!("{what}: {err}"))
}
