//! A GPU MODE submission's CuTe DSL kernels compiled for a named architecture without running
//! anything: `compile_worker.py` (embedded) runs the submission's compilation in the worker
//! sandbox and hands back what each `cute.compile` returned: the PTX for the census, and the
//! host code, where each launch's dynamic shared memory, block size and cluster are (the
//! kernel's own code does not hold them; [`super::host`]); or the compiler's refusal, in words. What a submission can still
//! forge, being in the same process as the compiler: [`compile`].

pub use super::host::{host_launches, Launch};
use crate::error::{Error, Result};
use crate::sandbox::bounded::{self, Deadline};
use crate::sandbox::SandboxPaths;
use crate::secrets::secrets_dir;
use crate::worker::command::python_program;
use crate::worker::command::{wrap, WorkerCommand};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The script that drives the compilation, embedded so the binary alone can preflight.
pub const COMPILE_WORKER: &str = include_str!("compile_worker.py");

/// How long a compilation may take unless the caller says: imports (torch, CuTe DSL) and every
/// kernel's compile.
pub const COMPILE_TIMEOUT: Duration = Duration::from_secs(600);

/// What came of compiling a submission.
pub enum Compilation {
    /// Compiled: each PTX file's text (headed by a comment per launch of its kernels, saying the
    /// cluster: [`super::host::annotate`]), the launches of the host code.
    Compiled {
        ptx: Vec<(String, String)>,
        launches: Vec<Launch>,
        /// How the compilation was driven (`compile_kernel()`).
        driven_by: String,
        /// torch was not installed and a placeholder stood in for it.
        torch_placeholder: bool,
    },
    /// The compiler (or the submission) refused: in which phase, its message, what it means,
    /// and the submission's lines it came through (innermost last).
    Refused {
        phase: String,
        message: String,
        meaning: Option<&'static str>,
        lines: Vec<String>,
    },
}

#[derive(serde::Deserialize)]
struct WorkerResult {
    phase: Option<String>,
    error: Option<String>,
    torch: String,
    driven_by: Option<String>,
    #[serde(default)]
    compiles: Vec<Compiled>,
    /// Where the refusal arose in the submission's own files, outermost first.
    #[serde(default)]
    lines: Vec<String>,
}

/// What one `cute.compile` returned: its kernels' PTX and its lowered host code.
#[derive(serde::Deserialize)]
struct Compiled {
    ptx: String,
    host: String,
}

/// The largest result a compile worker may leave: a 10 MB PTX per kernel for a few kernels.
const MAX_RESULT_BYTES: u64 = 512 << 20;

/// 16 random bytes as hex: names nothing else on the machine chose or can guess.
fn random_hex() -> Result<String> {
    let mut bytes = [0u8; 16];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        return Err(Error::Preflight(format!(
            "no random bytes from the system: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Compiles `submission` for `arch` in the sandbox and reads what the compiler returned; a
/// compilation past `deadline` is killed with everything it started.
///
/// Each run gets a folder of its own, made here under a random name and removed however the
/// run ends: the worker's working directory (the one place it may write, sandbox or not), its
/// compilers' cache, the script. The worker's result file is named by a token it reads from
/// stdin before the submission's code runs, and the result carries the PTX and host code that
/// each `cute.compile` returned, never files found in a folder: a PTX the submission writes
/// itself is not what the compiler made.
///
/// What is left: the submission runs in the worker's own Python process, so code written to
/// deceive can still reach anything there (replace the hook that keeps what `cute.compile`
/// returns, find the token in the worker's memory, write a result of its own and exit, or
/// rewrite from a thread of its own the PTX file CuTe DSL writes and reads back as it compiles,
/// in the moment between the two). The
/// oracle checks what it can from outside (every kernel of a PTX is one its compilation's host
/// code launches); preflight is a reading of honest code, not a proof against a forger, and
/// nothing in it is a verdict: only `certify` on a GPU judges what a kernel computes.
pub fn compile(submission: &Path, arch: &str, deadline: &Deadline) -> Result<Compilation> {
    let submission = std::path::absolute(submission).map_err(|err| Error::file(submission, err))?;
    if !submission.is_file() {
        return Err(Error::file(&submission, "no such file"));
    }
    let scratch = std::env::temp_dir().join(format!("nvfp4-oracle-preflight-{}", random_hex()?));
    // Made here, never found: a folder that already exists under this name is refused. Private
    // (0700), as certify's folders are: the compilation's files are the submission's.
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&scratch)
        .map_err(|err| Error::file(&scratch, err))?;
    let outcome = compile_in(&scratch, &submission, arch, deadline);
    let _ = std::fs::remove_dir_all(&scratch);
    outcome
}

fn compile_in(
    scratch: &Path,
    submission: &Path,
    arch: &str,
    deadline: &Deadline,
) -> Result<Compilation> {
    let work = scratch.join("work");
    let script_dir = scratch.join("script");
    // Its own empty compiler cache, removed with the scratch folder: nothing a compilation
    // writes reaches a later one, nor another submission's.
    let cache = scratch.join("cache");
    for dir in [&work, &script_dir, &cache] {
        std::fs::create_dir(dir).map_err(|err| Error::file(dir, err))?;
    }
    let script = script_dir.join("compile_worker.py");
    std::fs::write(&script, COMPILE_WORKER).map_err(|err| Error::file(&script, err))?;
    let token = random_hex()?;
    let log = scratch.join("worker.log");
    run_worker(
        submission, arch, &script, &work, &cache, &token, &log, deadline,
    )?;
    read(&work.join(format!("result-{token}.json")), &log)
}

/// Runs the compile worker in the sandbox (or, where there is none, as it is, warned) with
/// `work` its working directory; its output goes to `log`.
#[allow(clippy::too_many_arguments)]
fn run_worker(
    submission: &Path,
    arch: &str,
    script: &Path,
    work: &Path,
    cache: &Path,
    token: &str,
    log: &Path,
    deadline: &Deadline,
) -> Result<()> {
    let folder = |path: &Path| path.parent().map(Path::to_path_buf);
    let command = WorkerCommand {
        program: python_program(),
        args: vec![
            "-u".into(),
            script.display().to_string(),
            "--submission".into(),
            submission.display().to_string(),
            "--arch".into(),
            arch.into(),
        ],
        env: Vec::new(),
        start_timeout: deadline.limit(),
        sandbox: None,
        clean_env: false,
    };
    let paths = SandboxPaths {
        readable: [folder(submission), folder(script)]
            .into_iter()
            .flatten()
            .collect(),
        hidden: vec![secrets_dir()],
        ..SandboxPaths::default()
    };
    let (wrapped, isolation) = wrap(&command, &paths, work, cache);
    if !isolation.sandboxed {
        eprintln!(
            "warning: the submission's compilation runs NOT sandboxed ({}): it can read and \
             write whatever this user can",
            isolation.description
        );
    }
    let log_file = std::fs::File::create(log).map_err(|err| Error::file(log, err))?;
    let mut worker = Command::new(&wrapped.program);
    if wrapped.clean_env {
        worker.env_clear();
    }
    worker
        .args(&wrapped.args)
        .envs(wrapped.env.iter().map(|(k, v)| (k, v)))
        // Sandboxed or not, it works in its own folder, never in the caller's.
        .current_dir(work)
        .stdin(token_input(token)?)
        .stdout(log_file.try_clone().map_err(|err| Error::file(log, err))?)
        .stderr(log_file);
    bounded::run(
        &mut worker,
        "the submission's compilation",
        deadline,
        |err| {
            Error::Preflight(format!(
                "cannot start {} for the compilation: {err} (NVFP4_ORACLE_PYTHON names the \
             interpreter with nvidia-cutlass-dsl installed)",
                command.program.display()
            ))
        },
    )?;
    Ok(())
}

/// The isolation a compilation ran in, for the report: the sandbox's words and the
/// environment it was given.
pub fn how_compiled() -> String {
    let isolation = crate::sandbox::isolation(&crate::worker::command::worker_program());
    format!(
        "{}; {}",
        isolation.description_for_certificate(),
        crate::sandbox::environment::describe()
    )
}

/// The worker's stdin: the token and nothing else, from a memory file (never on disk).
fn token_input(token: &str) -> Result<Stdio> {
    use std::io::{Seek, Write};
    // SAFETY: a NUL-terminated name and valid flags; the new descriptor is owned by the File.
    let fd = unsafe { libc::memfd_create(c"token".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::Preflight(format!(
            "cannot make a memory file for the compile worker: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let mut file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let io = |err: std::io::Error| Error::Preflight(format!("handing the worker its token: {err}"));
    file.write_all(format!("{token}\n").as_bytes())
        .map_err(io)?;
    file.rewind().map_err(io)?;
    Ok(Stdio::from(file))
}

/// The worker's result at `path` (`log` holds what it printed, for a failure's message).
fn read(path: &Path, log: &Path) -> Result<Compilation> {
    // Written by untrusted code: only a regular file, never a link it planted to a file this
    // process may read and it may not (the certificate key, another user's file).
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(_) => {
            let tail = crate::worker::parent::log_tail(log, 12);
            return Err(Error::Preflight(format!(
                "the compilation ended without a result (the interpreter failed, or the \
                 submission ended its process); its last lines:\n{}",
                if tail.is_empty() {
                    "(none: it printed nothing)".to_string()
                } else {
                    crate::worker::parent::quoted(&tail)
                }
            )));
        }
    };
    if !metadata.file_type().is_file() {
        return Err(Error::Preflight(
            "the compilation left its result as something other than a regular file (a link?): \
             refused"
                .into(),
        ));
    }
    if metadata.len() > MAX_RESULT_BYTES {
        return Err(Error::Preflight(format!(
            "the compilation's result is {} bytes, more than the {MAX_RESULT_BYTES} any \
             compilation needs: refused",
            metadata.len()
        )));
    }
    let text = nvfp4_model::bounded_read::read_text(path, "compilation result", MAX_RESULT_BYTES)?;
    let result: WorkerResult = serde_json::from_str(&text)
        .map_err(|err| Error::file(path, format!("unreadable result: {err}")))?;
    if let Some(phase) = result.phase {
        let message = result.error.unwrap_or_default();
        if phase == "no-cute-dsl" {
            return Err(Error::Preflight(message));
        }
        return Ok(Compilation::Refused {
            meaning: meaning(&message),
            phase,
            message,
            lines: result.lines,
        });
    }
    let Some(driven_by) = result.driven_by.filter(|_| !result.compiles.is_empty()) else {
        return Err(Error::Preflight(
            "the submission was imported but nothing was compiled (no `cute.compile` returned \
             a kernel): preflight drives CuTe DSL through a `compile_kernel()` without \
             parameters (GPU MODE's template) and reads only what `cute.compile` returns, never \
             files left in a folder; a kernel compiled only inside custom_kernel needs inputs \
             on a GPU of that architecture; compile it to PTX yourself and use --ptx"
                .into(),
        ));
    };
    let mut ptx = Vec::new();
    let mut launches = Vec::new();
    for (i, compiled) in result.compiles.into_iter().enumerate() {
        let entries = check_made_together(&compiled)?;
        let launched = host_launches(&compiled.host);
        // The cluster each kernel is launched with goes to the census with its PTX.
        let text = super::host::annotate(&compiled.ptx, &entries, &launched);
        launches.extend(launched);
        ptx.push((format!("cute.compile #{}", i + 1), text));
    }
    Ok(Compilation::Compiled {
        ptx,
        launches,
        driven_by,
        torch_placeholder: result.torch == "placeholder",
    })
}

/// Every kernel of a compilation's PTX is one its host code launches: CuTe DSL lowers both from
/// one module, so a PTX put beside the host code of another compilation (or of none) is refused.
/// Its entries' names where it is.
fn check_made_together(compiled: &Compiled) -> Result<Vec<&str>> {
    let entries: Vec<&str> = compiled
        .ptx
        .split(".entry ")
        .skip(1)
        .filter_map(|rest| rest.split(['(', ' ', '\n']).next())
        .filter(|name| !name.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(Error::Preflight(
            "a compilation's PTX holds no kernel (.entry): not what CuTe DSL makes, refused".into(),
        ));
    }
    match entries
        .iter()
        .find(|name| !compiled.host.contains(&format!("@{name}")))
    {
        Some(name) => Err(Error::Preflight(format!(
            "the PTX of a compilation holds the kernel {name}, which the host code of the same \
             compilation does not launch: not the output of one `cute.compile`, refused"
        ))),
        None => Ok(entries),
    }
}

/// What CuTe DSL 4.8.1 says when a CTA-pair MMA's kernel has a cluster that cannot hold the
/// pair: its TMA helpers check the kernel's cluster shape while tracing.
const PAIR_WITHOUT_CLUSTER: &str = "Cluster shape not divisible by MMA size";

/// The compiler's refusal in words, for the messages CuTe DSL gives for the Blackwell MMA.
pub fn meaning(message: &str) -> Option<&'static str> {
    if message.contains(PAIR_WITHOUT_CLUSTER) {
        return Some(
            "the kernel's cluster shape (the first tuple in the message) does not hold whole CTA \
             pairs: its MMA runs on a CTA pair (cta_group::2: the `2:1` in the message), a pair \
             is two CTAs of one cluster along its first (M) dimension, so that extent must be a \
             multiple of 2 (e.g. a cluster of (2, 1)); CuTe DSL's TMA helpers refuse it while \
             tracing, before anything is launched",
        );
    }
    if message.contains("op expects all operands to have the same rest modes") {
        // The MMA's own type in the message tells an M tile of 128 over a CTA pair, which in
        // CuTe DSL 4.8.1 makes scale-factor layouts of another shape than the operands'.
        let pair = message.contains("num_cta = 2");
        let pair_of_128 = pair
            && ["mma_bs<128x", "mma<128x"]
                .iter()
                .any(|m| message.contains(m));
        return Some(if pair_of_128 {
            "the tensors given to the MMA (cute.gemm) do not have the layout it expects: its M \
             tile is 128 over a CTA pair (`128x...` with `num_cta = 2` in the message: 64 rows \
             per CTA), and the scale-factor tensors made for that tile keep a mode of 2 (A[1] in \
             the message) that the A operand (A[0]) does not have. Seen with CuTe DSL 4.8.1 at \
             N tiles of 64, 128 and 256, while an M tile of 256 over the pair compiles (N 64 \
             included): the M tile, not the N tile nor the cluster, is what this message is \
             about; a CTA-pair MMA launched without a cluster of two is refused with \"Cluster \
             shape not divisible by MMA size\" by CuTe DSL's TMA helpers, or compiles and is a \
             preflight finding read from the host code. A CTA-pair MMA needs both: a cluster of \
             2 along M and scale-factor tensors laid out for the pair's tile"
        } else if pair {
            "the tensors given to the MMA (cute.gemm) do not have the layout it expects, and the \
             MMA runs on a CTA pair (cta_group::2: `num_cta = 2` in the message). A CTA-pair MMA \
             needs two things that go together: the kernel launched with a cluster of 2 along M \
             (e.g. (2, 1)), and its fragments and scale-factor tensors made for the pair's tile \
             (the whole M tile split across the two CTAs, as the tiled MMA of the pair \
             partitions it), not for one CTA's; scale tensors or fragments made for a one-CTA \
             MMA give this message"
        } else {
            "the tensors given to the MMA (cute.gemm) do not have the layout the MMA issued \
             expects: fragments or scale-factor tensors made for another tile, CTA count or \
             tiled MMA than the one issued; check them at the submission's line above. A \
             missing cluster does not give this message in our tests: a CTA-pair MMA launched \
             without a cluster of two is refused with \"Cluster shape not divisible by MMA \
             size\" by CuTe DSL's TMA helpers, or compiles and is a preflight finding read from \
             the host code"
        });
    }
    let rules: [(&str, &str); 6] = [
        (
            "expects the M-mode to be 128, but got",
            "the block-scaled MMA (NVFP4, MXFP4) takes an M tile of 128 per CTA; 256 needs a \
             CTA pair (cta_group::2)",
        ),
        (
            "expects the M-mode to be 128 or 256",
            "with a CTA pair (cta_group::2) the MMA takes an M tile of 128 or 256",
        ),
        (
            "expects the N-mode to satisfy",
            "the MMA's N tile is out of its range: 8 to 256 in steps of 8 on one CTA, 16 to 256 \
             in steps of 16 with a CTA pair (the message gives the rule for this MMA)",
        ),
        (
            "expects the scale factor vector size to be 16 or 32",
            "a scale covers 16 elements (NVFP4) or 32 (MXFP4, MXFP8), nothing else",
        ),
        (
            "expects the instruction extent in the K-mode",
            "the MMA's K extent is fixed by its operand type (64 for FP4 operands)",
        ),
        (
            "expects arch to be one of",
            "this instruction does not exist on the architecture compiled for: name the \
             target (--arch sm_100a)",
        ),
    ];
    rules
        .iter()
        .find(|(pattern, _)| message.contains(pattern))
        .map(|(_, meaning)| *meaning)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compilers_refusals_in_words() {
        let m = meaning("DSLUserCodeError: expects the M-mode to be 128, but got 64").unwrap();
        assert!(m.contains("128 per CTA"), "{m}");
        assert!(meaning("expects the N-mode to satisfy 8 <= N <= 256 and N % 8 == 0").is_some());
        assert_eq!(meaning("NameError: name 'x' is not defined"), None);
        // CuTe DSL 4.8.1's words for an MMA given operands of another layout: with the MMA's
        // type (an M tile of 128 over a CTA pair) the cause is named, without it the usual ones.
        let rest_modes = "MLIRError: Verification failed:\nerror: unknown: 'cute.gemm' op \
             expects all operands to have the same rest modes, but got: A[1]: \
             ((((32,4),4),(16,4)),2) and A[0]: (1,1)";
        let pair = format!(
            "{rest_modes}\n note: see current operation: (!cute.tiled_mma<!cute_nvgpu.sm100.\
             mma_bs<128x64x64, num_cta = 2, ab_major = (k, k)>>)"
        );
        let m = meaning(&pair).unwrap();
        assert!(m.contains("its M tile is 128 over a CTA pair"), "{m}");
        assert!(m.contains("not the N tile nor the cluster"), "{m}");
        // A CTA pair at another M tile: the cluster of 2 and the pair's scale layout named.
        let pair_256 = format!(
            "{rest_modes}\n note: (!cute.tiled_mma<!cute_nvgpu.sm100.mma_bs<256x128x64, num_cta \
             = 2, ab_major = (k, k)>>)"
        );
        let m = meaning(&pair_256).unwrap();
        assert!(
            m.contains("cluster of 2 along M") && m.contains("pair's tile"),
            "{m}"
        );
        let m = meaning(rest_modes).unwrap();
        assert!(m.contains("another tile, CTA count or tiled MMA"), "{m}");
        assert!(!m.contains("its M tile is 128"), "{m}");
        // A CTA pair in a cluster of one, refused by CuTe DSL's TMA helpers while tracing.
        let m =
            meaning("ValueError: Cluster shape not divisible by MMA size: (1, 1) and 2:1").unwrap();
        assert!(m.contains("multiple of 2"), "{m}");
    }
}
