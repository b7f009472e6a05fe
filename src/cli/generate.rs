//! `nvfp4-oracle generate`: deterministic inputs as a safetensors case file.

use crate::case_file::CaseWriter;
use crate::error::Result;
use crate::problem::generate::generate_problem;
use crate::problem::{Distribution, ProblemKind, Shape};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// What to generate: shared by `generate` and `reference`.
#[derive(Args, Debug)]
pub struct CaseArgs {
    /// Problem: dual-gemm, gemm, gemv or group-gemm. gemv sets N to 1 (b is one row). For
    /// group-gemm, L is the number of groups, all with the same K: the first is M x N, the others
    /// draw their M from 1..=M and their N from 1..=N with the seed (the file's `groups` metadata
    /// lists them).
    #[arg(long, default_value = "dual-gemm")]
    pub problem: ProblemKind,
    /// Shape as MxNxK or MxNxKxL, e.g. 256x4096x7168. K must be a multiple of 16.
    #[arg(long)]
    pub shape: Shape,
    /// Input distribution: gpumode, full, adversarial, adversarial-nan, or stagnation
    /// (per-product rounding at its worst: docs/numerics.md section 3).
    #[arg(long, default_value = "gpumode")]
    pub dist: Distribution,
    /// Seed of the portable generator: the same seed gives the same bytes on every machine.
    #[arg(long, default_value_t = 1111)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub case: CaseArgs,
    /// Output safetensors file.
    #[arg(long)]
    pub out: PathBuf,
}

impl CaseArgs {
    /// "dual-gemm 256x512x256 gpumode seed 1111", for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {} {} seed {}",
            self.problem.name(),
            self.shape,
            self.dist.name(),
            self.seed
        )
    }
}

pub fn run(args: GenerateArgs) -> Result<ExitCode> {
    let case = &args.case;
    crate::problem::memory::check_fits(case.problem, case.shape, false)?;
    inputs_writer(case.problem, case.shape, case.dist, case.seed)?.write(&args.out)?;
    println!("wrote {} to {}", case.describe(), args.out.display());
    Ok(ExitCode::SUCCESS)
}

/// A writer holding the generated inputs and their provenance; `reference` adds its outputs to it.
pub fn inputs_writer(
    problem: ProblemKind,
    shape: Shape,
    dist: Distribution,
    seed: u64,
) -> Result<CaseWriter> {
    let mut writer = CaseWriter::default();
    let fill = dist.blocked_padding_fill();
    writer.problem_inputs(&generate_problem(problem, shape, dist, seed), fill);
    writer
        .meta("distribution", dist.name())
        .meta("seed", seed)
        .meta("blocked_padding_fill", format!("{fill:#04x}"));
    Ok(writer)
}
