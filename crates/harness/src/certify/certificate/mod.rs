//! The certificate: its JSON and Markdown, its signature, whether bench may trust it, shards and
//! their merge, the baseline comparison and what a CI system reads of it.

pub(crate) mod baseline;
pub(crate) mod ci_report;
pub(crate) mod failure_report;
pub(crate) mod merge;
pub(crate) mod report;
pub(crate) mod report_lock;
pub(crate) mod report_markdown;
pub(crate) mod signing;
pub(crate) mod summary_row;
pub(crate) mod trust;

// The modules of other rooms the certificate's files name.
use super::campaign::{self, coverage, reference_engine, regimes, shard};
use super::checks::{self, sanitize};
use super::shrink::{failure, failure_class, region, shrink_data, time_bound};
