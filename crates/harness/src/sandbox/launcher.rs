//! The launcher, `nvfp4-oracle sandbox [PATHS] -- PROGRAM ARGS`: builds the boundary described
//! in [`super`] and runs the worker in it; with `--probe`, checks each layer from inside and
//! says what holds.

use super::SandboxError;
use std::path::{Path, PathBuf};

/// How a worker is to be sandboxed: the directories it may write and those it must not see.
#[derive(Debug, Clone, Default)]
pub struct SandboxPaths {
    pub writable: Vec<PathBuf>,
    /// Directories bound in read-only at the same paths (a submission's folder, the worker
    /// script's): needed where they lie under /tmp, which the sandbox replaces.
    pub readable: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    /// What a kernel's manifest asks to read beyond the minimal root (`readable = [...]`):
    /// bound in read-only like `readable`, and named in the certificate.
    pub declared: Vec<PathBuf>,
    /// The worker's working directory (one of `writable`).
    pub workdir: Option<PathBuf>,
    /// The worker's compiler cache, bound in read-write at [`CACHE_INSIDE`] rather than at its
    /// own path: every worker of a kernel then builds at the same path, which its build tools
    /// record (see [`CACHE_INSIDE`]).
    pub cache: Option<PathBuf>,
}

/// Where a sandboxed worker sees its compiler cache, whatever its folder outside. A compiler
/// writes its cache's absolute path into what it keeps there (torch's `load_inline` into its
/// `build.ninja`): at a path that changed from the build worker's to the campaign's, the
/// snapshot's build no longer matched and every worker compiled the extension again (a
/// `load_inline` certify went from 76 s to 152 s on the H100). The same path for every
/// worker also takes away one more thing that told workers apart. Under /tmp, which inside is a
/// fresh tmpfs of the worker's own.
pub const CACHE_INSIDE: &str = "/tmp/nvfp4-oracle-cache";

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

#[cfg(target_os = "linux")]
pub(super) mod linux {
    use super::super::syscalls::{check, mount, set_attr, AT_RECURSIVE, MOUNT_ATTR_RDONLY};
    use super::{LauncherArgs, SandboxError};
    use std::io::Error;
    use std::os::unix::process::CommandExt;
    use std::path::Path;

    /// Secure bits (`capabilities(7)`): root gains no capabilities on execve, none are kept
    /// across uid changes, none can be raised as ambient; each locked.
    const SECURE_BITS: libc::c_ulong = 0b1110_1111;

    pub fn launch(args: &LauncherArgs) -> Result<i32, SandboxError> {
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
                .map_err(|e| SandboxError(format!("setgroups: {e}")))?;
            std::fs::write("/proc/self/uid_map", format!("0 {uid} 1"))
                .map_err(|e| SandboxError(format!("uid_map: {e}")))?;
            std::fs::write("/proc/self/gid_map", format!("0 {gid} 1"))
                .map_err(|e| SandboxError(format!("gid_map: {e}")))?;
        }
        let root = Path::new("/");
        mount("none", root, "", (libc::MS_REC | libc::MS_PRIVATE) as _, "")?;
        // Every directory the worker may write, opened before /tmp is covered.
        let open_all = |dirs: &'_ [std::path::PathBuf]| -> Result<Vec<(std::fs::File, std::path::PathBuf)>, SandboxError> {
            dirs.iter()
                .map(|dir| {
                    std::fs::File::open(dir)
                        .map(|file| (file, dir.clone()))
                        .map_err(|e| SandboxError(format!("{}: {e}", dir.display())))
                })
                .collect()
        };
        let readable = open_all(&args.paths.readable)?;
        // Each with the path it is bound at inside: its own, but the cache's (CACHE_INSIDE).
        let cache_inside = Path::new(super::CACHE_INSIDE);
        let writable: Vec<(std::fs::File, &Path)> = args
            .paths
            .writable
            .iter()
            .map(|dir| (dir, dir.as_path()))
            .chain(args.paths.cache.iter().map(|dir| (dir, cache_inside)))
            .map(|(dir, inside)| {
                std::fs::File::open(dir)
                    .map(|file| (file, inside))
                    .map_err(|e| SandboxError(format!("{}: {e}", dir.display())))
            })
            .collect::<Result<_, _>>()?;
        // The /etc entries a worker keeps, opened before /etc is covered.
        let etc = super::super::root::linux::open_etc()?;
        set_attr(root, MOUNT_ATTR_RDONLY, 0, AT_RECURSIVE)?;
        let private = (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong;
        mount("tmpfs", Path::new("/tmp"), "tmpfs", private, "mode=1777")?;
        // Nothing of the host's but the system's folders: every other folder at the top
        // (the home folders, /var, /srv, /mnt, checkouts) covered by an empty tmpfs, and /etc
        // by one holding the few files programs read there (super::super::root).
        let covers = super::super::root::linux::cover_top()?;
        super::super::root::linux::build_etc(&etc)?;
        drop(etc);
        // The host's /dev (its disks, /dev/mem, the terminals) replaced by one holding only
        // what CUDA needs (super::sandbox_dev), with a private /dev/shm.
        let nodes = super::super::dev::linux::kept_nodes()?;
        super::super::dev::linux::build_dev(&nodes)?;
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
            // Under /tmp, or under a covered folder, the path is gone: make it again, then
            // bind the real one.
            let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(true);
            let made = if is_dir {
                std::fs::create_dir_all(dir)
            } else {
                // A file a manifest names: its folder, then an empty file to bind it on.
                dir.parent()
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| {
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(dir)
                            .map(drop)
                    })
            };
            made.map_err(|e| SandboxError(format!("{}: {e}", dir.display())))?;
            let source = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
            mount(&source, dir, "", (libc::MS_BIND | libc::MS_REC) as _, "")?;
            if write {
                // Clears the read-only flag alone (a remount would have to repeat every other
                // flag a user namespace locks).
                set_attr(dir, 0, MOUNT_ATTR_RDONLY, 0)?;
            } else {
                set_attr(dir, MOUNT_ATTR_RDONLY, 0, AT_RECURSIVE)?;
                // A folder bound in brings no repository's history with it.
                if is_dir {
                    super::super::root::linux::cover_git(dir)?;
                }
            }
        }
        // After the binds, so that a folder bound in cannot bring a hidden one back.
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
        // The covers were writable for the binds' mount points; read-only from here on.
        for cover in covers {
            set_attr(&cover, MOUNT_ATTR_RDONLY, 0, 0)?;
        }
        drop(writable);
        drop(readable);
        // SAFETY: fork in a single-threaded process; the child only makes system calls and
        // execs (or exits).
        let child = unsafe { libc::fork() };
        if child < 0 {
            return Err(SandboxError(format!("fork: {}", Error::last_os_error())));
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
                return Err(SandboxError(format!("waitpid: {}", Error::last_os_error())));
            }
        }
        Ok(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            128 + libc::WTERMSIG(status)
        })
    }

    /// In the child, PID 1 of the new PID namespace: the rest of the boundary, then the worker.
    fn inside(args: &LauncherArgs, user_namespace: bool) -> Result<i32, SandboxError> {
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
        super::super::filter::apply()?;
        // Only the protocol's descriptors go on (super::super::dev).
        super::super::dev::close_foreign_descriptors()?;
        if let Some(dir) = &args.paths.workdir {
            std::env::set_current_dir(dir)
                .map_err(|e| SandboxError(format!("{}: {e}", dir.display())))?;
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
        Err(SandboxError(format!(
            "cannot run {}: {err}",
            args.program.display()
        )))
    }
}

/// From inside (the probe): checks that each layer holds, and says what holds in words.
#[cfg(target_os = "linux")]
fn self_check(args: &LauncherArgs, user_namespace: bool) -> Result<String, SandboxError> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| SandboxError(format!("/proc: {e}")))?;
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
        return Err(SandboxError(format!(
            "capabilities remain: CapEff {}, CapBnd {}",
            field("CapEff:"),
            field("CapBnd:")
        )));
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
        return Err(SandboxError(format!("{others} other processes visible")));
    }
    let probe = Path::new("/etc/nvfp4-oracle-sandbox-probe");
    if std::fs::write(probe, b"x").is_ok() {
        let _ = std::fs::remove_file(probe);
        return Err("the file system is writable".into());
    }
    if std::fs::write("/tmp/probe", b"x").is_err() {
        return Err("/tmp is not writable".into());
    }
    let cache = args
        .paths
        .cache
        .as_ref()
        .map(|_| PathBuf::from(CACHE_INSIDE));
    for dir in args.paths.writable.iter().chain(cache.as_ref()) {
        let file = dir.join(".nvfp4-oracle-sandbox-probe");
        std::fs::write(&file, b"x")
            .map_err(|e| SandboxError(format!("{} is not writable: {e}", dir.display())))?;
        let _ = std::fs::remove_file(file);
    }
    // SAFETY: ptrace of pid 1's parent (none) must be refused by the filter: EPERM.
    let traced = unsafe { libc::ptrace(libc::PTRACE_ATTACH, 1, 0, 0) };
    if traced == 0 {
        return Err("ptrace was allowed".into());
    }
    // Nothing of the host's beyond the system's folders: no home folder, no /etc/shadow, no
    // /var; and no variable of the parent's beyond the allow-list.
    if std::fs::read("/etc/shadow").is_ok() || std::fs::read("/etc/gshadow").is_ok() {
        return Err("/etc/shadow is readable".into());
    }
    for dir in ["/root", "/home", "/var", "/srv", "/mnt"] {
        if std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(SandboxError(format!("{dir} shows the host's")));
        }
    }
    if std::fs::read_to_string("/etc/passwd").map_or(true, |p| p != super::root::PASSWD) {
        return Err("/etc/passwd is not the sandbox's".into());
    }
    let foreign_env: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .filter(|name| name != "HOME" && !super::environment::kept(name))
        .collect();
    if !foreign_env.is_empty() {
        return Err(SandboxError(format!(
            "variables of the parent's beyond the allow-list: {}",
            foreign_env.join(", ")
        )));
    }
    // The host's daemons' sockets are out of sight.
    if std::fs::read_dir("/run").is_ok_and(|mut entries| entries.next().is_some()) {
        return Err("/run shows the host's".into());
    }
    // Nothing of the host's /dev beyond what CUDA needs (no disks, no /dev/mem), and no
    // descriptor beyond the protocol's.
    let unexpected = super::dev::unexpected_in_dev(Path::new("/dev"));
    if !unexpected.is_empty() {
        return Err(SandboxError(format!(
            "/dev holds {}",
            unexpected.join(", ")
        )));
    }
    if std::fs::write("/dev/nvfp4-oracle-sandbox-probe", b"x").is_ok() {
        return Err("/dev is writable".into());
    }
    let foreign = super::dev::foreign_descriptors();
    if !foreign.is_empty() {
        return Err(SandboxError(format!(
            "inherited descriptors are open: {foreign:?}"
        )));
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
        "own mount, PID, network and IPC namespaces{}; read-only root of the host's system folders only (no home folder, /var, /srv, \
         /mnt or other top-level folder; an /etc of the loader's, Python's and CUDA's files with \
         a synthetic passwd), private /tmp, /dev/shm and /run; a /dev of the NVIDIA nodes and null, zero, full, random, urandom only; no \
         inherited descriptors; no capabilities; no_new_privs; seccomp refusing ptrace, process_vm_readv/writev, \
         mounts and new namespaces; killed with its launcher",
        if user_namespace {
            " (and a user namespace)"
        } else {
            " (as root without capabilities)"
        }
    ))
}
