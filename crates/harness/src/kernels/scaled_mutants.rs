//! A CPU kernel of the block-scaled family (`problem::scaled_gemm`) and planted-bug mutants of
//! it: the bugs a kernel author or a library integration makes with global scales, UE8M0 bytes,
//! MX blocks, scale layouts, output rounding and the bias. They exist to measure what catches
//! them: the libraries' own tolerance checks (`compare::field_checks`) or the oracle.
//!
//! The correct kernel sums each 16-product group exactly (a fused tensor-core adder) into an f32
//! accumulator, K increasing, then applies the epilogue in f32 with separate roundings.

use half::f16;
use nvfp4_model::formats::ExactValue;
use nvfp4_model::problem::scaled_gemm::{
    Epilogue, OperandFormat, ScaleFormat, ScaledGemmInputs, ScaledOperand,
};

/// One planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaledBug {
    /// alpha multiplied in twice.
    AlphaTwice,
    /// alpha rounded to fp16 before the multiply (a half-precision epilogue parameter).
    AlphaInFp16,
    /// alpha built from A's per-tensor scale twice instead of A's and B's (the global scale
    /// folded into the wrong operand).
    AlphaFromWrongOperand,
    /// UE8M0 byte 0x00 read as zero instead of 2^-127 (Triton's `dot_scaled` before PR 11624).
    Ue8m0ZeroAsZero,
    /// UE8M0 byte 0xFF (NaN) read as 2^128.
    Ue8m0NanAsNumber,
    /// MX scales indexed per 16 elements instead of per 32.
    MxBlockOf16,
    /// The 128x4 layout's 4-column group read one atom to the right (modulo the row's atoms).
    SwizzleOffByOneAtom,
    /// The output truncated to bf16 instead of rounded to nearest even.
    Bf16Truncated,
    /// The bias added twice.
    BiasTwice,
    /// The accumulator kept in fp16.
    Fp16Accumulator,
    /// The last 32 elements of K never loaded.
    KTailDropped,
    /// The output cast before alpha is applied (torchao's order where the library promises the
    /// f32 epilogue).
    AlphaAfterCast,
}

impl ScaledBug {
    pub const ALL: [ScaledBug; 12] = [
        ScaledBug::AlphaTwice,
        ScaledBug::AlphaInFp16,
        ScaledBug::AlphaFromWrongOperand,
        ScaledBug::Ue8m0ZeroAsZero,
        ScaledBug::Ue8m0NanAsNumber,
        ScaledBug::MxBlockOf16,
        ScaledBug::SwizzleOffByOneAtom,
        ScaledBug::Bf16Truncated,
        ScaledBug::BiasTwice,
        ScaledBug::Fp16Accumulator,
        ScaledBug::KTailDropped,
        ScaledBug::AlphaAfterCast,
    ];

    pub fn describe(self) -> &'static str {
        match self {
            ScaledBug::AlphaTwice => "global scale applied twice",
            ScaledBug::AlphaInFp16 => "global scale rounded to fp16",
            ScaledBug::AlphaFromWrongOperand => "global scale folded from the wrong operand",
            ScaledBug::Ue8m0ZeroAsZero => "UE8M0 0x00 read as zero",
            ScaledBug::Ue8m0NanAsNumber => "UE8M0 0xFF (NaN) read as 2^128",
            ScaledBug::MxBlockOf16 => "MX block of 32 read as 16",
            ScaledBug::SwizzleOffByOneAtom => "128x4 swizzle off by one atom",
            ScaledBug::Bf16Truncated => "bf16 output truncated, not rounded",
            ScaledBug::BiasTwice => "bias added twice",
            ScaledBug::Fp16Accumulator => "fp16 accumulator",
            ScaledBug::KTailDropped => "last 32 of K dropped",
            ScaledBug::AlphaAfterCast => "alpha applied after the output cast",
        }
    }
}

/// What the kernel knows beyond the inputs: alpha's two factors, for the wrong-operand bug.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AlphaFactors {
    pub a: f32,
    pub b: f32,
}

/// Runs the kernel with `bug` planted (or none): the output, as values of the output type.
pub fn run_scaled_kernel(
    inputs: &ScaledGemmInputs,
    factors: AlphaFactors,
    bug: Option<ScaledBug>,
) -> Vec<f64> {
    let (m, n, k) = (inputs.m(), inputs.n(), inputs.k());
    let kept = if bug == Some(ScaledBug::KTailDropped) {
        k - 32
    } else {
        k
    };
    let mut output = Vec::with_capacity(m * n);
    for row in 0..m {
        for col in 0..n {
            let mut acc = 0f32;
            for group in (0..kept).step_by(16) {
                let mut exact = 0f64;
                for kk in group..(group + 16).min(kept) {
                    let product =
                        value(&inputs.a, row, kk, bug).times(value(&inputs.b, col, kk, bug));
                    exact += product.to_f64();
                }
                acc = if bug == Some(ScaledBug::Fp16Accumulator) {
                    f16::from_f64(f64::from(acc) + exact).to_f32()
                } else {
                    (f64::from(acc) + exact) as f32
                };
            }
            output.push(epilogue(inputs, factors, col, acc, bug));
        }
    }
    output
}

/// Element (row, kk) of an operand, its scale decoded as the bug reads it.
fn value(operand: &ScaledOperand, row: usize, kk: usize, bug: Option<ScaledBug>) -> ExactValue {
    let element = operand
        .format
        .element()
        .decode(operand.codes[row * operand.k + kk]);
    let Some((format, block)) = operand.format.scale() else {
        return element;
    };
    let per_row = operand.k / block;
    let mut col = kk / block;
    if format == ScaleFormat::Ue8m0 && bug == Some(ScaledBug::MxBlockOf16) {
        col = (kk / 16).min(per_row - 1);
    }
    if bug == Some(ScaledBug::SwizzleOffByOneAtom) && per_row >= 8 {
        let atoms = per_row / 4;
        col = ((col / 4 + 1) % atoms) * 4 + col % 4;
    }
    let byte = operand.scales[row * per_row + col];
    let scale = match (format, bug, byte) {
        (ScaleFormat::Ue8m0, Some(ScaledBug::Ue8m0ZeroAsZero), 0x00) => ExactValue::Finite {
            negative: false,
            significand: 0,
            exponent: 0,
        },
        (ScaleFormat::Ue8m0, Some(ScaledBug::Ue8m0NanAsNumber), 0xFF) => ExactValue::Finite {
            negative: false,
            significand: 1,
            exponent: 128,
        },
        _ => format.decode(byte),
    };
    element.times(scale)
}

fn epilogue(
    inputs: &ScaledGemmInputs,
    factors: AlphaFactors,
    col: usize,
    acc: f32,
    bug: Option<ScaledBug>,
) -> f64 {
    let out = |x: f64| inputs.out.round(x);
    let mut bias = inputs.bias.as_ref().map_or(0.0, |b| b[col]);
    let alpha = match bug {
        Some(ScaledBug::AlphaTwice) => inputs.alpha * inputs.alpha,
        Some(ScaledBug::AlphaInFp16) => f16::from_f32(inputs.alpha).to_f32(),
        Some(ScaledBug::AlphaFromWrongOperand) => inputs.alpha / factors.b * factors.a,
        _ => inputs.alpha,
    };
    if bug == Some(ScaledBug::BiasTwice) {
        bias += bias;
    }
    let value = match (inputs.epilogue, bug) {
        (_, Some(ScaledBug::AlphaAfterCast)) => {
            return out(out(out(f64::from(acc)) * f64::from(alpha)) + f64::from(bias))
        }
        (Epilogue::F32, _) => f64::from(alpha * acc + bias),
        (Epilogue::BiasInOutput, _) => return out(out(f64::from(alpha * acc)) + f64::from(bias)),
        (Epilogue::AfterCast, _) => {
            return out(out(out(f64::from(acc)) * out(f64::from(alpha))) + f64::from(bias))
        }
    };
    if bug == Some(ScaledBug::Bf16Truncated)
        && inputs.out == nvfp4_model::problem::scaled_gemm::OutDtype::Bf16
    {
        let bits = (value as f32).to_bits() & 0xFFFF_0000;
        return f64::from(f32::from_bits(bits));
    }
    out(value)
}

/// Whether a bug applies to a pairing at all (an MX bug needs an MX operand).
pub fn applies(bug: ScaledBug, a: OperandFormat, b: OperandFormat) -> bool {
    let mx = |f: OperandFormat| f.scale().is_some_and(|(s, _)| s == ScaleFormat::Ue8m0);
    match bug {
        ScaledBug::Ue8m0ZeroAsZero | ScaledBug::Ue8m0NanAsNumber | ScaledBug::MxBlockOf16 => {
            mx(a) || mx(b)
        }
        ScaledBug::SwizzleOffByOneAtom => a.scale().is_some() || b.scale().is_some(),
        _ => true,
    }
}
