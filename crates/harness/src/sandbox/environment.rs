//! What a worker of a user's kernel starts with, besides the folders the sandbox binds in: its
//! environment variables, from an allow-list ([`worker_env`]), and the interpreter it runs
//! under, asked where its files are ([`interpreter`]).
//!
//! A worker inheriting the parent's environment hands the kernel whatever the caller has there:
//! a CI runner's tokens, cloud credentials, the paths of the caller's home. Whatever the worker
//! sees it can print, and what it prints as its last words is quoted in the verdict (console,
//! certificate, JUnit, CI summary). So a worker gets only what Python, CUDA, the compilers and
//! the protocol need, `HOME` pointing at its own scratch folder, and the names the caller
//! passes on purpose with `--pass-env NAME` (recorded, by name, in the certificate).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// Variables a worker keeps from the parent's environment, by exact name: where programs and
/// libraries are found, the locale and time zone, the interpreter's setup, and the compilers'
/// choices that a `load_inline` or Triton build reads.
const KEPT: [&str; 17] = [
    "PATH",
    "LD_LIBRARY_PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CC",
    "CXX",
    "CUDAHOSTCXX",
    "MAX_JOBS",
    "OMP_NUM_THREADS",
    "TERM",
    "NO_COLOR",
    "SOURCE_DATE_EPOCH",
];

/// Variables a worker keeps by prefix: the locale's categories and the settings of CUDA, the
/// NVIDIA driver and container runtime, Triton, torch and CuTe DSL (`CUDA_VISIBLE_DEVICES`,
/// `TORCH_CUDA_ARCH_LIST`, `TRITON_PTXAS_PATH`, `PYTORCH_CUDA_ALLOC_CONF`, ...).
const KEPT_PREFIXES: [&str; 9] = [
    "LC_",
    "CUDA_",
    "NVIDIA_",
    "NVCC_",
    "TRITON_",
    "TORCH_",
    "TORCHINDUCTOR_",
    "PYTORCH_",
    "CUTE_DSL_",
];

/// Whether a worker keeps the parent's variable `name` without being told to.
pub fn kept(name: &str) -> bool {
    KEPT.contains(&name) || KEPT_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn passed() -> &'static Mutex<Vec<String>> {
    static PASSED: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    PASSED.get_or_init(|| Mutex::new(Vec::new()))
}

/// Adds `names` to what every worker of this process keeps from the parent's environment
/// (`--pass-env`): what a user's kernel truly needs beyond the allow-list. A name that is not a
/// plain variable name is refused.
pub fn pass_env(names: &[String]) -> Result<(), String> {
    for name in names {
        let plain = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !plain {
            return Err(format!(
                "--pass-env {name:?}: not an environment variable's name"
            ));
        }
    }
    let mut passed = passed().lock().unwrap_or_else(|p| p.into_inner());
    for name in names {
        if !passed.contains(name) {
            passed.push(name.clone());
        }
    }
    Ok(())
}

/// The names given with `--pass-env` (names only: their values are the caller's).
pub fn passed_names() -> Vec<String> {
    passed().lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The environment a worker of a user's kernel starts from, whose home is `home` (its scratch
/// folder, as it sees it): the parent's variables that [`kept`] allows or `--pass-env` names,
/// and `HOME`. The harness's own (the compilers' cache, the input socket, PYTHONPATH from a
/// manifest) are added on top by the caller. Started with this and nothing else
/// (`Command::env_clear`).
pub fn worker_env(home: &Path) -> Vec<(String, String)> {
    env_with(home, &passed_names())
}

/// [`worker_env`] without the names `--pass-env` added: the allow-list alone, which is what
/// the sandbox's probe checks from inside.
pub fn allow_listed_env(home: &Path) -> Vec<(String, String)> {
    env_with(home, &[])
}

fn env_with(home: &Path, passed: &[String]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| name != "HOME" && (kept(name) || passed.contains(name)))
        .collect();
    env.push(("HOME".into(), home.display().to_string()));
    // A worker's OpenMP threads (torch's CPU operations) sized to this campaign's cores, as its
    // own threads are (crate::cores), unless the caller chose: left alone, each worker starts
    // one thread per core of the host, and four campaigns' workers on a host of four GPUs
    // spin four times as many threads as there are cores (the torch example's small cases ran
    // 3.3 times slower four at once than alone on an H100 x4 host).
    if !env.iter().any(|(name, _)| name == OMP_THREADS) {
        env.push((
            OMP_THREADS.into(),
            crate::cores::budget().threads.to_string(),
        ));
    }
    env.sort();
    env
}

/// The variable that sizes a worker's OpenMP thread pool.
const OMP_THREADS: &str = "OMP_NUM_THREADS";

/// The certificate's words for the environment workers got.
pub fn describe() -> String {
    let passed = passed_names();
    if passed.is_empty() {
        "environment from the allow-list only (HOME its scratch folder)".into()
    } else {
        format!(
            "environment from the allow-list plus {} (--pass-env)",
            passed.join(", ")
        )
    }
}

/// An interpreter as it was asked: the program to run (its real executable, not a launcher
/// script such as a pyenv shim, which needs the caller's home) and the folders its standard
/// library and packages are in, for the sandbox to bind in read-only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interpreter {
    pub program: PathBuf,
    pub folders: Vec<PathBuf>,
}

/// What `program` (a Python interpreter) says about itself: `sys.executable` and the folders
/// of `sys.prefix`, `sys.base_prefix`, the exec prefixes, `sys.path` and the site-packages.
/// Asked once per program for this process, with the environment a worker gets (but the
/// caller's home, which a pyenv shim needs to find the interpreter). The interpreter is the
/// caller's (`NVFP4_ORACLE_PYTHON` or python3 on PATH), not the submission's: it runs no code of
/// the kernel's. `None` where it is no Python that answers (a fake interpreter in a test).
pub fn interpreter(program: &Path) -> Option<Interpreter> {
    static ASKED: OnceLock<Mutex<Vec<(PathBuf, Option<Interpreter>)>>> = OnceLock::new();
    let asked = ASKED.get_or_init(|| Mutex::new(Vec::new()));
    if let Some((_, known)) = asked
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|(p, _)| p == program)
    {
        return known.clone();
    }
    let answer = ask(program);
    asked
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((program.to_path_buf(), answer.clone()));
    answer
}

const ASK: &str = "import json, os, site, sys\n\
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix] + sys.path\n\
try:\n    paths += site.getsitepackages()\nexcept Exception:\n    pass\n\
paths.append(os.path.dirname(os.path.realpath(sys.executable)))\n\
print(json.dumps({'executable': sys.executable, 'paths': paths}))\n";

/// The longest an interpreter may take to answer: it imports `site` and nothing else.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

fn ask(program: &Path) -> Option<Interpreter> {
    // In a folder of its own, removed after, with a deadline, in a process group killed with
    // everything it started when the time runs out or the oracle is interrupted: the program
    // named may be anything (a script standing in for python in a test).
    let dir = std::env::temp_dir().join(format!(
        "nvfp4-oracle-{}-ask-{:016x}",
        std::process::id(),
        crate::secrets::unpredictable_seed()
    ));
    std::fs::create_dir(&dir).ok()?;
    let answer = asked_in(program, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    answer
}

fn asked_in(program: &Path, dir: &Path) -> Option<Interpreter> {
    let home: Option<OsString> = std::env::var_os("HOME");
    let out_path = dir.join("answer");
    let mut command = std::process::Command::new(program);
    command
        .env_clear()
        .envs(worker_env(Path::new("/")))
        // `-s`: without the user's site-packages, which a worker (whose home is its scratch
        // folder) does not see either.
        .args(["-s", "-c", ASK])
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path).ok()?)
        .stderr(std::process::Stdio::null());
    if let Some(home) = home {
        command.env("HOME", home);
    }
    for name in ["PYENV_ROOT", "PYENV_VERSION"] {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let status = super::bounded::run(
        &mut command,
        "asking the interpreter where its files are",
        &super::bounded::Deadline::new(ASK_TIMEOUT),
        |err| crate::error::Error::Preflight(err.to_string()),
    );
    if !status.ok()?.success() {
        return None;
    }
    let stdout = std::fs::read(&out_path).ok()?;
    #[derive(serde::Deserialize)]
    struct Answer {
        executable: PathBuf,
        paths: Vec<PathBuf>,
    }
    let text = String::from_utf8_lossy(&stdout);
    let answer: Answer = serde_json::from_str(text.lines().last()?).ok()?;
    if !answer.executable.is_absolute() || !answer.executable.is_file() {
        return None;
    }
    let mut folders: Vec<PathBuf> = answer
        .paths
        .into_iter()
        .filter(|p| p.is_absolute() && p.is_dir())
        .collect();
    folders.sort();
    folders.dedup();
    // One bind per tree: a folder inside another already bound adds nothing.
    let roots: Vec<PathBuf> = folders
        .iter()
        .filter(|f| !folders.iter().any(|o| o != *f && f.starts_with(o)))
        .cloned()
        .collect();
    Some(Interpreter {
        program: answer.executable,
        folders: roots,
    })
}

/// Whether `path` is a home folder or holds one (`/root`, `/home`, `/home/NAME`, the caller's
/// `HOME`, `/`): never bound into a worker whole, whatever names it.
pub fn holds_a_home(path: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let homes = [Some(PathBuf::from("/root")), home]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
    path.parent().is_none()
        || homes.iter().any(|h| h.starts_with(path))
        || (path.starts_with("/home") && path.components().count() <= 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allow_list_and_passed_names_reach_a_worker() {
        assert!(kept("PATH") && kept("CUDA_VISIBLE_DEVICES") && kept("LC_ALL"));
        assert!(!kept("GITHUB_TOKEN") && !kept("AWS_SECRET_ACCESS_KEY") && !kept("HOME"));
        assert!(pass_env(&["BAD NAME".into()]).is_err());
        assert!(pass_env(&["1X".into()]).is_err());
        let env = worker_env(Path::new("/scratch"));
        assert!(env.contains(&("HOME".into(), "/scratch".into())));
        assert_eq!(env.iter().filter(|(k, _)| k == "HOME").count(), 1);
        assert!(env.iter().all(|(k, _)| k == "HOME" || kept(k)), "{env:?}");
        // OpenMP's threads: the caller's choice, else this process's core budget.
        let threads = env
            .iter()
            .find(|(k, _)| k == "OMP_NUM_THREADS")
            .map(|(_, v)| v.clone());
        let expected = std::env::var("OMP_NUM_THREADS")
            .unwrap_or_else(|_| crate::cores::budget().threads.to_string());
        assert_eq!(threads, Some(expected));
    }

    #[test]
    fn homes_are_never_bound_whole() {
        for home in ["/", "/root", "/home", "/home/ci"] {
            assert!(holds_a_home(Path::new(home)), "{home}");
        }
        for inside in ["/root/.pyenv/versions/3.11", "/home/ci/venv", "/usr/lib"] {
            assert!(!holds_a_home(Path::new(inside)), "{inside}");
        }
    }
}
