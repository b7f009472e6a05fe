//! After a failure: the failing case shrunk (its shape, then its data), the bug class of a
//! failure that left nothing to diagnose, and the table of planted bugs each check catches.

pub(crate) mod failure_class;
pub(crate) mod field_comparison;
pub(crate) mod shrink_data;
pub(crate) mod shrink_shape;

// The modules of other rooms the shrinking files name.
use super::campaign::{cases, reference_engine};
use super::trace::trace;
