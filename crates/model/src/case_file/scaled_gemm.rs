//! The block-scaled family's case file: the operands as the libraries store them, the model's
//! exact reference and its interval, and metadata naming the formats, alpha, the output type and
//! the epilogue. `nvfp4-oracle scaled-gemm reference` writes one and `scaled-gemm check` judges
//! a kernel's output against it; [`SCALED_GEMM_CASE_LAYOUT`] says the layout in words.

use super::{check_intervals, f32_from_bytes, f64_bytes, f64_from_bytes, CaseReader, CaseWriter};
use crate::error::{Error, Result};
use crate::formats::{pack_e2m1, unpack_e2m1, E2m1};
use crate::model::scaled_gemm::{Accepted, ScaledReference};
use crate::model::MODEL_VERSION;
use crate::problem::scaled_gemm::{OperandFormat, OutDtype, ScaledGemmInputs, ScaledOperand};
use safetensors::Dtype;
use std::path::Path;

/// The case file's layout, for `scaled-gemm check --help` (and `--inputs` of `reference`, which
/// reads the operands in the same form).
pub const SCALED_GEMM_CASE_LAYOUT: &str = "The case file (safetensors) holds a and b (packed FP4 as uint8 \
[rows, K/2], the low nibble the even k; FP8 as uint8 [rows, K]; bf16 as BF16 [rows, K]; B is N x K, as a \
weight is stored), a_scale and b_scale (uint8, plain [rows, K/block]; absent for FP8 and bf16), \
bias (F32 [N], optional) and expected, lo, hi (F64 [M, N]: values of the output type; lo = hi = \
NaN where the answer is NaN, -inf and inf where the element is not judged); its metadata names \
the formats, alpha, the output type and the epilogue. The output file holds c: F16, BF16 or F32 \
[M, N], the case's output type.";

/// A case as `scaled-gemm check` reads it: the output type and the reference with its bounds.
#[derive(Debug, Clone)]
pub struct ScaledGemmCase {
    pub out_dtype: OutDtype,
    pub m: usize,
    pub n: usize,
    pub expected: Vec<f64>,
    pub lo: Vec<f64>,
    pub hi: Vec<f64>,
}

/// Writes `inputs` and their `reference` to `path`.
pub fn write_scaled_gemm_case(
    inputs: &ScaledGemmInputs,
    reference: &ScaledReference,
    path: &Path,
) -> Result<()> {
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
        .write(path)
}

/// The operands a, b (of the formats given) and the optional bias of the file at `path`, stored
/// as a case file stores them (`scaled-gemm reference --inputs`).
pub fn read_scaled_gemm_operands(
    path: &Path,
    a_format: OperandFormat,
    b_format: OperandFormat,
) -> Result<(ScaledOperand, ScaledOperand, Option<Vec<f32>>)> {
    let case = CaseReader::open(path)?;
    let a = read_operand(&case, "a", a_format, None)?;
    let b = read_operand(&case, "b", b_format, Some(a.k))?;
    let bias = if case.has_tensor("bias")? {
        Some(f32_from_bytes(&case.tensor(
            "bias",
            Dtype::F32,
            &[b.rows],
        )?))
    } else {
        None
    };
    Ok((a, b, bias))
}

/// The case at `path`: refused unless a scaled-gemm case of this model version with intervals
/// that hold together.
pub fn read_scaled_gemm_case(path: &Path) -> Result<ScaledGemmCase> {
    let case = CaseReader::open(path)?;
    if case.meta("problem")? != "scaled-gemm" {
        return Err(Error::file(
            path,
            "is not a scaled-gemm case (write one with `scaled-gemm reference`)",
        ));
    }
    let version = case.meta("model_version")?;
    if version != MODEL_VERSION {
        return Err(Error::file(path, format!("was written by model version {version}; this tool is version {MODEL_VERSION}: regenerate the case")));
    }
    let out_dtype: OutDtype = case.meta("out_dtype")?.parse()?;
    let [m, n] = case.shape_of("expected")?[..] else {
        return Err(Error::file(path, "tensor 'expected' is not [M, N]"));
    };
    let read = |name| {
        case.tensor(name, Dtype::F64, &[m, n])
            .map(|bytes| f64_from_bytes(&bytes))
    };
    let (expected, lo, hi) = (read("expected")?, read("lo")?, read("hi")?);
    check_intervals(path, &lo, &hi, &[m, n])?;
    Ok(ScaledGemmCase {
        out_dtype,
        m,
        n,
        expected,
        lo,
        hi,
    })
}

/// A kernel's output for `case`: tensor `c` of the case's output type, as f64.
pub fn read_scaled_gemm_output(path: &Path, case: &ScaledGemmCase) -> Result<Vec<f64>> {
    let output = CaseReader::open(path)?;
    let (m, n) = (case.m, case.n);
    Ok(match case.out_dtype {
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
    })
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
    ScaledOperand::new(format, rows, operand_k, codes, scales)
}
