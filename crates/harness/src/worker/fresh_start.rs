//! How every worker of a kernel under test starts: from folders nothing else wrote to, but for
//! one snapshot that every worker of the kernel, and of its checks' copies, gets alike.
//!
//! A place one worker writes and a later one reads is a channel between them. Through one
//! compiler cache per kernel name, shared by its workers and kept between runs, a kernel left a
//! marker in its first worker and so told the campaign's worker (the first) from the checks'
//! copies started after it, and misbehaved in the campaign alone. So each worker gets its own
//! scratch folder's `outputs/` (its working directory) emptied and a compiler cache (`cache/`,
//! [`cache_env`](super::command::cache_env)) made for it and removed when it ends.
//!
//! A kernel's compilers would then start from nothing in every worker: a `load_inline` build
//! (a minute) again after each crash and for each of the four compute-sanitizer copies. For
//! an untrusted kernel, [`StartingCache`] keeps what is worth keeping without a channel: a
//! *build worker*, started before any other and ended before any other starts, runs only the
//! kernel's start (its import and `compile_kernel()`), never a case; what it leaves in its cache
//! is the snapshot, copied into every later worker's empty cache: the campaign's, its successors'
//! and every check copy's, the same bytes and file times for each. The kernel writes the
//! snapshot, so it may hold anything; but it is written once, before any worker with a purpose
//! exists, and every such worker reads the same: it cannot say which worker reads it. What the
//! campaign's worker writes reaches no other worker. The cost: one more worker start per kernel
//! and run (an import and a CUDA context, seconds), instead of a compilation per worker.

use super::command::{cache_env, WorkerCommand};
use super::parent::{Worker, INPUTS, OUTPUTS};
use crate::kernels::PrepareError;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Under a worker's scratch folder: its compilers' cache, made empty for each worker.
pub const CACHE: &str = "cache";

fn unusable(what: &str, path: &Path, err: std::io::Error) -> PrepareError {
    PrepareError::Unusable(format!("cannot {what} {}: {err}", path.display()))
}

/// Starts `command` as a worker whose scratch folder is `scratch`: `outputs/` emptied and made
/// its working directory, `cache/` emptied and filled with a copy of `snapshot` where there is
/// one, in the sandbox where `command` asks for it. Returns the worker and, for a sandboxed
/// one, the isolation that holds, in words. The cache outlives the worker: the caller removes
/// it ([`Worker::remove_when_gone`]) or keeps it.
pub fn start_worker(
    command: &WorkerCommand,
    scratch: &Path,
    snapshot: Option<&Path>,
) -> Result<(Worker, Option<String>), PrepareError> {
    let outputs = scratch.join(OUTPUTS);
    let cache = scratch.join(CACHE);
    for dir in [&outputs, &cache] {
        let _ = std::fs::remove_dir_all(dir);
    }
    for dir in [scratch, &scratch.join(INPUTS), &outputs, &cache] {
        std::fs::create_dir_all(dir).map_err(|err| unusable("create", dir, err))?;
    }
    if let Some(snapshot) = snapshot {
        copy_tree(snapshot, &cache).map_err(|err| unusable("fill", &cache, err))?;
    }
    let (command, isolation) = match &command.sandbox {
        Some(paths) => {
            let mut paths = paths.clone();
            paths.readable.push(scratch.join(INPUTS));
            let (command, isolation) = super::command::wrap(command, &paths, &outputs, &cache);
            (command, Some(isolation.description_for_certificate()))
        }
        None => {
            let mut command = command.clone();
            command.env.extend(cache_env(&cache));
            (command, None)
        }
    };
    // Its working directory is its outputs folder, sandboxed or not (the launcher changes to
    // it again inside).
    let worker = Worker::start_in(&command, &scratch.join("worker.log"), Some(&outputs))?;
    Ok((worker, isolation))
}

/// Copies the folder `from` into the existing folder `to`: files with their modification
/// times (a build tool compares them), symbolic links as links; nothing else.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            std::fs::create_dir(&target)?;
            copy_tree(&source, &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target)?;
            let modified = entry.metadata()?.modified()?;
            let times = std::fs::FileTimes::new()
                .set_modified(modified)
                .set_accessed(modified);
            std::fs::File::options()
                .write(true)
                .open(&target)?
                .set_times(times)?;
        }
    }
    Ok(())
}

/// The snapshot every worker of an untrusted kernel, and of its checks' copies, starts its
/// compiler cache from (see the module's documentation); shared by the kernel and its copies,
/// removed when the last of them is dropped.
pub struct StartingCache {
    /// The kernel's own command (never a tool's): the build worker runs as the kernel runs.
    command: WorkerCommand,
    /// The build worker's scratch folder and the snapshot, side by side.
    root: PathBuf,
    made: Mutex<bool>,
}

impl StartingCache {
    /// For the kernel `command` starts; `root` is a folder of its own (it is removed).
    pub fn new(command: WorkerCommand, root: PathBuf) -> Self {
        StartingCache {
            command,
            root,
            made: Mutex::new(false),
        }
    }

    /// The snapshot, made first if it is not yet: the build worker's start fails as the
    /// kernel's first worker would, and then the next call tries again.
    pub fn snapshot(&self) -> Result<PathBuf, PrepareError> {
        let snapshot = self.root.join("snapshot");
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if !*made {
            let build = self.root.join("build");
            let _ = std::fs::remove_dir_all(&self.root);
            let started = std::time::Instant::now();
            let (worker, _) = start_worker(&self.command, &build, None)?;
            let ready = started.elapsed().as_secs_f64();
            // Its stdin closed, the worker leaves its request loop and exits; past the wait it
            // is killed. It ran no case.
            worker.close(Duration::from_secs(60));
            crate::trace::trace(format_args!(
                "build worker: ready in {ready:.2} s, gone {:.2} s later",
                started.elapsed().as_secs_f64() - ready
            ));
            std::fs::rename(build.join(CACHE), &snapshot)
                .map_err(|err| unusable("keep", &build.join(CACHE), err))?;
            let _ = std::fs::remove_dir_all(&build);
            *made = true;
        }
        Ok(snapshot)
    }
}

impl Drop for StartingCache {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_is_copied_with_its_file_times_and_links() {
        let root = std::env::temp_dir().join(format!("nvfp4-copy-tree-{}", std::process::id()));
        let (from, to) = (root.join("from"), root.join("to"));
        std::fs::create_dir_all(from.join("ext/build")).unwrap();
        std::fs::create_dir_all(&to).unwrap();
        let object = from.join("ext/build/kernel.so");
        std::fs::write(&object, b"binary").unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        std::fs::File::options()
            .write(true)
            .open(&object)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::os::unix::fs::symlink("build/kernel.so", from.join("ext/latest")).unwrap();
        copy_tree(&from, &to).unwrap();
        let copied = to.join("ext/build/kernel.so");
        assert_eq!(std::fs::read(&copied).unwrap(), b"binary");
        assert_eq!(std::fs::metadata(&copied).unwrap().modified().unwrap(), old);
        assert_eq!(
            std::fs::read_link(to.join("ext/latest")).unwrap(),
            Path::new("build/kernel.so")
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
