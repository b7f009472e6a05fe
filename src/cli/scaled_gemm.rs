//! `nvfp4-oracle scaled-gemm`: the block-scaled family (`problem::scaled_gemm`) from the command
//! line. `reference` writes a case file with the operands (drawn, or yours with --inputs) and the
//! model's exact reference and interval; `check` judges a kernel's output against it.
//!
//! The case file (safetensors) holds `a` and `b` (packed FP4 as uint8 `[rows, K/2]`, FP8 as
//! uint8 `[rows, K]`, bf16 as BF16 `[rows, K]`), `a_scale` and `b_scale` (uint8, plain
//! `[rows, K/block]`, absent for FP8 and bf16), `bias` (F32 `[N]`, optional), and `expected`,
//! `lo`, `hi` (F64 `[M, N]`: values of the output type; lo = hi = NaN where the answer is NaN,
//! -inf and inf where the element is not judged); its metadata names the formats, alpha, the
//! output type and the epilogue.

use super::exit_code::EXIT_FAIL;
use clap::{Args, Subcommand};
use nvfp4_harness::error::{Error, Result};
use nvfp4_model::case_file::{
    check_intervals, f32_from_bytes, f64_bytes, f64_from_bytes, CaseReader, CaseWriter,
};
use nvfp4_model::formats::{pack_e2m1, unpack_e2m1, E2m1};
use nvfp4_model::model::scaled_gemm::{scaled_gemm_reference_with_progress, Accepted};
use nvfp4_model::model::MODEL_VERSION;
use nvfp4_model::problem::scaled_gemm::{
    Epilogue, OperandFormat, OutDtype, ScaledGemmInputs, ScaledOperand,
};
use nvfp4_model::problem::Shape;
use nvfp4_model::quant::family::{draw_scaled_gemm, ScaledDraw};
use safetensors::Dtype;
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
#[command(after_help = CASE_LAYOUT)]
pub struct ScaledCheckArgs {
    /// A case written by `scaled-gemm reference`.
    #[arg(long)]
    pub case: PathBuf,
    /// The kernel's output: a safetensors file with tensor `c` ([M, N], the case's output type).
    #[arg(long)]
    pub output: PathBuf,
}

/// The case file's layout, for `scaled-gemm check --help` (and `--inputs` of `reference`, which
/// reads the operands in the same form).
const CASE_LAYOUT: &str = "The case file (safetensors) holds a and b (packed FP4 as uint8 \
[rows, K/2], the low nibble the even k; FP8 as uint8 [rows, K]; bf16 as BF16 [rows, K]; B is N x K, as a \
weight is stored), a_scale and b_scale (uint8, plain [rows, K/block]; absent for FP8 and bf16), \
bias (F32 [N], optional) and expected, lo, hi (F64 [M, N]: values of the output type; lo = hi = \
NaN where the answer is NaN, -inf and inf where the element is not judged); its metadata names \
the formats, alpha, the output type and the epilogue. The output file holds c: F16, BF16 or F32 \
[M, N], the case's output type.";

pub fn run(command: ScaledGemmCommand) -> Result<ExitCode> {
    match command {
        ScaledGemmCommand::Reference(args) => reference(args),
        ScaledGemmCommand::Check(args) => check(args),
    }
}

fn reference(args: ScaledReferenceArgs) -> Result<ExitCode> {
    let (inputs, what) = match (&args.inputs, args.shape) {
        (Some(path), _) => {
            let case = CaseReader::open(path)?;
            let a = read_operand(&case, "a", args.a_format, None)?;
            let b = read_operand(&case, "b", args.b_format, Some(a.k))?;
            let bias = if case.has_tensor("bias")? {
                Some(f32_from_bytes(&case.tensor(
                    "bias",
                    Dtype::F32,
                    &[b.rows],
                )?))
            } else {
                None
            };
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
    let mut writer = CaseWriter::default();
    for (name, operand) in [("a", &inputs.a), ("b", &inputs.b)] {
        write_operand(&mut writer, name, operand);
    }
    if let Some(bias) = &inputs.bias {
        writer.tensor(
            "bias",
            Dtype::F32,
            vec![n],
            bias.iter().flat_map(|x| x.to_le_bytes()).collect(),
        );
    }
    let (lo, hi): (Vec<f64>, Vec<f64>) = reference.accepted.iter().map(Accepted::bounds).unzip();
    for (name, values) in [("expected", &reference.expected), ("lo", &lo), ("hi", &hi)] {
        writer.tensor(name, Dtype::F64, vec![m, n], f64_bytes(values));
    }
    writer
        .meta("problem", "scaled-gemm")
        .meta("model_version", MODEL_VERSION)
        .meta("a_format", inputs.a.format.name())
        .meta("b_format", inputs.b.format.name())
        .meta("alpha", format!("{:?}", inputs.alpha))
        .meta("out_dtype", inputs.out.name())
        .meta("epilogue", inputs.epilogue.name())
        .meta("shape", format!("{m}x{n}x{}", inputs.k()))
        .write(&args.out)?;
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

/// How an operand's elements are stored: (dtype, columns per row, bytes).
fn storage(operand: &ScaledOperand) -> (Dtype, usize, Vec<u8>) {
    match operand.format {
        OperandFormat::Nvfp4 | OperandFormat::Mxfp4 => (
            Dtype::U8,
            operand.k / 2,
            pack_e2m1(
                &operand
                    .codes
                    .iter()
                    .map(|&c| E2m1::from_bits(c as u8))
                    .collect::<Vec<_>>(),
            )
            .expect("K is a multiple of 16"),
        ),
        OperandFormat::Bf16 => (
            Dtype::BF16,
            operand.k,
            operand.codes.iter().flat_map(|c| c.to_le_bytes()).collect(),
        ),
        _ => (
            Dtype::U8,
            operand.k,
            operand.codes.iter().map(|&c| c as u8).collect(),
        ),
    }
}

fn write_operand(writer: &mut CaseWriter, name: &str, operand: &ScaledOperand) {
    let (dtype, cols, bytes) = storage(operand);
    writer.tensor(name, dtype, vec![operand.rows, cols], bytes);
    if let Some((_, block)) = operand.format.scale() {
        writer.tensor(
            &format!("{name}_scale"),
            Dtype::U8,
            vec![operand.rows, operand.k / block],
            operand.scales.clone(),
        );
    }
}

/// Reads operand `name` of `format`; its shape from the file (K must equal `k` when given).
fn read_operand(
    case: &CaseReader,
    name: &str,
    format: OperandFormat,
    k: Option<usize>,
) -> Result<ScaledOperand> {
    let shape = case.shape_of(name)?;
    let [rows, cols] = shape[..] else {
        return Err(Error::file(
            case.path(),
            format!("tensor '{name}' has shape {shape:?}; expected [rows, columns]"),
        ));
    };
    let packed = matches!(format, OperandFormat::Nvfp4 | OperandFormat::Mxfp4);
    let operand_k = if packed { cols * 2 } else { cols };
    if let Some(k) = k {
        if operand_k != k {
            return Err(Error::file(
                case.path(),
                format!("'{name}' has K = {operand_k}, A has K = {k}"),
            ));
        }
    }
    let codes: Vec<u16> = match format {
        OperandFormat::Bf16 => case
            .tensor(name, Dtype::BF16, &shape)?
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect(),
        _ if packed => unpack_e2m1(&case.tensor(name, Dtype::U8, &shape)?)
            .iter()
            .map(|code| u16::from(code.to_bits()))
            .collect(),
        _ => case
            .tensor(name, Dtype::U8, &shape)?
            .iter()
            .map(|&b| u16::from(b))
            .collect(),
    };
    let scales = match format.scale() {
        None => Vec::new(),
        Some((_, block)) => case.tensor(
            &format!("{name}_scale"),
            Dtype::U8,
            &[rows, operand_k / block],
        )?,
    };
    Ok(ScaledOperand::new(format, rows, operand_k, codes, scales)?)
}

fn check(args: ScaledCheckArgs) -> Result<ExitCode> {
    let case = CaseReader::open(&args.case)?;
    if case.meta("problem")? != "scaled-gemm" {
        return Err(Error::file(
            &args.case,
            "is not a scaled-gemm case (write one with `scaled-gemm reference`)",
        ));
    }
    let version = case.meta("model_version")?;
    if version != MODEL_VERSION {
        return Err(Error::file(&args.case, format!("was written by model version {version}; this tool is version {MODEL_VERSION}: regenerate the case")));
    }
    let out_dtype: OutDtype = case.meta("out_dtype")?.parse()?;
    let [m, n] = case.shape_of("expected")?[..] else {
        return Err(Error::file(&args.case, "tensor 'expected' is not [M, N]"));
    };
    let read = |name| {
        case.tensor(name, Dtype::F64, &[m, n])
            .map(|bytes| f64_from_bytes(&bytes))
    };
    let (expected, lo, hi) = (read("expected")?, read("lo")?, read("hi")?);
    check_intervals(&args.case, &lo, &hi, &[m, n])?;
    let output = CaseReader::open(&args.output)?;
    let got: Vec<f64> = match out_dtype {
        OutDtype::F16 => output
            .tensor("c", Dtype::F16, &[m, n])?
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        OutDtype::Bf16 => output
            .tensor("c", Dtype::BF16, &[m, n])?
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f64())
            .collect(),
        OutDtype::F32 => f32_from_bytes(&output.tensor("c", Dtype::F32, &[m, n])?)
            .into_iter()
            .map(f64::from)
            .collect(),
    };
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
