//! FP8 e4m3 with one scale per tensor, as torchao's float8 recipe makes it
//! (`torchao.float8.float8_utils`: `amax_to_scale`, then `to_fp8_saturated`); the vectors in
//! golden/conformance/fp8_tensor_quant.safetensors, written on the H100 by
//! scripts/gen_fp8_quant_vectors.py from torchao 0.18.0, prove this file equal to it bit for bit.
//!
//! 1. amax = max |x| (f32).
//! 2. s = 448 / max(amax, 1e-12), divided in f64 and rounded once to f32 (torchao upcasts to
//!    f64 so that eager and compiled code agree).
//! 3. Each element is multiplied by s (one f32 multiplication), clamped to +-448 and rounded to
//!    e4m3, to nearest even.
//! 4. The GEMM applies the f32 reciprocal 1 / s (what torchao hands `torch._scaled_mm`): the
//!    operand's factor of alpha.
//!
//! An infinite amax makes s zero and torchao's codes NaN (infinity times zero): an error here.
//! (The floor keeps s finite for any finite amax: 448 / 1e-12.)

use crate::error::{Error, Result};
use crate::formats::{E4m3, E4m3Overflow, E4M3_MAX};

/// torchao's floor for amax before the division.
const AMAX_FLOOR: f64 = 1e-12;

/// A tensor quantized to FP8 e4m3 with one scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Fp8Tensor {
    /// One e4m3 code per value.
    pub codes: Vec<u8>,
    /// s: the values were multiplied by it.
    pub scale: f32,
    /// 1 / s in f32: what the GEMM multiplies its result by.
    pub inverse_scale: f32,
}

/// Quantizes `values` as one tensor.
pub fn quantize_fp8_tensor(values: &[f32]) -> Result<Fp8Tensor> {
    if let Some(index) = values.iter().position(|x| x.is_nan()) {
        return Err(Error::Quantize {
            reason: format!("input element {index} is NaN"),
        });
    }
    let amax = values.iter().fold(0f32, |m, x| m.max(x.abs()));
    let scale = (f64::from(E4M3_MAX) / f64::from(amax).max(AMAX_FLOOR)) as f32;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(Error::Quantize {
            reason: format!(
                "amax {amax:e} has no finite per-tensor FP8 scale (448 / amax is {scale:e})"
            ),
        });
    }
    let codes = values
        .iter()
        .map(|&x| E4m3::from_f32_rne(x * scale, E4m3Overflow::Saturate).to_bits())
        .collect();
    Ok(Fp8Tensor {
        codes,
        scale,
        inverse_scale: 1.0 / scale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amax_lands_on_448() {
        let q = quantize_fp8_tensor(&[1.0, -2.0, 0.5]).unwrap();
        assert_eq!(q.scale, 224.0);
        assert_eq!(q.inverse_scale, 1.0 / 224.0);
        assert_eq!(E4m3::from_bits(q.codes[1]).to_f32(), -448.0);
        assert_eq!(E4m3::from_bits(q.codes[2]).to_f32(), 112.0);
    }

    #[test]
    fn a_zero_tensor_uses_the_amax_floor() {
        let q = quantize_fp8_tensor(&[0.0; 4]).unwrap();
        assert_eq!(q.scale, (448.0f64 / 1e-12) as f32);
        assert!(q.codes.iter().all(|&c| c == 0));
    }

    #[test]
    fn no_finite_scale_and_nan_are_errors() {
        assert!(quantize_fp8_tensor(&[f32::INFINITY, 1.0]).is_err());
        assert!(quantize_fp8_tensor(&[f32::NEG_INFINITY]).is_err());
        let tiny = quantize_fp8_tensor(&[1e-37]).unwrap();
        assert_eq!((tiny.scale, tiny.codes[0]), ((448.0f64 / 1e-12) as f32, 0));
        assert!(quantize_fp8_tensor(&[f32::NAN]).is_err());
    }
}
