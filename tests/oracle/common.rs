//! Shared helpers for the tool's integration tests: the one
//! runner of the oracle binary, and whether torch sees a GPU (the tests that run submissions);
//! kernels served by the fake worker (tests/fixtures/fake_worker.py), with or without the
//! sandbox; the process-wide settings the tests share, made once.
#![allow(dead_code)]

use std::path::PathBuf;

/// `relative` in the repository: the one this test binary was built from, or, where that is
/// not on this machine (a carried test binary on the GPU machine), the current directory.
pub fn repo_path(relative: &str) -> PathBuf {
    let built_from = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = if built_from.is_dir() {
        built_from
    } else {
        PathBuf::from(".")
    };
    root.join(relative)
}

/// The nvfp4-oracle binary under test: `NVFP4_ORACLE_BIN` (a carried binary on the GPU
/// machine), else the one cargo built.
pub fn oracle_binary() -> PathBuf {
    std::env::var_os("NVFP4_ORACLE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_nvfp4-oracle")))
}

/// A command that runs the oracle binary under test (`oracle_binary`), for the tests to add
/// arguments, environment, a working directory or stdin to: every test starts the binary
/// through this, so that `NVFP4_ORACLE_BIN` reaches them all.
pub fn oracle_command() -> std::process::Command {
    std::process::Command::new(oracle_binary())
}

/// Runs the oracle with `args`; (exit code, stdout + stderr).
pub fn oracle(args: &[&str]) -> (i32, String) {
    oracle_run(oracle_command().args(args))
}

/// Runs the oracle with `args` in `dir`; (exit code, stdout + stderr).
pub fn oracle_in(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    oracle_run(oracle_command().args(args).current_dir(dir))
}

/// Runs a prepared oracle command (`oracle_command` with what the test added); (exit code,
/// stdout + stderr).
pub fn oracle_run(command: &mut std::process::Command) -> (i32, String) {
    code_and_text(command.output().expect("nvfp4-oracle runs"))
}

/// Ok when python3 has torch and torch sees a CUDA GPU; otherwise why not (the test skips).
pub fn torch_gpu() -> Result<(), String> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 3)",
        ])
        .output()
        .map_err(|err| format!("no python3: {err}"))?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(3) => Err("torch sees no CUDA GPU".into()),
        _ => Err("python3 has no torch".into()),
    }
}

/// Records that the running test did nothing, and why: printed in the test output itself
/// (straight to stderr, past libtest's capture, so `cargo test` shows it beside "ok") and added
/// to this test process's log under `target/tmp/skipped-tests/`, which `.ci/run` prints after
/// the tests, so a skipped test never passes unseen.
pub fn skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let line = format!("{}: {test}: {reason}\n", test_binary());
    {
        use std::io::Write;
        // io::stderr() is not captured by libtest (only the print macros are).
        let _ = std::io::stderr().write_all(format!("skipped: {line}").as_bytes());
    }
    let _ = append_skip(&skip_log_dir(), &test_binary(), std::process::id(), &line);
}

/// `result`'s value, or None after [`skip`] with `what` and the error: for a test that needs a
/// GPU (or a tool) this machine may lack.
pub fn or_skip<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> Option<T> {
    result.map_err(|err| skip(&format!("{what}: {err}"))).ok()
}

/// Where each test process writes the skips of its tests: `<binary>.<pid>.log`.
pub fn skip_log_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("skipped-tests")
}

/// The running test binary's name without cargo's hash ("door" for `door-4c9bf40...`).
fn test_binary() -> String {
    let stem = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tests".into());
    match stem.rsplit_once('-') {
        Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem,
    }
}

/// Appends `line` to `dir/<binary>.<pid>.log` in one `write` on a file opened with O_APPEND, so
/// that lines from tests running at once never interleave. The first time in a process, the
/// logs an earlier run of the same binary left are removed (those whose process is gone: a
/// run of it going on beside this one keeps its own), so that the directory tells of the
/// latest run of each binary, whether or not `.ci/run` cleared it first.
pub fn append_skip(
    dir: &std::path::Path,
    binary: &str,
    pid: u32,
    line: &str,
) -> std::io::Result<()> {
    use std::io::Write;
    static CLEARED: std::sync::Once = std::sync::Once::new();
    std::fs::create_dir_all(dir)?;
    CLEARED.call_once(|| remove_stale_logs(dir, binary, pid));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{binary}.{pid}.log")))?;
    file.write_all(line.as_bytes())
}

/// Removes `dir/<binary>.<pid>.log` of every pid but `own` whose process no longer runs.
pub fn remove_stale_logs(dir: &std::path::Path, binary: &str, own: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix(&format!("{binary}."))
            .and_then(|rest| rest.strip_suffix(".log"))
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = pid {
            let running = std::path::Path::new(&format!("/proc/{pid}")).exists();
            if pid != own && !running {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// For the tests marked `#[ignore]` because they need torch and a CUDA GPU: run on purpose
/// (`-- --include-ignored`) on a machine without them, they fail saying why.
pub fn require_torch_gpu() {
    if let Err(reason) = torch_gpu() {
        panic!("this test needs torch and a CUDA GPU: {reason}");
    }
}

/// Runs the oracle with its signing key in `secrets` (its own, so that tests sign and verify
/// apart from the machine's) and no scheduler's shard variables; (exit code, stdout + stderr).
pub fn oracle_with_key(secrets: &std::path::Path, args: &[&str]) -> (i32, String) {
    oracle_run(with_key(&mut oracle_command(), secrets).args(args))
}

/// `command` with the oracle's signing key in `secrets` and no scheduler's shard variables (see
/// `oracle_with_key`).
pub fn with_key<'a>(
    command: &'a mut std::process::Command,
    secrets: &std::path::Path,
) -> &'a mut std::process::Command {
    command
        .env("NVFP4_ORACLE_SECRETS", secrets)
        .env_remove("NVFP4_ORACLE_SHARD")
        .env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("JOB_COMPLETION_INDEX")
}

/// A finished process's exit code (-1 when killed by a signal) and its stdout then stderr.
pub fn code_and_text(out: std::process::Output) -> (i32, String) {
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every folder this test process, and each oracle it starts, makes in the temporary directory
/// lies in one of its own (`$TMPDIR/nvfp4-oracle-tests-<pid>`), removed when the process exits:
/// a test that forgets its folder, or fails before removing it, leaves nothing in /tmp. Set
/// before `main`, while the process has one thread, so that no test sees another TMPDIR.
#[used]
#[link_section = ".init_array"]
static PRIVATE_TEMP_DIR: extern "C" fn() = private_temp_dir;

/// This process's temporary folder, once [`private_temp_dir`] has made it.
pub static TEMP_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

extern "C" fn private_temp_dir() {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-tests-{}", std::process::id()));
    // A folder of an earlier process of this pid, killed before its exit: not ours to keep.
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::DirBuilder::new().mode(0o700).create(&dir).is_err() {
        return;
    }
    // SAFETY: before main, on the process's only thread; nothing reads the environment yet.
    unsafe { std::env::set_var("TMPDIR", &dir) };
    let _ = TEMP_ROOT.set(dir);
    // SAFETY: registers a plain function with no arguments.
    unsafe { libc::atexit(remove_temp_root) };
}

extern "C" fn remove_temp_root() {
    if let Some(dir) = TEMP_ROOT.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A fresh directory for one test under cargo's test scratch space.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A JSON file's value.
pub fn read_json(path: &std::path::Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// A file of tests/fixtures.
pub fn fixture(name: &str) -> PathBuf {
    repo_path("tests/fixtures").join(name)
}

/// A dual-GEMM kernel served by `python3 tests/fixtures/fake_worker.py ARGS`, with `env` added
/// to its environment and, where `sandbox` is given, started in the sandbox.
pub fn fake_worker_kernel(
    name: &str,
    args: &[&str],
    env: Vec<(String, String)>,
    sandbox: Option<nvfp4_harness::sandbox::SandboxPaths>,
    start_timeout: std::time::Duration,
    case_timeout: std::time::Duration,
) -> nvfp4_harness::worker::isolated::IsolatedKernel {
    use nvfp4_harness::kernels::ShapeSupport;
    use nvfp4_harness::worker::command::WorkerCommand;
    use nvfp4_harness::worker::isolated::{IsolatedKernel, KernelInfo};
    use nvfp4_model::problem::ProblemKind;
    IsolatedKernel::new(
        KernelInfo {
            name: format!("fake-{name}-{}", std::process::id()),
            description: "fake worker".into(),
            problem: ProblemKind::DualGemm,
            support: ShapeSupport::ANY,
            schedule: None,
            source_hash: "0".repeat(64),
            deliberately_broken: false,
            nondeterministic: false,
            accumulation: None,
            source_path: None,
        },
        WorkerCommand {
            program: PathBuf::from("python3"),
            args: std::iter::once(fixture("fake_worker.py").display().to_string())
                .chain(args.iter().map(|s| s.to_string()))
                .collect(),
            env,
            start_timeout,
            sandbox,
            clean_env: false,
        },
        std::sync::Arc::new(|| Ok(())),
        case_timeout,
    )
}

/// Makes the oracle binary the launcher of the workers this test process starts (the test
/// harness is not one: the sandbox's launcher and the GPU workers re-run the binary), once for
/// the process, since the tests run as threads of one process and the worker reads the
/// variable from the process's environment: `NVFP4_ORACLE_WORKER` as the process found it (a
/// carried binary on a GPU machine without Rust), else `oracle_binary()`. Every test that
/// starts a worker in this process calls this first; the value never changes afterwards.
pub fn oracle_as_worker() -> PathBuf {
    static LAUNCHER: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LAUNCHER
        .get_or_init(|| {
            use nvfp4_harness::worker::command::WORKER_ENV;
            std::env::var_os(WORKER_ENV)
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    let launcher = oracle_binary();
                    // SAFETY: set once for the process, under the OnceLock; no other test of
                    // this binary sets it, and each reads it only after this call.
                    unsafe { std::env::set_var(WORKER_ENV, &launcher) };
                    launcher
                })
        })
        .clone()
}

/// Makes the oracle binary the sandbox's launcher for workers this test process starts
/// (`oracle_as_worker`), and says whether the sandbox can be built on this machine; why not,
/// where it cannot.
pub fn sandbox_here() -> Result<(), String> {
    let launcher = oracle_as_worker();
    let isolation = nvfp4_harness::sandbox::isolation(&launcher);
    if isolation.sandboxed {
        Ok(())
    } else {
        Err(isolation.description.clone())
    }
}

/// The certificate (the JSON that names a kernel) a campaign wrote in `report`; null where it
/// wrote none.
pub fn certificate_in(report: &std::path::Path) -> serde_json::Value {
    std::fs::read_dir(report)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok())
        .find(|v: &serde_json::Value| v.get("kernel").is_some())
        .unwrap_or_default()
}
