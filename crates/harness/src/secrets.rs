//! What no kernel may know: the directory of the oracle's secrets (the key that signs
//! certificates), which every worker's sandbox covers, and seeds no kernel can know in advance,
//! for what the harness draws after (or apart from) the public case seeds: the rows a large case
//! is judged on, the inputs of timed calls, the names of a worker's scratch directories.

use crate::error::{Error, Result};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};

/// The variable that names the secrets directory; every refusal of one names it as the fix.
pub const SECRETS_ENV: &str = "NVFP4_ORACLE_SECRETS";

/// The directory of the oracle's secrets (the key that signs certificates): covered by an
/// empty tmpfs in every sandbox, private to its user ([`check_private`]). `NVFP4_ORACLE_SECRETS`
/// names another; by default `$XDG_CONFIG_HOME/nvfp4-oracle` or `~/.config/nvfp4-oracle`, and
/// with neither (cron, `env -i`) a folder of this user's own in the temporary directory,
/// `nvfp4-oracle-secrets-uid<euid>`: one per user, so that no other user's folder is ever taken
/// for it.
pub fn secrets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(SECRETS_ENV) {
        return PathBuf::from(dir);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")));
    match config {
        Some(config) => config.join("nvfp4-oracle"),
        // SAFETY: geteuid has no preconditions and cannot fail.
        None => std::env::temp_dir().join(format!("nvfp4-oracle-secrets-uid{}", unsafe {
            libc::geteuid()
        })),
    }
}

/// Makes `dir` (and any folder missing above it) readable by this user alone, where it does not
/// exist yet, then checks it as [`check_private`] does.
pub fn make_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|err| {
            Error::file(
                dir,
                format!(
                    "cannot create the secrets directory (it holds the key that signs \
                     certificates): {err}; name a directory of your own with {SECRETS_ENV}=DIR"
                ),
            )
        })?;
    check_private(dir, Secret::Directory)
}

/// What [`check_private`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secret {
    /// The secrets directory: another user who can write into it can plant a key of their own.
    Directory,
    /// The key file: another user who can read it can sign any certificate.
    Key,
}

/// Refuses a secrets directory or key file another user could have planted or can read: it must
/// be owned by this user (or by root, who can read it anyway), the directory not writable by
/// group or others (unless it lies on a read-only mount, such as a Kubernetes Secret's, where
/// nobody can plant anything), the key file neither readable nor writable by them. Refused with
/// the fix named, never used: a certificate signed with a planted key proves nothing.
pub fn check_private(path: &Path, what: Secret) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|err| Error::file(path, err))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let (name, fix) = match what {
        Secret::Directory => (
            "secrets directory",
            format!("`chmod go-w {}`", path.display()),
        ),
        Secret::Key => ("signing key", format!("`chmod 600 {}`", path.display())),
    };
    let refuse = |why: String| {
        Err(Error::file(
            path,
            format!(
                "the {name} is not private to this user ({why}): another user could have planted \
                 or read the key that signs certificates, so it is not used. If it is yours, \
                 {fix}; else name a directory of your own with {SECRETS_ENV}=DIR (made 0700)"
            ),
        ))
    };
    if meta.uid() != me && meta.uid() != 0 {
        return refuse(format!(
            "owned by uid {}, this process runs as uid {me}",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    let open_to_others = match what {
        Secret::Directory => mode & 0o022 != 0 && !read_only_mount(path),
        Secret::Key => mode & 0o077 != 0,
    };
    if open_to_others {
        return refuse(format!("mode {mode:03o}"));
    }
    Ok(())
}

/// Whether `path` lies on a file system mounted read-only.
fn read_only_mount(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: statvfs fills a zeroed structure from a NUL-terminated path.
    unsafe {
        let mut stats: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c_path.as_ptr(), &mut stats) == 0 && stats.f_flag & libc::ST_RDONLY != 0
    }
}

/// 64 bits from the operating system's random source; where `/dev/urandom` cannot be read,
/// std's hasher keys (also from the operating system) mixed with the clock.
pub fn unpredictable_seed() -> u64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .is_ok()
    {
        return u64::from_le_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos)
}

#[cfg(test)]
mod tests {
    #[test]
    fn successive_seeds_differ() {
        let seeds: std::collections::BTreeSet<u64> =
            (0..16).map(|_| super::unpredictable_seed()).collect();
        assert_eq!(seeds.len(), 16);
    }
}
