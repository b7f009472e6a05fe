//! Diagnosis: when a kernel fails, which known bug explains its output?
//!
//! Each entry of the catalogue is a wrong problem the model can compute: the same inputs mutated
//! the way a bug reads them (scales ignored, scale layout misread, K tail dropped, FP4 decoded
//! wrong) and/or the wrong arithmetic (silu on the other GEMM, no silu, a plain GEMM, fp16
//! accumulation, truncating output). The failing output is judged against every entry's own
//! acceptance intervals; an entry that holds every element is a match, and among matches the one
//! with the narrowest intervals (the most specific claim) wins. Before the catalogue, elements
//! still holding the harness's poison fill are reported as never written.

use crate::layout::{plain_to_blocked, BlockedScaleLayout, ATOM_BYTES, ATOM_COLS, ATOM_ROWS};
use crate::model::bounds::{
    accumulator_range_in, epilogue_range, fp16_interval, fp16_interval_toward_zero, fp16_ordinal,
    Accumulator, Epilogue, KOrder, Range,
};
use crate::model::exact_grid::exact_dot_grid;
use crate::model::reference::Reference;
use crate::problem::{BlockScaledMatrix, DualGemmInputs, POISON};
use half::f16;
use serde::{Deserialize, Serialize};

/// The broad kind of a bug: the wrong problem computed, a misread scale layout, misread scales,
/// numerics (accumulation or rounding), an incomplete output, out-of-bounds accesses, races.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BugClass {
    WrongProblem,
    Layout,
    Scale,
    Numerics,
    IncompleteOutput,
    OutOfBounds,
    Race,
}

/// Known wrong problems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WrongProblem {
    GemmWithB1,
    GemmWithB2,
    SiluOnSecondGemm,
    NoSilu,
    SiluSignFlipped,
    ScalesIgnored,
    ScaleAtomRowsSwapped,
    ScaleAtomTransposed,
    Fp16Accumulation,
    TruncatedOutput,
    KTailDropped,
    Fp4HighExponentBitIgnored,
    NanScalesIgnored,
    SubnormalScalesFlushed,
    BatchIgnored,
    ScalesOfAAndB1Swapped,
    OverflowSaturated,
    #[serde(rename = "scales-of-batch-0")]
    ScalesOfBatch0,
    #[serde(rename = "scale-per-32")]
    ScalePer32,
}

impl WrongProblem {
    pub const ALL: [WrongProblem; 19] = [
        WrongProblem::GemmWithB1,
        WrongProblem::GemmWithB2,
        WrongProblem::SiluOnSecondGemm,
        WrongProblem::NoSilu,
        WrongProblem::SiluSignFlipped,
        WrongProblem::ScalesIgnored,
        WrongProblem::ScaleAtomRowsSwapped,
        WrongProblem::ScaleAtomTransposed,
        WrongProblem::Fp16Accumulation,
        WrongProblem::TruncatedOutput,
        WrongProblem::KTailDropped,
        WrongProblem::Fp4HighExponentBitIgnored,
        WrongProblem::NanScalesIgnored,
        WrongProblem::SubnormalScalesFlushed,
        WrongProblem::BatchIgnored,
        WrongProblem::ScalesOfAAndB1Swapped,
        WrongProblem::OverflowSaturated,
        WrongProblem::ScalesOfBatch0,
        WrongProblem::ScalePer32,
    ];

    pub fn description(self) -> &'static str {
        match self {
            WrongProblem::GemmWithB1 => "computes the plain GEMM A@B1 (no B2, no silu)",
            WrongProblem::GemmWithB2 => "computes the plain GEMM A@B2 (no B1, no silu)",
            WrongProblem::SiluOnSecondGemm => "applies silu to A@B2 instead of A@B1",
            WrongProblem::NoSilu => "multiplies A@B1 by A@B2 without silu",
            WrongProblem::SiluSignFlipped => "computes silu as x / (1 + exp(+x)): sign error in the exponent",
            WrongProblem::ScalesIgnored => "ignores the block scales (treats them as 1.0)",
            WrongProblem::ScaleAtomRowsSwapped => "reads the permuted scales with mm32 and mm4 swapped",
            WrongProblem::ScaleAtomTransposed => "reads the permuted scales with mm4 and kk4 swapped (atom transposed)",
            WrongProblem::Fp16Accumulation => "accumulates in fp16 instead of f32",
            WrongProblem::TruncatedOutput => "converts the output to fp16 by truncation instead of rounding to nearest",
            WrongProblem::KTailDropped => "drops the last K tile when K is not a multiple of 256",
            WrongProblem::Fp4HighExponentBitIgnored => "decodes FP4 codes with the high exponent bit wrong (2, 3, 4, 6 read as 0, 0.5, 1, 1.5)",
            WrongProblem::NanScalesIgnored => "treats NaN scales as 0 instead of propagating NaN",
            WrongProblem::SubnormalScalesFlushed => "flushes subnormal e4m3 scales (below 2^-6) to zero",
            WrongProblem::BatchIgnored => "reads batch 0 for every batch l",
            WrongProblem::ScalesOfAAndB1Swapped => "passes A's scales for B1 and B1's for A",
            WrongProblem::OverflowSaturated => "saturates outputs beyond the fp16 range to +-65504 instead of infinity",
            WrongProblem::ScalesOfBatch0 => "reads batch 0's scales for every batch l (the data of its own batch)",
            WrongProblem::ScalePer32 => "reads the scale of column k/32 instead of k/16 (one scale per 32 elements, as in MXFP4)",
        }
    }

    pub fn class(self) -> BugClass {
        match self {
            WrongProblem::GemmWithB1
            | WrongProblem::GemmWithB2
            | WrongProblem::SiluOnSecondGemm
            | WrongProblem::NoSilu
            | WrongProblem::SiluSignFlipped => BugClass::WrongProblem,
            WrongProblem::ScalesIgnored
            | WrongProblem::Fp4HighExponentBitIgnored
            | WrongProblem::NanScalesIgnored
            | WrongProblem::SubnormalScalesFlushed
            | WrongProblem::ScalesOfAAndB1Swapped => BugClass::Scale,
            WrongProblem::ScaleAtomRowsSwapped
            | WrongProblem::ScaleAtomTransposed
            | WrongProblem::KTailDropped
            | WrongProblem::BatchIgnored
            | WrongProblem::ScalesOfBatch0
            | WrongProblem::ScalePer32 => BugClass::Layout,
            WrongProblem::Fp16Accumulation
            | WrongProblem::TruncatedOutput
            | WrongProblem::OverflowSaturated => BugClass::Numerics,
        }
    }

    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

/// Per-element acceptance of a wrong problem.
pub struct Acceptance {
    pub lo: Vec<f16>,
    pub hi: Vec<f16>,
    /// The model cannot bound these elements (fp16 accumulation that may overflow).
    pub unbounded: Vec<bool>,
}

impl Acceptance {
    /// One output the buggy kernel could produce: the middle of each element's interval (NaN where
    /// NaN is required or nothing is bounded). Golden tests use it as the mutated output.
    pub fn representative(&self) -> Vec<f16> {
        self.lo
            .iter()
            .zip(&self.hi)
            .zip(&self.unbounded)
            .map(
                |((&lo, &hi), &unbounded)| match (fp16_ordinal(lo), fp16_ordinal(hi)) {
                    (Some(l), Some(h)) if !unbounded => {
                        let middle = (l + h).div_euclid(2);
                        f16::from_bits(if middle < 0 {
                            0x8000 | (-middle) as u16
                        } else {
                            middle as u16
                        })
                    }
                    _ => f16::NAN,
                },
            )
            .collect()
    }
}

/// The scale bytes a kernel reading the blocked layout through `offset` sees for each (row, col).
fn scales_read_through(
    operand: &BlockScaledMatrix,
    fill: u8,
    offset: impl Fn(usize, usize, usize, &BlockedScaleLayout) -> usize,
) -> Vec<u8> {
    let dims = operand.scale_dims();
    let blocked = plain_to_blocked(operand.scales(), dims, fill);
    let layout = BlockedScaleLayout(dims);
    let mut seen = Vec::with_capacity(operand.scales().len());
    for l in 0..dims.batches {
        for i in 0..dims.rows {
            for j in 0..dims.cols {
                seen.push(blocked[offset(i, j, l, &layout)]);
            }
        }
    }
    seen
}

fn atom_base(i: usize, j: usize, l: usize, layout: &BlockedScaleLayout) -> usize {
    ((l * layout.row_atoms() + i / ATOM_ROWS) * layout.col_atoms() + j / ATOM_COLS) * ATOM_BYTES
}

fn with_scales(operand: &BlockScaledMatrix, scales: Vec<u8>) -> BlockScaledMatrix {
    with_parts(operand, operand.data().to_vec(), scales)
}

fn with_data(operand: &BlockScaledMatrix, data: Vec<u8>) -> BlockScaledMatrix {
    with_parts(operand, data, operand.scales().to_vec())
}

fn with_parts(operand: &BlockScaledMatrix, data: Vec<u8>, scales: Vec<u8>) -> BlockScaledMatrix {
    BlockScaledMatrix::new(
        "x",
        operand.rows(),
        operand.k(),
        operand.batches(),
        data,
        scales,
    )
    .expect("same dimensions")
}

/// The inputs as the buggy kernel reads them, or `None` if the bug cannot show on this shape.
fn mutated_inputs(
    problem: WrongProblem,
    inputs: &DualGemmInputs,
    fill: u8,
) -> Option<DualGemmInputs> {
    let map = |f: &dyn Fn(&BlockScaledMatrix) -> BlockScaledMatrix| DualGemmInputs {
        shape: inputs.shape,
        a: f(&inputs.a),
        b1: f(&inputs.b1),
        b2: f(&inputs.b2),
    };
    match problem {
        WrongProblem::ScalesIgnored => {
            Some(map(&|op| with_scales(op, vec![0x38; op.scales().len()])))
        }
        WrongProblem::ScaleAtomRowsSwapped => Some(map(&|op| {
            with_scales(
                op,
                scales_read_through(op, fill, |i, j, l, layout| {
                    atom_base(i, j, l, layout) + ((i % 128) / 32) * 16 + (i % 32) * 4 + j % 4
                }),
            )
        })),
        WrongProblem::ScaleAtomTransposed => Some(map(&|op| {
            with_scales(
                op,
                scales_read_through(op, fill, |i, j, l, layout| {
                    atom_base(i, j, l, layout) + (i % 32) * 16 + (j % 4) * 4 + (i % 128) / 32
                }),
            )
        })),
        WrongProblem::KTailDropped => {
            let kept = inputs.shape.k / 256 * 256;
            (kept != inputs.shape.k).then(|| {
                // A kernel that drops the tail sums fewer blocks: zero them rather than shrink K,
                // so the bound keeps its block count.
                let drop_tail = |op: &BlockScaledMatrix| {
                    let mut data = op.data().to_vec();
                    for row in data.chunks_exact_mut(op.k() / 2) {
                        row[kept / 2..].fill(0);
                    }
                    with_data(op, data)
                };
                map(&drop_tail)
            })
        }
        WrongProblem::Fp4HighExponentBitIgnored => Some(map(&|op| {
            with_data(
                op,
                op.data().iter().map(|byte| byte & 0b1011_1011).collect(),
            )
        })),
        WrongProblem::NanScalesIgnored => {
            let has_nan = [&inputs.a, &inputs.b1, &inputs.b2]
                .iter()
                .any(|op| op.scales().iter().any(|s| s & 0x7F == 0x7F));
            has_nan.then(|| {
                map(&|op| {
                    with_scales(
                        op,
                        op.scales()
                            .iter()
                            .map(|&s| if s & 0x7F == 0x7F { 0 } else { s })
                            .collect(),
                    )
                })
            })
        }
        WrongProblem::SubnormalScalesFlushed => {
            let has_subnormal = [&inputs.a, &inputs.b1, &inputs.b2]
                .iter()
                .any(|op| op.scales().iter().any(|s| s & 0x78 == 0 && s & 0x7 != 0));
            has_subnormal.then(|| {
                map(&|op| {
                    with_scales(
                        op,
                        op.scales()
                            .iter()
                            .map(|&s| if s & 0x78 == 0 { 0 } else { s })
                            .collect(),
                    )
                })
            })
        }
        WrongProblem::BatchIgnored => (inputs.shape.l > 1).then(|| {
            map(&|op| {
                let (data_len, scales_len) = (
                    op.data().len() / op.batches(),
                    op.scales().len() / op.batches(),
                );
                let data = op.data()[..data_len].repeat(op.batches());
                with_parts(op, data, op.scales()[..scales_len].repeat(op.batches()))
            })
        }),
        WrongProblem::ScalesOfBatch0 => (inputs.shape.l > 1).then(|| {
            map(&|op| {
                let per_batch = op.scales().len() / op.batches();
                with_scales(op, op.scales()[..per_batch].repeat(op.batches()))
            })
        }),
        // Plain scales are [batch][row][k / 16]: block j reads block j / 2 of its row.
        WrongProblem::ScalePer32 => (inputs.shape.k >= 32).then(|| {
            map(&|op| {
                let cols = op.scale_dims().cols;
                let scales = op.scales();
                let halved = (0..scales.len())
                    .map(|i| scales[i - i % cols + (i % cols) / 2])
                    .collect();
                with_scales(op, halved)
            })
        }),
        WrongProblem::ScalesOfAAndB1Swapped => {
            (inputs.shape.m == inputs.shape.n).then(|| DualGemmInputs {
                shape: inputs.shape,
                a: with_scales(&inputs.a, inputs.b1.scales().to_vec()),
                b1: with_scales(&inputs.b1, inputs.a.scales().to_vec()),
                b2: inputs.b2.clone(),
            })
        }
        _ => Some(inputs.clone()),
    }
}

/// The acceptance intervals of a wrong problem, or `None` if the bug cannot show on these inputs.
pub fn acceptance(
    problem: WrongProblem,
    inputs: &DualGemmInputs,
    fill: u8,
    order: KOrder,
) -> Option<Acceptance> {
    let mutated = mutated_inputs(problem, inputs, fill)?;
    let shape = inputs.shape;
    let blocks = shape.scale_cols();
    let accumulator = if problem == WrongProblem::Fp16Accumulation {
        Accumulator::Fp16
    } else {
        Accumulator::F32
    };
    let (epilogue, swap) = match problem {
        WrongProblem::GemmWithB1 => (Epilogue::First, false),
        WrongProblem::GemmWithB2 => (Epilogue::First, true),
        WrongProblem::SiluOnSecondGemm => (Epilogue::SiluMul, true),
        WrongProblem::NoSilu => (Epilogue::Mul, false),
        WrongProblem::SiluSignFlipped => (Epilogue::SignFlippedSiluMul, false),
        _ => (Epilogue::SiluMul, false),
    };
    let len = shape.m * shape.n * shape.l;
    let mut out = Acceptance {
        lo: vec![f16::ZERO; len],
        hi: vec![f16::ZERO; len],
        unbounded: vec![false; len],
    };
    for l in 0..shape.l {
        let elements = exact_dot_grid(
            &mutated.a,
            &[&mutated.b1, &mutated.b2],
            l,
            true,
            None,
            |_, _, d| {
                let x1 = accumulator_range_in(&d[0], blocks, order, accumulator);
                let x2 = accumulator_range_in(&d[1], blocks, order, accumulator);
                let (x1, x2) = if swap { (x2, x1) } else { (x1, x2) };
                let range = epilogue_range(epilogue, x1, x2);
                let (lo, hi) = match problem {
                    WrongProblem::TruncatedOutput => fp16_interval_toward_zero(range),
                    WrongProblem::OverflowSaturated => {
                        let (lo, hi) = fp16_interval(range);
                        (lo.clamp(f16::MIN, f16::MAX), hi.clamp(f16::MIN, f16::MAX))
                    }
                    _ => fp16_interval(range),
                };
                (lo, hi, range == Range::Unbounded)
            },
        );
        for (i, (lo, hi, unbounded)) in elements.into_iter().enumerate() {
            let index = i * shape.l + l;
            out.lo[index] = lo;
            out.hi[index] = hi;
            out.unbounded[index] = unbounded;
        }
    }
    Some(out)
}

pub(crate) fn inside(got: f16, lo: f16, hi: f16) -> bool {
    if lo.is_nan() || hi.is_nan() {
        return got.is_nan();
    }
    match (fp16_ordinal(got), fp16_ordinal(lo), fp16_ordinal(hi)) {
        (Some(g), Some(l), Some(h)) => l <= g && g <= h,
        _ => false,
    }
}

/// How well one wrong problem explains an output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Evidence {
    pub problem: WrongProblem,
    pub class: BugClass,
    pub description: std::borrow::Cow<'static, str>,
    /// Elements inside this wrong problem's intervals, of those it can bound.
    pub matched: usize,
    pub considered: usize,
    /// Sum of interval widths in ulps over the considered elements: smaller is more specific.
    pub total_width: u64,
    /// Whether it bounds and holds every element of the minimal case that the correct model
    /// rejects: a class that leaves the failure itself unbounded (its intervals too wide to say
    /// anything there) explains nothing, however many other elements it holds.
    pub explains_failure: bool,
}

/// The diagnosis of one failing output.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// Elements still holding the poison fill.
    pub unwritten: usize,
    /// Where the unwritten elements are, in words ("rows m 0 to 5, every column"), if any.
    pub unwritten_where: Option<String>,
    /// The best explanation, if one matches every element it can bound.
    pub best: Option<Evidence>,
    /// Every entry's score, best first.
    pub candidates: Vec<Evidence>,
    /// The shapes of the runs judged, the minimal failing case first: the evidence's element
    /// counts are over all of them, not over the minimal case alone.
    pub runs: Vec<crate::problem::Shape>,
}

impl Diagnosis {
    /// One line for reports.
    pub fn summary(&self) -> String {
        if self.unwritten > 0 {
            return format!(
                "incomplete output: {} never written ({})",
                plural(self.unwritten, "element"),
                self.unwritten_where.as_deref().unwrap_or("")
            );
        }
        match &self.best {
            Some(e) => {
                let others: Vec<String> = self.also_consistent().iter().map(|p| p.name()).collect();
                let also = if others.is_empty() {
                    String::new()
                } else {
                    format!(" (also consistent: {})", others.join(", "))
                };
                format!(
                    "{} ({:?}): {}; matches in {}/{} elements {}{also}",
                    e.problem.name(),
                    e.class,
                    e.description,
                    e.matched,
                    e.considered,
                    self.runs_in_words()
                )
            }
            // No "closest" class: one that does not hold every element points the wrong way
            // (the localization of the shrunk case says what was read wrong instead).
            None => "no known bug class".to_string(),
        }
    }

    /// Which runs the element counts are over: "of the minimal case", or of it and the larger
    /// runs that tell look-alike bugs apart, by shape.
    fn runs_in_words(&self) -> String {
        match &self.runs[..] {
            [] | [_] => "of the minimal case".to_string(),
            [minimal, others @ ..] => {
                // Each shape once, with its count: the other runs differ by data, not shape.
                let mut shapes: Vec<(crate::problem::Shape, usize)> = Vec::new();
                for shape in others {
                    match shapes.iter_mut().find(|(s, _)| s == shape) {
                        Some((_, count)) => *count += 1,
                        None => shapes.push((*shape, 1)),
                    }
                }
                let words: Vec<String> = shapes
                    .iter()
                    .map(|(shape, count)| match count {
                        1 => shape.to_string(),
                        _ => format!("{shape} ({count} runs)"),
                    })
                    .collect();
                format!(
                    "of {} runs: the minimal case {minimal} and, to tell look-alike bugs apart, \
                     other data at {}",
                    self.runs.len(),
                    words.join(", ")
                )
            }
        }
    }

    pub fn best_problem(&self) -> Option<WrongProblem> {
        self.best.as_ref().map(|e| e.problem)
    }

    /// Other wrong problems that also hold every element (the evidence cannot separate them).
    pub fn also_consistent(&self) -> Vec<WrongProblem> {
        self.candidates
            .iter()
            .filter(|e| {
                e.matched == e.considered
                    && e.explains_failure
                    && Some(e.problem) != self.best_problem()
            })
            .map(|e| e.problem)
            .collect()
    }
}

/// One run of the kernel under diagnosis: its inputs (blocked scales padded with `fill`) and its
/// `[M, N, L]` output.
pub struct Observation<'a> {
    pub inputs: &'a DualGemmInputs,
    pub fill: u8,
    pub output: &'a [f16],
    /// The problem asked's reference of this run where the caller has it already (the GPU's,
    /// for a run past what the CPU model computes in seconds); `None`: the model computes it.
    pub reference: Option<&'a Reference>,
}

impl<'a> Observation<'a> {
    /// The problem asked's reference of this run: the caller's, else the model's.
    pub fn reference(&self, order: KOrder) -> std::borrow::Cow<'a, Reference> {
        match self.reference {
            Some(reference) => std::borrow::Cow::Borrowed(reference),
            None => std::borrow::Cow::Owned(crate::model::reference::dual_gemm_reference(
                self.inputs,
                order,
            )),
        }
    }
}

/// "3 elements", "1 element".
pub fn plural(count: usize, noun: &str) -> String {
    format!("{count} {noun}{}", if count == 1 { "" } else { "s" })
}

/// A set of indices in words: "0", "0 to 127", "3 of 0 to 200".
pub fn index_span(indices: &[usize]) -> String {
    let mut sorted = indices.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    match (sorted.first(), sorted.last()) {
        (Some(first), Some(last)) if first == last => format!("{first}"),
        (Some(first), Some(last)) if sorted.len() == last - first + 1 => {
            format!("{first} to {last}")
        }
        (Some(first), Some(last)) => format!("{} of {first} to {last}", sorted.len()),
        _ => String::new(),
    }
}

/// Where unwritten (row, column) elements lie, in words: whole rows, whole columns, or both
/// named.
pub(crate) fn unwritten_where(elements: &[(usize, usize)], shape: crate::problem::Shape) -> String {
    let rows: Vec<usize> = elements.iter().map(|e| e.0).collect();
    let columns: Vec<usize> = elements.iter().map(|e| e.1).collect();
    let distinct = |v: &[usize]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    let (row_count, column_count) = (distinct(&rows), distinct(&columns));
    let (row_word, column_word) = (
        if row_count == 1 { "row" } else { "rows" },
        if column_count == 1 {
            "column"
        } else {
            "columns"
        },
    );
    if column_count == shape.n && row_count < shape.m {
        format!("{row_word} m {}, every column", index_span(&rows))
    } else if row_count == shape.m && column_count < shape.n {
        format!("{column_word} n {}, every row", index_span(&columns))
    } else {
        format!(
            "{row_word} m {}, {column_word} n {}",
            index_span(&rows),
            index_span(&columns)
        )
    }
}

/// Diagnoses a failing kernel from one or more of its runs, the minimal failing case first. More
/// runs (larger shapes) separate bug classes that a tiny case cannot tell apart: a wrong problem
/// explains the kernel only if it holds every element of every run it can bound.
pub fn diagnose(observations: &[Observation], order: KOrder) -> Diagnosis {
    let first = &observations[0];
    let shape = first.inputs.shape;
    let unwritten: Vec<(usize, usize)> = first
        .output
        .iter()
        .enumerate()
        .filter(|(_, x)| x.to_bits() == POISON.to_bits())
        .map(|(i, _)| (i / (shape.n * shape.l), i / shape.l % shape.n))
        .collect();
    // The elements of the minimal case outside the correct model's intervals.
    let correct = first.reference(order);
    let failing: Vec<usize> = (0..first.output.len())
        .filter(|&i| !inside(first.output[i], correct.lo[i], correct.hi[i]))
        .collect();
    let mut candidates: Vec<Evidence> = WrongProblem::ALL
        .iter()
        .filter_map(|&problem| {
            let mut evidence = Evidence {
                problem,
                class: problem.class(),
                description: problem.description().into(),
                matched: 0,
                considered: 0,
                total_width: 0,
                explains_failure: false,
            };
            let mut applicable = 0;
            for (index, observation) in observations.iter().enumerate() {
                let Some(acceptance) =
                    acceptance(problem, observation.inputs, observation.fill, order)
                else {
                    if index == 0 {
                        return None; // the bug cannot show on the minimal failing case
                    }
                    continue;
                };
                if index == 0 {
                    evidence.explains_failure = failing.iter().all(|&i| {
                        !acceptance.unbounded[i]
                            && inside(observation.output[i], acceptance.lo[i], acceptance.hi[i])
                    });
                }
                applicable += observation.output.len();
                for (i, &value) in observation.output.iter().enumerate() {
                    if acceptance.unbounded[i] {
                        continue;
                    }
                    evidence.considered += 1;
                    evidence.matched +=
                        usize::from(inside(value, acceptance.lo[i], acceptance.hi[i]));
                    if let (Some(lo), Some(hi)) = (
                        fp16_ordinal(acceptance.lo[i]),
                        fp16_ordinal(acceptance.hi[i]),
                    ) {
                        evidence.total_width += (hi - lo) as u64;
                    }
                }
            }
            // A wrong problem that cannot bound most of the output is no evidence either way.
            (evidence.considered > 0 && evidence.considered * 2 >= applicable).then_some(evidence)
        })
        .collect();
    let score = |e: &Evidence| {
        (
            e.matched as f64 / e.considered.max(1) as f64,
            std::cmp::Reverse(e.total_width),
        )
    };
    candidates.sort_by(|x, y| {
        score(y)
            .partial_cmp(&score(x))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let best = candidates
        .iter()
        .find(|e| e.matched == e.considered && e.explains_failure)
        .cloned();
    Diagnosis {
        unwritten: unwritten.len(),
        unwritten_where: (!unwritten.is_empty()).then(|| unwritten_where(&unwritten, shape)),
        best,
        candidates,
        runs: observations.iter().map(|o| o.inputs.shape).collect(),
    }
}
