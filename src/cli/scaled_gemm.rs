//! `nvfp4-oracle scaled-gemm`: the block-scaled family (`problem::scaled_gemm`) from the command
//! line. `reference` writes a case file with the operands (drawn, or yours with --inputs) and the
//! model's exact reference and interval; `check` judges a kernel's output against it. The case
//! file's layout is the model's (`nvfp4_model::case_file::SCALED_GEMM_CASE_LAYOUT`).

use super::exit_code::EXIT_FAIL;
use clap::{Args, Subcommand};
use nvfp4_harness::{Error, Result};
use nvfp4_model::case_file::{
    read_scaled_gemm_case, read_scaled_gemm_operands, read_scaled_gemm_output,
    write_scaled_gemm_case, SCALED_GEMM_CASE_LAYOUT,
};
use nvfp4_model::model::scaled_gemm::{scaled_gemm_reference_with_progress, Accepted};
use nvfp4_model::model::MODEL_VERSION;
use nvfp4_model::problem::scaled_gemm::{Epilogue, OperandFormat, OutDtype, ScaledGemmInputs};
use nvfp4_model::problem::Shape;
use nvfp4_model::quant::family::{draw_scaled_gemm, ScaledDraw};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum ScaledGemmCommand {
    /// Write a case: the operands (drawn, or yours with --inputs) and the model's exact reference
    /// and acceptance interval.
    Reference(ScaledReferenceArgs),
    /// Judge a kernel's output (tensor `c`: F16, BF16 or F32 [M, N]) against a case. Exit 0
    /// pass, 1 fail, 2 bad input.
    Check(ScaledCheckArgs),
}

#[derive(Args, Debug)]
#[command(
    after_help = "Formats: nvfp4 (e2m1, e4m3 scale per 16), mxfp4 (e2m1, UE8M0 per 32), \
mxfp8-e4m3 and mxfp8-e5m2 (UE8M0 per 32), fp8-e4m3 (no block scale: fold its per-tensor scale \
into --alpha), bf16. Epilogues: f32 (alpha * acc + bias in f32, one cast: CUTLASS, cuBLASLt, \
cuDNN), bias-in-output (the bias added after the cast: vLLM), after-cast (cast, times alpha, \
plus bias, each in the output type: torchao). With --inputs, FILE holds a, b, a_scale, b_scale \
and optionally bias as the case file stores them (`scaled-gemm check --help` gives the layout)."
)]
pub struct ScaledReferenceArgs {
    /// A's format.
    #[arg(long, default_value = "nvfp4", value_parser = super::value_parsers::named::<OperandFormat>())]
    pub a_format: OperandFormat,
    /// B's format (B is N x K, as a weight is stored).
    #[arg(long, default_value = "nvfp4", value_parser = super::value_parsers::named::<OperandFormat>())]
    pub b_format: OperandFormat,
    /// MxNxK of drawn operands (K a multiple of 32 for MX formats, of 16 otherwise).
    #[arg(long, required_unless_present = "inputs", conflicts_with = "inputs")]
    pub shape: Option<Shape>,
    /// How drawn operands are made: `normal` (standard normal values through each format's
    /// quantizer, as the libraries' tests do; alpha then includes the per-tensor scales),
    /// `moderate` (every finite code, scales near 1), `codes` (every finite code and scale:
    /// UE8M0 from 2^-127 to 2^127) or `edges` (NaN and infinite elements, UE8M0 0x00, 0xFE and
    /// NaN scales).
    #[arg(long, default_value = "normal", conflicts_with = "inputs")]
    pub dist: String,
    #[arg(long, default_value_t = 1111, conflicts_with = "inputs", allow_negative_numbers = true, value_parser = super::value_parsers::whole::<u64>(0, u64::MAX))]
    pub seed: u64,
    /// Your operands instead of drawn ones (a safetensors file).
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// How `normal` operands of the MX formats get their scales: `floor` (torchao's `to_mx`
    /// default, the OCP MX rule) or `rceil` (cuBLAS's and TransformerEngine's: the scale rounded
    /// up so that amax fits).
    #[arg(long, default_value = "floor", conflicts_with = "inputs")]
    pub mx_scaling: String,
    /// The FP32 global scale (for drawn `normal` operands, multiplied by their per-tensor scales).
    /// Negative values are numbers, not flags: `--alpha -0.5`.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub alpha: f32,
    /// Add a bias per column (drawn: 0.05 times standard normal values).
    #[arg(long)]
    pub bias: bool,
    /// The output type.
    #[arg(long, default_value = "bf16", value_parser = super::value_parsers::named::<OutDtype>())]
    pub out_dtype: OutDtype,
    /// Where alpha and the bias are applied (below).
    #[arg(long, default_value = "f32", value_parser = super::value_parsers::named::<Epilogue>())]
    pub epilogue: Epilogue,
    /// Output case file (safetensors).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Args, Debug)]
#[command(after_help = SCALED_GEMM_CASE_LAYOUT)]
pub struct ScaledCheckArgs {
    /// A case written by `scaled-gemm reference`.
    #[arg(long)]
    pub case: PathBuf,
    /// The kernel's output: a safetensors file with tensor `c` ([M, N], the case's output type).
    #[arg(long)]
    pub output: PathBuf,
}

pub fn run(command: ScaledGemmCommand) -> Result<ExitCode> {
    match command {
        ScaledGemmCommand::Reference(args) => reference(args),
        ScaledGemmCommand::Check(args) => check(args),
    }
}

fn reference(args: ScaledReferenceArgs) -> Result<ExitCode> {
    let (inputs, what) = match (&args.inputs, args.shape) {
        (Some(path), _) => {
            let (a, b, bias) = read_scaled_gemm_operands(path, args.a_format, args.b_format)?;
            let inputs =
                ScaledGemmInputs::new(a, b, args.alpha, bias, args.out_dtype, args.epilogue)?;
            (inputs, format!("the operands of {}", path.display()))
        }
        (None, Some(shape)) => {
            if shape.l != 1 {
                return Err(Error::Usage("scaled-gemm shapes are MxNxK (no L)".into()));
            }
            // Before the operands are drawn: a shape too large to hold is refused at once, not
            // by an allocation failure after minutes of drawing.
            check_fits(shape.m, shape.n, shape.k)?;
            (
                drawn(&args, shape)?,
                format!(
                    "{}x{}x{} {} operands{}, seed {}",
                    shape.m,
                    shape.n,
                    shape.k,
                    args.dist,
                    if args.mx_scaling == "rceil" {
                        " (RCEIL MX scales)"
                    } else {
                        ""
                    },
                    args.seed
                ),
            )
        }
        (None, None) => unreachable!("clap requires --shape or --inputs"),
    };
    let reference = with_progress(&inputs)?;
    let (m, n) = (inputs.m(), inputs.n());
    write_scaled_gemm_case(&inputs, &reference, &args.out)?;
    println!(
        "wrote {what} ({} x {}, alpha {:?}, {} output, {} epilogue) with the reference (model \
         version {MODEL_VERSION}) to {}; {} of {} elements not judged (the f32 accumulator \
         could overflow)",
        inputs.a.format.name(),
        inputs.b.format.name(),
        inputs.alpha,
        inputs.out.name(),
        inputs.epilogue.name(),
        args.out.display(),
        reference.unjudged(),
        m * n
    );
    Ok(ExitCode::SUCCESS)
}

fn drawn(args: &ScaledReferenceArgs, shape: Shape) -> Result<ScaledGemmInputs> {
    Ok(draw_scaled_gemm(&ScaledDraw {
        a_format: args.a_format,
        b_format: args.b_format,
        shape: (shape.m, shape.n, shape.k),
        distribution: args.dist.parse()?,
        seed: args.seed,
        alpha: args.alpha,
        bias: args.bias,
        out: args.out_dtype,
        epilogue: args.epilogue,
        mx_scaling: args.mx_scaling.parse()?,
    })?)
}

/// Outputs past this many elements are refused: the reference holds about 40 bytes for each.
const MAX_OUTPUT_ELEMENTS: usize = 1 << 28;
/// Bytes of memory per output element (the exact value, the interval and the written copies).
const BYTES_PER_OUTPUT: u128 = 40;
/// Bytes of memory per operand element while drawing: the drawn f32 value, its code (u16) and
/// the written copy, with room for the quantizer's working set.
const BYTES_PER_OPERAND_ELEMENT: u128 = 8;

/// Refuses an `m x n x k` GEMM whose output has more than 2^28 elements, or whose operands and
/// reference need more memory than this machine has available.
fn check_fits(m: usize, n: usize, k: usize) -> Result<()> {
    if m.saturating_mul(n) > MAX_OUTPUT_ELEMENTS {
        return Err(Error::Usage(format!(
            "the output {m} x {n} has more than 2^28 elements: its reference would need about \
             {} GB; split it into row blocks of A",
            (m as u128 * n as u128 * BYTES_PER_OUTPUT) / 1_000_000_000
        )));
    }
    let needed = (m as u128 + n as u128) * k as u128 * BYTES_PER_OPERAND_ELEMENT
        + m as u128 * n as u128 * BYTES_PER_OUTPUT;
    Ok(nvfp4_model::problem::memory::check_bytes(
        &format!("the scaled-gemm reference for {m}x{n}x{k}"),
        needed,
    )?)
}

/// The reference, with a progress bar on stderr for long runs; refused for outputs too large to
/// hold.
fn with_progress(
    inputs: &ScaledGemmInputs,
) -> Result<nvfp4_model::model::scaled_gemm::ScaledReference> {
    let (m, n, k) = (inputs.m(), inputs.n(), inputs.k());
    check_fits(m, n, k)?;
    let bar = super::progress::rows_bar("reference", m, m as u128 * n as u128 * k as u128);
    let reference = scaled_gemm_reference_with_progress(inputs, &|done| {
        if let Some(bar) = &bar {
            bar.set_position(done as u64)
        }
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(reference)
}

fn check(args: ScaledCheckArgs) -> Result<ExitCode> {
    let case = read_scaled_gemm_case(&args.case)?;
    let got = read_scaled_gemm_output(&args.output, &case)?;
    let (m, n) = (case.m, case.n);
    let (expected, lo, hi) = (case.expected, case.lo, case.hi);
    let accepted: Vec<Accepted> = lo
        .iter()
        .zip(&hi)
        .map(|(&lo, &hi)| Accepted::from_bounds(lo, hi))
        .collect();
    let rejected: Vec<usize> = (0..m * n)
        .filter(|&i| !accepted[i].accepts(got[i]))
        .collect();
    let unjudged = accepted
        .iter()
        .filter(|a| **a == Accepted::Unjudged)
        .count();
    if rejected.is_empty() {
        println!("PASS: all {} elements are what a correct kernel gives ({unjudged} not judged: the f32 accumulator could overflow)", m * n);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "FAIL: {} of {} elements are outside what a correct kernel gives",
        rejected.len(),
        m * n
    );
    for &i in rejected.iter().take(10) {
        println!(
            "  [{}, {}]: got {:?}, exact {:?}, accepted [{:?}, {:?}]",
            i / n,
            i % n,
            got[i],
            expected[i],
            lo[i],
            hi[i]
        );
    }
    if rejected.len() > 10 {
        println!("  ... and {} more", rejected.len() - 10);
    }
    Ok(ExitCode::from(EXIT_FAIL))
}
