//! nvfp4-oracle: the command-line tool on the harness (`nvfp4-harness`) and the model
//! (`nvfp4-model`): argument parsing, printing and exit codes ([`cli`]); `main.rs` only parses
//! and maps an error to its exit code.

pub mod cli;
