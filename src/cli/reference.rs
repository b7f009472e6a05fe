//! `nvfp4-oracle reference`: inputs plus the model's answer and acceptance interval.

use super::generate::{inputs_writer, CaseArgs};
use crate::error::Result;
use crate::model::bounds::KOrder;
use crate::model::{problem_reference, Reference, MODEL_VERSION};
use crate::problem::generate::generate_problem;
use crate::problem::{Distribution, ProblemKind, Shape};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct ReferenceArgs {
    #[command(flatten)]
    pub case: CaseArgs,
    /// K orders the interval must accept: `contiguous` (each accumulator sums one contiguous run of
    /// K, at most 16 split-K partials: every main loop, split-K and stream-K kernel) or `any`
    /// (blocks in any order; wider intervals).
    #[arg(long, default_value = "contiguous")]
    pub k_order: KOrder,
    /// Output case file (safetensors): the inputs plus `expected`, `lo`, `hi` (fp16 [M, N, L]).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: ReferenceArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let case = &args.case;
    let mut writer = inputs_writer(case.problem, case.shape, case.dist, case.seed)?;
    let reference =
        compute_reference(case.problem, case.shape, case.dist, case.seed, args.k_order)?;
    writer
        .reference(case.shape, &reference, args.k_order)
        .write(&args.out)?;
    println!(
        "wrote {} with its reference (model version {MODEL_VERSION}) to {} in {:.2} s",
        case.describe(),
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The model's reference for a generated case.
pub fn compute_reference(
    problem: ProblemKind,
    shape: Shape,
    dist: Distribution,
    seed: u64,
    order: KOrder,
) -> Result<Reference> {
    Ok(problem_reference(
        &generate_problem(problem, shape, dist, seed),
        order,
    ))
}
