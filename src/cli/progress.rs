//! Progress bars: each kernel's campaign in `certify`, and the long computations of `reference`
//! and `scaled-gemm reference` (a bar appears only where the work is long enough to leave the
//! user waiting without one); and, where no bar can be drawn (a CI log), a line every 15 s.

use indicatif::{ProgressBar, ProgressStyle};

/// Products past this many get a progress bar (a few seconds on two cores).
pub const PROGRESS_PRODUCTS: u128 = 1 << 28;

/// A bar counting `rows` output rows on stderr, labelled `what`, when the work is at least
/// [`PROGRESS_PRODUCTS`] multiply-adds; `None` for shorter work.
pub fn rows_bar(what: &str, rows: usize, products: u128) -> Option<ProgressBar> {
    if products < PROGRESS_PRODUCTS {
        return None;
    }
    let bar = ProgressBar::new(rows as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{pos}}/{{len}} rows, {{eta}} left"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    Some(bar)
}

/// A campaign's bar on stderr: `kernel`'s cases done of `cases` planned. On a terminal
/// (indicatif draws nothing elsewhere), unless `quiet`; ticking, so that a long case (a
/// production shape, a shrink) is seen to run.
pub fn cases_bar(kernel: &str, cases: usize, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(cases as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>28} [{bar:30}] {pos}/{len} cases {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(kernel.to_string());
    if quiet {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    } else {
        bar.enable_steady_tick(std::time::Duration::from_millis(500));
    }
    bar
}

/// How often a long command says it is still working where no bar is drawn (stderr a file or a
/// pipe: a CI log), so that a log is never silent for minutes.
pub const NOTE_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Whether stderr is a terminal (where indicatif draws its bars).
pub fn stderr_is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal()
}

/// A line on stderr every [`NOTE_EVERY`] while it lives, as `line` words it given the time since
/// it started; it stops when dropped.
pub struct Heartbeat {
    stop: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    pub fn start(line: impl Fn(std::time::Duration) -> String + Send + 'static) -> Heartbeat {
        Self::every(NOTE_EVERY, line)
    }

    fn every(
        period: std::time::Duration,
        line: impl Fn(std::time::Duration) -> String + Send + 'static,
    ) -> Heartbeat {
        let stop = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let seen = stop.clone();
        let started = std::time::Instant::now();
        let thread = std::thread::Builder::new()
            .name("progress-notes".into())
            .spawn(move || {
                let (stopped, wake) = &*seen;
                let mut stopped = stopped.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    let (now, timeout) = wake
                        .wait_timeout(stopped, period)
                        .unwrap_or_else(|e| e.into_inner());
                    stopped = now;
                    if *stopped {
                        return;
                    }
                    if timeout.timed_out() {
                        eprintln!("{}", line(started.elapsed()));
                    }
                }
            })
            .ok();
        Heartbeat { stop, thread }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_long_work_gets_a_bar() {
        assert!(rows_bar("reference", 128, PROGRESS_PRODUCTS - 1).is_none());
        let bar = rows_bar("reference", 30_000, PROGRESS_PRODUCTS).expect("a bar");
        assert_eq!(bar.length(), Some(30_000));
    }

    #[test]
    fn a_heartbeat_counts_its_notes_and_stops_when_dropped() {
        let notes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = notes.clone();
        let beat = Heartbeat::every(std::time::Duration::from_millis(20), move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            "still working".into()
        });
        std::thread::sleep(std::time::Duration::from_millis(150));
        drop(beat);
        let seen = notes.load(std::sync::atomic::Ordering::SeqCst);
        assert!(seen >= 2, "{seen} notes");
        std::thread::sleep(std::time::Duration::from_millis(60));
        assert_eq!(
            notes.load(std::sync::atomic::Ordering::SeqCst),
            seen,
            "stopped"
        );
    }
}
