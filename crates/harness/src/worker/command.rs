//! How a worker is started: its command ([`WorkerCommand`]), the program that serves
//! `gpu-worker` and launches the sandbox ([`worker_program`]), the environment that points its
//! compilers at its own cache ([`cache_env`]), and the same command wrapped in the sandbox
//! ([`wrap`]).

use crate::sandbox::environment;
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
    /// Start it with `env` alone, none of the parent's environment: set by [`wrap`], whose
    /// `env` is then the whole of it ([`environment::worker_env`]).
    pub clean_env: bool,
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
    let mut isolation = isolation(&launcher).clone();
    let mut command = command.clone();
    let mut paths = paths.clone();
    // A program named by a relative path is found from the parent's directory, wherever the
    // worker works (the launcher changes to the worker's scratch folder before it runs it).
    if command.program.components().count() > 1 {
        command.program = std::path::absolute(&command.program).unwrap_or(command.program);
    }
    // Sandboxed, a Python interpreter runs as its real executable (a pyenv shim needs the
    // caller's home, which the worker neither has nor sees), with its standard library and
    // packages bound in: the worker's program, or the program a tool (compute-sanitizer) runs.
    let python = python_program();
    let is_python = |word: &str| {
        let path = Path::new(word);
        path == python
            || path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python") && !n.contains(".py"))
    };
    let words = std::iter::once(&mut command.program)
        .map(|p| p as &mut dyn AsWord)
        .chain(command.args.iter_mut().map(|a| a as &mut dyn AsWord));
    // Unsandboxed, the worker sees the host as the caller does: the program given runs as given
    // (a wrapper script standing in for python included).
    for word in words.filter(|_| isolation.sandboxed) {
        let Some(interpreter) = is_python(&word.text())
            .then(|| environment::interpreter(Path::new(&word.text())))
            .flatten()
        else {
            continue;
        };
        word.set(&interpreter.program);
        for dir in interpreter.folders {
            if !paths.readable.contains(&dir) {
                paths.readable.push(dir);
            }
        }
    }
    if !isolation.sandboxed {
        isolation.description = format!("{}; {}", isolation.description, environment::describe());
        let mut plain = command.clone();
        plain.env = environment::worker_env(scratch);
        plain.env.extend(command.env.iter().cloned());
        plain.env.extend(cache_env(cache));
        plain.clean_env = true;
        return (plain, isolation);
    }
    // The program and every file named on its command line must stay readable, wherever they
    // lie (a checkout under /tmp, which the sandbox replaces; a home folder, which it covers):
    // their folders are bound in read-only.
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
            if !environment::holds_a_home(dir) && !paths.readable.iter().any(|d| d == dir) {
                paths.readable.push(dir.to_path_buf());
            }
        }
    }
    // Where programs and libraries are looked up, outside the home folders: the minimal root
    // holds the system's folders already; a toolkit elsewhere (a checkout's NVRTC) is bound.
    for name in ["PATH", "LD_LIBRARY_PATH"] {
        for dir in std::env::var_os(name)
            .map(|v| std::env::split_paths(&v).collect::<Vec<_>>())
            .unwrap_or_default()
        {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let under_home = dir.starts_with("/root")
                || dir.starts_with("/home")
                || home.as_ref().is_some_and(|h| dir.starts_with(h));
            if dir.is_absolute()
                && dir.is_dir()
                && !under_home
                && !environment::holds_a_home(&dir)
                && !paths.readable.contains(&dir)
            {
                paths.readable.push(dir);
            }
        }
    }
    for dir in &paths.declared {
        if !paths.readable.contains(dir) {
            paths.readable.push(dir.clone());
        }
    }
    paths.writable.push(scratch.to_path_buf());
    paths.cache = Some(cache.to_path_buf());
    paths.workdir = Some(scratch.to_path_buf());
    let mut env = environment::worker_env(scratch);
    env.extend(command.env.iter().cloned());
    env.extend(cache_env(Path::new(CACHE_INSIDE)));
    isolation.description = format!("{}; {}", isolation.description, environment::describe());
    if !paths.declared.is_empty() {
        let declared: Vec<String> = paths
            .declared
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        isolation.description = format!(
            "{}; readable beyond the minimal root as its manifest asks: {}",
            isolation.description,
            declared.join(", ")
        );
    }
    let wrapped = WorkerCommand {
        program: launcher.clone(),
        args: launcher_args(&paths, &command.program, &command.args),
        env,
        start_timeout: command.start_timeout,
        sandbox: None,
        clean_env: true,
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

/// A program or an argument, as text, that [`wrap`] may replace with an interpreter's path.
trait AsWord {
    fn text(&self) -> String;
    fn set(&mut self, path: &Path);
}

impl AsWord for PathBuf {
    fn text(&self) -> String {
        self.display().to_string()
    }
    fn set(&mut self, path: &Path) {
        *self = path.to_path_buf();
    }
}

impl AsWord for String {
    fn text(&self) -> String {
        self.clone()
    }
    fn set(&mut self, path: &Path) {
        *self = path.display().to_string();
    }
}

/// Environment variable naming the Python interpreter for submissions (default `python3`).
pub const PYTHON_ENV: &str = "NVFP4_ORACLE_PYTHON";

/// The Python interpreter that runs submissions: NVFP4_ORACLE_PYTHON, else `python3` on PATH.
pub fn python_program() -> PathBuf {
    std::env::var_os(PYTHON_ENV).map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}
