//! Deterministic input generators. The same (problem, shape, distribution, seed) gives the same
//! bytes on every machine: ChaCha8 is specified bit for bit, and every value is derived from its
//! raw 32-bit outputs by integer arithmetic (no platform float functions).
//!
//! Each tensor draws from its own ChaCha stream (stream = tensor index), so shrinking N does not
//! change A, and the grouped GEMM's groups are independent of each other's shapes.

use super::{
    BlockScaledMatrix, DualGemmInputs, GemmInputs, GroupGemmInputs, ProblemInputs, ProblemKind,
    Shape, SCALE_BLOCK,
};
use crate::error::{Error, Result};
use crate::formats::{E4m3, E4m3Overflow, E4M3_MAX_CODE, E4M3_NAN_CODE, E4M3_ONE_CODE};

mod draws;
mod source;
pub use draws::{dual_gemm_draws, DualGemmDraws};
use source::Source;

/// The input distributions. See the README for what each is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    /// The competition's: FP4 bytes masked with 0b1011_1011 (only +-{0, 0.5, 1, 1.5}); dual-GEMM
    /// scales e4m3(uniform[0, 1)); grouped-GEMM scales 1 or 2.
    Gpumode,
    /// All 16 FP4 codes and every finite non-negative e4m3 scale, subnormals and 448 included.
    /// Most scales are drawn from [0, 0.25] so that most outputs stay finite; one row in eight is
    /// "wide" and draws one scale in sixteen from the whole range up to 448.
    Full,
    /// Inputs built to break kernels: cancelling K-blocks, maximal magnitudes, zero blocks, rows
    /// with a single nonzero K-block, scales varying by block and row; padding of the blocked scale
    /// layout filled with NaN so a kernel that reads it poisons its output.
    Adversarial,
    /// `adversarial` plus a few NaN scales (0x7F), whose outputs must be NaN.
    AdversarialNan,
    /// Per-product rounding at its worst (crates/model/src/problem/stagnation.rs): a partial sum just above
    /// 2^23 that products just under half an ulp each fail to move. Not drawn at random (not in
    /// [`Distribution::ALL`]): every dual-GEMM campaign runs a few fixed cases of it.
    Stagnation,
}

impl Distribution {
    pub const ALL: [Distribution; 4] = [
        Distribution::Gpumode,
        Distribution::Full,
        Distribution::Adversarial,
        Distribution::AdversarialNan,
    ];
    /// Every distribution a name can select: [`Distribution::ALL`] and the fixed families.
    pub const NAMED: [Distribution; 5] = [
        Distribution::Gpumode,
        Distribution::Full,
        Distribution::Adversarial,
        Distribution::AdversarialNan,
        Distribution::Stagnation,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Distribution::Gpumode => "gpumode",
            Distribution::Full => "full",
            Distribution::Adversarial => "adversarial",
            Distribution::AdversarialNan => "adversarial-nan",
            Distribution::Stagnation => "stagnation",
        }
    }

    /// The fill byte for padding of the blocked scale layout.
    pub fn blocked_padding_fill(self) -> u8 {
        match self {
            Distribution::Gpumode | Distribution::Full | Distribution::Stagnation => 0x00,
            Distribution::Adversarial | Distribution::AdversarialNan => E4M3_NAN_CODE,
        }
    }
}

impl std::str::FromStr for Distribution {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        crate::error::parse_name(
            &Distribution::NAMED,
            Distribution::name,
            "distribution",
            text,
        )
    }
}

const E4M3_TWO: u8 = 0x40;
const E4M3_SIXTEEN: u8 = 0x58;
const E4M3_MIN_NORMAL_CODE: u8 = 0x08;
/// 0.25: the top of the narrow scale range of the `full` distribution.
const FULL_NARROW_MAX_CODE: u8 = 0x28;
const FP4_MAX_POSITIVE: u8 = 0x7;
const GPUMODE_FP4_MASK: u8 = 0b1011_1011;

/// Which family of scales a gpumode tensor gets (the competition differs by problem).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GpumodeScales {
    UniformUnit,
    OneOrTwo,
}

pub fn generate_dual_gemm(shape: Shape, dist: Distribution, seed: u64) -> DualGemmInputs {
    if dist == Distribution::Stagnation {
        return super::stagnation::dual_gemm(shape, seed);
    }
    let plan = KBlockPlan::new(shape.scale_cols(), dist, seed);
    let [a_stream, b1_stream, b2_stream] = DUAL_GEMM_STREAMS;
    let operand = |role: Role, stream: u64| {
        let rows = if role == Role::A { shape.m } else { shape.n };
        generate_operand(
            role,
            rows,
            shape,
            dist,
            GpumodeScales::UniformUnit,
            &plan,
            seed,
            stream,
        )
    };
    // Each operand has its own stream, so the three are drawn at once on the machine's cores.
    let (mut a, (mut b1, mut b2)) = rayon::join(
        || operand(Role::A, a_stream),
        || {
            rayon::join(
                || operand(Role::B, b1_stream),
                || operand(Role::B, b2_stream),
            )
        },
    );
    if dist == Distribution::AdversarialNan {
        for matrix in [&mut a, &mut b1, &mut b2] {
            set_scale_sign_bits(matrix, seed);
        }
    }
    DualGemmInputs::new(shape, a, b1, b2).expect("generated operands match their shape")
}

/// The ChaCha streams of the dual GEMM's operands a, b1 and b2.
pub const DUAL_GEMM_STREAMS: [u64; 3] = [0, 1, 2];

/// The sign bit of a UE4M3 scale is ignored by tensor cores, and by the model: a kernel must
/// give the same output with it set. In every adversarial-nan dual-GEMM case one scale row in
/// four of each operand has it set, so a kernel that honours it fails. Part of generation, so
/// that a case regenerated from its seed (the `generate` command, the Python package, a
/// certificate's repro line) is byte for byte the case the campaign ran.
fn set_scale_sign_bits(matrix: &mut BlockScaledMatrix, seed: u64) {
    for batch in 0..matrix.batches() {
        for row in (0..matrix.rows()).filter(|r| (r + seed as usize) % 4 == 0) {
            for k in (0..matrix.k()).step_by(SCALE_BLOCK) {
                let byte = matrix.scale(row, k, batch).to_bits();
                matrix.set_scale(row, k, batch, byte | 0x80);
            }
        }
    }
}

pub fn generate_gemm(shape: Shape, dist: Distribution, seed: u64) -> GemmInputs {
    generate_gemm_streams(shape, dist, GpumodeScales::UniformUnit, seed, 0)
}

/// The inputs of `kind` for a campaign shape (see [`ProblemKind::normalize`]).
pub fn generate_problem(
    kind: ProblemKind,
    shape: Shape,
    dist: Distribution,
    seed: u64,
) -> ProblemInputs {
    let shape = kind.normalize(shape);
    match kind {
        ProblemKind::DualGemm => ProblemInputs::DualGemm(generate_dual_gemm(shape, dist, seed)),
        ProblemKind::Gemm => ProblemInputs::Gemm(generate_gemm(shape, dist, seed)),
        ProblemKind::Gemv => ProblemInputs::Gemv(generate_gemm(shape, dist, seed)),
        ProblemKind::GroupGemm => ProblemInputs::GroupGemm(
            generate_group_gemm(&group_shapes(shape, seed), dist, seed)
                .expect("at least one group"),
        ),
    }
}

/// The groups a campaign shape stands for in the grouped GEMM: `shape.l` groups sharing K (so
/// that a kernel's declared K multiple holds for each), the first of `shape.m` x `shape.n`, the
/// others with M in 1..=`shape.m` and N in 1..=`shape.n` drawn by the seed.
pub fn group_shapes(shape: Shape, seed: u64) -> Vec<Shape> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    // splitmix64: a portable, seedable draw with no generator state to carry.
    let mut draw = |bound: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        1 + (z % bound as u64) as usize
    };
    (0..shape.l)
        .map(|g| {
            let (m, n) = if g == 0 {
                (shape.m, shape.n)
            } else {
                (draw(shape.m), draw(shape.n))
            };
            Shape::new(m, n, shape.k, 1).expect("smaller than a valid shape")
        })
        .collect()
}

/// Groups are given as (M, N, K); every group has L = 1.
pub fn generate_group_gemm(
    groups: &[Shape],
    dist: Distribution,
    seed: u64,
) -> Result<GroupGemmInputs> {
    let inputs = groups
        .iter()
        .enumerate()
        .map(|(g, &shape)| {
            generate_gemm_streams(shape, dist, GpumodeScales::OneOrTwo, seed, 2 * g as u64)
        })
        .collect();
    GroupGemmInputs::new(inputs)
}

fn generate_gemm_streams(
    shape: Shape,
    dist: Distribution,
    scales: GpumodeScales,
    seed: u64,
    first: u64,
) -> GemmInputs {
    if dist == Distribution::Stagnation {
        return super::stagnation::gemm(shape, seed ^ first);
    }
    // Each group gets its own plan stream so that cancellation pairs line up within a group.
    let plan = KBlockPlan::new(shape.scale_cols(), dist, seed ^ (first << 32));
    let (a, b) = rayon::join(
        || generate_operand(Role::A, shape.m, shape, dist, scales, &plan, seed, first),
        || {
            generate_operand(
                Role::B,
                shape.n,
                shape,
                dist,
                scales,
                &plan,
                seed,
                first + 1,
            )
        },
    );
    GemmInputs::new(shape, a, b).expect("generated operands match their shape")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    A,
    B,
}

/// What the adversarial distribution does with each K-block, shared by A and B so that patterns
/// that need both operands (cancellation) line up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KBlockMode {
    Random,
    /// Maximal magnitudes: codes +-6 with scale 448 (one block of one A row in sixteen).
    Max,
    /// All-zero data in A.
    Zero,
    /// First half of a cancelling pair: A's next block repeats this one, B's next is its negation.
    CancelFirst,
    CancelSecond,
}

struct KBlockPlan(Vec<KBlockMode>);

impl KBlockPlan {
    fn new(blocks: usize, dist: Distribution, seed: u64) -> Self {
        let mut modes = vec![KBlockMode::Random; blocks];
        if matches!(
            dist,
            Distribution::Adversarial | Distribution::AdversarialNan
        ) {
            let mut source = Source::new(seed, u64::MAX);
            let mut j = 0;
            while j < blocks {
                let pick = source.below(16);
                if pick < 2 && j + 1 < blocks {
                    modes[j] = KBlockMode::CancelFirst;
                    modes[j + 1] = KBlockMode::CancelSecond;
                    j += 2;
                    continue;
                }
                modes[j] = match pick {
                    2..=3 => KBlockMode::Zero,
                    _ => KBlockMode::Random,
                };
                j += 1;
            }
        }
        KBlockPlan(modes)
    }
}

/// An operand's rows are made on every core, each task from the word of its operand's stream
/// where its first row starts, and give the bytes one sequential pass gives (`generate.rs`'s
/// tests): what a row draws is fixed by a few of its words, which [`row_starts`] reads ahead.
/// A task makes at least this many bytes of data.
const TASK_DATA_BYTES: usize = 256 << 10;

/// What one operand's rows are drawn from and how.
struct OperandDraw<'a> {
    role: Role,
    dist: Distribution,
    gpumode_scales: GpumodeScales,
    plan: &'a KBlockPlan,
    seed: u64,
    stream: u64,
    /// K / 2: the data bytes of a row.
    row_bytes: usize,
    /// K / 16: the scales of a row.
    blocks: usize,
}

#[allow(clippy::too_many_arguments)]
fn generate_operand(
    role: Role,
    rows: usize,
    shape: Shape,
    dist: Distribution,
    gpumode_scales: GpumodeScales,
    plan: &KBlockPlan,
    seed: u64,
    stream: u64,
) -> BlockScaledMatrix {
    let draw = OperandDraw {
        role,
        dist,
        gpumode_scales,
        plan,
        seed,
        stream,
        row_bytes: shape.k / 2,
        blocks: shape.scale_cols(),
    };
    let task_rows = TASK_DATA_BYTES.div_ceil(draw.row_bytes).max(1);
    draw.matrix(rows, shape, task_rows)
}

impl OperandDraw<'_> {
    /// The operand's `rows` x L rows, `task_rows` of them to a task.
    fn matrix(&self, rows: usize, shape: Shape, task_rows: usize) -> BlockScaledMatrix {
        use rayon::prelude::*;
        let all_rows = rows * shape.l;
        let mut data = vec![0u8; all_rows * self.row_bytes];
        let mut scales = vec![0u8; all_rows * self.blocks];
        let starts = self.row_starts(all_rows, task_rows);
        data.par_chunks_mut(task_rows * self.row_bytes)
            .zip(scales.par_chunks_mut(task_rows * self.blocks))
            .zip(starts.par_windows(2))
            .for_each(|((data, scales), start_end)| {
                let mut source = Source::at(self.seed, self.stream, start_end[0]);
                for (row_data, row_scales) in data
                    .chunks_exact_mut(self.row_bytes)
                    .zip(scales.chunks_exact_mut(self.blocks))
                {
                    self.row(row_data, row_scales, &mut source);
                }
                // A task that ends elsewhere than where the next begins would make other bytes
                // than one sequential pass: row_starts and row disagree, a bug of this file.
                assert_eq!(
                    source.word_pos(),
                    start_end[1],
                    "rows of {} drawn from other words than row_starts counted",
                    self.dist.name()
                );
            });
        BlockScaledMatrix::new(
            if self.role == Role::A { "a" } else { "b" },
            rows,
            shape.k,
            shape.l,
            data,
            scales,
        )
        .expect("generated buffers match their dimensions")
    }

    /// The stream's word position at the first row of each task of `task_rows` rows, and where
    /// the last row ends: each row's length read from the few words that decide it.
    fn row_starts(&self, all_rows: usize, task_rows: usize) -> Vec<u128> {
        let mut starts = Vec::with_capacity(all_rows.div_ceil(task_rows) + 1);
        if let Some(row) = self.fixed_row_words() {
            // The starts are multiples of the row's words, with no pass over millions of rows.
            starts.extend((0..all_rows).step_by(task_rows).map(|r| r as u128 * row));
            starts.push(all_rows as u128 * row);
            return starts;
        }
        let mut peek = Source::at(self.seed, self.stream, 0);
        let mut at = 0u128;
        for row in 0..all_rows {
            if row % task_rows == 0 {
                starts.push(at);
            }
            at += self.row_words(at, &mut peek);
        }
        starts.push(at);
        starts
    }

    /// How many words every row draws, where no row's draws depend on its chances: a GPU MODE
    /// operand's, and an adversarial B's (no maximal or kept block, no NaN scale).
    fn fixed_row_words(&self) -> Option<u128> {
        match (self.dist, self.role) {
            (Distribution::Gpumode, _) => Some((self.row_bytes + self.blocks) as u128),
            (Distribution::Adversarial, Role::B) => Some(self.plan_words()),
            _ => None,
        }
    }

    /// The words an adversarial row's K blocks draw, as its plan lays them out.
    fn plan_words(&self) -> u128 {
        let block_bytes = (SCALE_BLOCK / 2) as u128;
        self.plan
            .0
            .iter()
            .map(|mode| match (mode, self.role) {
                (KBlockMode::Random, _) | (KBlockMode::Zero, Role::B) => block_bytes + 1,
                (KBlockMode::Zero, Role::A) => 1,
                (KBlockMode::CancelFirst | KBlockMode::Max, _) => block_bytes,
                (KBlockMode::CancelSecond, _) => 0,
            })
            .sum()
    }

    /// How many words of the stream the row starting at word `at` draws ([`Self::row`]).
    fn row_words(&self, at: u128, peek: &mut Source) -> u128 {
        if let Some(words) = self.fixed_row_words() {
            return words;
        }
        let (row_bytes, blocks) = (self.row_bytes as u128, self.blocks as u128);
        // One word per draw: a byte, a scale, a chance.
        let mut chance_at = |at: u128, numerator, denominator| {
            peek.seek(at);
            peek.chance(numerator, denominator)
        };
        match self.dist {
            Distribution::Gpumode => unreachable!("every GPU MODE row draws as many words"),
            Distribution::Full => {
                // A wide row draws a chance before each of its scales.
                let wide_row = chance_at(at + row_bytes, 1, 8);
                row_bytes + 1 + blocks * if wide_row { 2 } else { 1 }
            }
            Distribution::Stagnation => unreachable!("built whole by problem::stagnation"),
            Distribution::Adversarial | Distribution::AdversarialNan => {
                let block_bytes = (SCALE_BLOCK / 2) as u128;
                let mut end = at + self.plan_words();
                if self.role == Role::A {
                    // The maximal block: its position, then its bytes.
                    end += if chance_at(end, 1, 16) {
                        2 + block_bytes
                    } else {
                        1
                    };
                    // The single kept block: its position.
                    end += if chance_at(end, 1, 8) { 2 } else { 1 };
                }
                if self.dist == Distribution::AdversarialNan {
                    end += if chance_at(end, 1, 16) { 2 } else { 1 };
                }
                end - at
            }
        }
    }

    /// One row's data and scales, drawn from `source`.
    fn row(&self, row_data: &mut [u8], row_scales: &mut [u8], source: &mut Source) {
        let (role, blocks) = (self.role, self.blocks);
        let block_bytes = SCALE_BLOCK / 2;
        match self.dist {
            Distribution::Gpumode => {
                source.top_bytes(row_data, GPUMODE_FP4_MASK);
                row_scales
                    .iter_mut()
                    .for_each(|scale| *scale = gpumode_scale(source, self.gpumode_scales));
            }
            Distribution::Full => {
                source.top_bytes(row_data, 0xff);
                let wide_row = source.chance(1, 8);
                for scale in row_scales.iter_mut() {
                    let top = if wide_row && source.chance(1, 16) {
                        E4M3_MAX_CODE
                    } else {
                        FULL_NARROW_MAX_CODE
                    };
                    *scale = source.below(u32::from(top) + 1) as u8;
                }
            }
            Distribution::Stagnation => unreachable!("built whole by problem::stagnation"),
            Distribution::Adversarial | Distribution::AdversarialNan => {
                for (j, mode) in self.plan.0.iter().enumerate() {
                    let block = &mut row_data[j * block_bytes..(j + 1) * block_bytes];
                    adversarial_block(role, *mode, block, &mut row_scales[j], source);
                    if *mode == KBlockMode::CancelSecond {
                        let (previous, current) = row_data.split_at_mut(j * block_bytes);
                        let previous = &previous[(j - 1) * block_bytes..];
                        let flip = if role == Role::B { 0x88 } else { 0x00 };
                        for (byte, &source_byte) in current[..block_bytes].iter_mut().zip(previous)
                        {
                            *byte = source_byte ^ flip;
                        }
                        row_scales[j] = row_scales[j - 1];
                    }
                }
                // One A row in sixteen gets one block of maximal magnitudes, 6 * 6 * 448 * 448 per
                // product: its outputs overflow fp16 and must be infinite.
                if role == Role::A && source.chance(1, 16) {
                    let j = source.below(blocks as u32) as usize;
                    adversarial_block(
                        role,
                        KBlockMode::Max,
                        &mut row_data[j * block_bytes..(j + 1) * block_bytes],
                        &mut row_scales[j],
                        source,
                    );
                }
                // One A row in eight keeps a single nonzero K-block.
                if role == Role::A && source.chance(1, 8) {
                    let keep = source.below(blocks as u32) as usize;
                    for j in (0..blocks).filter(|&j| j != keep) {
                        row_data[j * block_bytes..(j + 1) * block_bytes].fill(0);
                    }
                }
                if self.dist == Distribution::AdversarialNan && source.chance(1, 16) {
                    row_scales[source.below(blocks as u32) as usize] = E4M3_NAN_CODE;
                }
            }
        }
    }
}

/// Scales vary by block and by row over 2^-6 .. 2.
fn random_moderate_scale(source: &mut Source) -> u8 {
    E4M3_MIN_NORMAL_CODE + source.below(u32::from(E4M3_TWO - E4M3_MIN_NORMAL_CODE) + 1) as u8
}

fn gpumode_scale(source: &mut Source, family: GpumodeScales) -> u8 {
    match family {
        GpumodeScales::UniformUnit => {
            E4m3::from_f32_rne(source.unit_f32(), E4m3Overflow::Saturate).to_bits()
        }
        GpumodeScales::OneOrTwo => {
            if source.chance(1, 2) {
                E4M3_ONE_CODE
            } else {
                E4M3_TWO
            }
        }
    }
}

fn adversarial_block(
    role: Role,
    mode: KBlockMode,
    block: &mut [u8],
    scale: &mut u8,
    source: &mut Source,
) {
    match mode {
        KBlockMode::Random => {
            source.top_bytes(block, 0xff);
            *scale = random_moderate_scale(source);
        }
        KBlockMode::CancelFirst => {
            // Large enough that the partial sum leaves fp16's range (6 * 6 * 16 * 16 per product)
            // before the next block cancels it exactly.
            for byte in block.iter_mut() {
                *byte = (source.byte() & 0x88) | FP4_MAX_POSITIVE | (FP4_MAX_POSITIVE << 4);
            }
            *scale = E4M3_SIXTEEN;
        }
        KBlockMode::Max => {
            for byte in block.iter_mut() {
                let signs = source.byte() & 0x88;
                *byte = signs | FP4_MAX_POSITIVE | (FP4_MAX_POSITIVE << 4);
            }
            *scale = E4M3_MAX_CODE;
        }
        KBlockMode::Zero => {
            if role == Role::A {
                block.fill(0);
            } else {
                source.top_bytes(block, 0xff);
            }
            *scale = random_moderate_scale(source);
        }
        // Filled from the previous block by the caller; draw nothing so streams stay aligned.
        KBlockMode::CancelSecond => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows made by tasks of 1 and of 7 rows, each task from the word its first row starts at,
    /// are the rows one sequential pass makes, for every distribution, both roles and both
    /// families of GPU MODE scales (the golden files pin the sequential pass's bytes).
    #[test]
    fn rows_made_in_tasks_are_the_rows_of_one_pass() {
        let shape = Shape::new(37, 37, 160, 3).unwrap();
        for dist in Distribution::ALL {
            for seed in 0..6 {
                let plan = KBlockPlan::new(shape.scale_cols(), dist, seed);
                for (role, gpumode_scales) in [
                    (Role::A, GpumodeScales::UniformUnit),
                    (Role::B, GpumodeScales::OneOrTwo),
                ] {
                    let draw = OperandDraw {
                        role,
                        dist,
                        gpumode_scales,
                        plan: &plan,
                        seed,
                        stream: 1,
                        row_bytes: shape.k / 2,
                        blocks: shape.scale_cols(),
                    };
                    let one_pass = draw.matrix(shape.m, shape, shape.m * shape.l);
                    for task_rows in [1, 7] {
                        let in_tasks = draw.matrix(shape.m, shape, task_rows);
                        assert_eq!(
                            (in_tasks.data(), in_tasks.scales()),
                            (one_pass.data(), one_pass.scales()),
                            "{} seed {seed} {role:?}, tasks of {task_rows} rows",
                            dist.name()
                        );
                    }
                }
            }
        }
    }
}
