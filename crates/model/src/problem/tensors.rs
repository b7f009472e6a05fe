//! A problem's inputs from named tensors the user made: the tensors of a case file, read from a
//! safetensors file (`nvfp4-oracle reference --inputs`) or handed over as numpy arrays (the
//! Python package). One reader for both, so both accept and refuse the same things.
//!
//! Names and layouts, those of a case file (the GPU MODE tensors made contiguous with L first):
//! - each operand `X` (`a`, `b1`, `b2` for the dual GEMM; `a`, `b` for the GEMM and GEMV; `a0`,
//!   `b0`, `a1`, `b1`, ... for the grouped GEMM) is its packed FP4 data `X`, `[L, rows, K/2]`
//!   bytes (two e2m1 codes per byte, even k in the low nibble), and its plain scales `sfX`,
//!   `[L, rows, K/16]` e4m3 bytes; `[rows, K/2]` and `[rows, K/16]` mean L = 1;
//! - `sfX_permuted`, the blocked (tcgen05) layout `[L, M/128, K/64, 32, 4, 4]`, is optional;
//!   when present it must hold the same scales as `sfX`.

use super::{
    BlockScaledMatrix, DualGemmInputs, GemmInputs, GroupGemmInputs, ProblemInputs, ProblemKind,
    Shape, SCALE_BLOCK,
};
use crate::error::{Error, Result};
use crate::layout::{blocked_to_plain, BlockedScaleLayout};
use std::collections::HashMap;

/// How a tensor's bytes are typed. Data must be bytes of packed e2m1 pairs; scales e4m3 bytes.
/// Both are one byte an element, so an unsigned-byte tensor is accepted for either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteType {
    /// Unsigned bytes (`U8`, numpy `uint8`, a torch tensor viewed as `uint8`).
    U8,
    /// Two e2m1 codes per byte (torch `float4_e2m1fn_x2`).
    Fp4x2,
    /// e4m3 (`F8_E4M3`, torch `float8_e4m3fn`).
    E4m3,
    /// Anything else, named for the message (for example `float32`).
    Other(&'static str),
}

impl std::fmt::Display for ByteType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ByteType::U8 => "uint8",
            ByteType::Fp4x2 => "float4_e2m1fn_x2",
            ByteType::E4m3 => "float8_e4m3fn",
            ByteType::Other(name) => name,
        })
    }
}

/// One named tensor: its element type, shape and bytes (row-major, contiguous).
#[derive(Debug, Clone, Copy)]
pub struct TensorRef<'a> {
    pub dtype: ByteType,
    pub shape: &'a [usize],
    pub bytes: &'a [u8],
}

/// Named tensors: element type, shape and bytes (row-major, contiguous) of each.
pub type TensorMap<'a> = HashMap<String, (ByteType, Vec<usize>, &'a [u8])>;

/// The inputs of `problem` from `tensors`. `source` names them in errors (a file's path, "the
/// tensors given").
pub fn problem_inputs_from_tensors(
    problem: ProblemKind,
    tensors: &TensorMap<'_>,
    source: &str,
) -> Result<ProblemInputs> {
    let get = |name: &str| {
        tensors.get(name).map(|(dtype, shape, bytes)| TensorRef {
            dtype: *dtype,
            shape,
            bytes,
        })
    };
    let fail = |reason: String| Error::file(source, reason);
    let need = |name: &str| {
        get(name).ok_or_else(|| {
            fail(format!(
                "no tensor '{name}' (a {} needs it)",
                problem.name()
            ))
        })
    };
    let operand = |name: &str| read_operand(name, &need, &get, source);
    let gemm = |a_name: &str, b_name: &str| -> Result<GemmInputs> {
        let (a, b) = (operand(a_name)?, operand(b_name)?);
        same_k_and_l((a_name, &a), (b_name, &b), source)?;
        GemmInputs::new(Shape::new(a.rows(), b.rows(), a.k(), a.batches())?, a, b)
    };
    Ok(match problem {
        ProblemKind::DualGemm => {
            let (a, b1, b2) = (operand("a")?, operand("b1")?, operand("b2")?);
            same_k_and_l(("a", &a), ("b1", &b1), source)?;
            same_k_and_l(("a", &a), ("b2", &b2), source)?;
            let shape = Shape::new(a.rows(), b1.rows(), a.k(), a.batches())?;
            ProblemInputs::DualGemm(DualGemmInputs::new(shape, a, b1, b2)?)
        }
        ProblemKind::Gemm => ProblemInputs::Gemm(gemm("a", "b")?),
        ProblemKind::Gemv => {
            let gemv = gemm("a", "b")?;
            if gemv.b.rows() != 1 {
                return Err(fail(format!(
                    "a gemv's b has one row (N = 1); this one has {} (is it the 128-row padded copy GPU MODE makes? give its first row)",
                    gemv.b.rows()
                )));
            }
            ProblemInputs::Gemv(gemv)
        }
        ProblemKind::GroupGemm => {
            let mut groups = Vec::new();
            while get(&format!("a{}", groups.len())).is_some() {
                let g = groups.len();
                groups.push(gemm(&format!("a{g}"), &format!("b{g}"))?);
            }
            if groups.is_empty() {
                return Err(fail(
                    "no tensor 'a0' (a group-gemm's groups are a0, b0, a1, b1, ...)".into(),
                ));
            }
            ProblemInputs::GroupGemm(GroupGemmInputs::new(groups)?)
        }
    })
}

fn same_k_and_l(
    (a_name, a): (&str, &BlockScaledMatrix),
    (b_name, b): (&str, &BlockScaledMatrix),
    source: &str,
) -> Result<()> {
    if a.k() != b.k() || a.batches() != b.batches() {
        return Err(Error::file(
            source,
            format!(
                "'{a_name}' has K = {} and L = {}, '{b_name}' has K = {} and L = {}: they must agree",
                a.k(),
                a.batches(),
                b.k(),
                b.batches()
            ),
        ));
    }
    Ok(())
}

/// `[L, rows, cols]` from a 3-D shape, or `[rows, cols]` as L = 1.
/// `[L, rows, cols]` from a 3-D shape, or `[rows, cols]` as L = 1; `cols` names the last
/// dimension in the message ("K/2", "K/16").
fn dims(name: &str, shape: &[usize], cols: &str, source: &str) -> Result<(usize, usize, usize)> {
    match *shape {
        [l, rows, c] => Ok((l, rows, c)),
        [rows, c] => Ok((1, rows, c)),
        _ => Err(Error::file(
            source,
            format!(
                "tensor '{name}' has shape {shape:?}; expected [L, rows, {cols}] or [rows, {cols}]"
            ),
        )),
    }
}

fn read_operand<'a>(
    name: &str,
    need: &impl Fn(&str) -> Result<TensorRef<'a>>,
    get: &impl Fn(&str) -> Option<TensorRef<'a>>,
    source: &str,
) -> Result<BlockScaledMatrix> {
    let fail = |reason: String| Error::file(source, reason);
    let data = need(name)?;
    if !matches!(data.dtype, ByteType::U8 | ByteType::Fp4x2) {
        return Err(fail(format!(
            "tensor '{name}' is {}: FP4 data must be packed bytes (uint8, or torch's float4_e2m1fn_x2), two e2m1 codes per byte",
            data.dtype
        )));
    }
    let (l, rows, half_k) = dims(name, data.shape, "K/2", source)?;
    let k = 2 * half_k;
    if k == 0 || k % SCALE_BLOCK != 0 {
        return Err(fail(format!(
            "tensor '{name}' holds K = {k} values a row: K must be a positive multiple of {SCALE_BLOCK}"
        )));
    }
    let scales_name = format!("sf{name}");
    let scales = need(&scales_name)?;
    if !matches!(scales.dtype, ByteType::U8 | ByteType::E4m3) {
        return Err(fail(format!(
            "tensor '{scales_name}' is {}: scales must be e4m3 bytes (float8_e4m3fn or uint8)",
            scales.dtype
        )));
    }
    let expected = [l, rows, k / SCALE_BLOCK];
    let (sl, srows, scols) = dims(&scales_name, scales.shape, "K/16", source)?;
    if [sl, srows, scols] != expected {
        return Err(fail(format!(
            "tensor '{scales_name}' has shape {:?}; '{name}' needs [L, rows, K/16] = {expected:?}",
            scales.shape
        )));
    }
    let operand =
        BlockScaledMatrix::new(name, rows, k, l, data.bytes.to_vec(), scales.bytes.to_vec())?;
    let permuted_name = format!("sf{name}_permuted");
    if let Some(permuted) = get(&permuted_name) {
        let want = BlockedScaleLayout(operand.scale_dims()).storage_shape();
        if permuted.shape != want {
            return Err(fail(format!(
                "tensor '{permuted_name}' has shape {:?}; the blocked layout of '{scales_name}' is {want:?}",
                permuted.shape
            )));
        }
        if let Some(first) = blocked_to_plain(permuted.bytes, operand.scale_dims())
            .iter()
            .zip(operand.scales())
            .position(|(p, s)| p != s)
        {
            let cols = k / SCALE_BLOCK;
            return Err(fail(format!(
                "tensor '{permuted_name}' does not hold the same scales as '{scales_name}': first difference at batch {}, row {}, scale column {}",
                first / (rows * cols),
                first / cols % rows,
                first % cols
            )));
        }
    }
    Ok(operand)
}
