//! `certify --gpus all|LIST`: one campaign over several GPUs of this machine. Each GPU gets a
//! shard of the campaign ([`nvfp4_harness::certify::Shard`]) in a `certify` process of its own that sees
//! only that GPU (`CUDA_VISIBLE_DEVICES`), all with one seed; their certificates are then merged
//! ([`crate::cli::merge`]) into the report directory, recording every GPU used. The same process
//! split as on several machines, so that one machine with N GPUs and N machines give the same
//! certificate.

use crate::cli::merge::MergeArgs;
use nvfp4_harness::{Error, Result};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// The options a shard process gets anew (the rest of the command line is passed on as given).
const REPLACED: [&str; 8] = [
    "--gpus",
    "--report-dir",
    "--seed",
    "--shard",
    "--shard-count",
    "--baseline",
    "--junit",
    "--summary",
];

/// How many GPUs `--gpus` takes the driver to see, for tests of the split on machines without
/// a GPU (their kernels are CPU kernels, which run alike in every shard).
pub const GPU_COUNT_ENV: &str = "NVFP4_ORACLE_TEST_GPU_COUNT";

/// The GPUs `list` names: `all` (every GPU the driver sees) or indices `0,1,...`.
pub fn gpu_list(list: &str) -> Result<Vec<String>> {
    if list.trim() == "all" {
        let count = nvfp4_harness::gpu::device_count()
            .map_err(|why| Error::Usage(format!("--gpus all: {why}")))?;
        if count == 0 {
            return Err(Error::Usage("--gpus all: the driver sees no GPU".into()));
        }
        return Ok((0..count).map(|i| i.to_string()).collect());
    }
    let gpus: Vec<String> = list.split(',').map(|s| s.trim().to_string()).collect();
    if gpus.is_empty()
        || gpus
            .iter()
            .any(|g| g.is_empty() || g.parse::<u32>().is_err())
    {
        return Err(Error::Usage(format!(
            "--gpus {list}: expected `all` or GPU indices such as 0,1"
        )));
    }
    for (i, gpu) in gpus.iter().enumerate() {
        if gpus[..i].contains(gpu) {
            return Err(Error::Usage(format!(
                "--gpus {list}: GPU {gpu} is named twice (each GPU runs one shard)"
            )));
        }
    }
    // Named GPUs must exist: a shard on a missing one would run on no GPU at all.
    // GPU_COUNT_ENV stands in for the driver where tests split CPU campaigns on a machine
    // without a GPU.
    let count = match std::env::var(GPU_COUNT_ENV)
        .ok()
        .and_then(|n| n.parse().ok())
    {
        Some(count) => count,
        None => nvfp4_harness::gpu::device_count()
            .map_err(|why| Error::Usage(format!("--gpus {list}: {why}")))?,
    };
    if let Some(missing) = gpus
        .iter()
        .find(|g| g.parse::<usize>().map_or(true, |i| i >= count))
    {
        return Err(Error::Usage(format!(
            "--gpus {list}: there is no GPU {missing}: the driver sees {count} ({})",
            if count == 0 {
                "none".to_string()
            } else {
                format!("indices 0 to {}", count - 1)
            }
        )));
    }
    Ok(gpus)
}

/// This command line without the options in [`REPLACED`] (and their values).
fn passed_on(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for arg in args {
        if skip_value {
            skip_value = false;
            continue;
        }
        if let Some(option) = REPLACED.iter().find(|o| arg.starts_with(*o)) {
            // `--opt value` or `--opt=value`.
            skip_value = arg.len() == option.len();
            continue;
        }
        out.push(arg.clone());
    }
    out
}

/// Runs the shards, one process per GPU, then merges them.
/// `certify --gpus LIST` with the rest of `args`: the shards run, then merged as `merge` would.
pub(super) fn run_on_gpus(list: &str, seed: u64, args: &super::CertifyArgs) -> Result<ExitCode> {
    let gpus = gpu_list(list)?;
    run(&gpus, seed, &args.report_dir, |shards| MergeArgs {
        shards,
        report_dir: args.report_dir.clone(),
        gate: args.gate.clone(),
    })
}

pub fn run(
    gpus: &[String],
    seed: u64,
    report_dir: &Path,
    merge: impl FnOnce(Vec<PathBuf>) -> MergeArgs,
) -> Result<ExitCode> {
    let exe = std::env::current_exe().map_err(|err| Error::Usage(err.to_string()))?;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let shards_dir = report_dir.join("gpu-shards");
    std::fs::create_dir_all(&shards_dir)
        .map_err(|err| Error::file(&shards_dir, format!("cannot create: {err}")))?;
    let count = gpus.len();
    eprintln!(
        "certifying on {count} GPU(s) ({}), one shard each, seed {seed}; logs in {}",
        gpus.join(", "),
        shards_dir.display()
    );
    // Each shard pinned to its own slice of the cores this process may use, so that the
    // shards' thread pools do not contend for every core (crates/harness/src/cores.rs).
    let core_slices = nvfp4_harness::cores::slices(&nvfp4_harness::cores::allowed_cores(), count);
    let mut children = Vec::new();
    for (i, gpu) in gpus.iter().enumerate() {
        let log_path = shards_dir.join(format!("gpu-{gpu}.log"));
        let log = std::fs::File::create(&log_path).map_err(|err| Error::file(&log_path, err))?;
        let mut command = Command::new(&exe);
        let cores = core_slices[i].clone();
        // SAFETY: between fork and exec the closure makes one system call and allocates nothing.
        unsafe {
            command.pre_exec(move || nvfp4_harness::cores::pin_to(&cores));
        }
        let child = command
            .args(passed_on(&argv))
            .args(["--seed", &seed.to_string()])
            .args(["--shard", &format!("{}/{count}", i + 1)])
            .arg("--report-dir")
            .arg(&shards_dir)
            .env("CUDA_VISIBLE_DEVICES", gpu)
            .env_remove("NVFP4_ORACLE_SHARD")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|err| Error::file(&log_path, err))?)
            .stderr(log)
            .spawn()
            .map_err(|err| Error::Usage(format!("cannot start a shard: {err}")))?;
        children.push((gpu.clone(), child, log_path));
    }
    let mut broken = Vec::new();
    for (gpu, mut child, log) in children {
        let code = child.wait().map(|s| s.code().unwrap_or(-1)).unwrap_or(-1);
        eprintln!("GPU {gpu}: shard exited {code} (log {})", log.display());
        // 0 certified, 1 failed, 3 not exact, 4 unavailable: each wrote its certificates.
        if ![0, 1, 3, 4].contains(&code) {
            broken.push(format!("GPU {gpu} (exit {code}, see {})", log.display()));
        }
    }
    if !broken.is_empty() {
        return Err(Error::Usage(format!(
            "a shard could not run: {}",
            broken.join("; ")
        )));
    }
    let suffix = format!("-of-{count}.json");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&shards_dir)
        .map_err(|err| Error::file(&shards_dir, err))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.contains(".shard-") && n.ends_with(&suffix))
        })
        .collect();
    files.sort();
    crate::cli::merge::run(merge(files))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_gets_the_command_line_without_what_it_is_given_anew() {
        let args: Vec<String> = [
            "certify",
            "--kernel",
            "cpu-tiled",
            "--gpus",
            "0,1",
            "--seed=4",
            "--cases",
            "9",
            "--report-dir",
            "out",
            "--junit",
            "j.xml",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            passed_on(&args),
            ["certify", "--kernel", "cpu-tiled", "--cases", "9"]
        );
    }

    #[test]
    fn gpu_lists() {
        // SAFETY: no other test of this binary reads or sets it.
        unsafe { std::env::set_var(GPU_COUNT_ENV, "2") };
        assert_eq!(gpu_list("0, 1").unwrap(), ["0", "1"]);
        assert!(gpu_list("0,0").unwrap_err().to_string().contains("twice"));
        assert!(gpu_list("99")
            .unwrap_err()
            .to_string()
            .contains("no GPU 99"));
        assert!(gpu_list("0,x").is_err());
        assert!(gpu_list("").is_err());
    }
}
