//! The harness's integration tests that need neither the nvfp4-oracle binary nor a GPU, one
//! binary (one link) with a module per subject. The tests that run the binary are the root
//! package's (tests/oracle/main.rs): cargo builds the binary for those alone.

mod common;

mod campaign_coverage;

mod field_mutants;
mod host_profile;
mod per_product;
