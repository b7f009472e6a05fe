//! `nvfp4-oracle golden generate|verify`: the golden set.

use super::exit_code::EXIT_FAIL;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use nvfp4_harness::{Error, Result};
use nvfp4_model::golden::scaled::{verify_scaled_manifest, write_scaled_manifest};
use nvfp4_model::golden::{cost, generate, read_manifest, verify_case, CaseStatus};
use nvfp4_model::model::bounds::KOrder;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct GoldenArgs {
    #[command(subcommand)]
    pub action: GoldenAction,
    /// The golden directory (holds manifest.json and cases/).
    #[arg(long, default_value = "golden", global = true)]
    pub dir: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum GoldenAction {
    /// Rewrite the golden set from the model (several minutes: the large competition shapes).
    Generate {
        /// Replace golden files written by another model version.
        #[arg(long)]
        force: bool,
    },
    /// Recompute every case and compare with the golden files; exit 1 naming any case that drifted.
    Verify {
        /// Only cases below this many multiply-adds (e.g. 1e9), for quick CI runs; positive.
        #[arg(long, value_name = "MACS", allow_negative_numbers = true)]
        max_cost: Option<f64>,
    },
}

fn bar(len: usize) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    // Drawn on a terminal only (indicatif's own rule), and ticking through a long case.
    bar.enable_steady_tick(std::time::Duration::from_millis(500));
    bar
}

pub fn run(args: GoldenArgs) -> Result<ExitCode> {
    match args.action {
        GoldenAction::Generate { force } => {
            let started = Instant::now();
            let progress = bar(0);
            let manifest = generate(
                &args.dir,
                KOrder::Contiguous,
                force,
                &mut |name, i, total| {
                    progress.set_length(total as u64);
                    progress.set_position(i as u64);
                    progress.set_message(name.to_string());
                },
            )?;
            progress.finish_and_clear();
            let scaled = write_scaled_manifest(&args.dir)?;
            println!(
                "wrote {} golden cases and {} of the block-scaled family to {} in {:.0} s",
                manifest.cases.len(),
                scaled.cases.len(),
                args.dir.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        GoldenAction::Verify { max_cost } => {
            // A limit that selects nothing would verify nothing and pass.
            if let Some(limit) = max_cost.filter(|&limit| limit <= 0.0 || limit.is_nan()) {
                return Err(Error::Usage(format!(
                    "--max-cost {limit}: the limit must be a positive number of multiply-adds \
                     (e.g. 1e9); without it every case is verified"
                )));
            }
            let manifest = read_manifest(&args.dir)?;
            let cases: Vec<_> = manifest
                .cases
                .iter()
                .filter(|case| max_cost.is_none_or(|limit| cost(case) as f64 <= limit))
                .collect();
            if cases.is_empty() && !manifest.cases.is_empty() {
                let cheapest = manifest.cases.iter().map(cost).min().unwrap_or(0);
                return Err(Error::Usage(format!(
                    "--max-cost {}: no golden case is that cheap (the cheapest needs {cheapest} \
                     multiply-adds)",
                    max_cost.unwrap_or(0.0)
                )));
            }
            let progress = bar(cases.len());
            let mut drifted = Vec::new();
            let mut rows = Vec::new();
            for case in &cases {
                progress.set_message(case.name.clone());
                let started = Instant::now();
                let status = verify_case(&args.dir, case, manifest.k_order)?;
                let verdict = match &status {
                    CaseStatus::Ok => "ok".to_string(),
                    CaseStatus::Drift(reason) => {
                        drifted.push(case.name.clone());
                        format!("DRIFT: {reason}")
                    }
                };
                let shapes: Vec<String> = case.shapes.iter().map(|s| s.to_string()).collect();
                rows.push(format!(
                    "| {} | {} | {} | {} | {verdict} | {:.2} |",
                    case.name,
                    case.problem.name(),
                    shapes.join(" "),
                    if case.file.is_some() {
                        "whole"
                    } else {
                        "hashes + samples"
                    },
                    started.elapsed().as_secs_f64()
                ));
                progress.inc(1);
            }
            progress.finish_and_clear();
            for (name, shape, drift) in verify_scaled_manifest(&args.dir)? {
                let verdict = match drift {
                    None => "ok".to_string(),
                    Some(reason) => {
                        drifted.push(name.clone());
                        format!("DRIFT: {reason}")
                    }
                };
                rows.push(format!(
                    "| {name} | scaled-gemm | {shape} | hashes | {verdict} | - |"
                ));
            }
            println!("| case | problem | shape | stored | verdict | time (s) |\n|---|---|---|---|---|---|");
            rows.iter().for_each(|row| println!("{row}"));
            println!(
                "verified {} of {} cases (model version {})",
                cases.len(),
                manifest.cases.len(),
                manifest.model_version
            );
            if drifted.is_empty() {
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("drift in: {}", drifted.join(", "));
                Ok(ExitCode::from(EXIT_FAIL))
            }
        }
    }
}
