//! `nvfp4-oracle merge`: shard certificates (`certify --shard I/N`) into one certificate per
//! kernel, as the unsharded campaign would have written it (crates/harness/src/certify/certificate/merge.rs says how).

use super::exit_code::{EXIT_FAIL, EXIT_NOT_EXACT, EXIT_REGRESSION, EXIT_UNAVAILABLE};
use clap::Args;
use nvfp4_harness::certify::{merge, read_shard, ShardCertificate};
use nvfp4_harness::certify::{Certificate, ExactOutcome, Status};
use nvfp4_harness::{Error, Result};
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
    #[command(flatten)]
    pub gate: super::gate::GateArgs,
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
    let names: Vec<&str> = by_kernel
        .iter()
        .map(|(kernel, _)| kernel.as_str())
        .collect();
    args.gate.check_baseline(&names)?;
    std::fs::create_dir_all(&args.report_dir)
        .map_err(|err| Error::file(&args.report_dir, format!("cannot create: {err}")))?;
    let mut certificates = Vec::new();
    // Printed once every kernel's shards merged: a refused merge is an error with no
    // half-printed table before it.
    let mut rows = Vec::new();
    for (kernel, shards) in by_kernel {
        let count = shards.len();
        let merged = merge(shards, &args.report_dir)
            .map_err(|err| Error::Usage(format!("{kernel}: {err}")))?;
        if let Some(kept) = merged.write(&args.report_dir)? {
            eprintln!("note: {kept}");
        }
        let (repro, diagnosis) = match &merged.failure {
            Some(f) => (
                format!("{} {}", f.minimal_case.shape, f.minimal_case.dist.name()),
                f.diagnosis.clone(),
            ),
            None => {
                let findings = merged.check_findings();
                let words = if findings.is_empty() {
                    "-".to_string()
                } else {
                    findings.join("; ")
                };
                ("-".into(), words)
            }
        };
        rows.push(format!(
            "| {kernel} | {count} | {} | {} | {repro} | {diagnosis} |",
            nvfp4_harness::certify::verdict(&merged).0,
            merged.coverage.cases
        ));
        certificates.push(merged);
    }
    println!("| kernel | shards | status | cases | minimal repro | diagnosis |");
    println!("|---|---|---|---|---|---|");
    rows.iter().for_each(|row| println!("{row}"));
    let worse = super::gate::gate_reports(&args.gate, &certificates)?;
    // The same precedence as certify's: a failure, then a regression, then not exact, then
    // not runnable here.
    let exact = |c: &Certificate| c.exact.as_ref().map(|e| e.outcome);
    let code = if certificates.iter().any(|c| c.status == Status::Failed) {
        EXIT_FAIL
    } else if worse {
        EXIT_REGRESSION
    } else if certificates.iter().any(|c| {
        matches!(
            exact(c),
            Some(ExactOutcome::ScheduleDiffers | ExactOutcome::NoScheduleDeclared)
        )
    }) {
        EXIT_NOT_EXACT
    } else if certificates.iter().any(|c| c.status == Status::Unavailable) {
        EXIT_UNAVAILABLE
    } else {
        0
    };
    eprintln!(
        "merged certificates written to {}",
        args.report_dir.display()
    );
    Ok(ExitCode::from(code))
}
