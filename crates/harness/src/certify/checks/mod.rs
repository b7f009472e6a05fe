//! The checks a GPU kernel gets beyond its outputs: determinism, compute-sanitizer, and the
//! sanitizer's log carried through a channel the kernel cannot rewrite.

pub(crate) mod determinism;
pub(crate) mod sanitize;
pub(crate) mod tool_log;

// The modules of other rooms the checks name.
use super::campaign::{self, fixed_cases};
