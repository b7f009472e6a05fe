//! A lock on one certificate's name in a report directory, held for a whole campaign: two runs
//! certifying one kernel into one directory at once would otherwise both say "written" while
//! the later rename silently drops the other's certificate. The second run is refused at its
//! start, naming the run that holds the lock. Shards write under names of their own, so the
//! shards of one campaign still share a directory.

use crate::error::{Error, Result};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock on `<dir>/.<stem>.lock`, released (and its file removed) when dropped.
#[derive(Debug)]
pub struct ReportLock {
    path: PathBuf,
    file: std::fs::File,
}

impl ReportLock {
    /// Takes the lock on the certificate `stem` in `dir` (made if missing), or refuses where
    /// another process holds it.
    pub fn take(dir: &Path, stem: &str) -> Result<ReportLock> {
        std::fs::create_dir_all(dir)
            .map_err(|err| Error::file(dir, format!("cannot create: {err}")))?;
        let path = dir.join(format!(".{stem}.lock"));
        // A holder that ends removes the file: where the file locked is no longer the one at
        // the path, another run may already hold a new one there, so take that one instead.
        for _ in 0..100 {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|err| Error::file(&path, format!("cannot create the lock: {err}")))?;
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                return Err(held_by_another(&path, stem, dir));
            }
            if same_file(&file, &path) {
                use std::io::Write;
                let mut holder = &file;
                let _ = file.set_len(0);
                let _ = writeln!(holder, "{}", std::process::id());
                return Ok(ReportLock { path, file });
            }
        }
        Err(held_by_another(&path, stem, dir))
    }
}

impl Drop for ReportLock {
    fn drop(&mut self) {
        // Removed while still locked: a run waiting on this file sees it is gone and retries.
        let _ = std::fs::remove_file(&self.path);
        // SAFETY: unlocks the descriptor this lock owns; closing it would too.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

fn same_file(file: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

fn held_by_another(path: &Path, stem: &str, dir: &Path) -> Error {
    let holder = std::fs::read_to_string(path)
        .ok()
        .map(|pid| pid.trim().to_string())
        .filter(|pid| !pid.is_empty())
        .map_or(String::new(), |pid| format!(" (process {pid})"));
    Error::Usage(format!(
        "another nvfp4-oracle run{holder} is writing the certificate {stem} into {} now (it \
         holds {}): two runs there at once would keep only one certificate; wait for it to end, \
         or give this run another --report-dir",
        dir.display(),
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_run_on_one_certificate_is_refused_until_the_first_ends() {
        let dir = std::env::temp_dir().join(format!("nvfp4-oracle-lock-{}", std::process::id()));
        let first = ReportLock::take(&dir, "k").unwrap();
        let err = ReportLock::take(&dir, "k").unwrap_err().to_string();
        assert!(
            err.contains("another nvfp4-oracle run")
                && err.contains(&format!("process {}", std::process::id())),
            "{err}"
        );
        // Another certificate's name (a shard's) is not held.
        let shard = ReportLock::take(&dir, "k.shard-1-of-2").unwrap();
        drop(first);
        assert!(!dir.join(".k.lock").exists(), "removed when released");
        let again = ReportLock::take(&dir, "k").unwrap();
        drop((again, shard));
        std::fs::remove_dir(&dir).unwrap();
    }
}
