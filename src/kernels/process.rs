//! Kernels that run in a worker process: the NVRTC variants and shared libraries (served by
//! `nvfp4-oracle gpu-worker`) and Python submissions (served by `submission_worker.py`). The
//! process boundary is what makes a crash, a hang or a corrupted CUDA context a verdict for one
//! case instead of the end of the campaign, and what keeps the answer out of the kernel's reach:
//! a worker receives inputs only, never expected outputs or intervals.
//!
//! The protocol, the same for every worker: the parent writes one JSON [`Request`] per line on
//! the worker's stdin; the worker answers each with one JSON [`Reply`] on its stdout, on a line
//! that starts with [`REPLY_MARKER`] (anything else a kernel prints is not a reply and goes to the
//! log). The first reply, before any request, says whether the worker started. A case's inputs
//! travel as raw files (one per tensor, bytes in storage order) in a fresh directory; the output
//! comes back as a raw file of `[M, N, L]` fp16 bits.

use super::interface::{KernelCase, KernelEnvironment, KernelFailure, PrepareError, RunConditions};
use crate::problem::{BlockScaledMatrix, ProblemInputs, ProblemKind};
use half::f16;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

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
    pub fn tensor_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.bin"))
    }

    /// Writes `case` into `dir` (created if needed).
    pub fn write(case: &KernelCase, dir: &Path) -> std::io::Result<CaseFiles> {
        std::fs::create_dir_all(dir)?;
        let s = case.shape();
        let groups = match &case.inputs {
            ProblemInputs::GroupGemm(g) => g
                .groups
                .iter()
                .map(|g| [g.shape.m, g.shape.n, g.shape.k])
                .collect(),
            _ => Vec::new(),
        };
        let files = CaseFiles {
            problem: case.problem(),
            m: s.m,
            n: s.n,
            k: s.k,
            l: s.l,
            groups,
            dir: dir.to_path_buf(),
            poison: crate::compare::diagnosis::POISON.to_bits(),
            padding_fill: case.padding_fill,
        };
        for ((name, operand), blocked) in case.inputs.operands().iter().zip(&case.blocked) {
            std::fs::write(files.tensor_path(name), operand.data())?;
            std::fs::write(files.tensor_path(&format!("sf{name}")), operand.scales())?;
            std::fs::write(files.tensor_path(&format!("sf{name}_permuted")), blocked)?;
        }
        Ok(files)
    }

    /// Reads the case back (the worker's side), checking every size.
    pub fn read(&self) -> crate::Result<KernelCase> {
        use crate::problem::{DualGemmInputs, GemmInputs, GroupGemmInputs, Shape};
        let read = |name: &str| {
            let path = self.tensor_path(name);
            std::fs::read(&path).map_err(|err| crate::Error::file(&path, err))
        };
        let operand = |name: &str, rows: usize, shape: Shape| -> crate::Result<BlockScaledMatrix> {
            BlockScaledMatrix::new(
                name,
                rows,
                shape.k,
                shape.l,
                read(name)?,
                read(&format!("sf{name}"))?,
            )
        };
        let shape = Shape::new(self.m, self.n, self.k, self.l)?;
        let gemm = |suffix: &str, shape: Shape| -> crate::Result<GemmInputs> {
            GemmInputs::new(
                shape,
                operand(&format!("a{suffix}"), shape.m, shape)?,
                operand(&format!("b{suffix}"), shape.n, shape)?,
            )
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
                    return Err(crate::Error::TensorSize {
                        name,
                        expected,
                        actual: bytes.len(),
                    });
                }
                Ok(bytes)
            })
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(KernelCase {
            inputs,
            blocked,
            padding_fill: self.padding_fill,
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
    /// Timing, step 1: load every set of inputs onto the GPU (the first `warmup` for warm-up
    /// calls, then one per timed call: no timed call sees inputs twice). Answered `Done`.
    Prepare { sets: Vec<CaseFiles>, warmup: usize },
    /// Timing, step 2: the warm-up calls. Answered `Done`.
    Warmup,
    /// Timing, step 3: one call per timed set, each after an L2 flush, between two CUDA events,
    /// its output copied aside right after; then a device-wide synchronize. With `null`, the
    /// same loop without the calls (the loop's own cost, for the parent's wall-clock bound).
    /// Answered `Timed`.
    Loop { null: bool },
    /// Timing, step 4: write the copied-aside outputs of the timed calls `indices` to `paths`
    /// (chosen by the parent after the loop). Answered `Done`.
    Outputs {
        indices: Vec<usize>,
        paths: Vec<PathBuf>,
    },
}

/// What the worker measured in one timing loop.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimedCalls {
    /// One per timed call, microseconds between CUDA events around the call.
    pub samples_us: Vec<f64>,
    /// The worker's wall clock around the whole loop.
    pub wall_us: f64,
    /// One per timed call: how long a device-wide synchronize took once the call's end event
    /// had completed (and its output had been copied aside). An honest kernel has nothing left
    /// running then; work on a stream the events do not see shows up here.
    #[serde(default)]
    pub after_end_us: Vec<f64>,
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

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Added to the worker's environment.
    pub env: Vec<(String, String)>,
    /// Time the worker gets to start and answer Ready (compilation included).
    pub start_timeout: Duration,
}

/// A running worker process. Dropping it kills the process.
pub struct Worker {
    child: Child,
    /// None once [`Worker::close`] has closed it.
    stdin: Option<ChildStdin>,
    replies: Receiver<String>,
    log: PathBuf,
    pub environment: KernelEnvironment,
}

impl Worker {
    /// Closes the worker's stdin, which ends its request loop, and waits up to `wait` for it to
    /// exit (a tool it runs under writes its summary then) before it is killed on drop.
    pub fn close(mut self, wait: Duration) {
        self.stdin = None;
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last lines of a worker's stderr log, for messages.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Worker {
    /// Starts the worker and waits for its first reply. Its stderr (and any non-reply line of its
    /// stdout) goes to `log`.
    pub fn start(command: &WorkerCommand, log: &Path) -> Result<Worker, PrepareError> {
        let stderr = std::fs::File::create(log).map_err(|err| {
            PrepareError::Unusable(format!("cannot create {}: {err}", log.display()))
        })?;
        let mut child = Command::new(&command.program)
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|err| {
                PrepareError::Unusable(format!("cannot start {}: {err}", command.program.display()))
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (send, replies) = std::sync::mpsc::channel();
        let prints = log.to_path_buf();
        std::thread::spawn(move || {
            let mut prints = std::fs::OpenOptions::new().append(true).open(prints).ok();
            for line in BufReader::new(stdout).lines().map_while(|line| line.ok()) {
                match line.strip_prefix(REPLY_MARKER) {
                    Some(reply) => {
                        if send.send(reply.to_string()).is_err() {
                            break;
                        }
                    }
                    None => {
                        if let Some(file) = prints.as_mut() {
                            let _ = writeln!(file, "[stdout] {line}");
                        }
                    }
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin: Some(stdin),
            replies,
            log: log.to_path_buf(),
            environment: KernelEnvironment::default(),
        };
        let tail = |worker: &Worker| {
            let tail = log_tail(&worker.log, 8);
            if tail.is_empty() {
                String::new()
            } else {
                format!("\n{tail}")
            }
        };
        match worker.receive(command.start_timeout) {
            Ok(Reply::Ready { environment }) => {
                worker.environment = environment;
                Ok(worker)
            }
            Ok(Reply::StartFailed {
                unavailable: true,
                reason,
            }) => Err(PrepareError::Unavailable(reason)),
            Ok(Reply::StartFailed { reason, .. }) => Err(PrepareError::Unusable(reason)),
            Ok(Reply::Done(_) | Reply::Timed(_)) => Err(PrepareError::Unusable(
                "the worker answered before it was asked".into(),
            )),
            Err(KernelFailure::Hung(seconds)) => Err(PrepareError::Unusable(format!(
                "the worker did not start within {seconds} s (import and compile_kernel() included){}",
                tail(&worker)
            ))),
            Err(failure) => Err(PrepareError::Unusable(format!("{failure}{}", tail(&worker)))),
        }
    }

    /// The next reply, or Hung after `timeout`, or Crashed if the process is gone.
    pub fn receive(&self, timeout: Duration) -> Result<Reply, KernelFailure> {
        match self.replies.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line)
                .map_err(|err| KernelFailure::Crashed(format!("unreadable worker reply: {err}"))),
            Err(RecvTimeoutError::Timeout) => Err(KernelFailure::Hung(timeout.as_secs())),
            Err(RecvTimeoutError::Disconnected) => {
                let tail = log_tail(&self.log, 4);
                Err(KernelFailure::Crashed(if tail.is_empty() {
                    "the worker process died".into()
                } else {
                    format!("the worker process died; its last words: {tail}")
                }))
            }
        }
    }

    pub fn send(&mut self, request: &Request) -> Result<(), KernelFailure> {
        let line = serde_json::to_string(request).expect("requests serialize");
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| KernelFailure::Crashed("the worker was closed".into()))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|_| KernelFailure::Crashed("the worker process died".into()))
    }

    /// Runs one case: writes its files under `scratch`, asks, waits at most `timeout`, reads the
    /// output into `output`. After Hung or Crashed the worker must not be used again.
    pub fn run(
        &mut self,
        case: &KernelCase,
        conditions: RunConditions,
        output: &mut [f16],
        scratch: &Path,
        timeout: Duration,
    ) -> Result<(), KernelFailure> {
        let crashed = |err: std::io::Error| KernelFailure::Crashed(err.to_string());
        let dir = scratch.join("case");
        let _ = std::fs::remove_dir_all(&dir);
        let files = CaseFiles::write(case, &dir).map_err(crashed)?;
        let output_path = scratch.join("output.bin");
        let _ = std::fs::remove_file(&output_path);
        self.send(&Request::Run {
            case: files,
            output: output_path.clone(),
            conditions,
        })?;
        match self.receive(timeout)? {
            Reply::Done(Ok(())) => {}
            Reply::Done(Err(failure)) => return Err(failure),
            _ => {
                return Err(KernelFailure::Crashed(
                    "the worker answered out of turn".into(),
                ))
            }
        }
        let bytes = std::fs::read(&output_path).map_err(crashed)?;
        if bytes.len() != 2 * output.len() {
            return Err(KernelFailure::BadOutput(format!(
                "{} bytes of output for {} fp16 elements",
                bytes.len(),
                output.len()
            )));
        }
        for (value, chunk) in output.iter_mut().zip(bytes.chunks_exact(2)) {
            *value = f16::from_bits(u16::from_le_bytes([chunk[0], chunk[1]]));
        }
        Ok(())
    }
}
