//! The block-scaled GEMM family as the libraries ship it: `out = epilogue(alpha * (A @ B^T), bias)`
//! with A (M x K) and B (N x K) each in one of the operand formats below, an FP32 global scale
//! `alpha`, an optional bias per output column, and an fp16, bf16 or f32 output. What each
//! library does where (alpha before or after the output cast, bias in f32 or in the output type)
//! is in docs/research/mx-formats.md; [`Epilogue`] names the three orders.
//!
//! Operands are held one code per element (a nibble, a byte, or bf16's two bytes) with their
//! block scales in the plain row-major layout `(rows, K / block)`; the libraries' 128x4 layout is
//! `layout::BlockedScaleLayout` with `cols = K / block`.

use crate::error::{Error, Result};
use crate::formats::{bf16_to_exact, E2m1, E4m3, E5m2, ExactValue, Ue8m0};

/// An element format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementFormat {
    E2m1,
    E4m3,
    E5m2,
    Bf16,
}

impl ElementFormat {
    /// The exact value of `code` (a nibble for e2m1, a byte for FP8, bf16's bits).
    pub fn decode(self, code: u16) -> ExactValue {
        match self {
            ElementFormat::E2m1 => E2m1::from_bits((code & 0xF) as u8).to_exact(),
            ElementFormat::E4m3 => E4m3::from_bits(code as u8).to_exact(),
            ElementFormat::E5m2 => E5m2::from_bits(code as u8).to_exact(),
            ElementFormat::Bf16 => bf16_to_exact(half::bf16::from_bits(code)),
        }
    }

    /// Codes there are: 16, 256 or 65,536.
    pub fn code_count(self) -> u32 {
        match self {
            ElementFormat::E2m1 => 16,
            ElementFormat::E4m3 | ElementFormat::E5m2 => 256,
            ElementFormat::Bf16 => 65_536,
        }
    }
}

/// A block scale's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaleFormat {
    /// e4m3 read without its sign: NVFP4's scale, per 16.
    Ue4m3,
    /// A power of two, 2^-127..2^127, 0xFF NaN: the MX formats' scale, per 32.
    Ue8m0,
}

impl ScaleFormat {
    pub fn decode(self, byte: u8) -> ExactValue {
        match self {
            ScaleFormat::Ue4m3 => E4m3::from_bits(byte).to_exact_unsigned_scale(),
            ScaleFormat::Ue8m0 => Ue8m0::from_bits(byte).to_exact(),
        }
    }
}

/// An operand format: elements, and their block scale if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OperandFormat {
    /// e2m1, UE4M3 per 16.
    Nvfp4,
    /// e2m1, UE8M0 per 32.
    Mxfp4,
    /// e4m3, UE8M0 per 32.
    Mxfp8E4m3,
    /// e5m2, UE8M0 per 32.
    Mxfp8E5m2,
    /// e4m3 with no block scale: its per-tensor scale is folded into alpha, as the libraries do
    /// (FP8 activations with NVFP4 weights: TensorRT-LLM's W4A8).
    Fp8E4m3,
    /// bf16 with no scale (bf16 activations with NVFP4 or MXFP4 weights).
    Bf16,
}

impl OperandFormat {
    pub const ALL: [OperandFormat; 6] = [
        OperandFormat::Nvfp4,
        OperandFormat::Mxfp4,
        OperandFormat::Mxfp8E4m3,
        OperandFormat::Mxfp8E5m2,
        OperandFormat::Fp8E4m3,
        OperandFormat::Bf16,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OperandFormat::Nvfp4 => "nvfp4",
            OperandFormat::Mxfp4 => "mxfp4",
            OperandFormat::Mxfp8E4m3 => "mxfp8-e4m3",
            OperandFormat::Mxfp8E5m2 => "mxfp8-e5m2",
            OperandFormat::Fp8E4m3 => "fp8-e4m3",
            OperandFormat::Bf16 => "bf16",
        }
    }

    pub fn element(self) -> ElementFormat {
        match self {
            OperandFormat::Nvfp4 | OperandFormat::Mxfp4 => ElementFormat::E2m1,
            OperandFormat::Mxfp8E4m3 | OperandFormat::Fp8E4m3 => ElementFormat::E4m3,
            OperandFormat::Mxfp8E5m2 => ElementFormat::E5m2,
            OperandFormat::Bf16 => ElementFormat::Bf16,
        }
    }

    /// The block scale and how many consecutive K elements share one.
    pub fn scale(self) -> Option<(ScaleFormat, usize)> {
        match self {
            OperandFormat::Nvfp4 => Some((ScaleFormat::Ue4m3, 16)),
            OperandFormat::Mxfp4 | OperandFormat::Mxfp8E4m3 | OperandFormat::Mxfp8E5m2 => {
                Some((ScaleFormat::Ue8m0, 32))
            }
            OperandFormat::Fp8E4m3 | OperandFormat::Bf16 => None,
        }
    }

    /// K must be a multiple of this: the scale block, or 16 (one MMA step) without one.
    pub fn k_multiple(self) -> usize {
        self.scale().map_or(16, |(_, block)| block)
    }
}

impl std::str::FromStr for OperandFormat {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        crate::error::parse_name(
            &OperandFormat::ALL,
            OperandFormat::name,
            "operand format",
            text,
        )
    }
}

/// The output's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutDtype {
    F16,
    Bf16,
    F32,
}

impl OutDtype {
    pub const ALL: [OutDtype; 3] = [OutDtype::F16, OutDtype::Bf16, OutDtype::F32];

    pub fn name(self) -> &'static str {
        match self {
            OutDtype::F16 => "fp16",
            OutDtype::Bf16 => "bf16",
            OutDtype::F32 => "fp32",
        }
    }

    /// `x` rounded once to this type, to nearest even (overflow to infinity), as f64.
    pub fn round(self, x: f64) -> f64 {
        match self {
            OutDtype::F16 => crate::formats::fp16_from_f64_rne(x).to_f64(),
            OutDtype::Bf16 => crate::formats::bf16_from_f64_rne(x).to_f64(),
            OutDtype::F32 => f64::from(x as f32),
        }
    }
}

impl std::str::FromStr for OutDtype {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        crate::error::parse_name(&OutDtype::ALL, OutDtype::name, "output type", text)
    }
}

/// Where alpha and the bias meet the f32 accumulator `acc` (f32 arithmetic rounds each step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `out = cast(alpha * acc + bias)` in f32, the multiply and add rounded each or fused into
    /// one FMA (both accepted): CUTLASS's linear combination (FlashInfer, vLLM's and
    /// TensorRT-LLM's CUTLASS kernels), cuBLASLt, cuDNN.
    F32,
    /// `out = cast(cast(alpha * acc) + bias)`, the bias added in the output type after the GEMM
    /// returns: vLLM's NVFP4 linear layer.
    BiasInOutput,
    /// `out = cast(cast(cast(acc) * cast(alpha)) + bias)`, every step in the output type: torchao's
    /// `NVFP4Tensor` (`_scaled_mm` to bf16, then the per-tensor scales, then the bias).
    AfterCast,
}

impl Epilogue {
    pub const ALL: [Epilogue; 3] = [Epilogue::F32, Epilogue::BiasInOutput, Epilogue::AfterCast];

    pub fn name(self) -> &'static str {
        match self {
            Epilogue::F32 => "f32",
            Epilogue::BiasInOutput => "bias-in-output",
            Epilogue::AfterCast => "after-cast",
        }
    }
}

impl std::str::FromStr for Epilogue {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        crate::error::parse_name(&Epilogue::ALL, Epilogue::name, "epilogue", text)
    }
}

/// One operand: `rows x k` element codes, row-major, and its block scales `(rows, k / block)`
/// row-major (empty for a format without block scales).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaledOperand {
    pub format: OperandFormat,
    pub rows: usize,
    pub k: usize,
    pub codes: Vec<u16>,
    pub scales: Vec<u8>,
}

impl ScaledOperand {
    pub fn new(
        format: OperandFormat,
        rows: usize,
        k: usize,
        codes: Vec<u16>,
        scales: Vec<u8>,
    ) -> Result<Self> {
        let size = |name: &str, expected: usize, actual: usize| {
            if expected == actual {
                Ok(())
            } else {
                Err(Error::ElementCount {
                    name: name.into(),
                    expected,
                    actual,
                })
            }
        };
        if k == 0 || k % format.k_multiple() != 0 {
            return Err(Error::InvalidShape {
                dimension: "K",
                value: k,
                requirement: "must be a positive multiple of the operand's scale block (16 for \
                              NVFP4, FP8 and bf16, 32 for the MX formats)",
            });
        }
        size("codes", rows * k, codes.len())?;
        let scale_count = format.scale().map_or(0, |(_, block)| rows * (k / block));
        size("scales", scale_count, scales.len())?;
        let limit = format.element().code_count();
        if let Some(bad) = codes.iter().find(|&&c| u32::from(c) >= limit) {
            return Err(Error::InvalidInput(format!(
                "element code {bad:#x} is not a {} code",
                format.name()
            )));
        }
        Ok(ScaledOperand {
            format,
            rows,
            k,
            codes,
            scales,
        })
    }

    /// The exact value of element (row, k), its block scale applied.
    pub fn value(&self, row: usize, k: usize) -> ExactValue {
        let element = self.format.element().decode(self.codes[row * self.k + k]);
        match self.format.scale() {
            None => element,
            Some((scale, block)) => {
                let byte = self.scales[row * (self.k / block) + k / block];
                element.times(scale.decode(byte))
            }
        }
    }
}

/// A GEMM of the family: `out[m, n] = epilogue(alpha * sum_k A[m, k] B[n, k], bias[n])`.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaledGemmInputs {
    pub a: ScaledOperand,
    pub b: ScaledOperand,
    pub alpha: f32,
    /// One value per output column (N), already in the type the epilogue adds it in (f32 for
    /// [`Epilogue::F32`], the output type otherwise: the caller rounds it there).
    pub bias: Option<Vec<f32>>,
    pub out: OutDtype,
    pub epilogue: Epilogue,
}

impl ScaledGemmInputs {
    pub fn new(
        a: ScaledOperand,
        b: ScaledOperand,
        alpha: f32,
        bias: Option<Vec<f32>>,
        out: OutDtype,
        epilogue: Epilogue,
    ) -> Result<Self> {
        if a.k != b.k {
            return Err(Error::InvalidShape {
                dimension: "K",
                value: b.k,
                requirement: "B's K must equal A's",
            });
        }
        if let Some(bias) = &bias {
            if bias.len() != b.rows {
                return Err(Error::ElementCount {
                    name: "bias".into(),
                    expected: b.rows,
                    actual: bias.len(),
                });
            }
        }
        for (i, &value) in bias.iter().flatten().enumerate() {
            let representable =
                epilogue == Epilogue::F32 || out.round(f64::from(value)) == f64::from(value);
            if !value.is_finite() || !representable {
                return Err(Error::InvalidInput(format!(
                    "bias[{i}] = {value} is not a finite {} value",
                    if epilogue == Epilogue::F32 {
                        "f32"
                    } else {
                        out.name()
                    }
                )));
            }
        }
        if !alpha.is_finite() {
            return Err(Error::InvalidInput(format!("alpha {alpha} is not finite")));
        }
        Ok(ScaledGemmInputs {
            a,
            b,
            alpha,
            bias,
            out,
            epilogue,
        })
    }

    pub fn m(&self) -> usize {
        self.a.rows
    }

    pub fn n(&self) -> usize {
        self.b.rows
    }

    pub fn k(&self) -> usize {
        self.a.k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_bias_is_counted_in_elements_not_bytes() {
        let operand = |rows: usize| {
            ScaledOperand::new(
                OperandFormat::Bf16,
                rows,
                16,
                vec![0; rows * 16],
                Vec::new(),
            )
            .unwrap()
        };
        let message = ScaledGemmInputs::new(
            operand(2),
            operand(4),
            1.0,
            Some(vec![0.0; 3]),
            OutDtype::F32,
            Epilogue::F32,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            message,
            "tensor 'bias' has 3 elements but the shape needs 4"
        );
    }
}
