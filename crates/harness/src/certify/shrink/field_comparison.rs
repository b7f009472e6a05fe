//! What catches a planted bug in the block-scaled family: each library's own tolerance check
//! (`compare::field_checks`) or the oracle, on the same outputs. Regenerate the README's table
//! with `cargo run --release --example field_mutants`; `crates/harness/tests/harness/field_mutants.rs` checks it.
//!
//! Two configurations, the ones the libraries ship: NVFP4 x NVFP4 with the two-level recipe's
//! global scale (alpha = the product of the per-tensor scales, about 3e-6 for normal data) and
//! MXFP8 (e4m3) x MXFP4 with alpha 1; both with a bias and bf16 output. Three data sets each:
//! - `field`: standard normal operands quantized by the formats' quantizers, as the libraries'
//!   tests draw them;
//! - `edge`: the same with one K block's UE8M0 scales set to 0x00 (2^-127) in A and 0xFE
//!   (2^127) in B, a product of scales of 1 (MX only);
//! - `nan`: the same with one scale of A set to NaN (MX only).
//!
//! A check catches a bug when it fails on a data set where it passes the correct kernel: no
//! tolerance check passes the correct kernel on `nan` (the answer holds NaN, which fails them
//! all), so there only the oracle can judge.

use crate::error::Result;
use crate::kernels::scaled_mutants::{applies, run_scaled_kernel, AlphaFactors, ScaledBug};
use nvfp4_model::compare::field_checks::FieldCheck;
use nvfp4_model::model::scaled_gemm::scaled_gemm_reference;
use nvfp4_model::problem::scaled_gemm::{Epilogue, OperandFormat, OutDtype, ScaledGemmInputs};
use nvfp4_model::problem::scaled_generate::normal_values;
use nvfp4_model::quant::family::quantize_operand;
use nvfp4_model::quant::mx::MxScaling;

/// Rows of A, rows of B, K: small enough for a test, K deep enough for MX blocks and tails.
pub const SHAPE: (usize, usize, usize) = (64, 64, 512);

/// One data set of one configuration: the inputs and the unquantized reference.
pub struct DataSet {
    pub name: String,
    pub inputs: ScaledGemmInputs,
    pub factors: AlphaFactors,
    /// The product of the operands before quantization (with alpha's factors and the bias), for
    /// the cosine check; the dequantized product where the data were planted.
    pub unquantized: Vec<f64>,
}

const FIELD_CHECKS: usize = FieldCheck::ALL.len();

/// Which checks caught one bug, in [`FieldCheck::ALL`] order, then the oracle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantRow {
    pub bug: ScaledBug,
    pub field: [bool; FIELD_CHECKS],
    pub oracle: bool,
}

/// Every bug's row, and for each data set which checks pass the correct kernel (the four field
/// checks, then the oracle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MutantTable {
    pub rows: Vec<MutantRow>,
    pub correct: Vec<(String, [bool; FIELD_CHECKS + 1])>,
}

/// The data sets of both configurations, drawn from `seed`.
pub fn data_sets(seed: u64) -> Result<Vec<DataSet>> {
    let mut sets = Vec::new();
    for (name, a_format, b_format) in [
        ("nvfp4", OperandFormat::Nvfp4, OperandFormat::Nvfp4),
        ("mx", OperandFormat::Mxfp8E4m3, OperandFormat::Mxfp4),
    ] {
        let (m, n, k) = SHAPE;
        let a_values = normal_values(m * k, seed, 0);
        let b_values = normal_values(n * k, seed, 1);
        let a = quantize_operand(a_format, &a_values, m, k, MxScaling::Floor)?;
        let b = quantize_operand(b_format, &b_values, n, k, MxScaling::Floor)?;
        let factors = AlphaFactors {
            a: a.alpha_factor,
            b: b.alpha_factor,
        };
        let bias: Vec<f32> = normal_values(n, seed, 2).iter().map(|x| x * 0.05).collect();
        let inputs = ScaledGemmInputs::new(
            a.operand,
            b.operand,
            factors.a * factors.b,
            Some(bias.clone()),
            OutDtype::Bf16,
            Epilogue::F32,
        )?;
        let unquantized = (0..m * n)
            .map(|i| {
                let (row, col) = (i / n, i % n);
                let dot: f64 = (0..k)
                    .map(|kk| f64::from(a_values[row * k + kk]) * f64::from(b_values[col * k + kk]))
                    .sum();
                dot + f64::from(bias[col])
            })
            .collect();
        sets.push(DataSet {
            name: format!("{name}/field"),
            inputs: inputs.clone(),
            factors,
            unquantized,
        });
        if a_format.scale().map(|(_, block)| block) == Some(32) {
            let blocks = k / 32;
            let mut edge = inputs.clone();
            for row in 0..m {
                edge.a.scales[row * blocks + 3] = 0x00;
            }
            for row in 0..n {
                edge.b.scales[row * blocks + 3] = 0xFE;
            }
            let mut nan = inputs.clone();
            nan.a.scales[5 * blocks + 2] = 0xFF;
            for (label, planted) in [("edge", edge), ("nan", nan)] {
                let unquantized = scaled_gemm_reference(&planted).expected;
                sets.push(DataSet {
                    name: format!("{name}/{label}"),
                    inputs: planted,
                    factors,
                    unquantized,
                });
            }
        }
    }
    Ok(sets)
}

/// Runs the correct kernel and every bug on every data set, and says what caught each bug.
pub fn mutant_table(seed: u64) -> Result<MutantTable> {
    let sets = data_sets(seed)?;
    // Each data set's reference, and which checks pass the correct kernel there (the field
    // checks, then the oracle): a check only counts where it passes the correct kernel.
    let judged: Vec<_> = sets
        .iter()
        .map(|set| {
            let reference = scaled_gemm_reference(&set.inputs);
            let correct = run_scaled_kernel(&set.inputs, set.factors, None);
            let mut passes = [false; FIELD_CHECKS + 1];
            for (i, check) in FieldCheck::ALL.into_iter().enumerate() {
                passes[i] = check.passes(&correct, &reference.expected, &set.unquantized);
            }
            passes[FIELD_CHECKS] = reference.rejected(&correct).is_empty();
            (reference, passes)
        })
        .collect();
    let correct = sets
        .iter()
        .zip(&judged)
        .map(|(set, (_, passes))| (set.name.clone(), *passes))
        .collect();
    let mut rows = Vec::new();
    for bug in ScaledBug::ALL {
        let mut row = MutantRow {
            bug,
            field: [false; FIELD_CHECKS],
            oracle: false,
        };
        for (set, (reference, usable)) in sets.iter().zip(&judged) {
            let (a, b) = (set.inputs.a.format, set.inputs.b.format);
            let alpha_bug = matches!(
                bug,
                ScaledBug::AlphaTwice | ScaledBug::AlphaInFp16 | ScaledBug::AlphaFromWrongOperand
            );
            if !applies(bug, a, b) || (alpha_bug && set.inputs.alpha == 1.0) {
                continue;
            }
            let out = run_scaled_kernel(&set.inputs, set.factors, Some(bug));
            for (i, check) in FieldCheck::ALL.into_iter().enumerate() {
                if usable[i] && !check.passes(&out, &reference.expected, &set.unquantized) {
                    row.field[i] = true;
                }
            }
            if !reference.rejected(&out).is_empty() {
                row.oracle = true;
            }
        }
        rows.push(row);
    }
    Ok(MutantTable { rows, correct })
}

/// The table as Markdown: which data sets each check passes the correct kernel on, each bug,
/// and a total row.
pub fn render_table(table: &MutantTable) -> String {
    let rows = &table.rows;
    let mut text = String::from("| planted bug |");
    for check in FieldCheck::ALL {
        text += &format!(" {} |", check.name());
    }
    text += " nvfp4-oracle |\n|---|";
    text += &"---|".repeat(FieldCheck::ALL.len() + 1);
    text += "\n";
    let mark = |caught: bool| if caught { "caught" } else { "missed" };
    text += "| *correct kernel passes on* |";
    for i in 0..=FieldCheck::ALL.len() {
        let sets: Vec<&str> = table
            .correct
            .iter()
            .filter(|(_, passes)| passes[i])
            .map(|(name, _)| name.as_str())
            .collect();
        text += &format!(" {} |", sets.join(", "));
    }
    text += "\n";
    for row in rows {
        text += &format!("| {} |", row.bug.describe());
        for caught in row.field {
            text += &format!(" {} |", mark(caught));
        }
        text += &format!(" {} |\n", mark(row.oracle));
    }
    text += "| **caught** |";
    for i in 0..FieldCheck::ALL.len() {
        let count = rows.iter().filter(|r| r.field[i]).count();
        text += &format!(" {count} of {} |", rows.len());
    }
    let count = rows.iter().filter(|r| r.oracle).count();
    text += &format!(" {count} of {} |\n", rows.len());
    text
}
