//! The worker's root: the host's system folders and nothing else of the host's.
//!
//! A read-only view of the whole host still lets a worker read it: the caller's home folder
//! (its tokens, keys, shell history), `/etc/shadow`, `/var`, other checkouts and their
//! history. Whatever a worker reads it can print as its last words, which the verdict quotes.
//! So the launcher keeps, read-only, only the top-level folders that hold the system's programs
//! and libraries ([`KEPT_TOP`]: `/usr`, `/bin`, `/lib*`, `/sbin`, `/opt`, where the CUDA toolkit
//! and driver libraries are) and covers every other top-level folder (`/root`, `/home`, `/var`,
//! `/srv`, `/mnt`, `/media`, `/boot`, a checkout's `/work`) with an empty tmpfs, every
//! top-level file with an empty one. `/etc` becomes a tmpfs holding only the entries the
//! loader, Python and CUDA read ([`kept_in_etc`]) and a synthetic `passwd` and `group` (root
//! and nobody). What a worker needs beyond that is bound back in at its own path, read-only,
//! by the parent's `--readable`: the interpreter's prefix and site-packages (asked of the
//! interpreter, `super::environment::interpreter`), the submission's folder, the worker
//! script's, a toolkit on PATH or LD_LIBRARY_PATH outside the home folders, a manifest's
//! `readable = [...]`; with no repository's `.git` inside any of them.

/// The top-level folders of the host a worker sees (read-only), where they are folders and not
/// links; `/proc`, `/dev`, `/tmp` and `/run` are the sandbox's own.
pub const KEPT_TOP: [&str; 14] = [
    "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt", "etc", "proc", "sys", "dev",
    "tmp", "run",
];

/// Whether the entry `name` of the host's `/etc` is kept in a worker's: the loader's cache and
/// configuration, name service and host lookups, the time zone, the alternatives' links, TLS
/// certificates, MIME types, the OS release, Python's own configuration folders.
pub fn kept_in_etc(name: &str) -> bool {
    const NAMES: [&str; 20] = [
        "ld.so.cache",
        "ld.so.conf",
        "ld.so.conf.d",
        "ld.so.preload",
        "nsswitch.conf",
        "hosts",
        "host.conf",
        "gai.conf",
        "localtime",
        "timezone",
        "locale.alias",
        "alternatives",
        "ssl",
        "pki",
        "ca-certificates",
        "ca-certificates.conf",
        "mime.types",
        "protocols",
        "os-release",
        "mtab",
    ];
    NAMES.contains(&name) || name.starts_with("python") || name == "services"
}

/// The synthetic `/etc/passwd` and `/etc/group`: the worker is uid 0 (root, or the caller
/// mapped to 0 in a user namespace); nobody for programs that look it up.
pub const PASSWD: &str = "root:x:0:0:root:/tmp:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
pub const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

#[cfg(target_os = "linux")]
pub(super) mod linux {
    use super::super::syscalls::{mount, set_attr, AT_RECURSIVE, MOUNT_ATTR_RDONLY};
    use super::super::SandboxError;
    use std::fs::File;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::{Path, PathBuf};

    /// An entry of the host's `/etc` a worker keeps: a link (made again inside) or a file or
    /// folder (bound in from this descriptor).
    pub enum EtcEntry {
        Link(String, PathBuf),
        Bound(String, File, bool),
    }

    fn err(path: &Path, e: impl std::fmt::Display) -> SandboxError {
        SandboxError(format!("{}: {e}", path.display()))
    }

    fn open_path(path: &Path) -> Result<File, SandboxError> {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| err(path, e))
    }

    /// The kept entries of the host's `/etc`, opened before it is covered.
    pub fn open_etc() -> Result<Vec<EtcEntry>, SandboxError> {
        let etc = Path::new("/etc");
        let mut kept = Vec::new();
        for entry in std::fs::read_dir(etc).map_err(|e| err(etc, e))? {
            let entry = entry.map_err(|e| err(etc, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if !super::kept_in_etc(&name) {
                continue;
            }
            let path = entry.path();
            let kind = std::fs::symlink_metadata(&path).map_err(|e| err(&path, e))?;
            if kind.file_type().is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| err(&path, e))?;
                kept.push(EtcEntry::Link(name, target));
            } else if kind.is_dir() || kind.is_file() {
                kept.push(EtcEntry::Bound(name, open_path(&path)?, kind.is_dir()));
            }
        }
        Ok(kept)
    }

    /// Replaces `/etc` with a tmpfs holding `kept` (read-only) and the synthetic `passwd` and
    /// `group`.
    pub fn build_etc(kept: &[EtcEntry]) -> Result<(), SandboxError> {
        let etc = Path::new("/etc");
        let private = (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong;
        mount("tmpfs", etc, "tmpfs", private, "mode=0755")?;
        for entry in kept {
            match entry {
                EtcEntry::Link(name, target) => {
                    std::os::unix::fs::symlink(target, etc.join(name))
                        .map_err(|e| err(&etc.join(name), e))?;
                }
                EtcEntry::Bound(name, file, dir) => {
                    let at = etc.join(name);
                    if *dir {
                        std::fs::create_dir(&at).map_err(|e| err(&at, e))?;
                    } else {
                        File::create(&at).map_err(|e| err(&at, e))?;
                    }
                    let source = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(file));
                    mount(&source, &at, "", (libc::MS_BIND | libc::MS_REC) as _, "")?;
                }
            }
        }
        for (name, text) in [("passwd", super::PASSWD), ("group", super::GROUP)] {
            std::fs::write(etc.join(name), text).map_err(|e| err(&etc.join(name), e))?;
        }
        set_attr(etc, MOUNT_ATTR_RDONLY, 0, AT_RECURSIVE)
    }

    /// Covers every top-level folder of the host but [`super::KEPT_TOP`] with an empty tmpfs
    /// (left writable, for the mount points of the folders bound back in: the caller makes each
    /// read-only once they are) and every top-level file with `/dev/null`. Returns the covered
    /// folders.
    pub fn cover_top() -> Result<Vec<PathBuf>, SandboxError> {
        let root = Path::new("/");
        let private = (libc::MS_NOSUID | libc::MS_NODEV) as libc::c_ulong;
        let mut covered = Vec::new();
        for entry in std::fs::read_dir(root).map_err(|e| err(root, e))? {
            let entry = entry.map_err(|e| err(root, e))?;
            let name = entry.file_name();
            if name.to_str().is_some_and(|n| super::KEPT_TOP.contains(&n)) {
                continue;
            }
            let path = entry.path();
            let Ok(kind) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if kind.is_dir() {
                mount("tmpfs", &path, "tmpfs", private, "mode=0755")?;
                covered.push(path);
            } else if kind.is_file() {
                mount("/dev/null", &path, "", libc::MS_BIND as _, "")?;
            }
        }
        Ok(covered)
    }

    /// Covers `dir/.git` (a repository's history, its remotes' credentials) where there is one.
    pub fn cover_git(dir: &Path) -> Result<(), SandboxError> {
        let git = dir.join(".git");
        let Ok(kind) = std::fs::symlink_metadata(&git) else {
            return Ok(());
        };
        if kind.is_dir() {
            let flags = (libc::MS_NOSUID | libc::MS_NODEV | libc::MS_RDONLY) as libc::c_ulong;
            mount("tmpfs", &git, "tmpfs", flags, "mode=0")
        } else if kind.is_file() {
            mount("/dev/null", &git, "", libc::MS_BIND as _, "")
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etc_keeps_what_programs_read_and_no_secret() {
        for kept in [
            "ld.so.cache",
            "ld.so.conf.d",
            "nsswitch.conf",
            "python3.11",
            "ssl",
        ] {
            assert!(kept_in_etc(kept), "{kept}");
        }
        for secret in [
            "shadow",
            "gshadow",
            "passwd",
            "group",
            "ssh",
            "sudoers",
            "machine-id",
        ] {
            assert!(!kept_in_etc(secret), "{secret}");
        }
        for top in ["root", "home", "var", "srv", "mnt", "media", "boot", "work"] {
            assert!(!KEPT_TOP.contains(&top), "{top}");
        }
    }
}
