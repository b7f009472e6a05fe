//! External kernels, the ones users bring: a GPU MODE `submission.py` (run by
//! `submission_worker.py` under the user's python3 with torch) or a shared library behind the C
//! ABI of `include/nvfp4_oracle.h` (run by `nvfp4-oracle gpu-worker --library`). Both are
//! described by a [`Manifest`] and run in worker processes like the built-in GPU variants.

use super::command::worker_program;
use super::command::WorkerCommand;
use super::isolated::{IsolatedKernel, KernelInfo};
use super::nvrtc::CASE_TIMEOUT;
use super::serve::WorkerTarget;
use crate::error::{Error, Result};
use crate::gpu::device::device_info;
use crate::kernels::manifest::{KernelCode, Manifest};
use crate::sandbox::SandboxPaths;
use crate::secrets::secrets_dir;
use nvfp4_model::problem::ProblemKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use super::command::PYTHON_ENV;

/// The submission the timing baseline's worker runs: no code of the user's.
const TIMING_BASELINE_SUBMISSION: &str = include_str!("timing_baseline.py");

/// Time a submission's worker gets to start by default: imports, `load_inline` or Triton
/// builds, `compile_kernel()` (`--start-timeout`, [`set_start_timeout`]).
pub const SUBMISSION_START_TIMEOUT: Duration = Duration::from_secs(600);

/// The start timeout of the submissions made from now on, in seconds (0: the default).
static START_TIMEOUT_SECONDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets the time a submission's worker gets to start (the command line's `--start-timeout`).
pub fn set_start_timeout(timeout: Duration) {
    START_TIMEOUT_SECONDS.store(
        timeout.as_secs().max(1),
        std::sync::atomic::Ordering::Relaxed,
    );
}

fn submission_start_timeout() -> Duration {
    match START_TIMEOUT_SECONDS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => SUBMISSION_START_TIMEOUT,
        seconds => Duration::from_secs(seconds),
    }
}
/// The base of a submission case's watchdog: the first calls of a Triton or torch.compile kernel
/// compile it, and a new shape may compile again.
const SUBMISSION_CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// Writes the worker script and the timing baseline's submission where the worker can run them,
/// once per process, into a folder of their own in this process's private temporary folder
/// (made fresh, mode 0700: no file planted in advance can stand in for ours): the sandbox binds
/// that folder in, read-only. Returns the folder.
fn worker_files() -> Result<&'static Path> {
    static WRITTEN: std::sync::OnceLock<std::result::Result<PathBuf, String>> =
        std::sync::OnceLock::new();
    WRITTEN
        .get_or_init(|| {
            let dir = crate::private_tmp::dir()
                .map_err(|err| err.to_string())?
                .join("worker");
            std::fs::create_dir(&dir)
                .map_err(|err| format!("{}: cannot create: {err}", dir.display()))?;
            for (name, text) in [
                ("submission_worker.py", super::SUBMISSION_WORKER),
                ("timing_baseline.py", TIMING_BASELINE_SUBMISSION),
            ] {
                let path = dir.join(name);
                // create_new: never through a file or link already there.
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .and_then(|mut file| std::io::Write::write_all(&mut file, text.as_bytes()))
                    .map_err(|err| format!("{}: cannot write: {err}", path.display()))?;
            }
            Ok(dir)
        })
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(|why| Error::Model(nvfp4_model::Error::InvalidInput(why.clone())))
}

fn worker_script() -> Result<PathBuf> {
    Ok(worker_files()?.join("submission_worker.py"))
}

/// The timing baseline's submission, beside the worker script.
fn timing_baseline_submission() -> Result<PathBuf> {
    Ok(worker_files()?.join("timing_baseline.py"))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The worker's PYTHONPATH for a manifest's `python_path`: its folders first, then whatever
/// PYTHONPATH this process has. Nothing where the manifest names none.
fn python_path_env(folders: &[PathBuf]) -> Vec<(String, String)> {
    if folders.is_empty() {
        return Vec::new();
    }
    let inherited = std::env::var_os("PYTHONPATH").map(PathBuf::from);
    let all = folders.iter().cloned().chain(inherited);
    let joined = std::env::join_paths(all)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    vec![("PYTHONPATH".to_string(), joined)]
}

/// The kernel a manifest describes.
pub fn external_kernel(manifest: &Manifest) -> Result<IsolatedKernel> {
    // Untrusted code runs in the sandbox, which must let it read its own folder (a submission
    // imports its neighbours; a library may load others) and the worker script.
    let parent_dir = |path: &Path| absolute(path).parent().map(Path::to_path_buf);
    // Its folder is shown to the worker whole; /tmp or the root shown whole would cover the
    // private /tmp the sandbox gives the worker (and show it every other user's files).
    let (KernelCode::Submission(code) | KernelCode::Library { path: code, .. }) = &manifest.code;
    if let Some(dir) = parent_dir(code).filter(|dir| super::command::covers_private_mounts(dir)) {
        return Err(Error::Usage(format!(
            "{}: the kernel's folder, {}, is shown whole to the sandboxed worker, and {} \
             cannot be (the worker gets a private one): move the kernel into a folder of its \
             own (mkdir {}/mine && mv {} {}/mine/)",
            code.display(),
            dir.display(),
            dir.display(),
            dir.display(),
            code.display(),
            dir.display(),
        )));
    }
    let sandbox = |readable: Vec<PathBuf>| {
        Some(SandboxPaths {
            readable,
            declared: manifest.readable.clone(),
            hidden: vec![secrets_dir()],
            ..SandboxPaths::default()
        })
    };
    let (command, case_timeout) = match &manifest.code {
        KernelCode::Submission(path) => (
            WorkerCommand {
                sandbox: sandbox(
                    [parent_dir(path), parent_dir(&worker_script()?)]
                        .into_iter()
                        .flatten()
                        .chain(manifest.python_path.iter().cloned())
                        .collect(),
                ),
                program: super::command::python_program(),
                args: [
                    "-u".to_string(),
                    worker_script()?.display().to_string(),
                    "--submission".to_string(),
                    absolute(path).display().to_string(),
                    "--problem".to_string(),
                    manifest.problem.name().to_string(),
                ]
                .into_iter()
                .chain(
                    manifest
                        .arch
                        .map(|arch| ["--arch".to_string(), arch.to_string()])
                        .into_iter()
                        .flatten(),
                )
                .collect(),
                env: python_path_env(&manifest.python_path),
                start_timeout: submission_start_timeout(),
                clean_env: false,
            },
            SUBMISSION_CASE_TIMEOUT,
        ),
        KernelCode::Library { path, symbol } => (
            WorkerCommand {
                sandbox: sandbox(parent_dir(path).into_iter().collect()),
                program: worker_program(),
                args: WorkerTarget::Library {
                    path: absolute(path),
                    symbol: symbol.clone(),
                }
                .worker_args(manifest.arch.map(|arch| arch.to_string()).as_deref()),
                env: Vec::new(),
                start_timeout: Duration::from_secs(60),
                clean_env: false,
            },
            CASE_TIMEOUT,
        ),
    };
    // The worker that serves a timing's requests without the kernel: the same program in the
    // same sandbox, with no code of the user's.
    let baseline_command = match &manifest.code {
        KernelCode::Submission(_) => {
            let submission = timing_baseline_submission()?;
            WorkerCommand {
                sandbox: sandbox(parent_dir(&submission).into_iter().collect()),
                args: [
                    "-u".to_string(),
                    worker_script()?.display().to_string(),
                    "--submission".to_string(),
                    submission.display().to_string(),
                    "--problem".to_string(),
                    manifest.problem.name().to_string(),
                ]
                .into(),
                ..command.clone()
            }
        }
        KernelCode::Library { .. } => WorkerCommand {
            sandbox: sandbox(Vec::new()),
            args: WorkerTarget::Baseline.worker_args(None),
            ..command.clone()
        },
    };
    // Every kernel whose data tuple lives on the device gets its timed calls in shared memory:
    // Python submissions of those problems, and C-ABI libraries (a dual GEMM). The grouped
    // GEMM's plain scales are host tensors: it gets files.
    let shared = match manifest.code {
        KernelCode::Submission(_) => manifest.problem != ProblemKind::GroupGemm,
        KernelCode::Library { .. } => manifest.problem == ProblemKind::DualGemm,
    };
    let info = KernelInfo {
        name: manifest.name.clone(),
        description: manifest.description.clone(),
        problem: manifest.problem,
        support: manifest.support,
        schedule: manifest.schedule,
        source_hash: manifest.hash.clone(),
        deliberately_broken: manifest.deliberately_broken,
        nondeterministic: manifest.nondeterministic,
        accumulation: manifest.accumulation,
        source_path: Some(
            absolute(manifest.path.as_deref().unwrap_or(match &manifest.code {
                KernelCode::Submission(path) | KernelCode::Library { path, .. } => path,
            }))
            .display()
            .to_string(),
        ),
    };
    let baseline = IsolatedKernel::new(
        KernelInfo {
            name: "timing-baseline".into(),
            description: "serves a timing's requests without the kernel".into(),
            ..info.clone()
        },
        baseline_command,
        std::sync::Arc::new(|| Ok(())),
        case_timeout,
    );
    let arch = manifest.arch;
    // A submission's code can be read where it cannot run: preflight compiles it for its
    // architecture (the B200's unless the manifest names another) on any machine.
    let preflight = match &manifest.code {
        KernelCode::Submission(path) => Some(format!(
            "nvfp4-oracle preflight --submission {} --arch {}",
            absolute(path).display(),
            arch.map_or("sm_100a".to_string(), |arch| arch.to_string())
        )),
        KernelCode::Library { .. } => None,
    };
    let kernel = IsolatedKernel::new(
        info,
        command,
        std::sync::Arc::new(move || match device_info() {
            Err(reason) => Err(reason.clone().into()),
            Ok(info) => arch
                .and_then(|arch| arch.unmet_by(info.compute_capability))
                .map_or(Ok(()), |why| Err(crate::kernels::Unavailable(why))),
        }),
        case_timeout,
    )
    .with_production_shapes(manifest.production_shapes.clone())
    .with_timing_baseline(baseline, shared)
    // A dual GEMM's large cases run on shared memory, where the worker says it can map it:
    // the library's Rust worker (its C ABI's c is [L][M][N]) and a Python submission's (whose
    // c is made as GPU MODE makes it, (L, M, N) storage permuted to [M, N, L]).
    .with_shared_runs(
        (manifest.problem == ProblemKind::DualGemm).then_some(super::shared_run::OutputOrder::Lmn),
    );
    Ok(match preflight {
        Some(command) => kernel.with_preflight(command),
        None => kernel,
    })
}
