//! Operands of the block-scaled family, drawn from a seed: random codes (the whole range, or
//! scales near 1), and standard normal values for the quantizers (`quant::family`), which is
//! what the libraries' own tests feed their kernels. ChaCha8 on its own stream per tensor, as for
//! the NVFP4 problems (`generate`), so a case is the same bytes on every machine.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::scaled_gemm::{OperandFormat, ScaleFormat, ScaledOperand};

/// How a case's operands are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScaledDistribution {
    /// Every finite element code and every non-NaN scale, uniformly: UE8M0 from 2^-127 to
    /// 2^127, e5m2 and bf16 subnormals and their largest values. Where the accumulator could
    /// overflow the model leaves the element unjudged.
    Codes,
    /// Every finite element code, scales within 2^-8..2^8 and bf16 exponents within 2^-16..2^16:
    /// values of comparable size, where the intervals are narrowest.
    Moderate,
    /// Every element code, NaN and infinities included (rarely), and the scale bytes kernels
    /// mishandle:
    /// UE8M0 0x00 (2^-127, not zero), 0xFE (2^127) and 0xFF (NaN) among 1 and its neighbours;
    /// UE4M3 NaN (0x7F) in one block in twenty.
    Edges,
}

impl ScaledDistribution {
    pub const ALL: [ScaledDistribution; 3] = [
        ScaledDistribution::Codes,
        ScaledDistribution::Moderate,
        ScaledDistribution::Edges,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScaledDistribution::Codes => "codes",
            ScaledDistribution::Moderate => "moderate",
            ScaledDistribution::Edges => "edges",
        }
    }
}

/// UE8M0 bytes of the edge distribution, out of 20: 0x00 six times, 1.0 six, 0xFE four, NaN
/// once, 2^-15 twice, 2^15 once.
const EDGE_UE8M0: [u8; 20] = [
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0x7F, 0xFE, 0xFE, 0xFE, 0xFE,
    0xFF, 0x70, 0x70, 0x8E,
];

/// Draws a `rows x k` operand of `format`.
pub fn random_operand(
    format: OperandFormat,
    rows: usize,
    k: usize,
    distribution: ScaledDistribution,
    seed: u64,
    stream: u64,
) -> ScaledOperand {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    let mut below = |n: u32| ((u64::from(rng.next_u32()) * u64::from(n)) >> 32) as u32;
    let moderate = distribution == ScaledDistribution::Moderate;
    let codes = (0..rows * k)
        .map(|_| loop {
            let code = below(format.element().code_count()) as u16;
            let code = if format == OperandFormat::Bf16 && moderate {
                // Sign, exponent field 111..143 (2^-16..2^16), any mantissa.
                (code & 0x807F) | ((111 + below(33) as u16) << 7)
            } else {
                code
            };
            // The edge distribution keeps a NaN or infinite code one time in sixteen, so that
            // most rows still have a finite answer to judge.
            let finite = format.element().decode(code).to_f64().is_finite();
            if finite || (distribution == ScaledDistribution::Edges && below(16) == 0) {
                break code;
            }
        })
        .collect();
    let scales = match format.scale() {
        None => Vec::new(),
        Some((scale, block)) => (0..rows * (k / block))
            .map(|_| match (scale, distribution) {
                (ScaleFormat::Ue4m3, ScaledDistribution::Edges) if below(20) == 0 => 0x7F,
                // Every UE4M3 byte but NaN and the sign bit: 0x00..=0x7E (zero included).
                (ScaleFormat::Ue4m3, _) => below(0x7F) as u8,
                (ScaleFormat::Ue8m0, ScaledDistribution::Codes) => below(0xFF) as u8,
                (ScaleFormat::Ue8m0, ScaledDistribution::Moderate) => (127 - 8 + below(17)) as u8,
                (ScaleFormat::Ue8m0, ScaledDistribution::Edges) => EDGE_UE8M0[below(20) as usize],
            })
            .collect(),
    };
    ScaledOperand::new(format, rows, k, codes, scales).expect("drawn to the operand's shape")
}

/// Standard normal f32 values (Box-Muller on ChaCha8), `count` of them.
pub fn normal_values(count: usize, seed: u64, stream: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    let mut unit = || ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    (0..count)
        .map(|_| {
            let (u, v) = (unit(), unit());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        })
        .collect()
}
