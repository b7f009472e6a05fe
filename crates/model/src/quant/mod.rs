//! NVFP4 quantization and dequantization with torchao's semantics (torchao 0.18.0; the exact
//! arithmetic, step by step, is in docs/research/torchao-nvfp4-semantics.md, and the conformance vectors in
//! golden/conformance/nvfp4_quant.safetensors prove this file equal to it bit for bit).
//!
//! Blocks of 16 consecutive values along K. Every intermediate is f32 with one round-to-nearest-
//! even per operation. Where torch gives different bits on CPU and CUDA (it turns division by a
//! Python scalar into multiplication by the scalar's f32 reciprocal on CUDA), the difference is a
//! named [`TorchDevice`], never a silent choice.
//!
//! MX formats (e2m1, e4m3 or e5m2 with a UE8M0 scale per 32, torchao's `to_mx`, FLOOR and RCEIL)
//! are in [`mx`]; FP8 e4m3 with a per-tensor scale (torchao's float8 recipe) in [`fp8`]; every
//! operand format of the block-scaled family in [`family`].

use crate::error::{Error, Result};
use crate::formats::{
    pack_e2m1, unpack_e2m1, E2m1, E4m3, E4m3Overflow, E2M1_MAX, E4M3_MAX, E4M3_MIN_NORMAL,
};
use crate::problem::SCALE_BLOCK;

pub mod family;
pub mod fp8;
pub mod mx;

/// 448 * 6: the per-tensor scale maps the tensor's amax to the largest e2m1 value at the largest
/// e4m3 scale.
const TENSOR_SCALE_DIVISOR: f32 = E4M3_MAX * E2M1_MAX;

/// Which device's torch arithmetic to reproduce for `tensor / python_scalar`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TorchDevice {
    /// A correctly rounded f32 division.
    Cpu,
    /// Multiplication by the divisor's f32 reciprocal (torch's CUDA true-division kernel).
    Cuda,
}

impl TorchDevice {
    fn divide_by_scalar(self, x: f32, divisor: f32) -> f32 {
        match self {
            TorchDevice::Cpu => x / divisor,
            TorchDevice::Cuda => x * (1.0 / divisor),
        }
    }
}

/// Single-level (e4m3 block scales only) or two-level (plus a per-tensor f32 scale).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QuantRecipe {
    SingleLevel,
    TwoLevel { tensor_scale: f32 },
}

/// A quantized `rows x k` matrix: packed e2m1 `[rows][k/2]` and plain e4m3 scales `[rows][k/16]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantized {
    pub data: Vec<u8>,
    pub scales: Vec<u8>,
}

/// torchao's `per_tensor_amax_to_scale`: amax / (448 * 6), with the device's division.
pub fn per_tensor_scale(values: &[f32], device: TorchDevice) -> Result<f32> {
    let amax = values.iter().fold(0f32, |acc, x| {
        if x.is_nan() || acc.is_nan() {
            f32::NAN
        } else {
            acc.max(x.abs())
        }
    });
    if !amax.is_finite() {
        return Err(Error::Quantize {
            reason: "the tensor's amax is not finite (inf or NaN input), so a per-tensor scale is undefined".into(),
        });
    }
    Ok(device.divide_by_scalar(amax, TENSOR_SCALE_DIVISOR))
}

/// The checks every block quantizer makes first: K a positive multiple of its block (else
/// `requirement`), `rows * k` values, no NaN (named by its row and column).
fn check_input(
    values: &[f32],
    rows: usize,
    k: usize,
    block: usize,
    requirement: &'static str,
) -> Result<()> {
    if k == 0 || k % block != 0 {
        return Err(Error::InvalidShape {
            dimension: "K",
            value: k,
            requirement,
        });
    }
    if values.len() != rows * k {
        return Err(Error::ElementCount {
            name: "input".into(),
            expected: rows * k,
            actual: values.len(),
        });
    }
    match values.iter().position(|x| x.is_nan()) {
        Some(index) => Err(Error::Quantize {
            reason: format!("input row {}, column {} is NaN", index / k, index % k),
        }),
        None => Ok(()),
    }
}

/// Quantizes `values` (row-major `rows x k`). NaN input is an error (NVFP4 cannot represent it, and
/// torchao's output for it is an artifact of its bit tricks). Infinities follow torchao: their
/// block gets scale 448 and they become +-6. (An infinite input makes the per-tensor scale of
/// the two-level recipe undefined; [`per_tensor_scale`] rejects it.)
pub fn quantize_nvfp4(
    values: &[f32],
    rows: usize,
    k: usize,
    recipe: QuantRecipe,
    device: TorchDevice,
) -> Result<Quantized> {
    check_input(
        values,
        rows,
        k,
        SCALE_BLOCK,
        "must be a positive multiple of 16",
    )?;
    if let QuantRecipe::TwoLevel { tensor_scale } = recipe {
        if !(tensor_scale.is_finite() && tensor_scale > 0.0) {
            return Err(Error::Quantize {
                reason: format!("per-tensor scale {tensor_scale} must be finite and positive"),
            });
        }
    }
    let mut codes = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / SCALE_BLOCK);
    for block in values.chunks_exact(SCALE_BLOCK) {
        let amax = block.iter().fold(0f32, |acc, x| acc.max(x.abs()));
        let block_scale = device.divide_by_scalar(amax, E2M1_MAX);
        let (scale, reciprocal) = match recipe {
            QuantRecipe::SingleLevel => {
                let scale = to_e4m3_scale(block_scale);
                (scale, 1.0 / scale.to_f32())
            }
            QuantRecipe::TwoLevel { tensor_scale } => {
                let scale = to_e4m3_scale(block_scale / tensor_scale);
                (scale, (1.0 / tensor_scale) / scale.to_f32())
            }
        };
        // A subnormal per-tensor scale (found by fuzzing) makes the reciprocal infinite, and then
        // 0 * inf would be NaN: refuse rather than emit garbage.
        if !(reciprocal.is_finite() && reciprocal > 0.0) {
            return Err(Error::Quantize {
                reason: format!("the scale of block {} has no finite nonzero reciprocal (per-tensor scale out of range?)", scales.len()),
            });
        }
        scales.push(scale.to_bits());
        for &x in block {
            let scaled = (x * reciprocal).clamp(-E2M1_MAX, E2M1_MAX);
            codes.push(
                E2m1::from_f32_rne_saturating(scaled)
                    .expect("no NaN: inputs checked, reciprocal finite and nonzero"),
            );
        }
    }
    Ok(Quantized {
        data: pack_e2m1(&codes)?,
        scales,
    })
}

/// clamp(s, 2^-6, 448) rounded to e4m3: torchao never emits zero or subnormal block scales.
fn to_e4m3_scale(s: f32) -> E4m3 {
    E4m3::from_f32_rne(s.clamp(E4M3_MIN_NORMAL, E4M3_MAX), E4m3Overflow::Saturate)
}

/// Dequantizes as torchao does: value = e2m1 * fl(tensor_scale * scale).
pub fn dequantize_nvfp4(quantized: &Quantized, recipe: QuantRecipe) -> Vec<f32> {
    let tensor_scale = match recipe {
        QuantRecipe::SingleLevel => 1.0,
        QuantRecipe::TwoLevel { tensor_scale } => tensor_scale,
    };
    unpack_e2m1(&quantized.data)
        .chunks_exact(SCALE_BLOCK)
        .zip(&quantized.scales)
        .flat_map(|(block, &scale)| {
            let scale = tensor_scale * E4m3::from_bits(scale).to_f32();
            block.iter().map(move |code| code.to_f32() * scale)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_at_scale_one_keeps_representable_values() {
        let mut row = vec![0f32; 16];
        row[..8].copy_from_slice(&[6.0, -4.0, 3.0, 2.0, 1.5, -1.0, 0.5, -0.0]);
        let quantized =
            quantize_nvfp4(&row, 1, 16, QuantRecipe::SingleLevel, TorchDevice::Cpu).unwrap();
        assert_eq!(quantized.scales, vec![0x38]); // amax 6 -> scale 1.0
        assert_eq!(dequantize_nvfp4(&quantized, QuantRecipe::SingleLevel), row);
    }

    #[test]
    fn zero_block_gets_the_smallest_normal_scale() {
        let quantized = quantize_nvfp4(
            &[0.0; 16],
            1,
            16,
            QuantRecipe::SingleLevel,
            TorchDevice::Cpu,
        )
        .unwrap();
        assert_eq!(quantized.scales, vec![0x08]);
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        let nan = quantize_nvfp4(
            &[f32::NAN; 16],
            1,
            16,
            QuantRecipe::SingleLevel,
            TorchDevice::Cpu,
        );
        assert!(nan
            .unwrap_err()
            .to_string()
            .contains("row 0, column 0 is NaN"));
        assert!(quantize_nvfp4(
            &[0.0; 15],
            1,
            15,
            QuantRecipe::SingleLevel,
            TorchDevice::Cpu
        )
        .is_err());
        let zero_scale = quantize_nvfp4(
            &[1.0; 16],
            1,
            16,
            QuantRecipe::TwoLevel { tensor_scale: 0.0 },
            TorchDevice::Cpu,
        );
        assert!(zero_scale.is_err());
        assert!(per_tensor_scale(&[1.0, f32::INFINITY], TorchDevice::Cpu).is_err());
        // Found by cargo fuzz: a subnormal per-tensor scale has an infinite reciprocal.
        let tiny = quantize_nvfp4(
            &[0.0; 16],
            1,
            16,
            QuantRecipe::TwoLevel {
                tensor_scale: 1e-40,
            },
            TorchDevice::Cuda,
        );
        assert!(tiny.unwrap_err().to_string().contains("reciprocal"));
    }
}
