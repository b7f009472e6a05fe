//! Kernels that run in a worker process: the NVRTC variants and shared libraries (served by
//! `nvfp4-oracle gpu-worker`) and Python submissions (served by `submission_worker.py`). The
//! process boundary is what makes a crash, a hang or a corrupted CUDA context a verdict for one
//! case instead of the end of the campaign, and what keeps the answer out of the kernel's reach:
//! a worker receives inputs only, never expected outputs or intervals.
//!
//! This is the parent's side: starting a worker ([`Worker::start`]), sending it requests, the
//! watchdog on every reply (no answer in time is Hung, a process gone is Crashed; after either
//! the worker is not used again), and reading a case's output back. The messages are in
//! [`super::protocol`].

use super::command::WorkerCommand;
use super::protocol::{BatchedRun, CaseFiles, Reply, Request, INPUT_SOCKET_ENV, REPLY_MARKER};
use super::shared_inputs::INPUT_SOCKET_FD;
use crate::kernels::{KernelCase, KernelEnvironment, KernelFailure, PrepareError, RunConditions};
use half::f16;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::Duration;

/// Under a worker's scratch directory: the inputs the parent writes (read-only to a sandboxed
/// worker) and the outputs the worker writes (its only writable place besides its caches).
pub const INPUTS: &str = "inputs";
pub const OUTPUTS: &str = "outputs";

/// Reads a file a worker wrote, never through a link or a FIFO it may have planted there.
pub fn read_output(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    open_output(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens an output file the worker wrote, refusing what a worker could put there instead of a
/// file: a link (to read something else) or a FIFO (to hang the parent's read).
fn open_output(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let file = options.open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// Reads the output file a worker wrote (little-endian fp16 bits) straight into `output`; a
/// file of any other length is a bad output.
fn read_output_into(path: &Path, output: &mut [f16]) -> Result<(), KernelFailure> {
    use std::io::Read;
    let crashed = |err: std::io::Error| KernelFailure::Crashed(format!("the output: {err}"));
    let mut file = open_output(path).map_err(crashed)?;
    let len = file.metadata().map_err(crashed)?.len();
    if len != 2 * output.len() as u64 {
        return Err(KernelFailure::BadOutput(format!(
            "{len} bytes of output for {} fp16 elements",
            output.len()
        )));
    }
    #[cfg(target_endian = "little")]
    {
        file.read_exact(fp16_bytes(output)).map_err(crashed)
    }
    #[cfg(not(target_endian = "little"))]
    {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(crashed)?;
        for (value, chunk) in output.iter_mut().zip(bytes.chunks_exact(2)) {
            *value = f16::from_bits(u16::from_le_bytes([chunk[0], chunk[1]]));
        }
        Ok(())
    }
}

/// `output` as its bytes: fp16 bits, little-endian (as kernels store them), two per element.
#[cfg(target_endian = "little")]
pub(super) fn fp16_bytes(output: &mut [f16]) -> &mut [u8] {
    // SAFETY: f16 is a u16 (repr(transparent)), every bit pattern is a valid f16, and u8 has
    // no alignment: the slice's memory viewed as its bytes, borrowed from `output`.
    unsafe { std::slice::from_raw_parts_mut(output.as_mut_ptr().cast::<u8>(), 2 * output.len()) }
}

/// A running worker process. Dropping it kills the process.
pub struct Worker {
    child: Child,
    /// None once [`Worker::close`] has closed it.
    stdin: Option<ChildStdin>,
    replies: Receiver<String>,
    log: PathBuf,
    pub environment: KernelEnvironment,
    /// The parent's end of the worker's input socket (descriptor
    /// [`super::shared_inputs::INPUT_SOCKET_FD`] in the worker), where the file descriptors of
    /// shared device memory go.
    pub input_socket: UnixStream,
    /// Wait for replies without sleeping ([`Worker::spin_while_waiting`]).
    spin: Arc<AtomicBool>,
    /// Folders of this worker's alone, removed once it is gone ([`Worker::remove_when_gone`]).
    private_dirs: Vec<PathBuf>,
}

impl Worker {
    /// Closes the worker's stdin, which ends its request loop, and waits up to `wait` for it to
    /// exit (a tool it runs under writes its summary then) before it is killed on drop.
    pub fn close(mut self, wait: Duration) {
        self.stdin = None;
        let deadline = std::time::Instant::now() + wait;
        while std::time::Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Worker {
    /// Removes `dir` once this worker is gone (killed, or exited after [`Worker::close`]).
    pub fn remove_when_gone(&mut self, dir: PathBuf) {
        self.private_dirs.push(dir);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for dir in &self.private_dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A worker's stdout, line by line (without the newline), read as it comes: blocking, or, while
/// `spin` is set, by polling without sleeping (see [`Worker::spin_while_waiting`]).
struct ReplyLines {
    stdout: std::process::ChildStdout,
    spin: Arc<AtomicBool>,
    pending: Vec<u8>,
    ended: bool,
}

impl ReplyLines {
    fn new(stdout: std::process::ChildStdout, spin: Arc<AtomicBool>) -> Self {
        ReplyLines {
            stdout,
            spin,
            pending: Vec::new(),
            ended: false,
        }
    }

    /// Whether the pipe has bytes (or its end) now, waiting up to `wait_ms` (0: not at all).
    fn readable(&self, wait_ms: i32) -> bool {
        let mut poll = libc::pollfd {
            fd: self.stdout.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call's duration.
        unsafe { libc::poll(&mut poll, 1, wait_ms) > 0 }
    }
}

impl Iterator for ReplyLines {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=end).collect();
                return Some(String::from_utf8_lossy(&line[..end]).into_owned());
            }
            if self.ended {
                let rest = std::mem::take(&mut self.pending);
                return (!rest.is_empty()).then(|| String::from_utf8_lossy(&rest).into_owned());
            }
            // A bounded wait, so that a change of `spin` is seen within it.
            let spinning = self.spin.load(Ordering::Relaxed);
            if !self.readable(if spinning { 0 } else { 50 }) {
                if spinning {
                    std::hint::spin_loop();
                }
                continue;
            }
            let mut chunk = [0u8; 1 << 16];
            match self.stdout.read(&mut chunk) {
                Ok(0) | Err(_) => self.ended = true,
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// The most of a worker's own text that a verdict quotes in one place.
pub const QUOTED_MAX_CHARS: usize = 1200;

/// Text that came from a worker (its last words, an exception's message, a check's words), as a
/// verdict quotes it: whatever runs in the worker is the kernel's, so this is the kernel's own
/// text, which it chose, and it is marked so (`«...» (the kernel's own words)`). At most
/// `max_chars` characters, the end kept (where an error's last line is); control characters
/// but line breaks shown as `\u{..}` escapes, so that it cannot rewrite a terminal or a log
/// around it.
pub fn quoted_within(text: &str, max_chars: usize) -> String {
    quoted_as(text, max_chars, "the kernel's own words")
}

/// What a worker reported of its own start (the oracle's worker script's words, about the
/// kernel's file), marked as the worker's: it came from a process the kernel runs in, so it is
/// quoted and bounded as the kernel's text is, but it is not the kernel's own output.
pub fn worker_report(text: &str) -> String {
    quoted_as(text, QUOTED_MAX_CHARS, "the worker's report")
}

/// [`quoted_within`] with the words that say whose text it is.
fn quoted_as(text: &str, max_chars: usize, whose: &str) -> String {
    let text = text.trim();
    let count = text.chars().count();
    let kept: String = text.chars().skip(count.saturating_sub(max_chars)).collect();
    let clean: String = kept
        .chars()
        .flat_map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    let cut = if count > max_chars {
        format!("[{} characters before cut] ", count - max_chars)
    } else {
        String::new()
    };
    format!("«{cut}{clean}» ({whose})")
}

/// [`quoted_within`] at [`QUOTED_MAX_CHARS`].
pub fn quoted(text: &str) -> String {
    quoted_within(text, QUOTED_MAX_CHARS)
}

/// A failure a worker reported, its text marked and bounded as the kernel's ([`quoted`]).
pub fn quoted_failure(failure: KernelFailure) -> KernelFailure {
    use KernelFailure::*;
    match failure {
        Refused(t) => Refused(quoted(&t)),
        Crashed(t) => Crashed(quoted(&t)),
        Hung(s) => Hung(s),
        OutOfBounds(t) => OutOfBounds(quoted(&t)),
        ModifiedInputs(t) => ModifiedInputs(quoted(&t)),
        Unordered(t) => Unordered(quoted(&t)),
        Raised(t) => Raised(quoted(&t)),
        BadOutput(t) => BadOutput(quoted(&t)),
    }
}

/// The most lines of a submission's output quoted when it fails to start.
const START_FAILURE_LINES: usize = 12;

/// How often a worker that has not started yet is reported on stderr.
const START_NOTE_EVERY: Duration = Duration::from_secs(15);

/// The last 64 KiB of a worker's log, as text: a worker may write gigabytes to stderr, and only
/// its end is ever quoted.
fn log_end(log: &Path) -> String {
    use std::io::{Seek, SeekFrom};
    const TAIL: u64 = 64 << 10;
    let Ok(mut file) = std::fs::File::open(log) else {
        return String::new();
    };
    let len = file.metadata().map_or(0, |meta| meta.len());
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
    let mut bytes = Vec::new();
    let _ = file.take(TAIL).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The last lines of a worker's stderr log, for messages.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = log_end(log);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Worker {
    /// Starts the worker and waits for its first reply. Its stderr (and any non-reply line of its
    /// stdout) goes to `log`.
    pub fn start(command: &WorkerCommand, log: &Path) -> Result<Worker, PrepareError> {
        Self::start_in(command, log, None)
    }

    /// [`Worker::start`] in the working directory `workdir` (by default the parent's).
    pub fn start_in(
        command: &WorkerCommand,
        log: &Path,
        workdir: Option<&Path>,
    ) -> Result<Worker, PrepareError> {
        let stderr = std::fs::File::create(log).map_err(|err| {
            PrepareError::Unusable(format!("cannot create {}: {err}", log.display()))
        })?;
        let unusable = |what: &str, err: std::io::Error| {
            PrepareError::Unusable(format!("cannot {what}: {err}"))
        };
        let (input_socket, workers_end) =
            UnixStream::pair().map_err(|err| unusable("make the worker's input socket", err))?;
        // A program named by a relative path is found from the parent's directory, wherever
        // the worker works.
        let program = if command.program.components().count() > 1 {
            std::path::absolute(&command.program).unwrap_or_else(|_| command.program.clone())
        } else {
            command.program.clone()
        };
        let mut child = Command::new(&program);
        if let Some(dir) = workdir {
            child.current_dir(dir);
        }
        if command.clean_env {
            child.env_clear();
        }
        child
            .args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .env(INPUT_SOCKET_ENV, INPUT_SOCKET_FD.to_string());
        let theirs = workers_end.as_raw_fd();
        // SAFETY: between fork and exec only dup2, fcntl, close_range and getrlimit run, all
        // async-signal-safe. The socket is close-on-exec in the parent; its copy at
        // INPUT_SOCKET_FD is not. Every descriptor above it is made close-on-exec: the parent's
        // libraries may leave some inheritable, and nothing but the protocol's
        // may reach a worker (crate::sandbox::dev).
        unsafe {
            child.pre_exec(move || {
                let status = if theirs == INPUT_SOCKET_FD {
                    libc::fcntl(theirs, libc::F_SETFD, 0)
                } else {
                    libc::dup2(theirs, INPUT_SOCKET_FD)
                };
                if status < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if !crate::sandbox::dev::close_foreign_descriptors_on_exec() {
                    return Err(std::io::Error::from_raw_os_error(libc::EBADF));
                }
                Ok(())
            });
        }
        let mut child = child
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|err| unusable(&format!("start {}", command.program.display()), err))?;
        drop(workers_end);
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (send, replies) = std::sync::mpsc::channel();
        let prints = log.to_path_buf();
        let spin = Arc::new(AtomicBool::new(false));
        let reader_spins = spin.clone();
        std::thread::spawn(move || {
            let mut prints = std::fs::OpenOptions::new().append(true).open(prints).ok();
            for line in ReplyLines::new(stdout, reader_spins) {
                match line.strip_prefix(REPLY_MARKER) {
                    Some(reply) => {
                        if send.send(reply.to_string()).is_err() {
                            break;
                        }
                    }
                    None => {
                        if let Some(file) = prints.as_mut() {
                            let _ = writeln!(file, "[stdout] {line}");
                        }
                    }
                }
            }
        });
        let mut worker = Worker {
            child,
            stdin: Some(stdin),
            replies,
            log: log.to_path_buf(),
            environment: KernelEnvironment::default(),
            input_socket,
            spin,
            private_dirs: Vec::new(),
        };
        let tail = |worker: &Worker| {
            let tail = log_tail(&worker.log, 8);
            if tail.is_empty() {
                String::new()
            } else {
                format!("\n{}", quoted(&tail))
            }
        };
        match worker.receive_while_starting(command.start_timeout) {
            Ok(Reply::Ready { environment }) => {
                worker.environment = environment;
                Ok(worker)
            }
            Ok(Reply::StartFailed {
                unavailable: true,
                reason,
            }) => Err(PrepareError::Unavailable(reason)),
            // The submission's own fault (a typo'd import, a syntax error): what it printed
            // before failing is quoted too, since it often says why.
            Ok(Reply::StartFailed { reason, .. }) => Err(PrepareError::Unusable(format!(
                "{}{}",
                worker_report(&reason),
                match log_tail(&worker.log, START_FAILURE_LINES) {
                    tail if tail.is_empty() => String::new(),
                    tail => format!("\nits last output before it failed: {}", quoted(&tail)),
                }
            ))),
            Ok(Reply::Done(_) | Reply::Timed(_) | Reply::Batch(_)) => Err(PrepareError::Unusable(
                "the worker answered before it was asked".into(),
            )),
            Err(KernelFailure::Hung(seconds)) => Err(PrepareError::Unusable(format!(
                "the worker did not start within {seconds} s (import and compile_kernel() included; \
                 --start-timeout gives it longer){}",
                tail(&worker)
            ))),
            Err(failure) => Err(PrepareError::Unusable(
                match worker.sandbox_failure() {
                    Some(reason) => format!(
                        "the sandbox could not be built around the worker, so the kernel never \
                         ran (this machine's or the oracle's failure, not the kernel's): {reason}"
                    ),
                    None => format!("{failure}{}", tail(&worker)),
                },
            )),
        }
    }

    /// Why the sandbox's launcher could not start this worker, where that is why it ended: the
    /// launcher's exit status (125) and its `sandbox: ` line, its only words before the worker
    /// runs.
    fn sandbox_failure(&mut self) -> Option<String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => return None,
            }
        };
        if status.code() != Some(crate::sandbox::LAUNCHER_FAILED) {
            return None;
        }
        log_end(&self.log)
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix("sandbox: "))
            .map(str::to_string)
    }

    /// While on (a timing), the parent waits for this worker's replies without sleeping: a
    /// thread woken from a blocking wait pays its core's wake-up from an idle state, longer
    /// the longer it slept (measured on the H100 as 100-400 us more around millisecond calls
    /// than around the baseline's short ones), which the parent's clock would count against
    /// the call. It costs a busy core per waiting thread while on, so a timing turns it on only
    /// where there are cores to spare (`crate::bench::per_call::SPIN_MIN_CORES`).
    pub fn spin_while_waiting(&self, on: bool) {
        self.spin.store(on, Ordering::Relaxed);
    }

    /// The worker's first reply, as [`Worker::receive`], with a line on stderr every
    /// [`START_NOTE_EVERY`] while it has not come: a submission that takes minutes to import or
    /// build is then not a silent wait.
    fn receive_while_starting(&self, timeout: Duration) -> Result<Reply, KernelFailure> {
        let started = std::time::Instant::now();
        loop {
            let left = timeout.saturating_sub(started.elapsed());
            match self.receive(left.min(START_NOTE_EVERY)) {
                Err(KernelFailure::Hung(_)) if started.elapsed() < timeout => eprintln!(
                    "waiting for the worker to start (imports, builds, compile_kernel()): {} s \
                     of the {} s it may take (--start-timeout)",
                    started.elapsed().as_secs(),
                    timeout.as_secs()
                ),
                Err(KernelFailure::Hung(_)) => return Err(KernelFailure::Hung(timeout.as_secs())),
                other => return other,
            }
        }
    }

    /// The next reply, or Hung after `timeout`, or Crashed if the process is gone.
    pub fn receive(&self, timeout: Duration) -> Result<Reply, KernelFailure> {
        let received = if self.spin.load(Ordering::Relaxed) {
            let started = std::time::Instant::now();
            loop {
                match self.replies.try_recv() {
                    Err(TryRecvError::Empty) if started.elapsed() < timeout => {
                        std::hint::spin_loop()
                    }
                    Err(TryRecvError::Empty) => break Err(RecvTimeoutError::Timeout),
                    Err(TryRecvError::Disconnected) => break Err(RecvTimeoutError::Disconnected),
                    Ok(line) => break Ok(line),
                }
            }
        } else {
            self.replies.recv_timeout(timeout)
        };
        match received {
            Ok(line) => serde_json::from_str(&line)
                .map_err(|err| KernelFailure::Crashed(format!("unreadable worker reply: {err}"))),
            Err(RecvTimeoutError::Timeout) => Err(KernelFailure::Hung(timeout.as_secs())),
            Err(RecvTimeoutError::Disconnected) => {
                let tail = log_tail(&self.log, 4);
                Err(KernelFailure::Crashed(if tail.is_empty() {
                    "the worker process died".into()
                } else {
                    format!("the worker process died; its last words: {}", quoted(&tail))
                }))
            }
        }
    }

    pub fn send(&mut self, request: &Request) -> Result<(), KernelFailure> {
        let line = serde_json::to_string(request).expect("requests serialize");
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| KernelFailure::Crashed("the worker was closed".into()))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|_| KernelFailure::Crashed("the worker process died".into()))
    }

    /// Runs one case: writes its files under `scratch`, asks, waits at most `timeout`, reads the
    /// output into `output`. After Hung or Crashed the worker must not be used again.
    pub fn run(
        &mut self,
        case: &KernelCase,
        conditions: RunConditions,
        output: &mut [f16],
        scratch: &Path,
        timeout: Duration,
    ) -> Result<(), KernelFailure> {
        let crashed = |err: std::io::Error| KernelFailure::Crashed(err.to_string());
        let dir = scratch.join(INPUTS).join("case");
        let _ = std::fs::remove_dir_all(&dir);
        let files = CaseFiles::write(case, &dir).map_err(crashed)?;
        let output_path = scratch.join(OUTPUTS).join("output.bin");
        let _ = std::fs::remove_file(&output_path);
        self.send(&Request::Run {
            case: files,
            output: output_path.clone(),
            conditions,
        })?;
        match self.receive(timeout)? {
            Reply::Done(Ok(())) => {}
            Reply::Done(Err(failure)) => return Err(quoted_failure(failure)),
            _ => {
                return Err(KernelFailure::Crashed(
                    "the worker answered out of turn".into(),
                ))
            }
        }
        read_output_into(&output_path, output)
    }

    /// Runs `cases` in one [`Request::RunBatch`]: writes each one's files under `scratch`,
    /// asks once, waits at most `timeout`, reads each output that the worker says it wrote
    /// into its buffer of `outputs`. One result per case the worker answered for, in order:
    /// fewer than `cases` when it stopped after a case it could not go on from. Err when the
    /// request as a whole failed (the worker died, hung or answered out of turn): which case
    /// did it is not known, and the worker must not be used again.
    pub fn run_batch(
        &mut self,
        cases: &[&KernelCase],
        outputs: &mut [Vec<f16>],
        scratch: &Path,
        timeout: Duration,
    ) -> Result<Vec<Result<(), KernelFailure>>, KernelFailure> {
        let crashed = |err: std::io::Error| KernelFailure::Crashed(err.to_string());
        let started = std::time::Instant::now();
        let inputs = scratch.join(INPUTS).join("batch");
        let _ = std::fs::remove_dir_all(&inputs);
        let outputs_dir = scratch.join(OUTPUTS).join("batch");
        let _ = std::fs::remove_dir_all(&outputs_dir);
        std::fs::create_dir_all(&outputs_dir).map_err(crashed)?;
        let runs = cases
            .iter()
            .enumerate()
            .map(|(i, case)| {
                Ok(BatchedRun {
                    case: CaseFiles::write(case, &inputs.join(i.to_string()))?,
                    output: outputs_dir.join(format!("{i}.bin")),
                })
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(crashed)?;
        let paths: Vec<PathBuf> = runs.iter().map(|run| run.output.clone()).collect();
        let written = started.elapsed().as_secs_f64();
        self.send(&Request::RunBatch { runs })?;
        let reply = self.receive(timeout)?;
        let answered = started.elapsed().as_secs_f64();
        let results = match reply {
            Reply::Batch(results) if results.len() <= cases.len() => results,
            _ => {
                return Err(KernelFailure::Crashed(
                    "the worker answered a batch out of turn".into(),
                ))
            }
        };
        let results = results
            .into_iter()
            .zip(outputs.iter_mut().zip(&paths))
            .map(|(result, (output, path))| match result {
                Ok(()) => read_output_into(path, output),
                Err(failure) => Err(quoted_failure(failure)),
            })
            .collect();
        crate::trace::trace(format_args!(
            "batch of {} cases on files: {written:.4} s writing them, {:.4} s the worker's \
             answer, {:.4} s reading the outputs",
            cases.len(),
            answered - written,
            started.elapsed().as_secs_f64() - answered
        ));
        Ok(results)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workers_text_is_bounded_and_marked_as_the_kernels() {
        let short = quoted("ValueError: no");
        assert_eq!(short, "«ValueError: no» (the kernel's own words)");
        let long = "x".repeat(5000) + "LAST LINE";
        let q = quoted(&long);
        assert!(
            q.contains("LAST LINE") && q.contains("characters before cut"),
            "{q}"
        );
        assert!(q.chars().count() < QUOTED_MAX_CHARS + 80, "{}", q.len());
        let escaped = quoted("a\x1b[2Jb\rc");
        assert!(
            !escaped.contains('\x1b') && !escaped.contains('\r'),
            "{escaped}"
        );
    }

    #[test]
    fn an_output_is_read_whole_and_anything_else_is_refused() {
        let dir = std::env::temp_dir().join(format!("nvfp4-read-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let values = [f16::from_f32(1.5), f16::from_f32(-2.0), f16::NAN];
        let bytes: Vec<u8> = values
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes())
            .collect();
        let file = dir.join("output.bin");
        std::fs::write(&file, &bytes).unwrap();
        let mut output = [f16::ZERO; 3];
        read_output_into(&file, &mut output).unwrap();
        assert_eq!(output.map(f16::to_bits), values.map(f16::to_bits));

        let mut longer = [f16::ZERO; 4];
        let err = read_output_into(&file, &mut longer).unwrap_err();
        assert!(
            matches!(&err, KernelFailure::BadOutput(why) if why.contains("6 bytes")),
            "{err:?}"
        );

        // A FIFO in the output's place would block a plain open until a writer came.
        let fifo = dir.join("fifo.bin");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(read_output_into(&fifo, &mut output).is_err());
        assert!(read_output(&fifo).is_err());
        let link = dir.join("link.bin");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_output(&link).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
