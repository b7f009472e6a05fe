//! Built-in CPU kernels, so the pipeline runs anywhere: `cpu-tiled`, a correct rayon kernel that
//! accumulates in f32 in a tensor-core-like blocked order, and planted-bug mutants of it, each a
//! real bug of a kind NVFP4 kernel authors make. Like a GPU kernel they read the *blocked* scales.

use super::interface::{KernelCase, KernelFailure, KernelUnderTest};
use half::f16;
use nvfp4_model::formats::{e2m1_at, E4m3};
use nvfp4_model::layout::BlockedScaleLayout;
use nvfp4_model::problem::SCALE_BLOCK;
use rayon::prelude::*;

/// Output tile edge of the CPU kernels, like a GPU CTA's.
const TILE: usize = 128;
/// K tile of the main loop: four scale blocks, like one tcgen05 MMA.
const K_TILE: usize = 64;

/// A planted bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    GemmOnly,
    SiluWrongGemm,
    ScalesIgnored,
    ScaleRowsSwapped,
    KTailDropped,
    Fp16Accumulation,
    TruncatedOutput,
    Fp4HighExponent,
    MEdgeOffByOne,
    SiluSignError,
    NoSilu,
    GemmB2Only,
    ScaleAtomTransposed,
    NanScalesAsZero,
    SubnormalScalesFlushed,
    BatchIgnored,
    OverflowSaturated,
    NEdgeOffByOne,
    ScalesOfBatch0,
    ScalePer32,
    // Outside every class the diagnosis knows: after data shrinking, the controlled changes of the
    // shrunk case must still say in words what the failure depends on.
    ScaleSignHonored,
    Fp4ThreeReadAsTwo,
    // Wrong only at production depths and widths: a deep-K path and a wide-N epilogue.
    DeepKScalePer32,
    WideNSiluOnD2,
    // Wrong only in a regime, each reading another batch, column, K range or epilogue there:
    // the failing region and the wrong-problem identification must name them.
    ScalesOfBatchMod2,
    SfaRingOf2DeepK,
    NTileIndexWraps,
    KTailPreviousChunkScales,
    LastRowTileUnwrittenPast128,
    Fp16SiluTallTiles,
    SplitKB2WithSfb1,
    LastBatchB1FromBatch0,
}

impl Bug {
    pub const ALL: [Bug; 32] = [
        Bug::GemmOnly,
        Bug::SiluWrongGemm,
        Bug::ScalesIgnored,
        Bug::ScaleRowsSwapped,
        Bug::KTailDropped,
        Bug::Fp16Accumulation,
        Bug::TruncatedOutput,
        Bug::Fp4HighExponent,
        Bug::MEdgeOffByOne,
        Bug::SiluSignError,
        Bug::NoSilu,
        Bug::GemmB2Only,
        Bug::ScaleAtomTransposed,
        Bug::NanScalesAsZero,
        Bug::SubnormalScalesFlushed,
        Bug::BatchIgnored,
        Bug::OverflowSaturated,
        Bug::NEdgeOffByOne,
        Bug::ScalesOfBatch0,
        Bug::ScalePer32,
        Bug::ScaleSignHonored,
        Bug::Fp4ThreeReadAsTwo,
        Bug::DeepKScalePer32,
        Bug::WideNSiluOnD2,
        Bug::ScalesOfBatchMod2,
        Bug::SfaRingOf2DeepK,
        Bug::NTileIndexWraps,
        Bug::KTailPreviousChunkScales,
        Bug::LastRowTileUnwrittenPast128,
        Bug::Fp16SiluTallTiles,
        Bug::SplitKB2WithSfb1,
        Bug::LastBatchB1FromBatch0,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            Bug::GemmOnly => "gemm-only",
            Bug::SiluWrongGemm => "silu-wrong-gemm",
            Bug::ScalesIgnored => "scales-ignored",
            Bug::ScaleRowsSwapped => "scale-rows-swapped",
            Bug::KTailDropped => "k-tail-dropped",
            Bug::Fp16Accumulation => "fp16-accumulation",
            Bug::TruncatedOutput => "truncated-output",
            Bug::Fp4HighExponent => "fp4-high-exponent",
            Bug::MEdgeOffByOne => "m-edge-off-by-one",
            Bug::SiluSignError => "silu-sign-error",
            Bug::NoSilu => "no-silu",
            Bug::GemmB2Only => "gemm-b2-only",
            Bug::ScaleAtomTransposed => "scale-atom-transposed",
            Bug::NanScalesAsZero => "nan-scales-as-zero",
            Bug::SubnormalScalesFlushed => "subnormal-scales-flushed",
            Bug::BatchIgnored => "batch-ignored",
            Bug::OverflowSaturated => "overflow-saturated",
            Bug::NEdgeOffByOne => "n-edge-off-by-one",
            Bug::ScalesOfBatch0 => "scales-of-batch-0",
            Bug::ScalePer32 => "scale-per-32",
            Bug::ScaleSignHonored => "scale-sign-honored",
            Bug::Fp4ThreeReadAsTwo => "fp4-three-read-as-two",
            Bug::DeepKScalePer32 => "deep-k-scale-per-32",
            Bug::WideNSiluOnD2 => "wide-n-silu-on-d2",
            Bug::ScalesOfBatchMod2 => "scales-of-batch-l-mod-2",
            Bug::SfaRingOf2DeepK => "sfa-ring-of-2-deep-k",
            Bug::NTileIndexWraps => "n-tile-index-wraps",
            Bug::KTailPreviousChunkScales => "k-tail-previous-chunk-scales",
            Bug::LastRowTileUnwrittenPast128 => "last-row-tile-unwritten-past-128",
            Bug::Fp16SiluTallTiles => "fp16-silu-tall-tiles",
            Bug::SplitKB2WithSfb1 => "split-k-b2-with-sfb1",
            Bug::LastBatchB1FromBatch0 => "last-batch-b1-from-batch-0",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Bug::GemmOnly => "computes A@B1 only (the plain GEMM instead of the dual GEMM)",
            Bug::SiluWrongGemm => "applies silu to A@B2 instead of A@B1",
            Bug::ScalesIgnored => "ignores the scale factors",
            Bug::ScaleRowsSwapped => "reads the permuted scales with mm32 and mm4 swapped",
            Bug::KTailDropped => "drops the last K tile when K % 256 != 0",
            Bug::Fp16Accumulation => "accumulates in fp16",
            Bug::TruncatedOutput => "truncates instead of rounding the output to fp16",
            Bug::Fp4HighExponent => "decodes FP4 codes with the high exponent bit wrong",
            Bug::MEdgeOffByOne => {
                "computes floor(M / 128) tiles: the partial M edge tile is never written"
            }
            Bug::SiluSignError => "sign error in silu: x / (1 + exp(x))",
            Bug::NoSilu => "multiplies A@B1 by A@B2 without silu",
            Bug::GemmB2Only => "computes A@B2 only",
            Bug::ScaleAtomTransposed => "reads the permuted scales with mm4 and kk4 swapped",
            Bug::NanScalesAsZero => "reads a NaN scale as 0",
            Bug::SubnormalScalesFlushed => "flushes subnormal scales to 0",
            Bug::BatchIgnored => "reads batch 0's data and scales for every batch",
            Bug::OverflowSaturated => "saturates outputs beyond fp16's range to +-65504",
            Bug::NEdgeOffByOne => {
                "computes floor(N / 128) column tiles: the partial N edge tile is never written"
            }
            Bug::ScalesOfBatch0 => "reads batch 0's scales for every batch (its own batch's data)",
            Bug::ScalePer32 => "reads the scale of column k/32 instead of k/16",
            Bug::ScaleSignHonored => "multiplies by a scale's sign bit (tensor cores ignore it)",
            Bug::Fp4ThreeReadAsTwo => "a decode table with a typo: FP4 3.0 read as 2.0",
            Bug::DeepKScalePer32 => {
                "when K > 4096 (a deep-K path), reads the scale of column k/32 instead of k/16"
            }
            Bug::WideNSiluOnD2 => {
                "when N > 2048 (a wide-N epilogue), applies silu to A@B2 instead of A@B1"
            }
            Bug::ScalesOfBatchMod2 => {
                "reads batch l's scale factors from an expert table of 2: batch l mod 2 (wrong from L = 3)"
            }
            Bug::SfaRingOf2DeepK => {
                "when K >= 512, batches past a ring of 2 read batch 0's SFA (wrong from L = 3)"
            }
            Bug::NTileIndexWraps => {
                "the N-tile index wraps at 2 bits: columns n >= 512 read B1's and B2's rows n mod 512"
            }
            Bug::KTailPreviousChunkScales => {
                "when K > 256 is not a multiple of 256, the last K chunk reads the previous chunk's scales"
            }
            Bug::LastRowTileUnwrittenPast128 => {
                "when M > 128 (a wide-index path), the last partial row tile is never written"
            }
            Bug::Fp16SiluTallTiles => {
                "when M > 64 (a tall tile config), rounds silu(A@B1) to fp16 before the product"
            }
            Bug::SplitKB2WithSfb1 => {
                "when K >= 512 (a split K), the second half of K scales B2 with SFB1"
            }
            Bug::LastBatchB1FromBatch0 => {
                "when L >= 3 (a last-expert path), the last batch reads batch 0's B1 and SFB1"
            }
        }
    }
}

/// `cpu-tiled` (no bug) or `cpu-mutant-<bug>`.
pub struct CpuKernel {
    name: String,
    bug: Option<Bug>,
}

impl CpuKernel {
    pub fn correct() -> Self {
        CpuKernel {
            name: "cpu-tiled".into(),
            bug: None,
        }
    }

    pub fn mutant(bug: Bug) -> Self {
        CpuKernel {
            name: format!("cpu-mutant-{}", bug.slug()),
            bug: Some(bug),
        }
    }

    pub fn bug(&self) -> Option<Bug> {
        self.bug
    }

    fn has(&self, bug: Bug) -> bool {
        self.bug == Some(bug)
    }

    /// e2m1 value, as this kernel decodes it.
    fn fp4(&self, packed: &[u8], k: usize) -> f32 {
        let code = e2m1_at(packed, k).to_bits();
        let code = if self.has(Bug::Fp4HighExponent) {
            code & 0b1011
        } else {
            code
        };
        let value = nvfp4_model::formats::E2m1::from_bits(code).to_f32();
        if self.has(Bug::Fp4ThreeReadAsTwo) && value.abs() == 3.0 {
            2.0f32.copysign(value)
        } else {
            value
        }
    }

    /// The scale of (row, block) read from the blocked layout, as this kernel addresses it.
    fn scale(
        &self,
        blocked: &[u8],
        layout: &BlockedScaleLayout,
        (row, block, batch): (usize, usize, usize),
        k: usize,
    ) -> f32 {
        if self.has(Bug::ScalesIgnored) {
            return 1.0;
        }
        let batch = if self.has(Bug::BatchIgnored) || self.has(Bug::ScalesOfBatch0) {
            0
        } else if self.has(Bug::ScalesOfBatchMod2) {
            batch % 2
        } else {
            batch
        };
        let block = if self.has(Bug::ScalePer32) || (self.has(Bug::DeepKScalePer32) && k > 4096) {
            block / 2
        } else {
            block
        };
        let base = || layout.offset(row - row % 128, block - block % 4, batch);
        let offset = match self.bug {
            Some(Bug::ScaleRowsSwapped) => {
                base() + ((row % 128) / 32) * 16 + (row % 32) * 4 + block % 4
            }
            Some(Bug::ScaleAtomTransposed) => {
                base() + (row % 32) * 16 + (block % 4) * 4 + (row % 128) / 32
            }
            _ => layout.offset(row, block, batch),
        };
        let byte = blocked[offset];
        match self.bug {
            Some(Bug::NanScalesAsZero) if byte & 0x7F == 0x7F => 0.0,
            Some(Bug::SubnormalScalesFlushed) if byte & 0x78 == 0 => 0.0,
            Some(Bug::ScaleSignHonored) => E4m3::from_bits(byte).to_f32(),
            _ => E4m3::from_bits(byte).to_f32_as_unsigned_scale(),
        }
    }

    /// One f32 dot product: K tiles in order, each scale block summed exactly then scaled and
    /// added with one rounding.
    #[allow(clippy::too_many_arguments)]
    fn dot(&self, a_row: &[u8], b_row: &[u8], sa: &[f32], sb: &[f32], k: usize) -> f32 {
        let k_end = if self.has(Bug::KTailDropped) && k % 256 != 0 {
            k / 256 * 256
        } else {
            k
        };
        // The last partial chunk of 256, where K has one before it.
        let tail_start = if self.has(Bug::KTailPreviousChunkScales) && k > 256 && k % 256 != 0 {
            k / 256 * 256
        } else {
            k
        };
        let mut acc = 0f32;
        let mut acc16 = f16::ZERO;
        for tile in (0..k_end).step_by(K_TILE) {
            for block in (tile..(tile + K_TILE).min(k_end)).step_by(SCALE_BLOCK) {
                let j = block / SCALE_BLOCK;
                let j = if block >= tail_start {
                    j - 256 / SCALE_BLOCK
                } else {
                    j
                };
                let sum: f32 = (block..block + SCALE_BLOCK)
                    .map(|kk| self.fp4(a_row, kk) * self.fp4(b_row, kk))
                    .sum();
                let scaled = sum * (sa[j] * sb[j]);
                if self.has(Bug::Fp16Accumulation) {
                    acc16 = f16::from_f32(acc16.to_f32() + scaled);
                } else {
                    acc += scaled;
                }
            }
        }
        if self.has(Bug::Fp16Accumulation) {
            acc16.to_f32()
        } else {
            acc
        }
    }

    fn epilogue(&self, x1: f32, x2: f32, (m, n): (usize, usize)) -> f16 {
        let wide_n_bug = self.has(Bug::WideNSiluOnD2) && n > 2048;
        let y = match self.bug {
            _ if wide_n_bug => x2 / (1.0 + (-x2).exp()) * x1,
            Some(Bug::Fp16SiluTallTiles) if m > 64 => {
                f16::from_f32(x1 / (1.0 + (-x1).exp())).to_f32() * x2
            }
            Some(Bug::GemmOnly) => x1,
            Some(Bug::GemmB2Only) => x2,
            Some(Bug::NoSilu) => x1 * x2,
            Some(Bug::SiluWrongGemm) => x2 / (1.0 + (-x2).exp()) * x1,
            Some(Bug::SiluSignError) => x1 / (1.0 + x1.exp()) * x2,
            _ => x1 / (1.0 + (-x1).exp()) * x2,
        };
        if self.has(Bug::OverflowSaturated) && y.abs() > 65504.0 && !y.is_nan() {
            f16::from_f32(65504f32.copysign(y))
        } else if self.has(Bug::TruncatedOutput) {
            let nearest = f16::from_f32(y);
            if nearest.to_f32().abs() > y.abs() && !nearest.is_nan() {
                f16::from_bits(nearest.to_bits() - 1)
            } else {
                nearest
            }
        } else {
            f16::from_f32(y)
        }
    }
}

impl KernelUnderTest for CpuKernel {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> String {
        self.bug
            .map_or(
                "correct CPU kernel: f32 accumulation in a blocked K order",
                Bug::description,
            )
            .to_string()
    }

    /// The hash of this file: a built-in kernel's source is compiled into the binary.
    fn source_hash(&self) -> Option<String> {
        Some(super::interface::source_hash_of(include_str!("cpu.rs")))
    }

    fn is_deliberately_broken(&self) -> bool {
        self.bug.is_some()
    }

    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        let case = case.dual_or_refuse()?;
        let inputs = case.inputs;
        let shape = inputs.shape;
        let (layout_a, layout_b) = (
            BlockedScaleLayout(inputs.a.scale_dims()),
            BlockedScaleLayout(inputs.b1.scale_dims()),
        );
        let blocks = shape.scale_cols();
        let m_tiles = if self.has(Bug::MEdgeOffByOne)
            || (self.has(Bug::LastRowTileUnwrittenPast128) && shape.m > TILE)
        {
            shape.m / TILE
        } else {
            shape.m.div_ceil(TILE)
        };
        let rows_written = (m_tiles * TILE).min(shape.m);
        let columns_written = if self.has(Bug::NEdgeOffByOne) {
            shape.n / TILE * TILE
        } else {
            shape.n
        };
        for l in 0..shape.l {
            let data_batch = if self.has(Bug::BatchIgnored) { 0 } else { l };
            let scales_of =
                |blocked: &[u8], layout: &BlockedScaleLayout, row: usize, batch: usize| {
                    (0..blocks)
                        .map(|j| self.scale(blocked, layout, (row, j, batch), shape.k))
                        .collect::<Vec<f32>>()
                };
            let sfa_batch = if self.has(Bug::SfaRingOf2DeepK) && shape.k >= 512 && l >= 2 {
                0
            } else {
                l
            };
            // The last expert's B1 pointer (data and scales) left at the first expert's.
            let b1_batch =
                if self.has(Bug::LastBatchB1FromBatch0) && shape.l >= 3 && l + 1 == shape.l {
                    0
                } else {
                    data_batch
                };
            let sb1: Vec<Vec<f32>> = (0..shape.n)
                .map(|n| scales_of(case.sfb1_blocked, &layout_b, n, b1_batch))
                .collect();
            let split_k = self.has(Bug::SplitKB2WithSfb1) && shape.k >= 512;
            let sb2: Vec<Vec<f32>> = (0..shape.n)
                .map(|n| {
                    let mut own = scales_of(case.sfb2_blocked, &layout_b, n, l);
                    if split_k {
                        own[blocks / 2..].copy_from_slice(&sb1[n][blocks / 2..]);
                    }
                    own
                })
                .collect();
            // A 2-bit N-tile index: column n reads B's row n mod 512.
            let b_row = |n: usize| {
                if self.has(Bug::NTileIndexWraps) {
                    n % (4 * TILE)
                } else {
                    n
                }
            };
            let row_len = shape.n * shape.l;
            output[..rows_written * row_len]
                .par_chunks_mut(row_len)
                .enumerate()
                .for_each(|(m, row)| {
                    let sa = scales_of(case.sfa_blocked, &layout_a, m, sfa_batch);
                    let a_row = inputs.a.row_data(m, data_batch);
                    for n in 0..columns_written {
                        let x1 = self.dot(
                            a_row,
                            inputs.b1.row_data(b_row(n), b1_batch),
                            &sa,
                            &sb1[b_row(n)],
                            shape.k,
                        );
                        let x2 = self.dot(
                            a_row,
                            inputs.b2.row_data(b_row(n), data_batch),
                            &sa,
                            &sb2[b_row(n)],
                            shape.k,
                        );
                        row[n * shape.l + l] = self.epilogue(x1, x2, (shape.m, shape.n));
                    }
                });
        }
        Ok(())
    }
}

/// `cpu-tiled` and every mutant.
pub fn cpu_kernels() -> Vec<CpuKernel> {
    std::iter::once(CpuKernel::correct())
        .chain(Bug::ALL.into_iter().map(CpuKernel::mutant))
        .collect()
}
