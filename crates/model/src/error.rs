//! The model's error type. Every message is written for the person who ran the command: it says
//! what was wrong and, where it can, what to do instead.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot pack {count} FP4 values: packing stores two per byte, so the count must be even (odd K?)")]
    OddFp4Count { count: usize },

    #[error("invalid shape: {dimension} = {value}: {requirement}")]
    InvalidShape {
        dimension: &'static str,
        value: usize,
        requirement: &'static str,
    },

    #[error("cannot parse shape '{text}': expected MxNxK or MxNxKxL with positive integers, e.g. 256x512x7168")]
    ShapeSyntax { text: String },

    #[error("tensor '{name}' has {actual} bytes but the shape needs {expected}")]
    TensorSize {
        name: String,
        expected: usize,
        actual: usize,
    },

    #[error("tensor '{name}' has {actual} elements but the shape needs {expected}")]
    ElementCount {
        name: String,
        expected: usize,
        actual: usize,
    },

    #[error("unknown {what} '{given}'; expected one of: {expected}")]
    UnknownName {
        what: &'static str,
        given: String,
        expected: String,
    },

    #[error("cannot quantize: {reason}")]
    Quantize { reason: String },

    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },

    #[error("{what} needs about {needed} of memory; this machine has {available} available: use a smaller shape (or a machine with more memory)")]
    TooLarge {
        what: String,
        needed: String,
        available: String,
    },

    /// Input that is well formed but not valid for what was asked (an element code not of its
    /// format, a non-finite alpha or bias, a K its format cannot take, files of another model
    /// version).
    #[error("{0}")]
    InvalidInput(String),
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

/// The value of `all` whose `name` is `text`, or [`Error::UnknownName`] listing every name: the
/// `FromStr` of each named enum (problems, formats, orders, epilogues...).
pub fn parse_name<T: Copy>(
    all: &[T],
    name: fn(T) -> &'static str,
    what: &'static str,
    text: &str,
) -> Result<T> {
    all.iter()
        .copied()
        .find(|&value| name(value) == text)
        .ok_or_else(|| Error::UnknownName {
            what,
            given: text.to_string(),
            expected: all
                .iter()
                .map(|&value| name(value))
                .collect::<Vec<_>>()
                .join(", "),
        })
}
