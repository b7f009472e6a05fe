//! A program the harness starts and waits for, bounded: every program preflight runs (the
//! compile worker, ptxas) under one time limit, `--timeout`, for the whole preflight, and the
//! interpreter a worker will run under, asked where its files are ([`super::environment`]).
//! Beside the sandbox, below both of its users. A 10 MB PTX can keep ptxas busy for many minutes and gigabytes, and a
//! submission's compilation can start processes of its own; so each program is started as the
//! leader of a process group of its own, and killed with its whole group when the time is
//! spent, when preflight is interrupted (SIGINT, SIGTERM, SIGHUP: the caller then removes its
//! temporary files and ends as the signal says), and, as a last resort, when preflight itself
//! dies (`PR_SET_PDEATHSIG` on the leader; what the leader started and left in the group is
//! then reached only through the sandbox, whose PID namespace ends with the launcher).

use crate::error::{Error, Result};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The time a whole preflight may take, from its start.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    started: Instant,
    limit: Duration,
}

impl Deadline {
    pub fn new(limit: Duration) -> Self {
        Deadline {
            started: Instant::now(),
            limit,
        }
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    fn remaining(&self) -> Duration {
        self.limit.saturating_sub(self.started.elapsed())
    }

    /// The error of a step that `step` names, stopped because the time ran out.
    pub fn spent(&self, step: &str) -> Error {
        Error::Timeout {
            step: step.to_string(),
            seconds: self.limit.as_secs(),
        }
    }
}

/// The signal that interrupted preflight, 0 while none did.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_signal(signal: libc::c_int) {
    // Only an atomic store: the one thing a signal handler may safely do here. The waits below
    // see it within their polling interval.
    INTERRUPTED.store(signal, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP no longer end this process at once: the step running
/// is killed with its group, its caller removes its temporary files, and the process then ends
/// with the signal ([`Error::Interrupted`], re-raised by `main`).
pub fn catch_interrupts() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: installing a handler that performs a single atomic store; the sigaction
        // structure is zeroed and then filled with valid values.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = note_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// The interrupting signal, as an error, once one came.
pub fn check_interrupted() -> Result<()> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => Ok(()),
        signal => Err(Error::Interrupted { signal }),
    }
}

/// Runs `command` (its stdio set by the caller) as `step` until it exits, the deadline passes
/// or preflight is interrupted; in every case its process group is killed before this returns,
/// so nothing it started outlives the step. `cannot_start` words a failure to start it.
pub fn run(
    command: &mut Command,
    step: &str,
    deadline: &Deadline,
    cannot_start: impl FnOnce(std::io::Error) -> Error,
) -> Result<ExitStatus> {
    check_interrupted()?;
    if deadline.remaining().is_zero() {
        return Err(deadline.spent(step));
    }
    let parent = std::process::id() as libc::pid_t;
    command.process_group(0);
    // SAFETY: between fork and exec only prctl, getppid and _exit run, all async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the line above: then no signal would come.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(cannot_start)?;
    let group = child.id() as libc::pid_t;
    let kill_group = |child: &mut std::process::Child| {
        // SAFETY: a signal to the process group this function created; ESRCH (none left) is
        // harmless. The leader is reaped after it, so its id, the group's, is not reused while
        // the group is signalled.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
        let _ = child.wait();
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                // What the leader left running in its group ends with the step.
                // SAFETY: as above; the group's members keep its id from being reused.
                unsafe {
                    libc::killpg(group, libc::SIGKILL);
                }
                return Ok(status);
            }
            Ok(None) => {
                if let Err(err) = check_interrupted() {
                    kill_group(&mut child);
                    return Err(err);
                }
                let remaining = deadline.remaining();
                if remaining.is_zero() {
                    kill_group(&mut child);
                    return Err(deadline.spent(step));
                }
                std::thread::sleep(remaining.min(Duration::from_millis(50)));
            }
            Err(err) => {
                kill_group(&mut child);
                return Err(Error::Preflight(format!("waiting for {step}: {err}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_past_the_deadline_is_killed_with_what_it_started() {
        let dir = std::env::temp_dir().join(format!("nvfp4-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("grandchild.pid");
        // The step starts a grandchild in its group, which must not outlive it.
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!("sleep 30 & echo $! > {}; wait", pid_file.display()));
        let deadline = Deadline::new(Duration::from_millis(500));
        let started = Instant::now();
        let err = run(&mut command, "the test step", &deadline, |e| {
            Error::Preflight(e.to_string())
        })
        .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        let text = err.to_string();
        assert!(
            text.contains("the test step") && text.contains("--timeout"),
            "{text}"
        );
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // Killed: gone, or a zombie waiting for init to reap it. SIGKILL is delivered when the
        // process next runs: on a busy machine it gets 5 s to finish dying (a process never
        // signalled would still run after them).
        let waited = Instant::now();
        let state = loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .to_string();
            if state.is_empty()
                || state.starts_with('Z')
                || waited.elapsed() > Duration::from_secs(5)
            {
                break state;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(state.is_empty() || state.starts_with('Z'), "{pid}: {state}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_step_within_the_deadline_gives_its_status() {
        let deadline = Deadline::new(Duration::from_secs(30));
        let status = run(
            Command::new("sh").args(["-c", "exit 3"]),
            "the test step",
            &deadline,
            |e| Error::Preflight(e.to_string()),
        )
        .unwrap();
        assert_eq!(status.code(), Some(3));
    }
}
