//! This process's private temporary folder: every file the oracle writes for a while (the
//! worker script, workers' scratch folders, their compiler caches, bench's script) lives under
//! one folder made by `mkdtemp` (a name nobody can guess, mode 0700, made fresh: nothing can be
//! planted in it beforehand, by another user or an older run whose pid came round). It is
//! removed when the command ends ([`remove`], from `main`) and when SIGINT, SIGTERM or SIGHUP
//! ends it ([`dir`] installs the handlers), so nothing stays in /tmp. (SIGKILL cannot be
//! caught: a folder it leaves is private, and no later run uses it.)

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static ROOT: OnceLock<std::result::Result<PathBuf, String>> = OnceLock::new();

/// The folder, made on first use (and the signal handlers that remove it installed then).
pub fn dir() -> Result<&'static Path> {
    ROOT.get_or_init(|| {
        let made = make(&std::env::temp_dir())?;
        remove_on_signal();
        // And at exit wherever `main` is not ours (a test binary, the Python extension).
        // SAFETY: registers a plain function with no arguments.
        unsafe { libc::atexit(remove_at_exit) };
        Ok(made)
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(|why| Error::file(std::env::temp_dir(), why))
}

/// Removes the folder, if one was made. Called once the command is done; later uses of
/// [`dir`] in this process would find it gone.
pub fn remove() {
    if let Some(Ok(root)) = ROOT.get() {
        let _ = std::fs::remove_dir_all(root);
    }
}

extern "C" fn remove_at_exit() {
    remove();
}

/// A fresh folder under `parent`, made by mkdtemp: mode 0700, a random name, never one that
/// already existed.
fn make(parent: &Path) -> std::result::Result<PathBuf, String> {
    use std::os::unix::ffi::OsStrExt;
    let template = parent.join("nvfp4-oracle-XXXXXX");
    let mut bytes = template.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    // SAFETY: a NUL-terminated template buffer that mkdtemp fills in place.
    let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
    if made.is_null() {
        return Err(format!(
            "cannot make a private temporary folder: {}",
            std::io::Error::last_os_error()
        ));
    }
    bytes.pop();
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// The signal being handled (0: none): set by the removal thread as soon as it is woken.
static SIGNALLED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The signal (SIGINT, SIGTERM, SIGHUP) whose handling has begun, if any. The work it
/// interrupted may fail meanwhile (its folder is being removed) and return an error of its own;
/// `main` then ends by the signal, not with that error's code.
pub fn signalled() -> Option<i32> {
    match SIGNALLED.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The write end of the pipe the signal handler writes the signal's number to.
static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::SeqCst);
    let byte = signal as u8;
    // SAFETY: write(2) is async-signal-safe; one byte from the stack.
    unsafe {
        libc::write(fd, (&byte as *const u8).cast(), 1);
    }
}

/// SIGINT, SIGTERM and SIGHUP remove the folder, then end the process as the signal would have.
/// The removal runs on a thread of its own, woken through a pipe (a signal handler may not
/// allocate or walk a directory). A handler another part of the program installs later (the
/// preflight's, which removes its files and ends by the signal through `main`) takes over; then
/// `main` calls [`remove`].
fn remove_on_signal() {
    let mut fds = [0; 2];
    // SAFETY: a pipe into a two-element array; its ends are close-on-exec.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    SIGNAL_PIPE.store(fds[1], std::sync::atomic::Ordering::SeqCst);
    let read_end = fds[0];
    let spawned = std::thread::Builder::new()
        .name("private-tmp-cleanup".into())
        .spawn(move || loop {
            let mut byte = 0u8;
            // SAFETY: reads one byte into a stack variable from the pipe this thread owns.
            let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
            if n == 1 {
                SIGNALLED.store(libc::c_int::from(byte), std::sync::atomic::Ordering::SeqCst);
                // Removed by a process of its own, so that this one ends at once, as the
                // signal means (a large compiler cache takes a while to remove); here where
                // no `rm` can be started.
                let detached = ROOT.get().and_then(|root| root.as_ref().ok()).map(|root| {
                    use std::os::unix::process::CommandExt;
                    std::process::Command::new("rm")
                        .arg("-rf")
                        .arg("--")
                        .arg(root)
                        .process_group(0)
                        .stdin(std::process::Stdio::null())
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::null())
                        .spawn()
                        .is_ok()
                });
                if detached != Some(true) {
                    remove();
                }
                let signal = libc::c_int::from(byte);
                // SAFETY: the default disposition restored and the signal raised: the process
                // ends as it would have without the handler.
                unsafe {
                    libc::signal(signal, libc::SIG_DFL);
                    libc::kill(libc::getpid(), signal);
                }
                std::thread::sleep(std::time::Duration::from_secs(1));
                std::process::exit(128 + signal);
            }
            if n == 0 {
                return;
            }
        });
    if spawned.is_err() {
        return;
    }
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a handler that only writes one byte to a pipe; the structure is zeroed, then
        // filled with valid values. A signal ignored when the process started (nohup) stays
        // ignored.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(signal, std::ptr::null(), &mut old);
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn each_folder_is_new_and_private() {
        let parent = std::env::temp_dir();
        let a = make(&parent).unwrap();
        let b = make(&parent).unwrap();
        assert_ne!(a, b);
        let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(std::fs::read_dir(&a).unwrap().count(), 0);
        std::fs::remove_dir(a).unwrap();
        std::fs::remove_dir(b).unwrap();
    }
}
