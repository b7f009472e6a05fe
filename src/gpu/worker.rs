//! Each GPU variant runs in a child process (`nvfp4-oracle gpu-worker`), so that an illegal memory
//! access, a trap or a hang becomes a verdict ("crashed", "hung") for the case that caused it, and
//! the campaign goes on. The parent sends one JSON line per case (the case file to read, the file
//! to write the output to) and waits for one JSON line back, with a watchdog.

use super::compile::compile_variant;
use super::device::{device_info, open_device};
use super::launch::{configure_function, hardened_launch};
use super::variants::{gpu_variants, GpuVariant};
use crate::case_file::{CaseReader, CaseWriter};
use crate::certify::{KernelCase, KernelFailure, KernelUnderTest, ShapeSupport};
use crate::error::{Error, Result};
use crate::model::mma::schedule::Schedule;
use crate::problem::ProblemKind;
use half::f16;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Mutex;
use std::time::Duration;

/// Environment variable naming the `nvfp4-oracle` binary that serves `gpu-worker`.
pub const WORKER_ENV: &str = "NVFP4_ORACLE_WORKER";

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    case: PathBuf,
    output: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Ready { device: String },
    StartFailed(String),
    Done(std::result::Result<(), KernelFailure>),
}

/// The worker's side: compile once, then serve cases until stdin closes.
pub fn serve(variant_name: &str) -> Result<()> {
    let variant = gpu_variants()
        .into_iter()
        .find(|v| v.name == variant_name)
        .ok_or_else(|| Error::Usage(format!("no GPU variant '{variant_name}'")))?;
    let stdout = std::io::stdout();
    let reply = |message: &Reply| {
        let mut out = stdout.lock();
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string(message).expect("replies serialize")
        );
        let _ = out.flush();
    };
    let started = (|| -> std::result::Result<_, String> {
        let (ctx, info) = open_device()?;
        if let Some(reason) = info.cannot_run(variant.arch) {
            return Err(reason);
        }
        let ptx = compile_variant(&variant).map_err(|err| err.to_string())?;
        let module = ctx
            .load_module(ptx)
            .map_err(|err| format!("loading the module: {err}"))?;
        let function = module
            .load_function(variant.entry)
            .map_err(|err| format!("entry point {}: {err}", variant.entry))?;
        configure_function(&variant, &function)?;
        Ok((ctx.default_stream(), function, info))
    })();
    let (stream, function, sm_count) = match started {
        Ok((stream, function, info)) => {
            reply(&Reply::Ready {
                device: info.describe(),
            });
            (stream, function, info.sm_count as u32)
        }
        Err(reason) => {
            reply(&Reply::StartFailed(reason));
            return Ok(());
        }
    };
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let request: Request = serde_json::from_str(&line)
            .map_err(|err| Error::Usage(format!("bad worker request: {err}")))?;
        let result = run_request(&stream, &variant, &function, &request, sm_count);
        let fatal = matches!(result, Err(KernelFailure::Crashed(_)));
        reply(&Reply::Done(result));
        if fatal {
            break; // the CUDA context is unusable after a fault
        }
    }
    Ok(())
}

fn run_request(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    variant: &GpuVariant,
    function: &cudarc::driver::CudaFunction,
    request: &Request,
    sm_count: u32,
) -> std::result::Result<(), KernelFailure> {
    let reader = CaseReader::open(&request.case)
        .map_err(|err| KernelFailure::Crashed(format!("worker could not read the case: {err}")))?;
    let inputs = reader
        .dual_gemm_inputs()
        .map_err(|err| KernelFailure::Crashed(err.to_string()))?;
    let fill = reader
        .meta("blocked_padding_fill")
        .ok()
        .and_then(|text| u8::from_str_radix(text.trim_start_matches("0x"), 16).ok())
        .unwrap_or(0);
    let output = hardened_launch(
        stream,
        variant,
        function,
        &KernelCase::new(inputs, fill),
        sm_count,
    )?;
    let bytes: Vec<u8> = output.iter().flat_map(|bits| bits.to_le_bytes()).collect();
    std::fs::write(&request.output, bytes)
        .map_err(|err| KernelFailure::Crashed(format!("worker could not write the output: {err}")))
}

/// A running worker process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<String>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The parent's side: a GPU variant as a [`KernelUnderTest`].
pub struct GpuKernel {
    variant: GpuVariant,
    worker: Mutex<Option<Worker>>,
    scratch: PathBuf,
}

/// Time a worker gets to start (NVRTC compilation included).
const START_TIMEOUT: Duration = Duration::from_secs(180);

impl GpuKernel {
    pub fn new(variant: GpuVariant) -> Self {
        let scratch = std::env::temp_dir().join(format!(
            "nvfp4-oracle-{}-{}",
            std::process::id(),
            variant.name
        ));
        GpuKernel {
            variant,
            worker: Mutex::new(None),
            scratch,
        }
    }

    pub fn variant(&self) -> &GpuVariant {
        &self.variant
    }

    /// A watchdog generous for any correct kernel: 10 s plus 1 s per 10^11 multiply-adds.
    fn case_timeout(case: &KernelCase) -> Duration {
        let s = case.inputs.shape;
        Duration::from_secs(10 + (2 * s.m * s.n * s.k * s.l / 100_000_000_000) as u64)
    }

    fn start(&self) -> std::result::Result<Worker, KernelFailure> {
        // The worker is this program, unless NVFP4_ORACLE_WORKER names another build of it
        // (a test binary is not `nvfp4-oracle` and cannot serve `gpu-worker`).
        let exe = match std::env::var_os(WORKER_ENV) {
            Some(path) => PathBuf::from(path),
            None => std::env::current_exe().map_err(|err| {
                KernelFailure::Crashed(format!("cannot find this program: {err}"))
            })?,
        };
        let mut child = Command::new(exe)
            .args(["gpu-worker", "--variant", self.variant.name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| KernelFailure::Crashed(format!("cannot start the worker: {err}")))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (send, replies) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(|line| line.ok()) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let worker = Worker {
            child,
            stdin,
            replies,
        };
        match Self::receive(&worker, START_TIMEOUT)? {
            Reply::Ready { .. } => Ok(worker),
            Reply::StartFailed(reason) => Err(KernelFailure::Crashed(format!(
                "the worker could not start: {reason}"
            ))),
            Reply::Done(_) => Err(KernelFailure::Crashed(
                "the worker answered out of turn".into(),
            )),
        }
    }

    fn receive(worker: &Worker, timeout: Duration) -> std::result::Result<Reply, KernelFailure> {
        match worker.replies.recv_timeout(timeout) {
            Ok(line) => serde_json::from_str(&line)
                .map_err(|err| KernelFailure::Crashed(format!("unreadable worker reply: {err}"))),
            Err(RecvTimeoutError::Timeout) => Err(KernelFailure::Hung(timeout.as_secs())),
            Err(RecvTimeoutError::Disconnected) => {
                Err(KernelFailure::Crashed("the worker process died".into()))
            }
        }
    }
}

impl KernelUnderTest for GpuKernel {
    fn name(&self) -> &str {
        self.variant.name
    }

    fn description(&self) -> String {
        format!(
            "{} ({}, {})",
            self.variant.description,
            self.variant.sources.last().map_or("", |f| f.path),
            self.variant.arch.target
        )
    }

    fn is_deliberately_broken(&self) -> bool {
        self.variant.test_kernel
    }

    fn source_hash(&self) -> Option<String> {
        Some(self.variant.source_hash())
    }

    fn problem(&self) -> ProblemKind {
        ProblemKind::DualGemm
    }

    fn support(&self) -> ShapeSupport {
        self.variant.support
    }

    fn schedule(&self) -> Option<Schedule> {
        self.variant.schedule
    }

    fn availability(&self) -> std::result::Result<(), String> {
        match device_info() {
            Err(reason) => Err(reason.clone()),
            Ok(info) => info.cannot_run(self.variant.arch).map_or(Ok(()), Err),
        }
    }

    fn run(&self, case: &KernelCase, output: &mut [f16]) -> std::result::Result<(), KernelFailure> {
        let shape = case.inputs.shape;
        if !self.variant.support.supports(shape) {
            return Err(KernelFailure::Refused(format!(
                "{shape}: {} supports {}",
                self.variant.name,
                self.variant.support.describe()
            )));
        }
        let mut slot = self
            .worker
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if slot.is_none() {
            *slot = Some(self.start()?);
        }
        let worker = slot.as_mut().expect("started above");
        std::fs::create_dir_all(&self.scratch)
            .map_err(|err| KernelFailure::Crashed(err.to_string()))?;
        let request = Request {
            case: self.scratch.join("case.safetensors"),
            output: self.scratch.join("output.bin"),
        };
        let mut writer = CaseWriter::default();
        writer
            .dual_gemm_inputs(&case.inputs, case.padding_fill)
            .meta(
                "blocked_padding_fill",
                format!("{:#04x}", case.padding_fill),
            );
        writer
            .write(&request.case)
            .map_err(|err| KernelFailure::Crashed(err.to_string()))?;
        let _ = std::fs::remove_file(&request.output);
        let line = serde_json::to_string(&request).expect("requests serialize");
        if writeln!(worker.stdin, "{line}")
            .and_then(|()| worker.stdin.flush())
            .is_err()
        {
            *slot = None;
            return Err(KernelFailure::Crashed("the worker process died".into()));
        }
        let reply = Self::receive(worker, Self::case_timeout(case));
        let result = match reply {
            Ok(Reply::Done(result)) => result,
            Ok(_) => Err(KernelFailure::Crashed(
                "the worker answered out of turn".into(),
            )),
            Err(failure) => Err(failure),
        };
        match &result {
            Ok(()) => {
                let bytes = std::fs::read(&request.output)
                    .map_err(|err| KernelFailure::Crashed(err.to_string()))?;
                for (value, chunk) in output.iter_mut().zip(bytes.chunks_exact(2)) {
                    *value = f16::from_bits(u16::from_le_bytes([chunk[0], chunk[1]]));
                }
            }
            // A hung or crashed worker is killed (on drop) and restarted for the next case.
            Err(KernelFailure::Hung(_) | KernelFailure::Crashed(_)) => *slot = None,
            Err(_) => {}
        }
        result
    }
}

/// Every GPU variant as a kernel under test.
pub fn gpu_kernels() -> Vec<GpuKernel> {
    gpu_variants().into_iter().map(GpuKernel::new).collect()
}
