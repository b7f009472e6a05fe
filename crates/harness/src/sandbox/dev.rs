//! Two things a worker must not inherit from the machine it runs on, beside what
//! [`super`] builds: the descriptors its parent and launcher had open, and the host's
//! `/dev`.
//!
//! - **Descriptors.** A process inherits every descriptor of its parent that is not
//!   close-on-exec. The oracle's own files are (Rust opens everything so), but libraries in
//!   the parent need not be (and a test harness's are not): on the H100 about 30 inherited
//!   descriptors were open inside a worker. Only the protocol's cross: stdin (requests),
//!   stdout (replies), stderr (the log) and one socket at fd 3 (the worker's input socket,
//!   `crate::worker::shared_inputs::INPUT_SOCKET_FD`, which checks it is that one); everything above is closed, in the parent's
//!   child before it executes the worker or the launcher, and again in the launcher before it
//!   executes the worker.
//! - **`/dev`.** The host's `/dev` holds its disks, `/dev/mem`, `/dev/kmsg` and the terminals;
//!   read-only mounts do not stop reading a block device. The sandbox gives the worker a fresh,
//!   read-only tmpfs holding only what CUDA and ordinary programs need, each node bound in from
//!   the host: the NVIDIA nodes (`nvidia*`, `nvidia-caps/`, `nvidia-uvm*`, `nvidiactl`), `null`,
//!   `zero`, `full`, `random` and `urandom`; `/dev/fd` and the standard streams as links into
//!   `/proc/self/fd`; and a private `/dev/shm`.

use super::SandboxError;
use std::path::Path;

/// The first descriptor that is not the protocol's (stdin, stdout, stderr and one socket at 3):
/// everything from here on is closed.
pub const FIRST_FOREIGN_FD: i32 = 4;

/// The character devices of `/dev` a worker keeps besides the NVIDIA ones.
const PLAIN_NODES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// Whether the entry `name` of the host's `/dev` is bound into a worker's.
pub fn kept_in_dev(name: &str) -> bool {
    PLAIN_NODES.contains(&name) || name.starts_with("nvidia")
}

/// The links a worker's `/dev` holds, and where they point.
pub const DEV_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Marks every descriptor from [`FIRST_FOREIGN_FD`] on close-on-exec, so that executing the
/// next program closes them. For the parent's child between fork and exec, where only
/// async-signal-safe calls may run: closing them outright there would also close the pipe the
/// standard library reports a failed exec through. Returns false where no way worked.
pub fn close_foreign_descriptors_on_exec() -> bool {
    #[cfg(target_os = "linux")]
    // SAFETY: raw system calls with integer arguments only (async-signal-safe).
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            FIRST_FOREIGN_FD as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return true;
        }
        // Before Linux 5.11: one descriptor at a time, up to the highest a process may hold.
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return false;
        }
        let highest = limit.rlim_cur.min(1 << 20) as i32;
        for fd in FIRST_FOREIGN_FD..highest {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
        true
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// Closes every descriptor from [`FIRST_FOREIGN_FD`] on, now: the launcher's last step before
/// it executes the worker (or checks the boundary from inside).
pub fn close_foreign_descriptors() -> Result<(), SandboxError> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a raw system call with integer arguments only.
        let closed = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                FIRST_FOREIGN_FD as libc::c_uint,
                libc::c_uint::MAX,
                0 as libc::c_uint,
            )
        };
        if closed == 0 {
            return Ok(());
        }
        // Before Linux 5.9: the open ones, as /proc lists them (listed first: the listing holds
        // a descriptor of its own, closed when it ends).
        let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .map_err(|e| SandboxError(format!("/proc/self/fd: {e}")))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&fd| fd >= FIRST_FOREIGN_FD)
            .collect();
        for fd in open {
            // SAFETY: closes a descriptor nothing in this process uses any more.
            unsafe { libc::close(fd) };
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    Ok(())
}

/// The descriptors open in this process above the protocol's, with what each points to: none,
/// inside a worker. The listing's own descriptor, gone once it ends, is not among them.
pub fn foreign_descriptors() -> Vec<(i32, String)> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    fds.into_iter()
        .filter(|&fd| fd >= FIRST_FOREIGN_FD)
        .filter_map(|fd| {
            let target = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
            Some((fd, target.display().to_string()))
        })
        .collect()
}

/// What a worker's `/dev` holds that it should not: any entry that is neither kept nor one of
/// [`DEV_LINKS`] nor `shm`, and any block device at all.
pub fn unexpected_in_dev(dev: &Path) -> Vec<String> {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dev) else {
        return vec![format!("{} cannot be listed", dev.display())];
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().to_string_lossy().to_string();
            let kind = entry.file_type().ok()?;
            let expected = kept_in_dev(&name)
                || name == "shm"
                || DEV_LINKS.iter().any(|(link, _)| *link == name) && kind.is_symlink();
            (!expected || kind.is_block_device()).then_some(name)
        })
        .collect()
}

#[cfg(target_os = "linux")]
pub(super) mod linux {
    use super::{kept_in_dev, SandboxError, DEV_LINKS};
    use crate::sandbox::syscalls::{mount, set_attr, MOUNT_ATTR_RDONLY};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::Path;

    /// An entry of the host's `/dev` to bind into the worker's, held open (`O_PATH`: the node is
    /// named, not opened, so no driver runs) until the new `/dev` covers the old one.
    pub struct Node {
        name: String,
        dir: bool,
        handle: std::fs::File,
    }

    /// The entries of the host's `/dev` a worker keeps (symbolic links are not followed: a
    /// link could lead anywhere).
    pub fn kept_nodes() -> Result<Vec<Node>, SandboxError> {
        let entries = std::fs::read_dir("/dev").map_err(|e| SandboxError(format!("/dev: {e}")))?;
        let mut nodes = Vec::new();
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().to_string();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !kept_in_dev(&name) || kind.is_symlink() {
                continue;
            }
            let handle = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
                .open(entry.path())
                .map_err(|e| SandboxError(format!("/dev/{name}: {e}")))?;
            nodes.push(Node {
                name,
                dir: kind.is_dir(),
                handle,
            });
        }
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    /// Covers `/dev` with a fresh tmpfs holding `nodes` (each bound in over an empty file or
    /// folder of its name), the links of [`DEV_LINKS`] and a private `/dev/shm`, then makes it
    /// read-only (`/dev/shm` stays writable: a mount of its own).
    pub fn build_dev(nodes: &[Node]) -> Result<(), SandboxError> {
        let dev = Path::new("/dev");
        let private = (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC) as libc::c_ulong;
        mount("tmpfs", dev, "tmpfs", private, "mode=0755")?;
        for node in nodes {
            let target = dev.join(&node.name);
            let made = if node.dir {
                std::fs::create_dir(&target)
            } else {
                std::fs::File::create(&target).map(drop)
            };
            made.map_err(|e| SandboxError(format!("{}: {e}", target.display())))?;
            let source = format!("/proc/self/fd/{}", node.handle.as_raw_fd());
            mount(
                &source,
                &target,
                "",
                (libc::MS_BIND | libc::MS_REC) as _,
                "",
            )?;
        }
        for (link, to) in DEV_LINKS {
            std::os::unix::fs::symlink(to, dev.join(link))
                .map_err(|e| SandboxError(format!("/dev/{link}: {e}")))?;
        }
        let shm = dev.join("shm");
        std::fs::create_dir(&shm).map_err(|e| SandboxError(format!("{}: {e}", shm.display())))?;
        mount(
            "tmpfs",
            &shm,
            "tmpfs",
            (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong,
            "mode=1777",
        )?;
        // Not recursive: /dev/shm stays writable, the bound nodes as they were.
        set_attr(dev, MOUNT_ATTR_RDONLY, 0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_nodes_cuda_needs_are_kept() {
        for name in [
            "nvidia0",
            "nvidiactl",
            "nvidia-uvm",
            "nvidia-uvm-tools",
            "nvidia-caps",
            "null",
            "urandom",
        ] {
            assert!(kept_in_dev(name), "{name}");
        }
        for name in [
            "sda", "nvme0n1", "mem", "kmsg", "tty", "pts", "loop0", "port",
        ] {
            assert!(!kept_in_dev(name), "{name}");
        }
    }

    /// The host's /dev (this machine's) holds more than a worker's may: the check sees it.
    #[test]
    fn the_hosts_dev_is_not_a_workers() {
        let extra = unexpected_in_dev(Path::new("/dev"));
        if !Path::new("/dev/tty").exists() {
            eprintln!("skipping: this /dev is already minimal");
            return;
        }
        assert!(extra.iter().any(|name| name == "tty"), "{extra:?}");
        // Every block device of the host (a disk, a loop device) is flagged.
        use std::os::unix::fs::FileTypeExt;
        for entry in std::fs::read_dir("/dev").unwrap().filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|kind| kind.is_block_device()) {
                let name = entry.file_name().to_string_lossy().to_string();
                assert!(extra.contains(&name), "{name}: {extra:?}");
            }
        }
    }
}
