//! The tool's integration tests, one binary (one link of the workspace) with a module per
//! subject: the CLI end to end, certify and its door, shards, the gate, golden files, replay, the
//! GPU and preflight checks, the exploit catalogue. Every test that runs nvfp4-oracle is here,
//! since cargo builds the binary (CARGO_BIN_EXE_nvfp4-oracle) for the root package's tests only;
//! they all start it through `common::oracle_command`. The tests share one process: what they
//! need of the process's environment is set once, in `common`.

mod common;

mod campaign_plan;
mod certify;
mod ci_templates;
mod cli;
mod cli_errors;
mod cli_help;
mod exploits;
mod external_kernels;
mod external_kernels_gpu;
mod gate;
mod golden;
mod help_matches_code;
mod gpu;
mod gpu_inputs;
mod gpu_reference;
mod gpu_reference_tensor_core;
mod hardening;
mod planted_wrong_problems;
mod preflight;
mod preflight_cute;
mod preflight_steps;
mod progress_notes;
mod readme_commands;
mod regimes;
mod replay;
mod report_dir;
mod sandbox_root;
mod secrets;
mod scaled_gemm_cli;
mod shard;
mod skip_log;
mod submission_start;
mod temp_cleanup;
mod usage_messages;
mod worker_isolation;
mod wrong_problems;
