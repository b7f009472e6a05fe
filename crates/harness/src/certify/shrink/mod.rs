//! After a failure (`failure.rs`, the campaign's one call): the failing case shrunk (its shape,
//! then its data) and diagnosed, the bug class of a failure that left nothing to diagnose, and
//! the table of planted bugs each check catches.

mod diagnose;
pub(crate) mod failure;
pub(crate) mod failure_class;
pub(crate) mod field_comparison;
mod identify;
pub(crate) mod region;
pub(crate) mod shrink_data;
pub(crate) mod shrink_shape;
pub(crate) mod time_bound;

// The modules of other rooms the shrinking files name.
use super::campaign::{cases, fixed_cases, reference_engine, sampling};
use crate::trace::trace;
