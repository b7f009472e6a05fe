//! A kernel's declared accumulation schedule: which MMA instruction adds (its adder model), in
//! which order the K chunks reach each f32 accumulator, and how the two accumulators become one
//! fp16 output. A kernel that declares one can be replayed bit for bit (`certify --exact`).

/// The tensor-core adder a schedule's MMA steps go through (see the module docs of `model::mma`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MmaModel {
    /// `mma.sync m16n8k16` / `wgmma ... k16` f16 -> f32 on Hopper: one fused step per 16-element
    /// scale block, operands the exact fp16 values `e2m1 * e4m3`.
    HopperHmmaF16F32,
    /// `tcgen05.mma kind::mxf4nvf4` block16 UE4M3: one fused step per 64 K (4 scale blocks).
    BlackwellMxf4Nvf4Block16Ue4m3,
    /// The reference's own: the exact sum, rounded once to f32 (nearest even).
    ExactRne,
}

impl MmaModel {
    pub const ALL: [MmaModel; 3] = [
        MmaModel::HopperHmmaF16F32,
        MmaModel::BlackwellMxf4Nvf4Block16Ue4m3,
        MmaModel::ExactRne,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MmaModel::HopperHmmaF16F32 => "hopper-hmma-f16-f32",
            MmaModel::BlackwellMxf4Nvf4Block16Ue4m3 => "blackwell-mxf4nvf4-block16-ue4m3",
            MmaModel::ExactRne => "exact-rne",
        }
    }

    pub fn parse(name: &str) -> Option<MmaModel> {
        MmaModel::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The order in which a model's K steps reach each accumulator (which starts at +0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KChunkOrder {
    /// k = 0 first, then upwards: one loop over K, no split.
    Increasing,
    /// The last step first (only deliberately broken kernels declare or use it).
    Decreasing,
    /// Split-K in two: steps [0, n/2) and [n/2, n) (n steps, n/2 rounded down) each reach their
    /// own accumulator in increasing order from +0 (two CTAs), then one f32 add, round to nearest
    /// even: (first half) + (second half).
    SplitHalvesIncreasing,
}

/// How the two f32 accumulators become the fp16 output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum OutputEpilogue {
    /// `x1 / (1 + exp(-x1)) * x2` evaluated in f64 (IEEE semantics for inf and NaN), then one
    /// round to nearest even fp16. Predictable bit for bit except where the real value lies
    /// within f64 rounding error of an fp16 rounding boundary (the replay says where).
    SiluMulF64Rne,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Schedule {
    pub mma: MmaModel,
    pub k_order: KChunkOrder,
    pub epilogue: OutputEpilogue,
}

/// The schedule of every Hopper kernel here: one f16 MMA per scale block, K increasing from 0.
pub const HOPPER_F16_INCREASING_K: Schedule = Schedule {
    mma: MmaModel::HopperHmmaF16F32,
    k_order: KChunkOrder::Increasing,
    epilogue: OutputEpilogue::SiluMulF64Rne,
};

/// The split-K pair's: each K half accumulated by one CTA as above, then one f32 add.
pub const HOPPER_F16_SPLIT_HALVES: Schedule = Schedule {
    mma: MmaModel::HopperHmmaF16F32,
    k_order: KChunkOrder::SplitHalvesIncreasing,
    epilogue: OutputEpilogue::SiluMulF64Rne,
};

impl KChunkOrder {
    pub const ALL: [KChunkOrder; 3] = [
        KChunkOrder::Increasing,
        KChunkOrder::Decreasing,
        KChunkOrder::SplitHalvesIncreasing,
    ];

    /// The step indices each partial accumulator receives, in order; partials are then added
    /// left to right in f32.
    pub fn partials(self, steps: usize) -> Vec<Vec<usize>> {
        match self {
            KChunkOrder::Increasing => vec![(0..steps).collect()],
            KChunkOrder::Decreasing => vec![(0..steps).rev().collect()],
            KChunkOrder::SplitHalvesIncreasing => {
                vec![(0..steps / 2).collect(), (steps / 2..steps).collect()]
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KChunkOrder::Increasing => "increasing",
            KChunkOrder::Decreasing => "decreasing",
            KChunkOrder::SplitHalvesIncreasing => {
                "split in two halves, each increasing, then added"
            }
        }
    }
}

impl OutputEpilogue {
    pub fn name(self) -> &'static str {
        match self {
            OutputEpilogue::SiluMulF64Rne => "silu-mul-f64-rne",
        }
    }
}

impl std::fmt::Display for Schedule {
    /// For example `hopper-hmma-f16-f32, K increasing, silu-mul-f64-rne`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}, K {}, {}",
            self.mma.name(),
            self.k_order.name(),
            self.epilogue.name()
        )
    }
}
