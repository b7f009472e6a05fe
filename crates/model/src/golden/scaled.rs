//! Golden hashes of the block-scaled family (`golden/scaled-gemm.json`): a fixed list of small
//! cases across the format pairings, distributions, output types and epilogues, each with the
//! SHA-256 of its drawn operands and of its `expected`, `lo` and `hi` (f64 little-endian, the
//! form of a `scaled-gemm` case file). `golden verify` recomputes them: a changed input hash is
//! generator drift, a changed answer hash model drift.

use super::sha256_hex;
use crate::case_file::f64_bytes;
use crate::error::{Error, Result};
use crate::model::scaled_gemm::{scaled_gemm_reference, Accepted};
use crate::model::MODEL_VERSION;
use crate::problem::scaled_gemm::{Epilogue, OperandFormat, OutDtype, ScaledGemmInputs};
use crate::quant::family::{draw_scaled_gemm, ScaledCaseDistribution, ScaledDraw};
use crate::quant::mx::MxScaling;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const SCALED_MANIFEST: &str = "scaled-gemm.json";

/// One case of the manifest: how it is drawn (as `scaled-gemm reference` takes it) and hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaledGoldenCase {
    pub name: String,
    pub a_format: String,
    pub b_format: String,
    pub shape: String,
    pub distribution: String,
    pub seed: u64,
    pub alpha: f32,
    pub bias: bool,
    pub out_dtype: String,
    pub epilogue: String,
    pub sha256_inputs: String,
    pub sha256_expected: String,
    pub sha256_lo: String,
    pub sha256_hi: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaledManifest {
    pub model_version: String,
    pub cases: Vec<ScaledGoldenCase>,
}

/// The cases: (A, B, distribution, output type, epilogue, bias, alpha). M x N x K is 24 x 20 x 128.
const CASES: [(&str, &str, &str, &str, &str, bool, f32); 12] = [
    ("nvfp4", "nvfp4", "normal", "bf16", "f32", true, 1.0),
    ("mxfp4", "mxfp4", "normal", "bf16", "f32", false, 1.0),
    ("mxfp8-e4m3", "mxfp4", "moderate", "fp32", "f32", true, 0.5),
    ("mxfp8-e5m2", "mxfp4", "codes", "fp16", "f32", false, 1.0),
    (
        "fp8-e4m3",
        "nvfp4",
        "normal",
        "bf16",
        "bias-in-output",
        true,
        1.0,
    ),
    (
        "bf16",
        "mxfp4",
        "moderate",
        "bf16",
        "after-cast",
        true,
        0.25,
    ),
    ("bf16", "nvfp4", "edges", "fp32", "f32", false, 1.0),
    (
        "mxfp8-e4m3",
        "mxfp8-e5m2",
        "edges",
        "bf16",
        "f32",
        true,
        1.0,
    ),
    ("nvfp4", "nvfp4", "edges", "fp16", "after-cast", false, 2.0),
    (
        "mxfp4",
        "bf16",
        "codes",
        "fp32",
        "bias-in-output",
        true,
        1.0,
    ),
    (
        "fp8-e4m3", "fp8-e4m3", "moderate", "fp16", "f32", false, 0.0078125,
    ),
    ("mxfp8-e5m2", "nvfp4", "normal", "fp16", "f32", true, 1.0),
];
const SHAPE: (usize, usize, usize) = (24, 20, 128);
const SEED: u64 = 2026;

/// The case's inputs from its definition.
fn inputs(case: &ScaledGoldenCase) -> Result<ScaledGemmInputs> {
    let dims: Vec<usize> = case
        .shape
        .split('x')
        .map(|d| {
            d.parse()
                .map_err(|_| Error::InvalidInput(format!("bad shape {}", case.shape)))
        })
        .collect::<Result<_>>()?;
    let [m, n, k] = dims[..] else {
        return Err(Error::InvalidInput(format!("bad shape {}", case.shape)));
    };
    draw_scaled_gemm(&ScaledDraw {
        a_format: case.a_format.parse::<OperandFormat>()?,
        b_format: case.b_format.parse::<OperandFormat>()?,
        shape: (m, n, k),
        distribution: case.distribution.parse::<ScaledCaseDistribution>()?,
        seed: case.seed,
        alpha: case.alpha,
        bias: case.bias,
        out: case.out_dtype.parse::<OutDtype>()?,
        epilogue: case.epilogue.parse::<Epilogue>()?,
        mx_scaling: MxScaling::Floor,
    })
}

/// The hashes of a case (its definition fields kept).
fn hashed(mut case: ScaledGoldenCase) -> Result<ScaledGoldenCase> {
    let inputs = inputs(&case)?;
    let mut bytes = Vec::new();
    for operand in [&inputs.a, &inputs.b] {
        bytes.extend(operand.codes.iter().flat_map(|c| c.to_le_bytes()));
        bytes.extend(&operand.scales);
    }
    let bias: Vec<f64> = inputs
        .bias
        .iter()
        .flatten()
        .map(|&x| f64::from(x))
        .collect();
    bytes.extend(f64_bytes(&bias));
    bytes.extend(inputs.alpha.to_le_bytes());
    let reference = scaled_gemm_reference(&inputs);
    let (lo, hi): (Vec<f64>, Vec<f64>) = reference.accepted.iter().map(Accepted::bounds).unzip();
    case.sha256_inputs = sha256_hex(&bytes);
    case.sha256_expected = sha256_hex(&f64_bytes(&reference.expected));
    case.sha256_lo = sha256_hex(&f64_bytes(&lo));
    case.sha256_hi = sha256_hex(&f64_bytes(&hi));
    Ok(case)
}

/// The manifest computed from the model.
pub fn compute_scaled_manifest() -> Result<ScaledManifest> {
    let (m, n, k) = SHAPE;
    let cases = CASES
        .iter()
        .map(|&(a, b, dist, out, epilogue, bias, alpha)| {
            hashed(ScaledGoldenCase {
                name: format!("{a}-x-{b}-{dist}-{out}-{epilogue}"),
                a_format: a.into(),
                b_format: b.into(),
                shape: format!("{m}x{n}x{k}"),
                distribution: dist.into(),
                seed: SEED,
                alpha,
                bias,
                out_dtype: out.into(),
                epilogue: epilogue.into(),
                sha256_inputs: String::new(),
                sha256_expected: String::new(),
                sha256_lo: String::new(),
                sha256_hi: String::new(),
            })
        })
        .collect::<Result<_>>()?;
    Ok(ScaledManifest {
        model_version: MODEL_VERSION.into(),
        cases,
    })
}

pub fn write_scaled_manifest(dir: &Path) -> Result<ScaledManifest> {
    let manifest = compute_scaled_manifest()?;
    let path = dir.join(SCALED_MANIFEST);
    let text = serde_json::to_string_pretty(&manifest).expect("manifests serialize") + "\n";
    std::fs::write(&path, text)
        .map_err(|err| Error::file(&path, format!("cannot write: {err}")))?;
    Ok(manifest)
}

/// Each committed case's name and shape and, where it drifted, why.
pub fn verify_scaled_manifest(dir: &Path) -> Result<Vec<(String, String, Option<String>)>> {
    let path = dir.join(SCALED_MANIFEST);
    let text = crate::bounded_read::read_text(
        &path,
        "scaled-gemm golden manifest",
        crate::bounded_read::JSON_CAP,
    )?;
    let manifest: ScaledManifest = serde_json::from_str(&text)
        .map_err(|err| Error::file(&path, format!("not a scaled-gemm golden manifest: {err}")))?;
    manifest
        .cases
        .into_iter()
        .map(|case| {
            let now = hashed(case.clone())?;
            let drift = if now.sha256_inputs != case.sha256_inputs {
                Some("the drawn operands changed (generator drift)".to_string())
            } else if (now.sha256_expected, now.sha256_lo, now.sha256_hi)
                != (case.sha256_expected, case.sha256_lo, case.sha256_hi)
            {
                Some("the reference or interval changed (model drift)".to_string())
            } else {
                None
            };
            Ok((case.name, case.shape, drift))
        })
        .collect()
}
