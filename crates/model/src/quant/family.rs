//! Quantizers for every operand format of the block-scaled family (`problem::scaled_gemm`), as
//! the libraries' reference quantizers work: what their tests feed their kernels.

use crate::error::Error;
use crate::error::Result;
use crate::formats::{bf16_from_f64_rne, unpack_e2m1};
use crate::problem::scaled_gemm::{
    Epilogue, OperandFormat, OutDtype, ScaledGemmInputs, ScaledOperand,
};
use crate::problem::scaled_generate::{normal_values, random_operand, ScaledDistribution};

use super::fp8::quantize_fp8_tensor;
use super::mx::{quantize_mx, MxElement, MxScaling};
use super::{quantize_nvfp4, QuantRecipe, TorchDevice};

/// An operand quantized from `values` (`rows x k`, row-major), and the factor its per-tensor
/// scale contributes to alpha (1 where the format has none).
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedOperand {
    pub operand: ScaledOperand,
    pub alpha_factor: f32,
}

/// Quantizes as the libraries' reference quantizers do: NVFP4 with torchao's two-level recipe
/// (a per-tensor scale amax / (448 * 6), folded into alpha); MXFP4 and MXFP8 with torchao's `to_mx`
/// (FLOOR, its default, or RCEIL, cuBLAS's and TransformerEngine's rule); FP8 with torchao's float8 per-tensor scale (its inverse folded into alpha); bf16
/// rounded. NaN input is an error.
pub fn quantize_operand(
    format: OperandFormat,
    values: &[f32],
    rows: usize,
    k: usize,
    mx_scaling: MxScaling,
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
        OperandFormat::Mxfp4 | OperandFormat::Mxfp8E4m3 | OperandFormat::Mxfp8E5m2 => {
            let element = match format {
                OperandFormat::Mxfp4 => MxElement::E2m1,
                OperandFormat::Mxfp8E4m3 => MxElement::E4m3,
                _ => MxElement::E5m2,
            };
            let q = quantize_mx(values, rows, k, element, mx_scaling)?;
            (q.codes.into_iter().map(u16::from).collect(), q.scales, 1.0)
        }
        OperandFormat::Fp8E4m3 => {
            let q = quantize_fp8_tensor(values)?;
            let codes = q.codes.into_iter().map(u16::from).collect();
            (codes, Vec::new(), q.inverse_scale)
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
        crate::error::parse_name(
            &ScaledCaseDistribution::ALL,
            ScaledCaseDistribution::name,
            "distribution",
            text,
        )
    }
}

impl ScaledCaseDistribution {
    pub const ALL: [ScaledCaseDistribution; 4] = [
        ScaledCaseDistribution::Normal,
        ScaledCaseDistribution::Drawn(ScaledDistribution::Moderate),
        ScaledCaseDistribution::Drawn(ScaledDistribution::Codes),
        ScaledCaseDistribution::Drawn(ScaledDistribution::Edges),
    ];

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
    /// The MX formats' scale rule for `Normal` operands.
    pub mx_scaling: MxScaling,
}

/// The inputs of one drawn case.
pub fn draw_scaled_gemm(draw: &ScaledDraw) -> Result<ScaledGemmInputs> {
    let (m, n, k) = draw.shape;
    for format in [draw.a_format, draw.b_format] {
        if k == 0 || k % format.k_multiple() != 0 {
            return Err(Error::InvalidInput(format!(
                "K = {k} is not a positive multiple of {} ({})",
                format.k_multiple(),
                format.name()
            )));
        }
    }
    let (a, b, alpha) = match draw.distribution {
        ScaledCaseDistribution::Normal => {
            let quantize = |format, values: &[f32], rows| {
                quantize_operand(format, values, rows, k, draw.mx_scaling)
            };
            let a = quantize(draw.a_format, &normal_values(m * k, draw.seed, 0), m)?;
            let b = quantize(draw.b_format, &normal_values(n * k, draw.seed, 1), n)?;
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
    fn every_distribution_has_a_name_that_parses_back() {
        for drawn in ScaledDistribution::ALL {
            assert!(ScaledCaseDistribution::ALL.contains(&ScaledCaseDistribution::Drawn(drawn)));
        }
        for d in ScaledCaseDistribution::ALL {
            assert_eq!(d.name().parse::<ScaledCaseDistribution>().unwrap(), d);
        }
        let error = "uniform".parse::<ScaledCaseDistribution>().unwrap_err();
        assert!(
            error.to_string().contains("normal, moderate, codes, edges"),
            "{error}"
        );
    }

    #[test]
    fn quantized_operands_are_close_to_their_values() {
        let (rows, k) = (4, 64);
        let values = normal_values(rows * k, 3, 0);
        for format in OperandFormat::ALL {
            let q = quantize_operand(format, &values, rows, k, MxScaling::Floor).unwrap();
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
