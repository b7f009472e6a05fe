//! The door for external kernels, on a machine with no GPU and no torch, a file per subject
//! on the fixtures here: the worker protocol's parent side against a fake worker (`protocol`:
//! crashes, hangs, unreadable and forged replies, restarts, batches), what a user brings to the
//! door (`inputs`: manifests and their errors, submissions, the CLI's exit codes for bad input),
//! campaigns and timing through a worker (`campaigns`), and the checks that run the worker
//! under a tool or a sandbox (`checks`). With torch and a GPU, the real door is exercised by
//! `external_kernels_gpu.rs` and results/door/door_run.sh.

use crate::common;

use half::f16;
use nvfp4_harness::kernels::KernelCase;
use nvfp4_harness::worker::isolated::IsolatedKernel;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(super) fn python() -> Option<&'static str> {
    Command::new("python3")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "python3")
}

pub(super) fn fake_kernel(name: &str, args: &[&str], case_timeout: Duration) -> IsolatedKernel {
    let start = Duration::from_secs(3);
    common::fake_worker_kernel(name, args, Vec::new(), None, start, case_timeout)
}

pub(super) fn small_case() -> (KernelCase, Vec<f16>) {
    let shape = Shape::new(3, 5, 32, 2).unwrap();
    let case = KernelCase::new(generate_dual_gemm(shape, Distribution::Full, 7), 0x7F);
    (case, vec![f16::NAN; 3 * 5 * 2])
}

macro_rules! need_python {
    () => {
        if python().is_none() {
            common::skip("no python3 here to run the fake worker");
            return;
        }
    };
}

pub(super) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the oracle with `env` added, from the temporary directory; (exit code, stderr alone).
pub(super) fn oracle(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = common::oracle_command()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

mod campaigns;
mod checks;
mod inputs;
mod protocol;
