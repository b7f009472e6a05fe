//! `nvfp4-oracle reference`: inputs plus the model's answer and acceptance interval.

use super::generate::{inputs_writer, CaseArgs};
use clap::Args;
use nvfp4_harness::{Error, Result};
use nvfp4_model::case_file::{CaseReader, CaseWriter};
use nvfp4_model::model::bounds::{max_blocks, KOrder};
use nvfp4_model::model::{output_rows, problem_reference_with_progress, Reference, MODEL_VERSION};
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::memory::{available_bytes, check_fits, gib, model_bytes};
use nvfp4_model::problem::ProblemInputs;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args, Debug)]
#[command(
    after_help = "Your own inputs: --inputs FILE.safetensors holds the problem's operands in the \
case-file layout, L first: for each operand X (a, b1, b2 for the dual GEMM; a, b for gemm and gemv; \
a0, b0, a1, b1, ... for group-gemm) its packed FP4 data X as uint8 [L, rows, K/2] (or F4 \
[L, rows, K]) and its plain scales sfX as F8_E4M3 or uint8 [L, rows, K/16]; [rows, ...] means \
L = 1. sfX_permuted (the blocked layout) is optional and, if present, checked against sfX. From \
torch: x.permute(2, 0, 1).contiguous() for GPU MODE's [rows, K/2, L] tensors, viewed as uint8."
)]
pub struct ReferenceArgs {
    /// The problem, generated (--shape; see `generate --help` for what gemv and group-gemm make
    /// of it) or read from --inputs.
    #[arg(long, default_value = "dual-gemm", value_parser = super::value_parsers::named::<ProblemKind>())]
    pub problem: ProblemKind,
    /// Shape of generated inputs, MxNxK or MxNxKxL, e.g. 256x4096x7168 (K a multiple of 16).
    #[arg(long, required_unless_present = "inputs", conflicts_with = "inputs")]
    pub shape: Option<Shape>,
    /// Input distribution of generated inputs (stagnation: per-product rounding at its worst,
    /// docs/reference/numerics.md section 3).
    #[arg(long, default_value = "gpumode", conflicts_with = "inputs", value_parser = super::value_parsers::named::<Distribution>())]
    pub dist: Distribution,
    /// Seed of the portable generator: the same seed gives the same bytes on every machine.
    #[arg(long, default_value_t = 1111, conflicts_with = "inputs", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(0, u64::MAX))]
    pub seed: u64,
    /// Your own inputs instead of generated ones (a safetensors file; layout below).
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// K orders the interval must accept: `contiguous` (each accumulator sums one contiguous run of
    /// K, at most 16 split-K partials: every main loop, split-K and stream-K kernel), `any`
    /// (blocks in any order; wider intervals) or `per-product` (one f32 fused multiply-add per
    /// product, as cuBLAS SGEMM and torch's fp32 matmul do).
    #[arg(long, default_value = "contiguous", value_parser = super::value_parsers::named::<KOrder>())]
    pub k_order: KOrder,
    /// Output case file (safetensors): the inputs plus `expected`, `lo`, `hi` (fp16 [M, N, L]).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn run(args: ReferenceArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let (mut writer, inputs, what) = match (&args.inputs, args.shape) {
        (Some(path), _) => {
            let inputs = CaseReader::open(path)?.user_problem_inputs(args.problem)?;
            let (m, n, l) = inputs.output_dims();
            let k = inputs.operands()[0].1.k();
            check_fits(args.problem, Shape { m, n, k, l }, true)?;
            let mut writer = CaseWriter::default();
            writer
                .problem_inputs(&inputs, USER_PADDING_FILL)
                .meta("distribution", "user")
                .meta("inputs", path.display())
                .meta("blocked_padding_fill", format!("{USER_PADDING_FILL:#04x}"));
            let what = format!("the {} inputs of {}", args.problem.name(), path.display());
            (writer, inputs, what)
        }
        (None, Some(shape)) => {
            check_fits(args.problem, shape, true)?;
            let case = CaseArgs {
                problem: args.problem,
                shape,
                dist: args.dist,
                seed: args.seed,
            };
            let writer = inputs_writer(case.problem, shape, case.dist, case.seed)?;
            let inputs = generate_problem(case.problem, shape, case.dist, case.seed);
            (writer, inputs, case.describe())
        }
        (None, None) => unreachable!("clap requires --shape or --inputs"),
    };
    let blocks = inputs.operands()[0].1.k() / 16;
    if blocks > max_blocks(args.k_order) {
        return Err(Error::Usage(format!(
            "K = {} is too deep for --k-order {}: its error bound holds up to K = {} (docs/reference/numerics.md section 4)",
            blocks * 16,
            args.k_order.name(),
            max_blocks(args.k_order) * 16
        )));
    }
    let reference = with_progress(&inputs, args.k_order);
    let (m, n, l) = inputs.output_dims();
    let k = inputs.operands()[0].1.k();
    writer
        .reference(Shape { m, n, k, l }, &reference, args.k_order)
        .write(&args.out)?;
    println!(
        "wrote {what} with its reference (model version {MODEL_VERSION}) to {} in {:.2} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The reference, with a progress bar on stderr (and the memory it needs) when it is long.
fn with_progress(inputs: &ProblemInputs, order: KOrder) -> Reference {
    let (m, n, l) = inputs.output_dims();
    let k = inputs.operands()[0].1.k();
    // The dual GEMM makes two dot products per output element.
    let dots = if inputs.kind() == ProblemKind::DualGemm {
        2
    } else {
        1
    };
    let products = dots * inputs.output_len() as u128 * k as u128;
    let Some(bar) = super::progress::rows_bar("reference", output_rows(inputs), products) else {
        return problem_reference_with_progress(inputs, order, &|| {});
    };
    // The estimate `check_fits` judged against, now that the work is known to be long.
    eprintln!(
        "the reference needs about {} of memory{}",
        gib(model_bytes(inputs.kind(), Shape { m, n, k, l }, true)),
        available_bytes().map_or(String::new(), |a| format!(" ({} available)", gib(a)))
    );
    let reference = problem_reference_with_progress(inputs, order, &|| bar.inc(1));
    bar.finish_and_clear();
    reference
}

/// The byte written into the padding of the blocked scales of a user's inputs (the written case
/// file always carries `sfX_permuted`): 0, a zero scale, as torch's `to_blocked` pads.
const USER_PADDING_FILL: u8 = 0;
