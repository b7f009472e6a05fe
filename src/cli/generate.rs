//! `nvfp4-oracle generate`: deterministic inputs as a safetensors case file.

use clap::Args;
use nvfp4_harness::Result;
use nvfp4_model::case_file::CaseWriter;
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::path::PathBuf;
use std::process::ExitCode;

/// What to generate: shared by `generate` and `reference`.
#[derive(Args, Debug)]
pub struct CaseArgs {
    /// The problem. gemv sets N to 1 (b is one row). For
    /// group-gemm, L is the number of groups, all with the same K: the first is M x N, the others
    /// draw their M from 1..=M and their N from 1..=N with the seed (the file's `groups` metadata
    /// lists them).
    #[arg(long, default_value = "dual-gemm", value_parser = super::value_parsers::named::<ProblemKind>())]
    pub problem: ProblemKind,
    /// Shape as MxNxK or MxNxKxL, e.g. 256x4096x7168. K must be a multiple of 16.
    #[arg(long)]
    pub shape: Shape,
    /// Input distribution (stagnation: per-product rounding at its worst, docs/reference/numerics.md
    /// section 3).
    #[arg(long, default_value = "gpumode", value_parser = super::value_parsers::named::<Distribution>())]
    pub dist: Distribution,
    /// Seed of the portable generator: the same seed gives the same bytes on every machine.
    #[arg(long, default_value_t = 1111, allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(0, u64::MAX))]
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
    /// The shape is the one written (gemv's N is 1, whatever --shape said: the note says so).
    pub fn describe(&self) -> String {
        let written = self.problem.normalize(self.shape);
        format!(
            "{} {written} {} seed {}{}",
            self.problem.name(),
            self.dist.name(),
            self.seed,
            if written == self.shape {
                String::new()
            } else {
                format!(
                    " (N set to 1 from --shape {}: a gemv's b is one row)",
                    self.shape
                )
            }
        )
    }
}

pub fn run(args: GenerateArgs) -> Result<ExitCode> {
    let case = &args.case;
    nvfp4_model::problem::memory::check_fits(case.problem, case.shape, false)?;
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
