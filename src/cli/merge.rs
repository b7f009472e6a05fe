//! `nvfp4-oracle merge`: shard certificates (`certify --shard I/N`) into one certificate per
//! kernel, as the unsharded campaign would have written it (src/certify/merge.rs says how).

use super::{EXIT_FAIL, EXIT_NOT_EXACT, EXIT_UNAVAILABLE};
use crate::certify::merge::{merge, read_shard, ShardCertificate};
use crate::certify::report::{ExactOutcome, Status};
use crate::error::{Error, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// The shards' certificates (`<kernel>.shard-I-of-N.json`, every shard of each campaign),
    /// with their repro files beside them. Shards of several kernels may be given together.
    /// Each must be signed with this machine's key (shards certified elsewhere: share the key
    /// through NVFP4_ORACLE_SECRETS).
    #[arg(required = true, value_name = "SHARD.json")]
    pub shards: Vec<PathBuf>,
    /// Where the merged certificates (`<kernel>.json`, `.md`, signed) and a failure's repro
    /// files are written.
    #[arg(long, default_value = "certify-report")]
    pub report_dir: PathBuf,
}

pub fn run(args: MergeArgs) -> Result<ExitCode> {
    let mut by_kernel: Vec<(String, Vec<ShardCertificate>)> = Vec::new();
    for path in &args.shards {
        let shard = read_shard(path)?;
        let kernel = shard.certificate.kernel.clone();
        match by_kernel.iter_mut().find(|(k, _)| *k == kernel) {
            Some((_, shards)) => shards.push(shard),
            None => by_kernel.push((kernel, vec![shard])),
        }
    }
    std::fs::create_dir_all(&args.report_dir)
        .map_err(|err| Error::file(&args.report_dir, format!("cannot create: {err}")))?;
    let mut code = 0u8;
    println!("| kernel | shards | status | cases | minimal repro | diagnosis |");
    println!("|---|---|---|---|---|---|");
    for (kernel, shards) in by_kernel {
        let count = shards.len();
        let merged = merge(shards, &args.report_dir)
            .map_err(|err| Error::Usage(format!("{kernel}: {err}")))?;
        merged.write(&args.report_dir)?;
        let (repro, diagnosis) = match &merged.failure {
            Some(f) => (
                format!("{} {}", f.minimal_case.shape, f.minimal_case.dist.name()),
                f.diagnosis.clone(),
            ),
            None => ("-".into(), merged.check_findings().join("; ")),
        };
        println!(
            "| {kernel} | {count} | {:?} | {} | {repro} | {diagnosis} |",
            merged.status, merged.coverage.cases
        );
        let exact = merged.exact.as_ref().map(|e| e.outcome);
        code = code.max(match merged.status {
            Status::Failed => EXIT_FAIL,
            Status::Unavailable => EXIT_UNAVAILABLE,
            _ if matches!(
                exact,
                Some(ExactOutcome::ScheduleDiffers | ExactOutcome::NoScheduleDeclared)
            ) =>
            {
                EXIT_NOT_EXACT
            }
            _ => 0,
        });
    }
    eprintln!(
        "merged certificates written to {}",
        args.report_dir.display()
    );
    Ok(ExitCode::from(code))
}
