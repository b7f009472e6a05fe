//! MX quantization (e2m1, e4m3 or e5m2 elements, one UE8M0 scale per 32) with torchao's
//! semantics: torchao 0.18.0's `to_mx`, on the CPU and on CUDA, which agree. The vectors in
//! golden/conformance/ (mxfp4_quant, mxfp8_e4m3_quant, mxfp8_e5m2_quant for FLOOR,
//! mx_{e2m1,e4m3,e5m2}_rceil_quant for RCEIL), written on the H100 by
//! scripts/gen_mx_quant_vectors.py, prove this file equal to it bit for bit.
//!
//! Blocks of 32 consecutive values along K. amax = max |x| of the block (f32; an infinity is
//! kept). Two rules for the scale, [`MxScaling`]:
//!
//! **FLOOR** (torchao's default; the OCP MX specification's):
//! 1. The scale's exponent is amax's f32 exponent field minus 127 (floor(log2(amax)) for a normal
//!    amax, -127 for a subnormal or zero one) minus the element format's largest power of two
//!    (2 for e2m1's 4, 8 for e4m3's 256, 15 for e5m2's 32768), clamped to -127..=128; its byte is
//!    that plus 127. An infinite amax reads as exponent 128.
//! 2. The elements are divided (one correctly rounded f32 division) by the scale as an f32,
//!    clamped below at 2^-126: byte 0x00 (2^-127) divides by 2^-126, twice its own value, so such
//!    a block (amax below 2^-125 for e2m1) dequantizes to half of what it held (torchao's comment
//!    blames f32 subnormals in Triton).
//!
//! **RCEIL** (cuBLAS's and TransformerEngine's rule, as torchao computes it off Blackwell):
//! 1. descale = amax / max_pos (one f32 division; max_pos 6, 448 or 57344). Its byte is
//!    ceil(log2(descale)) clamped to -127..=127, plus 127, with log2 rounded to f32 before the
//!    ceiling (torch's f32 `log2`; here the correctly rounded one, which torch's vectorised log2
//!    need not be within one ulp of an integer); an infinite descale gives 254, a zero one 0.
//! 2. The elements are multiplied (one f32 multiplication) by the reciprocal 2^(127 - byte), or
//!    by 2^-127 for byte 254 from an infinite amax, or by 1 for byte 0: a block whose descale is
//!    at most 2^-127 is not scaled up at all (most of it becomes zero).
//!
//! Then each quotient is clamped to +-max_pos and rounded to the element format, to nearest
//! even (an infinity becomes +-max_pos).
//!
//! NaN input is an error here: torchao gives its block the NaN scale 0xFF and element codes made
//! by arithmetic on NaN, nothing a kernel should be held to.

use super::Quantized;
use crate::error::{Error, Result};
use crate::formats::{pack_e2m1, unpack_e2m1, E2m1, E4m3, E4m3Overflow, E5m2, Ue8m0};

/// Elements per MX scale.
pub const MX_BLOCK: usize = 32;
/// torchao's floor for the FLOOR rule's f32 divisor: the smallest normal f32, 2^-126.
const SMALLEST_DIVISOR: f32 = f32::MIN_POSITIVE;

/// The element format of an MX block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MxElement {
    E2m1,
    E4m3,
    E5m2,
}

impl MxElement {
    /// log2 of the format's largest power of two: FLOOR puts amax's power of two there.
    fn max_pow2(self) -> i32 {
        match self {
            MxElement::E2m1 => 2,
            MxElement::E4m3 => 8,
            MxElement::E5m2 => 15,
        }
    }

    /// The format's largest finite value: RCEIL maps amax at most there.
    pub fn max_pos(self) -> f32 {
        match self {
            MxElement::E2m1 => 6.0,
            MxElement::E4m3 => 448.0,
            MxElement::E5m2 => 57344.0,
        }
    }

    /// `x` (not NaN) clamped to +-max_pos and rounded to nearest even: the element's code.
    fn encode(self, x: f32) -> u8 {
        match self {
            MxElement::E2m1 => E2m1::from_f32_rne_saturating(x)
                .expect("no NaN: inputs checked, scales finite")
                .to_bits(),
            MxElement::E4m3 => E4m3::from_f32_rne(x, E4m3Overflow::Saturate).to_bits(),
            MxElement::E5m2 => E5m2::from_f32_rne_saturating(x).to_bits(),
        }
    }
}

/// How the block's scale is chosen from its amax.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MxScaling {
    Floor,
    Rceil,
}

impl MxScaling {
    pub const ALL: [MxScaling; 2] = [MxScaling::Floor, MxScaling::Rceil];

    pub fn name(self) -> &'static str {
        match self {
            MxScaling::Floor => "floor",
            MxScaling::Rceil => "rceil",
        }
    }
}

impl std::str::FromStr for MxScaling {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        crate::error::parse_name(&MxScaling::ALL, MxScaling::name, "MX scaling", text)
    }
}

/// An MX-quantized `rows x k` matrix: one element code per value (e2m1 codes unpacked, in the low
/// nibble) and one UE8M0 byte per block of 32, both row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MxQuantized {
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
}

/// Quantizes `values` (row-major `rows x k`, k a multiple of 32) as torchao's `to_mx` does.
pub fn quantize_mx(
    values: &[f32],
    rows: usize,
    k: usize,
    element: MxElement,
    scaling: MxScaling,
) -> Result<MxQuantized> {
    super::check_input(
        values,
        rows,
        k,
        MX_BLOCK,
        "must be a positive multiple of 32 for an MX format",
    )?;
    let mut codes = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(values.len() / MX_BLOCK);
    for block in values.chunks_exact(MX_BLOCK) {
        let amax = block.iter().fold(0f32, |acc, x| acc.max(x.abs()));
        match scaling {
            MxScaling::Floor => {
                let (byte, divisor) = floor_scale(amax, element.max_pow2());
                scales.push(byte);
                codes.extend(block.iter().map(|&x| element.encode(x / divisor)));
            }
            MxScaling::Rceil => {
                let (byte, reciprocal) = rceil_scale(amax, element.max_pos());
                scales.push(byte);
                codes.extend(block.iter().map(|&x| element.encode(x * reciprocal)));
            }
        }
    }
    Ok(MxQuantized { codes, scales })
}

/// MXFP4 with FLOOR scaling, e2m1 codes packed two per byte (even k in the low nibble).
pub fn quantize_mxfp4_floor(values: &[f32], rows: usize, k: usize) -> Result<Quantized> {
    let q = quantize_mx(values, rows, k, MxElement::E2m1, MxScaling::Floor)?;
    let codes: Vec<E2m1> = q.codes.into_iter().map(E2m1::from_bits).collect();
    Ok(Quantized {
        data: pack_e2m1(&codes)?,
        scales: q.scales,
    })
}

/// FLOOR: the UE8M0 byte (amax's f32 exponent field minus 127 minus `max_pow2`, clamped to
/// -127..=128, plus 127) and the f32 divisor (the byte's value, clamped below at 2^-126).
fn floor_scale(amax: f32, max_pow2: i32) -> (u8, f32) {
    let exponent_field = ((amax.to_bits() >> 23) & 0xFF) as i32;
    let exponent = (exponent_field - 127 - max_pow2).clamp(-127, 128);
    let byte = (exponent + 127) as u8;
    (
        byte,
        f32::from_bits(u32::from(byte) << 23).max(SMALLEST_DIVISOR),
    )
}

/// RCEIL: the UE8M0 byte and the f32 reciprocal the elements are multiplied by.
fn rceil_scale(amax: f32, max_pos: f32) -> (u8, f32) {
    let descale = amax / max_pos;
    if descale.is_infinite() {
        return (254, f32::from_bits(1 << 22)); // 2^-127
    }
    // ceil of the f32-rounded log2; log2(0) is -inf, clamped to -127 like any tiny descale.
    let log2 = (f64::from(descale).log2() as f32).ceil();
    let byte = (log2.clamp(-127.0, 127.0) as i32 + 127) as u8;
    let reciprocal = match byte {
        0 => 1.0,
        _ => 2f32.powi(127 - i32::from(byte)),
    };
    (byte, reciprocal)
}

/// The values MXFP4 data stands for: e2m1 times its block's scale byte as UE8M0
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
    fn rceil_rounds_the_scale_up_so_amax_fits() {
        // amax 7 over e2m1's 6: descale 7/6, log2 0.22, ceiling 1: scale 2, 7 -> 3.5 -> 4 (even).
        let mut row = vec![0.0f32; MX_BLOCK];
        row[0] = 7.0;
        let q = quantize_mx(&row, 1, MX_BLOCK, MxElement::E2m1, MxScaling::Rceil).unwrap();
        assert_eq!(q.scales, vec![128]);
        assert_eq!(E2m1::from_bits(q.codes[0]).to_f32(), 4.0);
        // FLOOR keeps 2^2 / 2^2 = scale 1 and saturates 7 to 6.
        let q = quantize_mx(&row, 1, MX_BLOCK, MxElement::E2m1, MxScaling::Floor).unwrap();
        assert_eq!(
            (q.scales[0], E2m1::from_bits(q.codes[0]).to_f32()),
            (127, 6.0)
        );
        // An exact fit stays: amax 448 in e4m3 has descale 1, scale byte 127.
        row[0] = 448.0;
        let q = quantize_mx(&row, 1, MX_BLOCK, MxElement::E4m3, MxScaling::Rceil).unwrap();
        assert_eq!((q.scales[0], q.codes[0]), (127, 0x7E));
    }

    #[test]
    fn rceil_leaves_a_block_below_two_to_the_minus_127_unscaled() {
        let row = vec![1e-40f32; MX_BLOCK];
        let q = quantize_mx(&row, 1, MX_BLOCK, MxElement::E4m3, MxScaling::Rceil).unwrap();
        assert_eq!(q.scales, vec![0]);
        assert!(q.codes.iter().all(|&c| c == 0), "1e-40 is 0 in e4m3");
    }

    #[test]
    fn bad_input_is_an_error() {
        assert!(quantize_mxfp4_floor(&[f32::NAN; 32], 1, 32).is_err());
        assert!(quantize_mxfp4_floor(&[0.0; 16], 1, 16).is_err());
        assert!(quantize_mxfp4_floor(&[0.0; 32], 2, 32).is_err());
    }
}
