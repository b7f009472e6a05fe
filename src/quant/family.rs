//! Quantizers for every operand format of the block-scaled family (`problem::scaled_gemm`), as
//! the libraries' reference quantizers work: what their tests feed their kernels.

use crate::error::Error;
use crate::error::Result;
use crate::formats::{bf16_from_f64_rne, unpack_e2m1, E4m3, E4m3Overflow, E5m2, E4M3_MAX};
use crate::problem::scaled_gemm::{
    Epilogue, OperandFormat, OutDtype, ScaledGemmInputs, ScaledOperand,
};
use crate::problem::scaled_generate::{normal_values, random_operand, ScaledDistribution};

use super::mxfp4::{floor_scale, quantize_mxfp4_floor};
use super::{quantize_nvfp4, QuantRecipe, TorchDevice};

/// An operand quantized from `values` (`rows x k`, row-major), and the factor its per-tensor
/// scale contributes to alpha (1 where the format has none).
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedOperand {
    pub operand: ScaledOperand,
    pub alpha_factor: f32,
}

/// Quantizes as the libraries' reference quantizers do: NVFP4 with torchao's two-level recipe
/// (a per-tensor scale amax / (448 * 6), folded into alpha); MXFP4 with torchao's `to_mx` (FLOOR);
/// MXFP8 with the same FLOOR scale rule (amax's power of two over the element format's largest
/// power of two, torchao's `to_mx` rule for every element format) and a saturating cast; FP8
/// with a per-tensor scale amax / 448; bf16 rounded. NaN input is an error.
pub fn quantize_operand(
    format: OperandFormat,
    values: &[f32],
    rows: usize,
    k: usize,
) -> Result<QuantizedOperand> {
    let unpack = |packed: &[u8]| -> Vec<u16> {
        unpack_e2m1(packed)
            .iter()
            .map(|code| u16::from(code.to_bits()))
            .collect()
    };
    let (codes, scales, alpha_factor) = match format {
        OperandFormat::Nvfp4 => {
            let tensor_scale = crate::quant::per_tensor_scale(values, TorchDevice::Cpu)?;
            let recipe = QuantRecipe::TwoLevel { tensor_scale };
            let q = quantize_nvfp4(values, rows, k, recipe, TorchDevice::Cpu)?;
            (unpack(&q.data), q.scales, tensor_scale)
        }
        OperandFormat::Mxfp4 => {
            let q = quantize_mxfp4_floor(values, rows, k)?;
            (unpack(&q.data), q.scales, 1.0)
        }
        OperandFormat::Mxfp8E4m3 | OperandFormat::Mxfp8E5m2 => {
            if let Some(index) = values.iter().position(|x| x.is_nan()) {
                return Err(Error::Quantize {
                    reason: format!("input row {}, column {} is NaN", index / k, index % k),
                });
            }
            // The largest power of two of e4m3 (448) is 2^8, of e5m2 (57344) 2^15.
            let e4m3 = format == OperandFormat::Mxfp8E4m3;
            let mut codes = Vec::with_capacity(values.len());
            let mut scales = Vec::new();
            for block in values.chunks(32) {
                let (byte, divisor) = floor_scale(block, if e4m3 { 8 } else { 15 });
                scales.push(byte);
                codes.extend(block.iter().map(|&x| {
                    u16::from(if e4m3 {
                        E4m3::from_f32_rne(x / divisor, E4m3Overflow::Saturate).to_bits()
                    } else {
                        E5m2::from_f32_rne_saturating(x / divisor).to_bits()
                    })
                }));
            }
            (codes, scales, 1.0)
        }
        OperandFormat::Fp8E4m3 => {
            let amax = values.iter().fold(0f32, |m, x| m.max(x.abs()));
            let scale = if amax > 0.0 { amax / E4M3_MAX } else { 1.0 };
            let codes = values
                .iter()
                .map(|&x| {
                    u16::from(E4m3::from_f32_rne(x / scale, E4m3Overflow::Saturate).to_bits())
                })
                .collect();
            (codes, Vec::new(), scale)
        }
        OperandFormat::Bf16 => {
            let codes = values
                .iter()
                .map(|&x| bf16_from_f64_rne(f64::from(x)).to_bits())
                .collect();
            (codes, Vec::new(), 1.0)
        }
    };
    Ok(QuantizedOperand {
        operand: ScaledOperand::new(format, rows, k, codes, scales)?,
        alpha_factor,
    })
}

/// How a case's operands are made: drawn codes, or normal values quantized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaledCaseDistribution {
    /// Standard normal values through each format's quantizer, as the libraries' tests draw
    /// them; alpha then includes the operands' per-tensor scales.
    Normal,
    Drawn(ScaledDistribution),
}

impl std::str::FromStr for ScaledCaseDistribution {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        if text == "normal" {
            return Ok(ScaledCaseDistribution::Normal);
        }
        ScaledDistribution::ALL
            .into_iter()
            .find(|d| d.name() == text)
            .map(ScaledCaseDistribution::Drawn)
            .ok_or_else(|| Error::UnknownName {
                what: "distribution",
                given: text.into(),
                expected: "normal, moderate, codes, edges".into(),
            })
    }
}

impl ScaledCaseDistribution {
    pub fn name(self) -> &'static str {
        match self {
            ScaledCaseDistribution::Normal => "normal",
            ScaledCaseDistribution::Drawn(d) => d.name(),
        }
    }
}

/// Everything that makes one drawn case of the family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaledDraw {
    pub a_format: OperandFormat,
    pub b_format: OperandFormat,
    /// (M, N, K).
    pub shape: (usize, usize, usize),
    pub distribution: ScaledCaseDistribution,
    pub seed: u64,
    pub alpha: f32,
    /// A bias per column: 0.05 times standard normal values, in the type the epilogue adds it in.
    pub bias: bool,
    pub out: OutDtype,
    pub epilogue: Epilogue,
}

/// The inputs of one drawn case.
pub fn draw_scaled_gemm(draw: &ScaledDraw) -> Result<ScaledGemmInputs> {
    let (m, n, k) = draw.shape;
    for format in [draw.a_format, draw.b_format] {
        if k == 0 || k % format.k_multiple() != 0 {
            return Err(Error::Usage(format!(
                "K = {k} is not a positive multiple of {} ({})",
                format.k_multiple(),
                format.name()
            )));
        }
    }
    let (a, b, alpha) = match draw.distribution {
        ScaledCaseDistribution::Normal => {
            let a = quantize_operand(draw.a_format, &normal_values(m * k, draw.seed, 0), m, k)?;
            let b = quantize_operand(draw.b_format, &normal_values(n * k, draw.seed, 1), n, k)?;
            let alpha = draw.alpha * a.alpha_factor * b.alpha_factor;
            (a.operand, b.operand, alpha)
        }
        ScaledCaseDistribution::Drawn(distribution) => {
            let a = random_operand(draw.a_format, m, k, distribution, draw.seed, 0);
            let b = random_operand(draw.b_format, n, k, distribution, draw.seed, 1);
            (a, b, draw.alpha)
        }
    };
    let bias = draw.bias.then(|| {
        normal_values(n, draw.seed, 2)
            .into_iter()
            .map(|x| {
                let value = x * 0.05;
                if draw.epilogue == Epilogue::F32 {
                    value
                } else {
                    draw.out.round(f64::from(value)) as f32
                }
            })
            .collect()
    });
    ScaledGemmInputs::new(a, b, alpha, bias, draw.out, draw.epilogue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::scaled_generate::normal_values;

    #[test]
    fn quantized_operands_are_close_to_their_values() {
        let (rows, k) = (4, 64);
        let values = normal_values(rows * k, 3, 0);
        for format in OperandFormat::ALL {
            let q = quantize_operand(format, &values, rows, k).unwrap();
            let worst = (0..rows * k)
                .map(|i| {
                    let got = q.operand.value(i / k, i % k).to_f64() * f64::from(q.alpha_factor);
                    (got - f64::from(values[i])).abs()
                })
                .fold(0.0, f64::max);
            // e2m1 keeps a quarter of the block's amax apart at worst: below 1.5 for N(0, 1).
            assert!(worst < 1.5, "{}: {worst}", format.name());
        }
    }
}
