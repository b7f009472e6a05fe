//! The trace: where a long run's time goes, on stderr, only when asked.

/// With NVFP4_ORACLE_TRACE set, a campaign says on stderr what it is doing (each case with its
/// shape and seconds, a large case's steps on shared memory, each shrink run, the diagnosis and
/// data shrinking): where a long run's time goes.
pub(crate) fn trace(what: std::fmt::Arguments) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("NVFP4_ORACLE_TRACE").is_some()) {
        eprintln!("trace: {what}");
    }
}
