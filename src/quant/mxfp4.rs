//! MXFP4 quantization with torchao's semantics (torchao 0.18.0, `to_mx` with its default FLOOR
//! scaling; golden/conformance/mxfp4_quant.safetensors, written by scripts/gen_mx_quant_vectors.py
//! on the H100, proves this file equal to it bit for bit on the CPU and on CUDA, which agree).
//!
//! Blocks of 32 consecutive values along K, one UE8M0 scale each:
//! 1. amax = max |x| of the block (f32; an infinity is kept).
//! 2. The scale's exponent is amax's f32 exponent field minus 127 (floor(log2(amax)) for a normal
//!    amax, -127 for a subnormal or zero one) minus 2 (e2m1's largest power of two, 4), clamped to
//!    -127..=128; its byte is that plus 127. An infinite amax reads as exponent 128: byte 253.
//! 3. The elements are divided (one correctly rounded f32 division) by the scale as an f32,
//!    clamped below at 2^-126: byte 0x00 (2^-127) divides by 2^-126, twice its own value, so such
//!    a block (amax below 2^-125) dequantizes to half of what it held (torchao's comment blames
//!    f32 subnormals in Triton).
//! 4. Each quotient is rounded to e2m1, to nearest even, saturating at +-6 (an infinity too).
//!
//! NaN input is an error here: torchao gives its block the NaN scale 0xFF and element codes made
//! by integer arithmetic on NaN's bits, nothing a kernel should be held to.

use super::Quantized;
use crate::error::{Error, Result};
use crate::formats::{pack_e2m1, unpack_e2m1, E2m1, Ue8m0};

/// Elements per MX scale.
pub const MX_BLOCK: usize = 32;
/// log2 of e2m1's largest power of two (4): the scale puts amax's power of two there.
const E2M1_MAX_POW2: i32 = 2;
/// torchao's floor for the f32 divisor: the smallest normal f32, 2^-126.
const SMALLEST_DIVISOR: f32 = f32::MIN_POSITIVE;

/// Quantizes `values` (row-major `rows x k`, k a multiple of 32) to MXFP4 as torchao's `to_mx`
/// does with FLOOR scaling: packed e2m1 codes (two per byte, even k in the low nibble) and one
/// UE8M0 byte per block.
pub fn quantize_mxfp4_floor(values: &[f32], rows: usize, k: usize) -> Result<Quantized> {
    if k == 0 || k % MX_BLOCK != 0 {
        return Err(Error::InvalidShape {
            dimension: "K",
            value: k,
            requirement: "must be a positive multiple of 32 for MXFP4",
        });
    }
    if values.len() != rows * k {
        return Err(Error::TensorSize {
            name: "input".into(),
            expected: rows * k,
            actual: values.len(),
        });
    }
    if let Some(index) = values.iter().position(|x| x.is_nan()) {
        return Err(Error::Quantize {
            reason: format!("input row {}, column {} is NaN", index / k, index % k),
        });
    }
    let mut codes = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / MX_BLOCK);
    for block in values.chunks_exact(MX_BLOCK) {
        let (byte, divisor) = floor_scale(block, E2M1_MAX_POW2);
        scales.push(byte);
        for &x in block {
            codes.push(
                E2m1::from_f32_rne_saturating(x / divisor)
                    .expect("no NaN: inputs checked, divisor finite and nonzero"),
            );
        }
    }
    Ok(Quantized {
        data: pack_e2m1(&codes)?,
        scales,
    })
}

/// torchao's FLOOR scale of one block whose element format's largest power of two is
/// 2^`max_pow2`: the UE8M0 byte (amax's f32 exponent field minus 127 minus `max_pow2`, clamped to
/// -127..=128, plus 127) and the f32 divisor the elements are divided by (the byte's value,
/// clamped below at 2^-126).
pub(crate) fn floor_scale(block: &[f32], max_pow2: i32) -> (u8, f32) {
    let amax = block.iter().fold(0f32, |acc, x| acc.max(x.abs()));
    let exponent_field = ((amax.to_bits() >> 23) & 0xFF) as i32;
    let exponent = (exponent_field - 127 - max_pow2).clamp(-127, 128);
    let byte = (exponent + 127) as u8;
    (
        byte,
        f32::from_bits(u32::from(byte) << 23).max(SMALLEST_DIVISOR),
    )
}

/// The values the quantized data stands for: e2m1 times its block's scale byte as UE8M0
/// (2^(byte - 127)), as a block-scaled MMA reads them.
pub fn dequantize_mxfp4(quantized: &Quantized) -> Vec<f32> {
    unpack_e2m1(&quantized.data)
        .chunks(MX_BLOCK)
        .zip(&quantized.scales)
        .flat_map(|(block, &byte)| {
            let scale = Ue8m0::from_bits(byte).to_f32();
            block.iter().map(move |e| e.to_f32() * scale)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_puts_amaxs_power_of_two_at_four() {
        let mut row = vec![0.0f32; MX_BLOCK];
        row[0] = 8.0; // 2^3: scale 2^1, 8 -> 4
        row[1] = -3.0; // -1.5
        let q = quantize_mxfp4_floor(&row, 1, MX_BLOCK).unwrap();
        assert_eq!(q.scales, vec![128]);
        let back = dequantize_mxfp4(&q);
        assert_eq!((back[0], back[1]), (8.0, -3.0));
    }

    #[test]
    fn a_tiny_block_comes_back_at_half() {
        let row = vec![f32::MIN_POSITIVE; MX_BLOCK]; // 2^-126: byte 0, divided by 2^-126
        let q = quantize_mxfp4_floor(&row, 1, MX_BLOCK).unwrap();
        assert_eq!(q.scales, vec![0]);
        assert_eq!(dequantize_mxfp4(&q)[0], f32::MIN_POSITIVE / 2.0);
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(quantize_mxfp4_floor(&[f32::NAN; 32], 1, 32).is_err());
        assert!(quantize_mxfp4_floor(&[0.0; 16], 1, 16).is_err());
        assert!(quantize_mxfp4_floor(&[0.0; 32], 2, 32).is_err());
    }
}
