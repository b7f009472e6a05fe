//! The operating-system boundary around a worker: what a kernel under test, and anything it
//! starts, can reach. It is built for the machine where everything runs as root with every
//! capability (a CI runner, the GPU machines here), where file permissions and Yama's
//! `ptrace_scope` stop nothing.
//!
//! A worker is started through `nvfp4-oracle sandbox ... -- PROGRAM ARGS`, the launcher below.
//! The launcher, our own code, builds the boundary and then runs the worker inside it:
//! - **namespaces**: its own mount, PID, network and IPC namespaces (and, when the oracle is not
//!   root, a user namespace whose root is the caller). The worker is PID 1 of its PID namespace:
//!   it sees no other process (a fresh `/proc`), cannot name the parent to read its memory, and
//!   when it exits the kernel kills everything it started;
//! - **the file system, read-only**: every mount is made read-only (`mount_setattr` with
//!   `AT_RECURSIVE`), so the report directory, the golden files, the NVRTC cache and the
//!   sources cannot be written; `/tmp`, `/dev/shm` and `/run` (the host's daemons' sockets)
//!   are fresh, private tmpfs; `/dev` is a fresh read-only tmpfs holding the NVIDIA nodes and
//!   the five plain ones only ([`dev`]); the worker's own
//!   scratch directories (`--writable`) are bound in read-write at the same paths, its compiler
//!   cache (`--cache`) at one path for every worker ([`CACHE_INSIDE`]); directories
//!   named with `--hide` (the key that signs certificates) are covered by an empty tmpfs;
//! - **only the protocol's descriptors**: everything above the input socket is closed before
//!   the worker runs ([`dev`]);
//! - **no capabilities**: the bounding, ambient, permitted and effective sets emptied, secure
//!   bits set and locked so that executing a program as root grants none back, and
//!   `no_new_privs`; uid 0 without `CAP_SYS_PTRACE` cannot ptrace or read a non-dumpable
//!   process, and the oracle makes itself non-dumpable ([`protect_parent`]);
//! - **a seccomp filter** refusing (EPERM) the system calls that read or write another
//!   process's memory or change the boundary itself: ptrace, process_vm_readv/writev,
//!   pidfd_getfd, kcmp, mount and the new mount API, unshare, setns, clone with a namespace
//!   flag (clone3 answers ENOSYS, so the C library falls back to clone), bpf, perf_event_open,
//!   keyctl, kernel modules;
//! - **lifetime**: the worker dies with the launcher (`PR_SET_PDEATHSIG`), and the launcher is
//!   killed by the parent when a worker ends, so nothing a kernel started outlives its worker.
//!
//! Linux only. Where a mechanism is missing (no namespaces in a container, no seccomp), the
//! probe says which, the oracle prints it loudly, and every certificate and bench report
//! records the isolation that held ([`isolation`]). Written on `libc` and `seccompiler`: the
//! well-kept sandbox tools (bubblewrap, nsjail, firejail) are not installed on the machines
//! this runs on, and the steps are few and each a documented system call.
//!
//! Beside the boundary, what a worker starts with inside it ([`environment`]: the allow-listed
//! environment, the interpreter's folders), which the worker's command line and a manifest's
//! readable folders are checked against, and the bounded run of a program the harness waits
//! for ([`bounded`]), which preflight and the interpreter's question use.

use std::path::Path;
use std::sync::OnceLock;

pub mod bounded;
mod command_line;
pub mod dev;
pub mod environment;
#[cfg(target_os = "linux")]
mod filter;
mod launcher;
pub mod root;
#[cfg(target_os = "linux")]
mod syscalls;

pub use command_line::{launcher_args, SANDBOX_COMMAND};
pub use launcher::{launch, LauncherArgs, SandboxPaths, CACHE_INSIDE};

/// Why the boundary could not be built, or does not hold (a system call refused, a layer the
/// probe found open), in words; the launcher prints it and exits 125.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SandboxError(pub String);

impl From<String> for SandboxError {
    fn from(message: String) -> Self {
        SandboxError(message)
    }
}

impl From<&str> for SandboxError {
    fn from(message: &str) -> Self {
        SandboxError(message.to_string())
    }
}

/// The launcher's exit status when it cannot build the boundary (the worker never ran).
pub const LAUNCHER_FAILED: i32 = 125;

/// The environment variable that turns the sandbox off (`0`), for debugging a worker; every
/// certificate then says that no isolation held.
pub const SANDBOX_ENV: &str = "NVFP4_ORACLE_SANDBOX";

/// What held around the workers of this run, in words, for certificates and reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Isolation {
    /// Workers run inside the sandbox.
    pub sandboxed: bool,
    /// What holds, or why nothing does.
    pub description: String,
}

impl Isolation {
    /// For a certificate: what held, or that nothing did and why.
    pub fn description_for_certificate(&self) -> String {
        if self.sandboxed {
            format!("sandboxed: {}", self.description)
        } else {
            format!("NOT sandboxed: {}", self.description)
        }
    }
}

/// The isolation workers get on this machine: the launcher is tried once (`launcher sandbox
/// --probe`, which builds the whole boundary and checks it from inside) and the answer kept.
pub fn isolation(launcher: &Path) -> &'static Isolation {
    static PROBED: OnceLock<Isolation> = OnceLock::new();
    PROBED.get_or_init(|| {
        let isolation = probe(launcher);
        if !isolation.sandboxed {
            eprintln!(
                "WARNING: workers run WITHOUT the sandbox: {}. A hostile kernel may read this \
                 process's memory, write the report directory and outlive its worker; \
                 certificates say so.",
                isolation.description
            );
        }
        isolation
    })
}

fn probe(launcher: &Path) -> Isolation {
    if std::env::var(SANDBOX_ENV).is_ok_and(|v| v == "0") {
        return Isolation {
            sandboxed: false,
            description: format!("turned off by {SANDBOX_ENV}=0"),
        };
    }
    if !cfg!(target_os = "linux") {
        return Isolation {
            sandboxed: false,
            description: "the sandbox needs Linux".into(),
        };
    }
    // Started as a worker is: with the allow-listed environment alone, which the probe checks
    // from inside.
    let out = std::process::Command::new(launcher)
        .env_clear()
        .envs(environment::allow_listed_env(Path::new("/tmp")))
        .args([SANDBOX_COMMAND, "--probe", "--", "true"])
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(out) if out.status.success() => Isolation {
            sandboxed: true,
            description: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        },
        Ok(out) => Isolation {
            sandboxed: false,
            description: format!(
                "the sandbox could not be built here ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        },
        Err(err) => Isolation {
            sandboxed: false,
            description: format!(
                "cannot start {} to build the sandbox: {err}",
                launcher.display()
            ),
        },
    }
}

/// Makes this process non-dumpable: its `/proc/<pid>/mem` and ptrace then need
/// `CAP_SYS_PTRACE`, which no worker has.
pub fn protect_parent() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
}
