//! The trace: where a long run's time goes, on stderr, only when asked.

use std::sync::OnceLock;
use std::time::Instant;

/// With NVFP4_ORACLE_TRACE set, a campaign says on stderr what it is doing (each case with its
/// shape and seconds, a large case's steps on shared memory, each shrink run, the diagnosis and
/// data shrinking): where a long run's time goes. Each line starts with the seconds since the
/// first line, so that time spent between the lines (no case's phase) shows as a gap.
pub(crate) fn trace(what: std::fmt::Arguments) {
    static ON: OnceLock<bool> = OnceLock::new();
    static FIRST: OnceLock<Instant> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("NVFP4_ORACLE_TRACE").is_some()) {
        let since = FIRST.get_or_init(Instant::now).elapsed().as_secs_f64();
        eprintln!("trace: [{since:9.3}] {what}");
    }
}

/// One step of a run, traced as [`trace`] traces a campaign's: the tool calls it first thing, so
/// that the clock starts with the process and the time before the first case (the worker's
/// start, the reference's compile) and after the last (the checks, the certificate) shows.
pub fn trace_step(what: &str) {
    trace(format_args!("{what}"));
}
