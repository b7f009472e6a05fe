//! The harness's error type: the model's errors as they are, and what only the harness meets (a
//! file it could not read or write, a GPU that failed, bad usage). Every message is written for
//! the person who ran the command: it says what was wrong and, where it can, what to do instead.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Model(#[from] nvfp4_model::Error),

    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },

    #[error("{0}")]
    Usage(String),

    #[error("GPU: {0}")]
    Gpu(String),
}

impl Error {
    pub fn file(path: impl Into<PathBuf>, reason: impl ToString) -> Self {
        Error::File {
            path: path.into(),
            reason: reason.to_string(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
