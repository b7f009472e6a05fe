//! How a worker is started: its command ([`WorkerCommand`]), the program that serves
//! `gpu-worker` and launches the sandbox ([`worker_program`]), the environment that points its
//! compilers at its own cache ([`cache_env`]), and the same command wrapped in the sandbox
//! ([`wrap`]).

use crate::sandbox::{isolation, launcher_args, Isolation, SandboxPaths, CACHE_INSIDE};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How to start a worker.
#[derive(Debug, Clone)]
pub struct WorkerCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Added to the worker's environment.
    pub env: Vec<(String, String)>,
    /// Time the worker gets to start and answer Ready (compilation included).
    pub start_timeout: Duration,
    /// Untrusted code: run it in the sandbox, with these paths besides its scratch directory
    /// (see [`crate::sandbox`]); `None` for the oracle's own workers.
    pub sandbox: Option<SandboxPaths>,
}

/// Environment variable naming the `nvfp4-oracle` binary that serves `gpu-worker`.
pub const WORKER_ENV: &str = "NVFP4_ORACLE_WORKER";

/// The program that serves `gpu-worker`: this one, unless NVFP4_ORACLE_WORKER names another
/// build of it (a test binary is not `nvfp4-oracle` and cannot serve `gpu-worker`).
pub fn worker_program() -> PathBuf {
    std::env::var_os(WORKER_ENV)
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("nvfp4-oracle"))
}

/// The command that runs `command` in the sandbox with `scratch` (the worker's own directory,
/// also its working directory) and `cache` (its compilers' caches) writable, and the isolation
/// that holds; `command` itself, and why it is not sandboxed, where the sandbox cannot be built
/// here. Either way the environment that points the compilers at the cache
/// ([`cache_env`]) is added: inside the sandbox the cache lies at
/// [`CACHE_INSIDE`], the same path for every worker.
pub fn wrap(
    command: &WorkerCommand,
    paths: &SandboxPaths,
    scratch: &Path,
    cache: &Path,
) -> (WorkerCommand, Isolation) {
    let launcher = worker_program();
    let isolation = isolation(&launcher).clone();
    if !isolation.sandboxed {
        let mut plain = command.clone();
        plain.env.extend(cache_env(cache));
        return (plain, isolation);
    }
    let mut paths = paths.clone();
    // The program and every file named on its command line must stay readable, wherever they
    // lie (a checkout under /tmp, which the sandbox replaces): their folders are bound in
    // read-only.
    for path in std::iter::once(command.program.as_path())
        .chain(command.args.iter().map(Path::new))
        .filter(|p| p.is_absolute() && p.exists())
    {
        let dir = if path.is_dir() {
            Some(path)
        } else {
            path.parent()
        };
        // A program in a `bin` folder (a virtual environment's python) needs the folder above
        // it too: its packages are in lib/ beside bin/.
        let prefix = (path == command.program.as_path())
            .then(|| dir.filter(|d| d.ends_with("bin")).and_then(Path::parent))
            .flatten();
        for dir in [dir, prefix].into_iter().flatten() {
            // The root or /tmp itself (python as /bin/python3, whose prefix is /) bound over
            // everything would cover the sandbox's private /tmp, /dev and /run, and the
            // worker could not start ("Read-only file system"); what lies outside /tmp is
            // visible, read-only, without a bind.
            if covers_private_mounts(dir) {
                continue;
            }
            if !paths.readable.iter().any(|d| d == dir) {
                paths.readable.push(dir.to_path_buf());
            }
        }
    }
    paths.writable.push(scratch.to_path_buf());
    paths.cache = Some(cache.to_path_buf());
    paths.workdir = Some(scratch.to_path_buf());
    let mut env = command.env.clone();
    env.extend(cache_env(Path::new(CACHE_INSIDE)));
    let wrapped = WorkerCommand {
        program: launcher.clone(),
        args: launcher_args(&paths, &command.program, &command.args),
        env,
        start_timeout: command.start_timeout,
        sandbox: None,
    };
    (wrapped, isolation)
}

/// Whether binding `dir` into the sandbox would cover the fresh /tmp, /dev or /run it builds:
/// the root, or one of those folders itself.
pub fn covers_private_mounts(dir: &Path) -> bool {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    ["/", "/tmp", "/dev", "/run", "/var/run", "/dev/shm"]
        .iter()
        .any(|private| dir == Path::new(private))
}

/// The environment that points a worker's compilers (load_inline, Triton, inductor, the CUDA
/// JIT, CuTe DSL) at `cache`, the empty folder its parent made for it alone and removes when it ends
/// ([`super::isolated`]), as the worker sees it (in the sandbox: [`crate::sandbox::CACHE_INSIDE`]). Given to every worker, sandboxed or not: a cache shared between
/// workers, or kept between runs, is a channel, through which one worker can tell another (a
/// campaign's from a check's) what it has seen; and outside `cache` the sandbox's file system is
/// read-only.
pub fn cache_env(cache: &Path) -> Vec<(String, String)> {
    let dir = |name: &str| cache.join(name).display().to_string();
    vec![
        ("XDG_CACHE_HOME".to_string(), cache.display().to_string()),
        ("TORCH_EXTENSIONS_DIR".into(), dir("torch_extensions")),
        ("TRITON_HOME".into(), cache.display().to_string()),
        ("TRITON_CACHE_DIR".into(), dir("triton")),
        ("TORCHINDUCTOR_CACHE_DIR".into(), dir("inductor")),
        ("CUDA_CACHE_PATH".into(), dir("nv")),
        // CuTe DSL's JIT cache: by default one folder per user under the temporary folder,
        // shared by every run and kept between them.
        ("CUTE_DSL_CACHE_DIR".into(), dir("cute_dsl")),
    ]
}
