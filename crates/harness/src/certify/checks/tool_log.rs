//! compute-sanitizer's report, carried to the parent through a channel the kernel cannot rewrite,
//! and checked for signs that something else wrote into it.
//!
//! The tool runs inside the worker's sandbox as the worker's parent, so any file it writes, the
//! kernel (same user, same mounts) could replace or truncate. Its `--log-file` is therefore a
//! FIFO whose read end the parent opens before the worker starts and reads to the end while the
//! tool runs ([`LogChannel`]): what the tool wrote is in the parent's memory as soon as it is
//! written, and removing or replacing the FIFO's name changes nothing the parent reads.
//!
//! What a kernel can still do is write into the same FIFO (through its name, or the tool's
//! descriptor under `/proc/<pid>/fd`), and read from it. Writing can only add to the log, so
//! [`audit`] reads it fail-closed: at most one banner, exactly one summary and nothing after it, every
//! line the tool's, and the summary's count equal to the reports the log holds; anything else is
//! a finding ("its findings cannot be trusted"), never a clean report. Reading is a race with the
//! parent that docs/reference/threat-model.md describes among what remains.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Every line compute-sanitizer writes into its log starts with this.
pub const MARK: &str = "=========";

/// The most of a log the parent keeps; a tool's real log (`--print-limit 200`) is far smaller,
/// and a kernel must not exhaust the parent's memory by writing into the FIFO.
pub const MAX_LOG_BYTES: usize = 32 << 20;

/// How long the parent waits, once the worker is gone, for the last writer of the FIFO to close
/// it. In the sandbox every process of the worker dies with it; outside it, a process the kernel
/// left behind could hold the FIFO open.
pub const DRAIN_WAIT: Duration = Duration::from_secs(10);

/// What the parent read from a tool's FIFO.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    /// Every writer closed the FIFO (the tool and anything else that opened it).
    pub ended: bool,
    /// More than [`MAX_LOG_BYTES`] arrived (the rest was read and dropped).
    pub overflowed: bool,
}

/// The FIFO a tool writes its log into, and the parent's thread reading it.
pub struct LogChannel {
    path: PathBuf,
    /// A writer the parent holds until the tool is done, so that the reader does not take the
    /// time before the tool opens the FIFO for its end.
    holder: Option<std::fs::File>,
    /// When the reader is to give up waiting for the end (set by [`LogChannel::finish`]).
    deadline: Arc<Mutex<Option<Instant>>>,
    reader: Option<std::thread::JoinHandle<Captured>>,
}

impl LogChannel {
    /// Makes the FIFO `dir/name` (replacing whatever has that name) and starts reading it.
    pub fn open(dir: &Path, name: &str) -> std::io::Result<LogChannel> {
        std::fs::create_dir_all(dir)?;
        // Absolute: the tool runs in the worker's working directory, not the parent's.
        let path = dir.canonicalize()?.join(name);
        match std::fs::remove_file(&path) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(err),
            _ => {}
        }
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidInput, err))?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Non-blocking: opening the read end does not wait for a writer, and reads return
        // "nothing yet" instead of blocking, so the reader can keep to its deadline.
        let mut read_end = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path)?;
        if !read_end.metadata()?.file_type().is_fifo() {
            return Err(std::io::Error::other(format!(
                "{} is not the FIFO just made",
                path.display()
            )));
        }
        let holder = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)?;
        let deadline: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
        let give_up = deadline.clone();
        let reader = std::thread::spawn(move || {
            let mut captured = Captured::default();
            let mut bytes = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                match read_end.read(&mut chunk) {
                    Ok(0) => {
                        captured.ended = true;
                        break;
                    }
                    Ok(n) => {
                        let room = MAX_LOG_BYTES.saturating_sub(bytes.len());
                        captured.overflowed |= n > room;
                        bytes.extend_from_slice(&chunk[..n.min(room)]);
                        continue;
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
                let over = give_up
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .is_some_and(|at| Instant::now() >= at);
                if over {
                    break;
                }
                let mut poll = libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(&read_end),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; waits at most 100 ms.
                unsafe { libc::poll(&mut poll, 1, 100) };
            }
            captured.text = String::from_utf8_lossy(&bytes).into_owned();
            captured
        });
        Ok(LogChannel {
            path,
            holder: Some(holder),
            deadline,
            reader: Some(reader),
        })
    }

    /// The FIFO's path, for the tool's `--log-file`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Once the tool is gone: lets the reader see the end, waits up to `wait` for it, and
    /// removes the FIFO.
    pub fn finish(mut self, wait: Duration) -> Captured {
        self.holder = None;
        *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + wait);
        let captured = self
            .reader
            .take()
            .and_then(|reader| reader.join().ok())
            .unwrap_or_default();
        let _ = std::fs::remove_file(&self.path);
        captured
    }
}

impl Drop for LogChannel {
    fn drop(&mut self) {
        if self.reader.is_some() {
            *self.deadline.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A tool's log in outline: its report blocks (each a headline and its continuation lines) and
/// the lines that are not reports.
pub struct Outline<'a> {
    pub blocks: Vec<Vec<&'a str>>,
    banners: usize,
    /// The summary lines, each with its place among the lines that say something.
    summaries: Vec<(usize, &'a str)>,
    /// Lines that say something (not the tool's blank `=========` lines).
    lines: usize,
    /// Lines not as the tool writes them, with their numbers (1-based).
    foreign: Vec<(usize, &'a str)>,
}

/// Splits a log into report blocks; see [`Outline`].
pub fn outline(log: &str) -> Outline<'_> {
    let mut outline = Outline {
        blocks: Vec::new(),
        banners: 0,
        summaries: Vec::new(),
        lines: 0,
        foreign: Vec::new(),
    };
    let mut open = false;
    for (number, line) in log.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let index = outline.lines;
        // A line of the tool's starts with the mark and holds it once: text written into the
        // FIFO by someone else, landing before or inside one of the tool's lines, shows.
        let Some(content) = line.strip_prefix(MARK).filter(|c| !c.contains(MARK)) else {
            outline.foreign.push((number + 1, line));
            outline.lines += 1;
            open = false;
            continue;
        };
        let trimmed = content.trim();
        if !trimmed.is_empty() {
            outline.lines += 1;
        }
        if trimmed.starts_with("COMPUTE-SANITIZER") {
            outline.banners += 1;
            open = false;
        } else if trimmed.contains("SUMMARY") {
            outline.summaries.push((index, trimmed));
            open = false;
        } else if trimmed.is_empty() || trimmed.starts_with("Target application returned") {
            open = false; // ends the previous report
        } else if content.starts_with("  ") {
            if open {
                if let Some(block) = outline.blocks.last_mut() {
                    block.push(trimmed);
                }
            }
        } else {
            outline.blocks.push(vec![trimmed]);
            open = true;
        }
    }
    outline
}

/// The number of reports a summary line counts: `ERROR SUMMARY: N errors`, or racecheck's
/// `RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)` (E + W); None if it says
/// neither.
fn summary_count(summary: &str) -> Option<usize> {
    let number = |text: &str| text.trim().parse::<usize>().ok();
    if let Some(rest) = summary.strip_prefix("ERROR SUMMARY:") {
        return number(rest.split_whitespace().next()?);
    }
    let (_, inside) = summary.split_once('(')?;
    let inside = inside.strip_suffix(')')?;
    let mut total = 0;
    for part in inside.split(',') {
        let mut words = part.split_whitespace();
        let n = number(words.next()?)?;
        if !matches!(words.next()?, "error" | "errors" | "warning" | "warnings") {
            return None;
        }
        total += n;
    }
    Some(total)
}

/// The tool's `--print-limit`: past it the summary counts more reports than the log shows.
pub const PRINT_LIMIT: usize = 200;

/// Why a log cannot be trusted, if it cannot: [`Captured`] as the parent read it, `ran_to_end`
/// whether the tool ran the whole sample and was then let exit (it then writes its summary).
/// Each reason, in words, is one finding (the caller makes it one of its tool's); an empty list
/// is a log that reads as the tool wrote it.
pub fn audit(captured: &Captured, ran_to_end: bool) -> Vec<String> {
    let mut why: Vec<String> = Vec::new();
    if captured.overflowed {
        why.push(format!(
            "more than {} MiB arrived in it, far past what the tool writes",
            MAX_LOG_BYTES >> 20
        ));
    }
    if !captured.ended {
        why.push(
            "something other than the tool still held it open after the tool ended".to_string(),
        );
    }
    let log = outline(&captured.text);
    if let Some((number, line)) = log.foreign.first() {
        why.push(format!(
            "line {number} is not as the tool writes its lines ({} such line(s)): {:?}",
            log.foreign.len(),
            line.chars().take(120).collect::<String>()
        ));
    }
    if log.banners > 1 {
        why.push(format!("it holds {} banners, not one", log.banners));
    }
    if ran_to_end {
        match log.summaries.as_slice() {
            [] if captured.text.trim().is_empty() => why.push(
                "it is missing or empty after the sample ran to its end: the tool was stopped, or \
                 never wrote it"
                    .to_string(),
            ),
            [] => why.push("it has no summary after the sample ran to its end".to_string()),
            [(index, summary)] => {
                if index + 1 != log.lines {
                    why.push("lines follow its summary".to_string());
                }
                let shown = log.blocks.len();
                match summary_count(summary) {
                    None => why.push(format!(
                        "its summary does not read as the tool's: {summary:?}"
                    )),
                    Some(counted)
                        if counted != shown && !(counted > PRINT_LIMIT && shown >= PRINT_LIMIT) =>
                    {
                        why.push(format!(
                            "its summary counts {counted} report(s) and it holds {shown}"
                        ))
                    }
                    Some(_) => {}
                }
            }
            more => why.push(format!("it holds {} summaries, not one", more.len())),
        }
    }
    why.into_iter()
        .map(|reason| {
            format!(
                "compute-sanitizer's log was tampered with or is incomplete: {reason}; its \
                 findings cannot be trusted"
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
    const RACE: &str = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at k+0x10 in a.cu:7
=========     and Read access at k+0x20 in a.cu:9 [12 hazards]
========= 
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
";

    fn verdicts(text: &str, ran_to_end: bool) -> Vec<String> {
        let captured = Captured {
            text: text.to_string(),
            ended: true,
            overflowed: false,
        };
        audit(&captured, ran_to_end)
    }

    #[test]
    fn the_tools_own_logs_pass() {
        assert!(verdicts(CLEAN, true).is_empty());
        assert!(verdicts(RACE, true).is_empty());
        // As the H100 wrote them (copies of results/sanitize/logs/ in the crate's fixtures): a
        // race log of 30 reports.
        let race = include_str!("../../../tests/fixtures/sanitizer/hopper-test-race-racecheck.log");
        assert!(verdicts(race, true).is_empty());
        let clean = include_str!("../../../tests/fixtures/sanitizer/example-torch-racecheck.log");
        assert!(verdicts(clean, true).is_empty());
    }

    #[test]
    fn a_second_summary_or_a_count_the_reports_do_not_match_is_tampering() {
        // A clean summary appended before the tool's own.
        let appended = RACE.replace(
            "========= RACECHECK",
            "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n========= RACECHECK",
        );
        let two = verdicts(&appended, true);
        assert!(two.iter().any(|v| v.contains("2 summaries")), "{two:?}");
        // The reports cut out, the tool's summary kept.
        let cut = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
        let counted = verdicts(cut, true);
        assert!(
            counted
                .iter()
                .any(|v| v.contains("counts 1 report(s) and it holds 0")),
            "{counted:?}"
        );
        // A forged whole log after the tool's banner.
        let forged = format!("{CLEAN}{CLEAN}");
        let forged = verdicts(&forged, true);
        assert!(forged.iter().any(|v| v.contains("2 banners")), "{forged:?}");
    }

    #[test]
    fn text_that_lands_inside_the_tools_lines_shows() {
        // Bytes written without a newline merge with the tool's next line.
        let merged = "========= COMPUTE-SANITIZER\nxx========= Uninitialized __global__ memory read of size 4 bytes\n=========     at k+0x10 in a.cu:3\n========= ERROR SUMMARY: 1 error\n";
        let found = verdicts(merged, true);
        assert!(
            found
                .iter()
                .any(|v| v.contains("line 2 is not as the tool writes")),
            "{found:?}"
        );
        let inside =
            "========= COMPUTE-SANITIZER\n========= Uninit========= ERROR SUMMARY: 0 errors\n";
        assert!(!verdicts(inside, true).is_empty());
        let after = format!("{CLEAN}========= \n");
        assert!(
            verdicts(&after, true).is_empty(),
            "a blank line of the tool's"
        );
        let after = format!("{CLEAN}========= Invalid __global__ read\n");
        assert!(verdicts(&after, true)
            .iter()
            .any(|v| v.contains("lines follow its summary")));
    }

    #[test]
    fn a_missing_summary_counts_only_after_a_whole_sample() {
        let cut_short =
            "========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n";
        assert!(verdicts(cut_short, false).is_empty());
        assert!(verdicts(cut_short, true)
            .iter()
            .any(|v| v.contains("no summary")));
        assert!(verdicts("", true)
            .iter()
            .any(|v| v.contains("missing or empty")));
    }

    #[test]
    fn a_fifo_held_open_or_flooded_is_not_trusted() {
        let held = Captured {
            text: CLEAN.into(),
            ended: false,
            overflowed: false,
        };
        assert!(audit(&held, true)[0].contains("still held it open"));
        let flooded = Captured {
            text: CLEAN.into(),
            ended: true,
            overflowed: true,
        };
        assert!(audit(&flooded, true)[0].contains("MiB arrived"));
    }

    #[test]
    fn the_parent_reads_what_was_written_however_the_name_is_replaced() {
        let dir = std::env::temp_dir().join(format!("nvfp4-fifo-{}", std::process::id()));
        let channel = LogChannel::open(&dir, "t.log").unwrap();
        let path = channel.path().to_path_buf();
        assert!(path.is_absolute());
        let mut tool = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::io::Write::write_all(&mut tool, RACE.as_bytes()).unwrap();
        // What a kernel did to the old log file: removed, and a clean one in its place.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, CLEAN).unwrap();
        drop(tool);
        let captured = channel.finish(Duration::from_secs(5));
        assert!(captured.ended && !captured.overflowed);
        assert_eq!(captured.text, RACE);
        assert!(!path.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_writer_that_never_closes_is_given_up_on() {
        let dir = std::env::temp_dir().join(format!("nvfp4-fifo-held-{}", std::process::id()));
        let channel = LogChannel::open(&dir, "t.log").unwrap();
        let held = std::fs::OpenOptions::new()
            .write(true)
            .open(channel.path())
            .unwrap();
        let started = Instant::now();
        let captured = channel.finish(Duration::from_millis(300));
        assert!(!captured.ended);
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
