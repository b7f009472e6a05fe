//! The harness's error type: the model's errors as they are (a file it could not read or write
//! among them), and what only the harness meets (a GPU that failed, a timeout, bad usage). Every message is written for
//! the person who ran the command: it says what was wrong and, where it can, what to do instead.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Model(#[from] nvfp4_model::Error),

    /// What the command line asked cannot be done as asked (named by the tool, never by the
    /// library's own code).
    #[error("{0}")]
    Usage(String),

    /// A shard of a campaign named wrongly (`--shard I/N`, a job array's variables).
    #[error("{0}")]
    Shard(String),

    /// Preflight could not do its work: a program it runs could not be started or answered
    /// outside what it reads, a compilation's result was refused.
    #[error("{0}")]
    Preflight(String),

    /// A worker received a request it cannot read.
    #[error("bad worker request: {0}")]
    Protocol(String),

    #[error("GPU: {0}")]
    Gpu(String),

    /// Shards given to merge that are not of one campaign, and how they differ.
    #[error("{0}")]
    NotOneCampaign(String),

    /// A step that ran out of the time its command gives (exit code 6).
    #[error("{step} did not end within the {seconds} s that --timeout allows: it was killed, with every process it started (give it more with --timeout SECONDS)")]
    Timeout { step: String, seconds: u64 },

    /// The process was asked to end (SIGINT, SIGTERM, SIGHUP) while a step ran; the step was
    /// killed and its files removed, and `main` ends the process with the same signal.
    #[error("interrupted by signal {signal}: the step running was killed and its temporary files removed")]
    Interrupted { signal: i32 },
}

impl Error {
    /// A file that could not be read, written or understood: the model's one file error, so
    /// that both crates say it the same way.
    pub fn file(path: impl Into<PathBuf>, reason: impl ToString) -> Self {
        Error::Model(nvfp4_model::Error::file(path, reason))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
