//! The worker protocol, the same for every worker (the parent's side is [`super::parent`]; the
//! serving sides are [`super::serve`] and `submission_worker.py`): the parent writes one JSON
//! [`Request`] per line on the worker's stdin; the worker answers each with one JSON [`Reply`] on
//! its stdout, on a line that starts with [`REPLY_MARKER`] (anything else a kernel prints is not
//! a reply and goes to the log). The first reply, before any request, says whether the worker
//! started. A case's inputs travel as raw files (one per tensor, bytes in storage order) in a
//! fresh directory ([`CaseFiles`]); the output comes back as a raw file of `[M, N, L]` fp16 bits.

use crate::kernels::{KernelCase, KernelEnvironment, KernelFailure, RunConditions};
use nvfp4_model::problem::{BlockScaledMatrix, ProblemInputs, ProblemKind};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Every reply line starts with this; other lines on a worker's stdout are the kernel's prints.
pub const REPLY_MARKER: &str = "@@nvfp4-oracle-reply@@ ";

/// Where one case's inputs are, and what they are. For each operand `X` of the problem's data
/// tuple (`a`, `b1`, `b2` for the dual GEMM; `a`, `b` for the GEMM and GEMV; `a0`, `b0`, `a1`, ...
/// for the grouped GEMM) the directory holds `X.bin` (packed FP4, `[L][rows][K/2]`), `sfX.bin`
/// (plain scales, `[L][rows][K/16]`) and `sfX_permuted.bin` (the blocked layout).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseFiles {
    pub problem: ProblemKind,
    /// The case's shape ([`KernelCase::shape`]).
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub l: usize,
    /// The grouped GEMM's groups, (M, N, K) each with L = 1; empty for the other problems.
    pub groups: Vec<[usize; 3]>,
    pub dir: PathBuf,
    /// The bits the output buffer is filled with before the call.
    pub poison: u16,
    /// The byte the blocked scales' padding holds; a GEMV's b is padded to 128 rows with it.
    pub padding_fill: u8,
}

impl CaseFiles {
    /// The case, read by a worker: a file it cannot read ends the request as a crash.
    pub fn read_in_worker(&self) -> std::result::Result<KernelCase, KernelFailure> {
        self.read()
            .map_err(|err| KernelFailure::Crashed(format!("worker could not read the case: {err}")))
    }

    pub fn tensor_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.bin"))
    }

    /// Writes `case` into `dir` (created if needed).
    pub fn write(case: &KernelCase, dir: &Path) -> std::io::Result<CaseFiles> {
        std::fs::create_dir_all(dir)?;
        let files = CaseFiles::describe(case, dir);
        for ((name, operand), blocked) in case.inputs.operands().iter().zip(&case.blocked) {
            std::fs::write(files.tensor_path(name), operand.data())?;
            std::fs::write(files.tensor_path(&format!("sf{name}")), operand.scales())?;
            std::fs::write(files.tensor_path(&format!("sf{name}_permuted")), blocked)?;
        }
        Ok(files)
    }

    /// What `case` is, with `dir` named but nothing written (a call on shared inputs).
    pub fn describe(case: &KernelCase, dir: &Path) -> CaseFiles {
        let s = case.shape();
        let groups = match &case.inputs {
            ProblemInputs::GroupGemm(g) => g
                .groups
                .iter()
                .map(|g| [g.shape.m, g.shape.n, g.shape.k])
                .collect(),
            _ => Vec::new(),
        };
        CaseFiles {
            problem: case.problem(),
            m: s.m,
            n: s.n,
            k: s.k,
            l: s.l,
            groups,
            dir: dir.to_path_buf(),
            poison: nvfp4_model::problem::POISON.to_bits(),
            padding_fill: case.padding_fill,
        }
    }

    /// Reads the case back (the worker's side), checking every size.
    pub fn read(&self) -> crate::Result<KernelCase> {
        use nvfp4_model::problem::{DualGemmInputs, GemmInputs, GroupGemmInputs, Shape};
        let read = |name: &str| {
            let path = self.tensor_path(name);
            std::fs::read(&path).map_err(|err| crate::Error::file(&path, err))
        };
        let operand = |name: &str, rows: usize, shape: Shape| -> crate::Result<BlockScaledMatrix> {
            Ok(BlockScaledMatrix::new(
                name,
                rows,
                shape.k,
                shape.l,
                read(name)?,
                read(&format!("sf{name}"))?,
            )?)
        };
        let shape = Shape::new(self.m, self.n, self.k, self.l)?;
        let gemm = |suffix: &str, shape: Shape| -> crate::Result<GemmInputs> {
            Ok(GemmInputs::new(
                shape,
                operand(&format!("a{suffix}"), shape.m, shape)?,
                operand(&format!("b{suffix}"), shape.n, shape)?,
            )?)
        };
        let inputs = match self.problem {
            ProblemKind::DualGemm => ProblemInputs::DualGemm(DualGemmInputs::new(
                shape,
                operand("a", shape.m, shape)?,
                operand("b1", shape.n, shape)?,
                operand("b2", shape.n, shape)?,
            )?),
            ProblemKind::Gemm => ProblemInputs::Gemm(gemm("", shape)?),
            ProblemKind::Gemv => ProblemInputs::Gemv(gemm("", shape)?),
            ProblemKind::GroupGemm => ProblemInputs::GroupGemm(GroupGemmInputs::new(
                self.groups
                    .iter()
                    .enumerate()
                    .map(|(g, &[m, n, k])| gemm(&g.to_string(), Shape::new(m, n, k, 1)?))
                    .collect::<crate::Result<Vec<_>>>()?,
            )?),
        };
        let blocked = inputs
            .operands()
            .iter()
            .map(|(name, operand)| {
                let name = format!("sf{name}_permuted");
                let bytes = read(&name)?;
                let expected = operand.blocked_scales(0).len();
                if bytes.len() != expected {
                    return Err(nvfp4_model::Error::TensorSize {
                        name,
                        expected,
                        actual: bytes.len(),
                    }
                    .into());
                }
                Ok(bytes)
            })
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(KernelCase {
            inputs,
            blocked,
            padding_fill: self.padding_fill,
            ready: Default::default(),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// Run the kernel once on fresh buffers, write the output's `[M, N, L]` fp16 bits to
    /// `output`.
    Run {
        case: CaseFiles,
        output: PathBuf,
        #[serde(default)]
        conditions: RunConditions,
    },
    /// Run the kernel on several cases, one after another, each as [`Request::Run`] runs one
    /// (default conditions): inputs from its files, output to its file. Answered once,
    /// [`Reply::Batch`], one result per case in order; a worker that cannot go on after a case
    /// (its CUDA context is lost) answers the results so far, that case's the last. Sent only
    /// to a worker whose Ready said [`crate::kernels::KernelEnvironment::batches`].
    RunBatch { runs: Vec<BatchedRun> },
    /// Run the kernel once on device memory the parent shares (a large case of a campaign:
    /// `shared_run.rs`): the parent has sent one file descriptor per entry of `shared` on the
    /// input socket, in order, with the inputs in place and the output `c` poisoned; `set`
    /// gives the shape alone (its directory is empty). The worker maps them, calls the kernel,
    /// waits for its stream and unmaps them; the output stays in `c`, where the parent reads
    /// and checks it. Sent only to a worker whose Ready said
    /// [`crate::kernels::KernelEnvironment::shared_inputs`]. Answered `Done`.
    RunShared {
        set: CaseFiles,
        shared: Vec<SharedTensor>,
    },
    /// Timing, step 1: load the warm-up sets onto the GPU (`warmup` of them; the timed calls'
    /// inputs come one by one with their calls). With `shared` (only to a worker whose Ready
    /// said [`crate::kernels::KernelEnvironment::shared_inputs`]), the parent has also sent one
    /// file descriptor per entry on the input socket ([`INPUT_SOCKET_ENV`]), in this order:
    /// device memory the worker maps once and builds every shared call's tensors on. Answered
    /// `Done`.
    Prepare {
        sets: Vec<CaseFiles>,
        warmup: usize,
        #[serde(default)]
        shared: Vec<SharedTensor>,
        /// Wait for the following requests without sleeping (the parent does the same; see
        /// `Worker::spin_while_waiting`).
        #[serde(default)]
        spin: bool,
    },
    /// Timing, step 2: the warm-up calls. Answered `Done`.
    Warmup,
    /// Timing, before each timed call: one untimed call on the next warm-up set, so that an
    /// honest call does not pay for cold caches and clocks, then a device-wide synchronize.
    /// Its own request, so that a call without the kernel runs no code of the kernel's.
    /// Answered `Done`.
    Warm,
    /// Timing, step 3, once per call: load `set` onto the GPU, synchronize, call the kernel
    /// between two CUDA events, put its output where the parent reads it, synchronize the
    /// device (how long that took is the call's after-end time). With `null`, the same without
    /// the kernel (sent to a worker that never loaded one: the request's own cost, for the
    /// parent's clock). Answered `Timed` with one sample. With `shared`, nothing is loaded:
    /// the parent has just copied the call's inputs (and the poisoned output) into the shared
    /// memory and flushed L2, `set` gives only the case's shape (its directory is empty), and
    /// the output goes into the shared output buffer, which the parent copies out right after
    /// the reply. Without it, the inputs are files, L2 is flushed by the worker, and the output
    /// is written to `output`, which the parent reads right after the reply.
    Call {
        set: CaseFiles,
        null: bool,
        #[serde(default)]
        shared: bool,
        #[serde(default)]
        output: Option<PathBuf>,
    },
    /// A timed batch, step 1 (after the calls above): map the batch's device memory. The
    /// parent has sent one file descriptor per entry of `shared` on the input socket, in order;
    /// each tensor holds `slots` copies of one call's tensor, slot i's `len` bytes at
    /// `start + i * slot_stride(len)` ([`slot_stride`]), the last ending at the unmapped
    /// granule. `set` gives the shape alone. The worker builds every slot's data tuple once, so
    /// that a batch runs no code of the worker's between calls but the loop. Answered `Done`.
    PrepareBatch {
        set: CaseFiles,
        slots: usize,
        shared: Vec<SharedTensor>,
    },
    /// A timed batch, step 2: the parent has written fresh inputs into every slot, poisoned
    /// every output and flushed L2. Call the kernel on slot 0, 1, ... in order on the caller's
    /// stream (each output put in its slot's `c` when the kernel returned another tensor),
    /// with no synchronize between calls, then synchronize the device and reply once: `Timed`
    /// with one sample (CUDA events around the whole batch: the kernel's word, never a
    /// verdict), the after-end time and the threads alive. With `null`, the same loop without
    /// the kernel (a baseline worker: the request's own cost). The parent's clock around this
    /// request is the batch's time.
    ///
    /// With `lone`, a lone-call batch: each slot's call alone, as a cold call is timed one at
    /// a time. Per slot: write the worker's own flush buffer (4x the L2) on the caller's
    /// stream and synchronize the device; CUDA events around the call (the kernel's word,
    /// one sample per call); one copy of the output's size (the kernel's output into the slot's
    /// `c`, or, where the kernel wrote `c` itself or with `null`, `c` into a scratch buffer);
    /// synchronize the device. Answered `Timed` with one sample per slot. The parent's clock
    /// around it, less the baseline's same request, over the calls, is the cold call's time as
    /// the parent sees it (`crate::bench::batch_clock::lone_finding`).
    TimedBatch {
        null: bool,
        #[serde(default)]
        lone: bool,
    },
}

/// One case of a [`Request::RunBatch`]: where its inputs are and where its output goes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchedRun {
    pub case: CaseFiles,
    pub output: PathBuf,
}

/// The distance between two slots of one tensor in a batch's shared memory: its length rounded
/// up to 256 bytes, the alignment every tensor of a data tuple starts at.
pub fn slot_stride(len: usize) -> usize {
    len.div_ceil(256).max(1) * 256
}

/// The environment variable that gives a worker the descriptor number of its input socket: a
/// Unix socket on which the parent sends the file descriptors of shared device memory.
pub const INPUT_SOCKET_ENV: &str = "NVFP4_ORACLE_INPUT_SOCKET";

/// One tensor of the device memory the parent shares with a worker for timed calls: a mapping
/// of `mapped` bytes (placed with an unmapped granule before and after it), the tensor's
/// `len` bytes at offset `start` (ending within the alignment slack before the unmapped
/// granule), canary bytes elsewhere. `key` names the tensor as the worker's case builder does
/// (`a`, `sfa`, `sfa_permuted`, ..., `c`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedTensor {
    pub key: String,
    pub len: usize,
    pub mapped: usize,
    pub start: usize,
}

/// What the worker measured in one timing loop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimedCalls {
    /// One per timed call, microseconds between CUDA events around the call.
    pub samples_us: Vec<f64>,
    /// The worker's wall clock: the Python worker's from the request's arrival to its reply
    /// (the Rust worker's from just before the call's start event), summed over the calls.
    pub wall_us: f64,
    /// One per timed call: how long a device-wide synchronize took once the call's end event
    /// had completed (and its output had been copied aside). An honest kernel has nothing left
    /// running then; work on a stream the events do not see shows up here.
    #[serde(default)]
    pub after_end_us: Vec<f64>,
    /// One per timed call of a Python worker: how many Python threads besides its own were
    /// alive at the call (a kernel's thread could work on the inputs before the call began).
    #[serde(default)]
    pub other_threads: Vec<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    Ready {
        environment: KernelEnvironment,
    },
    /// The worker could not start. `unavailable`: because of this machine (no GPU, another
    /// architecture, a package only the kernel's platform has), not because of the kernel.
    StartFailed {
        unavailable: bool,
        reason: String,
    },
    Done(Result<(), KernelFailure>),
    /// A [`Request::RunBatch`]'s results, in the order of its cases.
    Batch(Vec<Result<(), KernelFailure>>),
    Timed(Result<TimedCalls, KernelFailure>),
}

impl Reply {
    /// One protocol line (the worker's side).
    pub fn line(&self) -> String {
        format!(
            "{REPLY_MARKER}{}",
            serde_json::to_string(self).expect("replies serialize")
        )
    }
}
