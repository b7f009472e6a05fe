//! Data shrinking: after the shape of a failing dual-GEMM case has been shrunk, its
//! data is, while the kernel still fails: batches dropped, K blocks zeroed, single FP4 codes
//! zeroed, the rest moved to +-1, scales moved to 1.0. What is left is usually one or two nonzero
//! products, printed as a table with the expected and the observed output, and, where one
//! exists, the single input that, read differently, turns the expected output into the observed
//! one ("observed = expected with A[0, 5] read as 4.0 instead of 6.0").
//!
//! Each step is a kernel run judged against the model on the changed inputs; the number of runs
//! is bounded ([`RUN_BUDGET`] runs, [`SECONDS_BUDGET`] seconds) so a slow kernel costs seconds,
//! not many minutes.

use crate::kernels::{KernelCase, KernelUnderTest};
use half::f16;
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::formats::{E2m1, E4m3, E4M3_ONE_CODE};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::problem_reference;
use nvfp4_model::problem::POISON;
use nvfp4_model::problem::{BlockScaledMatrix, DualGemmInputs, ProblemInputs, Shape, SCALE_BLOCK};
use serde::{Deserialize, Serialize};

/// Kernel runs data shrinking may spend, and seconds: a failure that needs a deployment shape
/// (K of 16384, N past 8192) costs up to a second per run.
pub const RUN_BUDGET: usize = 600;
pub const SECONDS_BUDGET: f64 = 90.0;
/// FP4 codes (A, B1 and B2 together) past which data is not shrunk.
pub const MAX_CODES: usize = 1 << 22;
/// The e4m3 code of 1.0, and the FP4 codes of +1.0 and -1.0.
const FP4_PLUS_ONE: u8 = 0x2;
const FP4_MINUS_ONE: u8 = 0xA;

/// One nonzero input of the shrunk case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NonzeroInput {
    /// "A[m, k, l]", "B1[n, k, l]", "B2[n, k, l]".
    pub position: String,
    pub code: u8,
    pub value: f32,
    pub scale_byte: u8,
    pub scale: f32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShrunkData {
    pub shape: Shape,
    pub runs: usize,
    pub nonzero: Vec<NonzeroInput>,
    /// The first failing output element, the model's answer and the kernel's.
    pub element: String,
    pub expected: f32,
    pub observed: f32,
    /// "observed = expected with A[0, 5, 0] read as 4.0 instead of 6.0", when one input alone
    /// explains the observed output.
    pub explanation: Option<String>,
    /// What the failure depends on, in words, from controlled changes of the shrunk case (each
    /// input moved, its sign flipped, its FP4 code and scale class changed, one at a time).
    pub localization: Vec<String>,
    /// The shrunk inputs (the repro files are written from them).
    #[serde(skip)]
    pub inputs: Option<DualGemmInputs>,
    /// The kernel's output on the shrunk inputs, `[M, N, L]` (written beside their case file, so
    /// that `check` replays the shrunk failure too).
    #[serde(skip)]
    pub output: Option<Vec<f16>>,
}

struct Shrinker<'a> {
    kernel: &'a dyn KernelUnderTest,
    order: KOrder,
    fill: u8,
    runs: usize,
    started: std::time::Instant,
    /// The failure's time bound for this step.
    deadline: std::time::Instant,
}

impl Shrinker<'_> {
    /// Runs the kernel on `inputs` and judges it: (still fails, the output). A crash or an
    /// exception on the changed case is still the failure.
    fn run_judged(&mut self, inputs: &DualGemmInputs) -> (bool, Vec<f16>) {
        self.runs += 1;
        let problem = ProblemInputs::DualGemm(inputs.clone());
        let reference = super::reference_engine::whole_reference(&problem, self.order);
        let (m, n, l) = problem.output_dims();
        let case = KernelCase::new(problem, self.fill);
        let mut output = vec![POISON; m * n * l];
        match self.kernel.run(&case, &mut output) {
            Err(_) => (true, output),
            Ok(()) => {
                let verdict = judge(
                    OutputShape { m, n, l },
                    &output,
                    &reference.expected,
                    &reference.lo,
                    &reference.hi,
                );
                (!verdict.pass, output)
            }
        }
    }

    /// Whether the runs or the seconds of the budget are spent.
    fn spent(&self) -> bool {
        self.runs >= RUN_BUDGET
            || self.started.elapsed().as_secs_f64() > SECONDS_BUDGET
            || std::time::Instant::now() >= self.deadline
    }

    /// The output when the kernel still fails on `inputs`; None when it passes or when the
    /// shrinking budget is spent.
    fn fails(&mut self, inputs: &DualGemmInputs) -> Option<Vec<f16>> {
        if self.spent() {
            return None;
        }
        let (failed, output) = self.run_judged(inputs);
        failed.then_some(output)
    }

    /// Applies `change` to a copy of `inputs` and keeps it when the kernel still fails.
    fn try_keep(
        &mut self,
        inputs: &mut DualGemmInputs,
        change: impl FnOnce(&mut DualGemmInputs) -> bool,
    ) -> bool {
        // Before the copy: a spent budget must cost nothing per candidate.
        if self.spent() {
            return false;
        }
        let mut candidate = inputs.clone();
        if !change(&mut candidate) || candidate == *inputs {
            return false;
        }
        if self.fails(&candidate).is_some() {
            *inputs = candidate;
            true
        } else {
            false
        }
    }
}

fn operands_mut(inputs: &mut DualGemmInputs) -> [(&'static str, &mut BlockScaledMatrix); 3] {
    [
        ("A", &mut inputs.a),
        ("B1", &mut inputs.b1),
        ("B2", &mut inputs.b2),
    ]
}

fn operands(inputs: &DualGemmInputs) -> [(&'static str, &BlockScaledMatrix); 3] {
    [("A", &inputs.a), ("B1", &inputs.b1), ("B2", &inputs.b2)]
}

/// Every (operand index, row, k, batch) whose FP4 code is not +-0.
fn nonzero_positions(inputs: &DualGemmInputs) -> Vec<(usize, usize, usize, usize)> {
    let mut positions = Vec::new();
    for (i, (_, matrix)) in operands(inputs).into_iter().enumerate() {
        for batch in 0..matrix.batches() {
            for row in 0..matrix.rows() {
                for k in 0..matrix.k() {
                    if matrix.value(row, k, batch).to_bits() & 0x7 != 0 {
                        positions.push((i, row, k, batch));
                    }
                }
            }
        }
    }
    positions
}

/// Shrinks the data of a failing dual-GEMM case (see the module's comment). None when the case
/// does not fail again (a flaky kernel) or is not a dual GEMM.
pub fn shrink_data(
    kernel: &dyn KernelUnderTest,
    failing: &ProblemInputs,
    fill: u8,
    order: KOrder,
    deadline: std::time::Instant,
) -> Option<ShrunkData> {
    let ProblemInputs::DualGemm(start) = failing else {
        return None;
    };
    // A minimal case that stays at a deployment shape (N = 4096, K = 16384 for a bug that
    // needs them) has over 10^8 codes: one step per code would never end, and its list alone
    // takes gigabytes. Its shape is the repro.
    let codes = (start.shape.m + 2 * start.shape.n) * start.shape.k * start.shape.l;
    if codes > MAX_CODES {
        return None;
    }
    let mut shrinker = Shrinker {
        kernel,
        order,
        fill,
        runs: 0,
        started: std::time::Instant::now(),
        deadline,
    };
    shrinker.fails(start)?;
    let mut inputs = start.clone();

    // Batches: keep one, if one alone fails.
    if inputs.shape.l > 1 {
        for batch in 0..inputs.shape.l {
            let single = DualGemmInputs {
                shape: Shape::new(inputs.shape.m, inputs.shape.n, inputs.shape.k, 1).ok()?,
                a: inputs.a.single_batch(batch),
                b1: inputs.b1.single_batch(batch),
                b2: inputs.b2.single_batch(batch),
            };
            if shrinker.fails(&single).is_some() {
                inputs = single;
                break;
            }
        }
    }
    let (rows_a, k, batches) = (inputs.shape.m, inputs.shape.k, inputs.shape.l);
    // K blocks: A's block zeroed removes it from every product.
    for block in 0..k / SCALE_BLOCK {
        shrinker.try_keep(&mut inputs, |c| {
            for batch in 0..batches {
                for row in 0..rows_a {
                    for kk in block * SCALE_BLOCK..(block + 1) * SCALE_BLOCK {
                        c.a.set_code(row, kk, batch, 0);
                    }
                }
            }
            true
        });
    }
    // Codes to 0: halves of the nonzero codes first, then quarters, down to single codes (delta
    // debugging: a few runs when most codes do not matter, one per code only at the end).
    let mut chunk = nonzero_positions(&inputs).len().next_power_of_two() / 2;
    while chunk >= 1 {
        let positions = nonzero_positions(&inputs);
        for group in positions.chunks(chunk) {
            shrinker.try_keep(&mut inputs, |c| {
                for &(i, row, kk, batch) in group {
                    operands_mut(c)[i].1.set_code(row, kk, batch, 0);
                }
                true
            });
        }
        chunk /= 2;
    }
    // The rest to +-1, then their scales to 1.0.
    for (i, row, kk, batch) in nonzero_positions(&inputs) {
        shrinker.try_keep(&mut inputs, |c| {
            let matrix = &mut operands_mut(c)[i].1;
            let negative = matrix.value(row, kk, batch).to_bits() & 0x8 != 0;
            let one = if negative {
                FP4_MINUS_ONE
            } else {
                FP4_PLUS_ONE
            };
            matrix.set_code(row, kk, batch, one);
            true
        });
    }
    for (i, row, kk, batch) in nonzero_positions(&inputs) {
        shrinker.try_keep(&mut inputs, |c| {
            operands_mut(c)[i]
                .1
                .set_scale(row, kk, batch, E4M3_ONE_CODE);
            true
        });
    }

    // Once more, outside the budget: the shrunk case's own output.
    let (still_fails, observed_output) = shrinker.run_judged(&inputs);
    if !still_fails {
        return None; // a flaky kernel: the case that failed passes now
    }
    let problem = ProblemInputs::DualGemm(inputs.clone());
    let reference = problem_reference(&problem, order);
    let (m, n, l) = problem.output_dims();
    let verdict = judge(
        OutputShape { m, n, l },
        &observed_output,
        &reference.expected,
        &reference.lo,
        &reference.hi,
    );
    let first = verdict.first_failures.first()?;
    let index = (first.m * n + first.n) * l + first.l;
    let observed = observed_output[index];
    let nonzero: Vec<NonzeroInput> = nonzero_positions(&inputs)
        .into_iter()
        .map(|(i, row, kk, batch)| {
            let (name, matrix) = operands(&inputs)[i];
            let code = matrix.value(row, kk, batch);
            let scale = matrix.scale(row, kk, batch);
            NonzeroInput {
                position: format!("{name}[{row}, {kk}, {batch}]"),
                code: code.to_bits(),
                value: code.to_f32(),
                scale_byte: scale.to_bits(),
                scale: scale.to_f32_as_unsigned_scale(),
            }
        })
        .collect();
    let explanation = explain(&inputs, order, index, observed);
    let localization = localize(&mut shrinker, &inputs);
    Some(ShrunkData {
        shape: inputs.shape,
        runs: shrinker.runs,
        nonzero,
        element: format!("c[{}, {}, {}]", first.m, first.n, first.l),
        expected: reference.expected[index].to_f32(),
        observed: observed.to_f32(),
        explanation,
        localization,
        inputs: Some(inputs),
        output: Some(observed_output),
    })
}

/// Where [`embed`] moves a case: rows of A, rows of B, k, batch.
type Offset = (usize, usize, usize, usize);

/// `inputs` placed inside a larger zero case of `shape`, moved by `offset`; the added inputs are
/// code 0 with scale 1.0.
fn embed(inputs: &DualGemmInputs, shape: Shape, offset: Offset) -> Option<DualGemmInputs> {
    let (dm, dn, dk, dl) = offset;
    let place = |name: &str, from: &BlockScaledMatrix, rows: usize, drow: usize| {
        let mut to = BlockScaledMatrix::new(
            name,
            rows,
            shape.k,
            shape.l,
            vec![0; rows * shape.k / 2 * shape.l],
            vec![E4M3_ONE_CODE; rows * shape.k / SCALE_BLOCK * shape.l],
        )
        .ok()?;
        for batch in 0..from.batches() {
            for row in 0..from.rows() {
                for k in 0..from.k() {
                    let (r, kk, b) = (row + drow, k + dk, batch + dl);
                    to.set_code(r, kk, b, from.value(row, k, batch).to_bits());
                    to.set_scale(r, kk, b, from.scale(row, k, batch).to_bits());
                }
            }
        }
        Some(to)
    };
    Some(DualGemmInputs {
        shape,
        a: place("a", &inputs.a, shape.m, dm)?,
        b1: place("b1", &inputs.b1, shape.n, dn)?,
        b2: place("b2", &inputs.b2, shape.n, dn)?,
    })
}

/// Controlled changes of the shrunk case, each run and judged: which features the failure
/// depends on, in words (localization: it works for bugs outside the diagnosis catalogue too).
fn localize(shrinker: &mut Shrinker<'_>, inputs: &DualGemmInputs) -> Vec<String> {
    let mut found = Vec::new();
    let shape = inputs.shape;
    // Localization has no budget of its own: it makes at most 7 + 2 + 4 * 11 runs.
    let fails = |changed: Option<DualGemmInputs>, shrinker: &mut Shrinker<'_>| {
        changed.map(|c| shrinker.run_judged(&c).0)
    };
    let grown = |m: usize, n: usize, k: usize, l: usize| Shape::new(m, n, k, l).ok();
    // Where the data sits.
    let moves: [(&str, Option<Shape>, Offset); 7] = [
        (
            "K padded with zeros to a multiple of 256",
            grown(
                shape.m,
                shape.n,
                shape.k.next_multiple_of(256).max(256),
                shape.l,
            ),
            (0, 0, 0, 0),
        ),
        (
            "its K blocks moved one block later",
            grown(shape.m, shape.n, shape.k + SCALE_BLOCK, shape.l),
            (0, 0, SCALE_BLOCK, 0),
        ),
        (
            "its rows of A moved to the next 128-row tile",
            grown(shape.m + 128, shape.n, shape.k, shape.l),
            (128, 0, 0, 0),
        ),
        (
            "its rows of B moved to the next 128-column tile",
            grown(shape.m, shape.n + 128, shape.k, shape.l),
            (0, 128, 0, 0),
        ),
        (
            "M grown to a multiple of 128 (the data in place)",
            grown(shape.m.next_multiple_of(128), shape.n, shape.k, shape.l),
            (0, 0, 0, 0),
        ),
        (
            "N grown to a multiple of 128 (the data in place)",
            grown(shape.m, shape.n.next_multiple_of(128), shape.k, shape.l),
            (0, 0, 0, 0),
        ),
        (
            "its batch moved to batch 2 of 2",
            grown(shape.m, shape.n, shape.k, shape.l + 1),
            (0, 0, 0, 1),
        ),
    ];
    for (what, to, offset) in moves {
        if let Some(false) = fails(to.and_then(|to| embed(inputs, to, offset)), shrinker) {
            found.push(format!(
                "passes with {what}: the failure depends on where the data is"
            ));
        }
    }
    // NaN scales (a NaN scale makes its outputs NaN whatever the data).
    let is_nan = |byte: u8| byte & 0x7F == 0x7F;
    if operands(inputs)
        .iter()
        .any(|(_, m)| m.scales().iter().any(|&b| is_nan(b)))
    {
        let mut cleared = inputs.clone();
        for (_, matrix) in operands_mut(&mut cleared) {
            for batch in 0..matrix.batches() {
                for row in 0..matrix.rows() {
                    for k in (0..matrix.k()).step_by(SCALE_BLOCK) {
                        if is_nan(matrix.scale(row, k, batch).to_bits()) {
                            matrix.set_scale(row, k, batch, E4M3_ONE_CODE);
                        }
                    }
                }
            }
        }
        if fails(Some(cleared), shrinker) == Some(false) {
            found.push(
                "passes with every NaN scale read as 1.0: the failure depends on the NaN scales"
                    .into(),
            );
        }
    }
    let positions = nonzero_positions(inputs);
    // Signs.
    let mut flipped = inputs.clone();
    for &(i, row, k, batch) in &positions {
        let matrix = &mut operands_mut(&mut flipped)[i].1;
        let code = matrix.value(row, k, batch).to_bits();
        matrix.set_code(row, k, batch, code ^ 0x8);
    }
    if !positions.is_empty() && fails(Some(flipped), shrinker) == Some(false) {
        found.push("passes with every sign flipped: the failure depends on the signs".into());
    }
    // FP4 codes and scale classes, input by input (the first four inputs).
    for &(i, row, k, batch) in positions.iter().take(4) {
        let (name, matrix) = operands(inputs)[i];
        let was = matrix.value(row, k, batch);
        let sign = was.to_bits() & 0x8;
        let (mut failing, mut passing) = (Vec::new(), Vec::new());
        for magnitude in 1..8u8 {
            let mut changed = inputs.clone();
            operands_mut(&mut changed)[i]
                .1
                .set_code(row, k, batch, sign | magnitude);
            let value = E2m1::from_bits(sign | magnitude).to_f32();
            match fails(Some(changed), shrinker) {
                Some(true) => failing.push(value),
                Some(false) => passing.push(value),
                None => {}
            }
        }
        if !failing.is_empty() && !passing.is_empty() {
            found.push(format!(
                "{name}[{row}, {k}, {batch}]: fails with FP4 values {failing:?}, passes with {passing:?}: the failure depends on which FP4 codes are read"
            ));
        }
        // NaN is left out: a NaN scale makes the expected output NaN, which any kernel that
        // propagates NaN matches. A scale is named only where its value matters: 1.0 passes and
        // another class fails, or the sign bit changes the outcome.
        let classes = [
            ("1.0", E4M3_ONE_CODE),
            ("1.0 with the sign bit set", 0xB8),
            ("subnormal (2^-9)", 0x01),
            ("the largest (448)", 0x7E),
        ];
        let outcomes: Vec<(&str, Option<bool>)> = classes
            .iter()
            .map(|&(class, byte)| {
                let mut changed = inputs.clone();
                operands_mut(&mut changed)[i]
                    .1
                    .set_scale(row, k, batch, byte);
                (class, fails(Some(changed), shrinker))
            })
            .collect();
        let failing: Vec<&str> = outcomes
            .iter()
            .filter(|o| o.1 == Some(true))
            .map(|o| o.0)
            .collect();
        let passing: Vec<&str> = outcomes
            .iter()
            .filter(|o| o.1 == Some(false))
            .map(|o| o.0)
            .collect();
        let one_passes = outcomes[0].1 == Some(false);
        let sign_matters = outcomes[0].1 != outcomes[1].1;
        if (one_passes && !failing.is_empty()) || sign_matters {
            found.push(format!(
                "the scale of {name}[{row}, {k}, {batch}]: fails when it is {}, passes when it is {}: the failure depends on {}",
                failing.join(", "),
                passing.join(", "),
                if sign_matters { "the scale's sign bit (tensor cores ignore it)" } else { "the scale's value" }
            ));
        }
    }
    if found.is_empty() {
        found.push(
            "no single change of position, sign, FP4 code or scale class made it pass".into(),
        );
    }
    found
}

/// The single input that, read differently, gives the observed output element: each nonzero
/// FP4 code read as each other code, then each of their scales read as each other scale byte.
fn explain(inputs: &DualGemmInputs, order: KOrder, index: usize, observed: f16) -> Option<String> {
    let output_of = |changed: &DualGemmInputs| {
        problem_reference(&ProblemInputs::DualGemm(changed.clone()), order).expected[index]
    };
    let same = |x: f16| x.to_bits() == observed.to_bits() || (x.is_nan() && observed.is_nan());
    let positions = nonzero_positions(inputs);
    if positions.len() > 64 {
        return None; // not shrunk far enough for a search input by input
    }
    for &(i, row, kk, batch) in &positions {
        let (name, matrix) = operands(inputs)[i];
        let was = matrix.value(row, kk, batch);
        for code in 0..16u8 {
            if code == was.to_bits() {
                continue;
            }
            let mut changed = inputs.clone();
            operands_mut(&mut changed)[i]
                .1
                .set_code(row, kk, batch, code);
            if same(output_of(&changed)) {
                return Some(format!(
                    "observed = expected with {name}[{row}, {kk}, {batch}] read as {} instead of {}",
                    E2m1::from_bits(code).to_f32(),
                    was.to_f32()
                ));
            }
        }
    }
    for &(i, row, kk, batch) in &positions {
        let (name, matrix) = operands(inputs)[i];
        let was = matrix.scale(row, kk, batch);
        for byte in 0..=255u8 {
            if byte == was.to_bits() {
                continue;
            }
            let mut changed = inputs.clone();
            operands_mut(&mut changed)[i]
                .1
                .set_scale(row, kk, batch, byte);
            if same(output_of(&changed)) {
                return Some(format!(
                    "observed = expected with the scale of {name}[{row}, {kk}, {batch}] read as {} (0x{byte:02X}) instead of {} (0x{:02X})",
                    E4m3::from_bits(byte).to_f32_as_unsigned_scale(),
                    was.to_f32_as_unsigned_scale(),
                    was.to_bits()
                ));
            }
        }
    }
    None
}

/// The certificate's table of a shrunk case.
pub fn markdown(shrunk: &ShrunkData) -> String {
    let mut md = format!(
        "\n## Minimal data: the minimal case's data shrunk further ({} kernel runs; the inputs \
         named in the diagnosis and below are this case's)\n\nShape {}; {} nonzero input(s){}\n",
        shrunk.runs,
        shrunk.shape,
        shrunk.nonzero.len(),
        if shrunk.nonzero.is_empty() {
            ": the failure does not depend on the data (every FP4 code 0 still fails)."
        } else {
            ":\n\n| input | FP4 code | value | scale byte | scale |\n|---|---|---|---|---|"
        }
    );
    for input in &shrunk.nonzero {
        md.push_str(&format!(
            "| {} | 0x{:X} | {} | 0x{:02X} | {} |\n",
            input.position, input.code, input.value, input.scale_byte, input.scale
        ));
    }
    md.push_str(&format!(
        "\n{}: expected {}, observed {}{}\n",
        shrunk.element,
        shrunk.expected,
        shrunk.observed,
        shrunk
            .explanation
            .as_ref()
            .map_or(String::new(), |e| format!("; {e}"))
    ));
    if !shrunk.localization.is_empty() {
        md.push_str("\nWhat it depends on (each change run and judged):\n\n");
        for line in &shrunk.localization {
            md.push_str(&format!("- {line}\n"));
        }
    }
    md
}
