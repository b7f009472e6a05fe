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
//!   the five plain ones only ([`super::sandbox_dev`]); the worker's own
//!   scratch directories (`--writable`) are bound in read-write at the same paths; directories
//!   named with `--hide` (the key that signs certificates) are covered by an empty tmpfs;
//! - **only the protocol's descriptors**: everything above the input socket is closed before
//!   the worker runs ([`super::sandbox_dev`]);
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

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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

/// The environment that points a worker's compilers (load_inline, Triton, inductor, the CUDA
/// JIT, CuTe DSL) at `cache`, the empty folder its parent made for it alone and removes when it ends
/// ([`super::isolated`]). Given to every worker, sandboxed or not: a cache shared between
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

/// How a worker is to be sandboxed: the directories it may write and those it must not see.
#[derive(Debug, Clone, Default)]
pub struct SandboxPaths {
    pub writable: Vec<PathBuf>,
    /// Directories bound in read-only at the same paths (a submission's folder, the worker
    /// script's): needed where they lie under /tmp, which the sandbox replaces.
    pub readable: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    /// The worker's working directory (one of `writable`).
    pub workdir: Option<PathBuf>,
}

/// The launcher's arguments for `paths` and the worker's `program` and `args`, to run as
/// `launcher ARGS`.
pub fn launcher_args(paths: &SandboxPaths, program: &Path, args: &[String]) -> Vec<String> {
    let mut out = vec!["sandbox".to_string()];
    for dir in &paths.writable {
        out.extend(["--writable".into(), dir.display().to_string()]);
    }
    for dir in &paths.readable {
        out.extend(["--readable".into(), dir.display().to_string()]);
    }
    for dir in &paths.hidden {
        out.extend(["--hide".into(), dir.display().to_string()]);
    }
    if let Some(dir) = &paths.workdir {
        out.extend(["--workdir".into(), dir.display().to_string()]);
    }
    out.push("--".into());
    out.push(program.display().to_string());
    out.extend(args.iter().cloned());
    out
}

/// The command that runs `command` in the sandbox with `scratch` (the worker's own directory,
/// also its working directory) and `cache` (its compilers' caches, [`cache_env`], which the
/// caller puts in `command`'s environment) writable, and the isolation that holds; `command`
/// itself, and why it is not sandboxed, where the sandbox cannot be built here.
pub fn wrap(
    command: &super::parent::WorkerCommand,
    paths: &SandboxPaths,
    scratch: &Path,
    cache: &Path,
) -> (super::parent::WorkerCommand, Isolation) {
    let launcher = super::nvrtc::worker_program();
    let isolation = isolation(&launcher).clone();
    if !isolation.sandboxed {
        return (command.clone(), isolation);
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
            if !paths.readable.iter().any(|d| d == dir) {
                paths.readable.push(dir.to_path_buf());
            }
        }
    }
    paths
        .writable
        .extend([scratch.to_path_buf(), cache.to_path_buf()]);
    paths.workdir = Some(scratch.to_path_buf());
    let wrapped = super::parent::WorkerCommand {
        program: launcher.clone(),
        args: launcher_args(&paths, &command.program, &command.args),
        env: command.env.clone(),
        start_timeout: command.start_timeout,
        sandbox: None,
    };
    (wrapped, isolation)
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
    let out = std::process::Command::new(launcher)
        .args(["sandbox", "--probe", "--", "true"])
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

/// The launcher's arguments, parsed by the CLI.
#[derive(Debug, Clone, Default)]
pub struct LauncherArgs {
    pub paths: SandboxPaths,
    /// Build the boundary, check it from inside, print what holds, run nothing.
    pub probe: bool,
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// Runs the launcher: builds the boundary and runs the worker in it; returns the exit code to
/// leave with (the worker's, 128 + its signal, or 125 when the boundary cannot be built).
#[cfg(target_os = "linux")]
pub fn launch(args: &LauncherArgs) -> i32 {
    match linux::launch(args) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("sandbox: {err}");
            125
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn launch(_: &LauncherArgs) -> i32 {
    eprintln!("sandbox: the sandbox needs Linux");
    125
}

fn c_string(text: &str) -> CString {
    CString::new(text).unwrap_or_else(|_| CString::new("?").expect("no NUL"))
}

#[cfg(target_os = "linux")]
pub(super) mod linux {
    use super::{c_string, LauncherArgs};
    use std::io::Error;
    use std::os::unix::process::CommandExt;
    use std::path::Path;

    /// `struct mount_attr` of `mount_setattr(2)`.
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    pub(crate) const MOUNT_ATTR_RDONLY: u64 = 0x1;
    const AT_RECURSIVE: libc::c_uint = 0x8000;

    /// Secure bits (`capabilities(7)`): root gains no capabilities on execve, none are kept
    /// across uid changes, none can be raised as ambient; each locked.
    const SECURE_BITS: libc::c_ulong = 0b1110_1111;

    fn check(what: &str, result: libc::c_long) -> Result<(), String> {
        if result < 0 {
            Err(format!("{what}: {}", Error::last_os_error()))
        } else {
            Ok(())
        }
    }

    pub(crate) fn mount(
        source: &str,
        target: &Path,
        fstype: &str,
        flags: libc::c_ulong,
        data: &str,
    ) -> Result<(), String> {
        let (source, fstype, data) = (c_string(source), c_string(fstype), c_string(data));
        let target_c = c_string(&target.display().to_string());
        // SAFETY: every pointer is a valid NUL-terminated string for the call's duration.
        let result = unsafe {
            libc::mount(
                source.as_ptr(),
                target_c.as_ptr(),
                fstype.as_ptr(),
                flags,
                data.as_ptr().cast(),
            )
        };
        check(
            &format!("mount {} on {}", source.to_string_lossy(), target.display()),
            result.into(),
        )
    }

    /// `mount_setattr(2)`: sets and clears mount attributes of `path` (with `AT_RECURSIVE`, of
    /// every mount below it too).
    pub(crate) fn set_attr(
        path: &Path,
        set: u64,
        clear: u64,
        flags: libc::c_uint,
    ) -> Result<(), String> {
        let attr = MountAttr {
            attr_set: set,
            attr_clr: clear,
            propagation: 0,
            userns_fd: 0,
        };
        let path_c = c_string(&path.display().to_string());
        // SAFETY: a valid path and an attribute struct of the size passed.
        check(&format!("mount_setattr {}", path.display()), unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                path_c.as_ptr(),
                flags,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        })
    }

    pub fn launch(args: &LauncherArgs) -> Result<i32, String> {
        // SAFETY: plain system calls on this single-threaded process (the launcher runs before
        // any thread is started), with valid pointers.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let mut flags =
            libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWNET | libc::CLONE_NEWIPC;
        if uid != 0 {
            flags |= libc::CLONE_NEWUSER;
        }
        check(
            "unshare (namespaces)",
            unsafe { libc::unshare(flags) }.into(),
        )?;
        if uid != 0 {
            std::fs::write("/proc/self/setgroups", "deny")
                .map_err(|e| format!("setgroups: {e}"))?;
            std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))
                .map_err(|e| format!("uid_map: {e}"))?;
            std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))
                .map_err(|e| format!("gid_map: {e}"))?;
        }
        let root = Path::new("/");
        mount("none", root, "", (libc::MS_REC | libc::MS_PRIVATE) as _, "")?;
        // Every directory the worker may write, opened before /tmp is covered.
        let open_all = |dirs: &'_ [std::path::PathBuf]| -> Result<Vec<(std::fs::File, std::path::PathBuf)>, String> {
            dirs.iter()
                .map(|dir| {
                    std::fs::File::open(dir)
                        .map(|file| (file, dir.clone()))
                        .map_err(|e| format!("{}: {e}", dir.display()))
                })
                .collect()
        };
        let readable = open_all(&args.paths.readable)?;
        let writable: Vec<(std::fs::File, &Path)> = args
            .paths
            .writable
            .iter()
            .map(|dir| {
                std::fs::File::open(dir)
                    .map(|file| (file, dir.as_path()))
                    .map_err(|e| format!("{}: {e}", dir.display()))
            })
            .collect::<Result<_, _>>()?;
        set_attr(root, MOUNT_ATTR_RDONLY, 0, AT_RECURSIVE)?;
        let private = (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong;
        mount("tmpfs", Path::new("/tmp"), "tmpfs", private, "mode=1777")?;
        // The host's /dev (its disks, /dev/mem, the terminals) replaced by one holding only
        // what CUDA needs (super::sandbox_dev), with a private /dev/shm.
        let nodes = crate::worker::sandbox_dev::linux::kept_nodes()?;
        crate::worker::sandbox_dev::linux::build_dev(&nodes)?;
        drop(nodes);
        // The host's daemons listen on Unix sockets under /run (/var/run links there), which
        // a read-only file system and a network namespace do not stop: a container engine's
        // socket owned by root would answer the worker's uid 0. A seccomp rule cannot keep
        // them out instead: on the H100 the CUDA driver failed to start with Unix sockets
        // refused, and compute-sanitizer hung with connect refused.
        for run in ["/run", "/var/run"].map(Path::new) {
            if run.is_dir() && !run.is_symlink() {
                mount("tmpfs", run, "tmpfs", private, "mode=0755")?;
            }
        }
        for dir in &args.paths.hidden {
            if dir.is_dir() {
                mount(
                    "tmpfs",
                    dir,
                    "tmpfs",
                    private | libc::MS_RDONLY as libc::c_ulong,
                    "mode=0",
                )?;
            }
        }
        // Shallower folders first, so that one inside another is bound on top of it: a
        // writable folder inside a read-only one stays writable, and the other way round.
        let mut binds: Vec<(&std::fs::File, &Path, bool)> = writable
            .iter()
            .map(|(file, dir)| (file, *dir, true))
            .chain(
                readable
                    .iter()
                    .map(|(file, dir)| (file, dir.as_path(), false)),
            )
            .collect();
        binds.sort_by_key(|(_, dir, _)| dir.components().count());
        for (file, dir, write) in binds {
            // Under /tmp the path is gone (a fresh tmpfs): make it again, then bind the real one.
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let source = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
            mount(&source, dir, "", (libc::MS_BIND | libc::MS_REC) as _, "")?;
            if write {
                // Clears the read-only flag alone (a remount would have to repeat every other
                // flag a user namespace locks).
                set_attr(dir, 0, MOUNT_ATTR_RDONLY, 0)?;
            } else {
                set_attr(dir, MOUNT_ATTR_RDONLY, 0, AT_RECURSIVE)?;
            }
        }
        drop(writable);
        drop(readable);
        // SAFETY: fork in a single-threaded process; the child only makes system calls and
        // execs (or exits).
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(format!("fork: {}", Error::last_os_error()));
        }
        if child == 0 {
            let code = match inside(args, uid != 0) {
                Ok(code) => code,
                Err(err) => {
                    eprintln!("sandbox: {err}");
                    125
                }
            };
            // SAFETY: leaves the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child with a valid status pointer.
            let waited = unsafe { libc::waitpid(child, &mut status, 0) };
            if waited == child {
                break;
            }
            if Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(format!("waitpid: {}", Error::last_os_error()));
            }
        }
        Ok(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        })
    }

    /// In the child, PID 1 of the new PID namespace: the rest of the boundary, then the worker.
    fn inside(args: &LauncherArgs, user_namespace: bool) -> Result<i32, String> {
        mount(
            "proc",
            Path::new("/proc"),
            "proc",
            (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC) as _,
            "",
        )?;
        // SAFETY: plain system calls with integer arguments or valid pointers.
        unsafe {
            libc::setsid();
            check(
                "prctl(PR_SET_SECUREBITS)",
                libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0).into(),
            )?;
            for cap in 0..64 {
                // EINVAL past the last capability this kernel knows.
                libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
            }
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL,
                0,
                0,
                0,
            );
            #[repr(C)]
            struct CapHeader {
                version: u32,
                pid: i32,
            }
            #[repr(C)]
            #[derive(Clone, Copy)]
            struct CapData {
                effective: u32,
                permitted: u32,
                inheritable: u32,
            }
            let header = CapHeader {
                version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
                pid: 0,
            };
            let data = [CapData {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            }; 2];
            check(
                "capset (drop every capability)",
                libc::syscall(libc::SYS_capset, &header, data.as_ptr()),
            )?;
            check(
                "prctl(PR_SET_NO_NEW_PRIVS)",
                libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into(),
            )?;
            check(
                "prctl(PR_SET_PDEATHSIG)",
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0).into(),
            )?;
        }
        super::filter::apply()?;
        // Only the protocol's descriptors go on (crate::worker::sandbox_dev).
        crate::worker::sandbox_dev::close_foreign_descriptors()?;
        if let Some(dir) = &args.paths.workdir {
            std::env::set_current_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        if args.probe {
            return super::self_check(args, user_namespace).map(|description| {
                println!("{description}");
                0
            });
        }
        let err = std::process::Command::new(&args.program)
            .args(&args.args)
            .exec();
        Err(format!("cannot run {}: {err}", args.program.display()))
    }
}

#[cfg(target_os = "linux")]
mod filter {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    use std::collections::BTreeMap;

    /// System calls a kernel under test has no use for and an attacker does: reading or writing
    /// another process's memory, changing the boundary, loading code into the kernel.
    fn refused() -> Vec<i64> {
        let mut calls = vec![
            libc::SYS_ptrace,
            libc::SYS_process_vm_readv,
            libc::SYS_process_vm_writev,
            libc::SYS_pidfd_getfd,
            libc::SYS_kcmp,
            libc::SYS_mount,
            libc::SYS_umount2,
            libc::SYS_pivot_root,
            libc::SYS_mount_setattr,
            libc::SYS_open_tree,
            libc::SYS_move_mount,
            libc::SYS_fsopen,
            libc::SYS_fsconfig,
            libc::SYS_fsmount,
            libc::SYS_fspick,
            libc::SYS_unshare,
            libc::SYS_setns,
            libc::SYS_bpf,
            libc::SYS_perf_event_open,
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_init_module,
            libc::SYS_finit_module,
            libc::SYS_delete_module,
            libc::SYS_kexec_load,
            libc::SYS_open_by_handle_at,
        ];
        calls.sort_unstable();
        calls
    }

    /// The namespace flags of `clone`: a new namespace of any kind is a way around the
    /// boundary (a user namespace gives back every capability inside it), as `unshare` is.
    const NEW_NAMESPACE_FLAGS: [libc::c_int; 7] = [
        libc::CLONE_NEWNS,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWCGROUP,
    ];

    /// `clone` with any namespace flag: one rule per flag (a rule's conditions must all hold,
    /// and any rule refuses the call). The flags are clone's first argument on x86_64 and
    /// aarch64 alike.
    fn clone_rules() -> Result<Vec<SeccompRule>, String> {
        NEW_NAMESPACE_FLAGS
            .iter()
            .map(|&flag| {
                let flag = flag as u64;
                SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(flag),
                    flag,
                )
                .and_then(|condition| SeccompRule::new(vec![condition]))
                .map_err(|e| format!("seccomp rule: {e}"))
            })
            .collect()
    }

    fn install(
        rules: BTreeMap<i64, Vec<SeccompRule>>,
        errno: i32,
        arch: TargetArch,
    ) -> Result<(), String> {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .map_err(|e| format!("seccomp filter: {e}"))?;
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e| format!("seccomp filter: {e:?}"))?;
        seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
    }

    pub fn apply() -> Result<(), String> {
        let arch = if cfg!(target_arch = "x86_64") {
            TargetArch::x86_64
        } else if cfg!(target_arch = "aarch64") {
            TargetArch::aarch64
        } else {
            return Err("no seccomp filter for this architecture".into());
        };
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = refused()
            .into_iter()
            .map(|call| (call, Vec::new()))
            .collect();
        rules.insert(libc::SYS_clone, clone_rules()?);
        install(rules, libc::EPERM, arch)?;
        // clone3 takes its flags in memory, where a filter cannot look: it is refused as if
        // the kernel had none (ENOSYS), on which the C library falls back to clone, checked
        // above. A second filter: the kernel applies the strictest answer of all filters.
        install(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            libc::ENOSYS,
            arch,
        )
    }
}

/// From inside (the probe): checks that each layer holds, and says what holds in words.
#[cfg(target_os = "linux")]
fn self_check(args: &LauncherArgs, user_namespace: bool) -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| format!("/proc: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    if !field("CapEff:").trim_start_matches('0').is_empty()
        || !field("CapBnd:").trim_start_matches('0').is_empty()
    {
        return Err(format!(
            "capabilities remain: CapEff {}, CapBnd {}",
            field("CapEff:"),
            field("CapBnd:")
        ));
    }
    if field("NoNewPrivs:") != "1" || field("Seccomp:") != "2" {
        return Err("no_new_privs or the seccomp filter did not take".into());
    }
    if std::process::id() != 1 {
        return Err("not PID 1 of a new PID namespace".into());
    }
    let others = std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != 1)
        .count();
    if others > 0 {
        return Err(format!("{others} other processes visible"));
    }
    let probe = Path::new("/etc/nvfp4-oracle-sandbox-probe");
    if std::fs::write(probe, b"x").is_ok() {
        let _ = std::fs::remove_file(probe);
        return Err("the file system is writable".into());
    }
    if std::fs::write("/tmp/probe", b"x").is_err() {
        return Err("/tmp is not writable".into());
    }
    for dir in &args.paths.writable {
        let file = dir.join(".nvfp4-oracle-sandbox-probe");
        std::fs::write(&file, b"x")
            .map_err(|e| format!("{} is not writable: {e}", dir.display()))?;
        let _ = std::fs::remove_file(file);
    }
    // SAFETY: ptrace of pid 1's parent (none) must be refused by the filter: EPERM.
    let traced = unsafe { libc::ptrace(libc::PTRACE_ATTACH, 1, 0, 0) };
    if traced == 0 {
        return Err("ptrace was allowed".into());
    }
    // The host's daemons' sockets are out of sight.
    if std::fs::read_dir("/run").is_ok_and(|mut entries| entries.next().is_some()) {
        return Err("/run shows the host's".into());
    }
    // Nothing of the host's /dev beyond what CUDA needs (no disks, no /dev/mem), and no
    // descriptor beyond the protocol's.
    let unexpected = crate::worker::sandbox_dev::unexpected_in_dev(Path::new("/dev"));
    if !unexpected.is_empty() {
        return Err(format!("/dev holds {}", unexpected.join(", ")));
    }
    if std::fs::write("/dev/nvfp4-oracle-sandbox-probe", b"x").is_ok() {
        return Err("/dev is writable".into());
    }
    let foreign = crate::worker::sandbox_dev::foreign_descriptors();
    if !foreign.is_empty() {
        return Err(format!("inherited descriptors are open: {foreign:?}"));
    }
    // A new user namespace through clone must be refused too (EPERM; clone3 ENOSYS).
    // SAFETY: a raw clone without a new stack is fork; a child, if the filter let one be made,
    // exits at once without touching this process's state.
    let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong;
    let child = unsafe { libc::syscall(libc::SYS_clone, flags, 0usize, 0usize, 0usize, 0usize) };
    if child == 0 {
        unsafe { libc::_exit(0) };
    }
    if child > 0 {
        unsafe { libc::waitpid(child as libc::pid_t, std::ptr::null_mut(), 0) };
        return Err("clone into a new user namespace was allowed".into());
    }
    Ok(format!(
        "own mount, PID, network and IPC namespaces{}; read-only file system, private /tmp, /dev/shm \
         and /run; a /dev of the NVIDIA nodes and null, zero, full, random, urandom only; no \
         inherited descriptors; no capabilities; no_new_privs; seccomp refusing ptrace, process_vm_readv/writev, \
         mounts and new namespaces; killed with its launcher",
        if user_namespace {
            " (and a user namespace)"
        } else {
            " (as root without capabilities)"
        }
    ))
}

/// The directory of the oracle's secrets (the key that signs certificates): covered by an
/// empty tmpfs in every sandbox, readable by the oracle alone (0700). `NVFP4_ORACLE_SECRETS`
/// names another; by default `$XDG_CONFIG_HOME/nvfp4-oracle` or `~/.config/nvfp4-oracle`.
pub fn secrets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NVFP4_ORACLE_SECRETS") {
        return PathBuf::from(dir);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .unwrap_or_else(|| std::env::temp_dir().join("nvfp4-oracle-config"));
    config.join("nvfp4-oracle")
}
