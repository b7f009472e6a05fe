//! A failed campaign's report in the certificate: the failure, shrunk and diagnosed, in words,
//! and its minimal repro written as safetensors files that `nvfp4-oracle check` replays.

use super::campaign::{CampaignLimits, CaseSpec};
use super::failure::Failure;
use super::region::Region;
use super::shrink_data::ShrunkData;
use crate::error::Result;
use crate::kernels::KernelUnderTest;
use nvfp4_model::case_file::{fp16_bytes, CaseWriter};
use nvfp4_model::compare::diagnosis::{Diagnosis, Evidence};
use nvfp4_model::compare::identify::Identification;
use safetensors::Dtype;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailureReport {
    /// The failing case's index in campaign order (fixed cases first, then random ones).
    #[serde(default)]
    pub case_index: usize,
    pub first_case: CaseSpec,
    pub minimal_case: CaseSpec,
    pub shrink_steps: usize,
    /// "crashed", "hung", ... or the verdict's first line.
    pub verdict: String,
    pub failed_elements: usize,
    pub worst_ulps_outside: Option<u32>,
    pub failure_map: String,
    pub diagnosis: String,
    pub diagnosis_candidates: Vec<Evidence>,
    pub repro_case: PathBuf,
    pub repro_output: PathBuf,
    pub replay: String,
    /// Regenerates the minimal case's inputs and reference from its seed, byte for byte.
    pub regenerate: String,
    /// The minimal case's data shrunk further, and its case file.
    pub minimal_data: Option<ShrunkData>,
    pub repro_minimal_data: Option<PathBuf>,
    /// The kernel's output on the minimal data, beside its case file (certificates from before
    /// it was written have none).
    #[serde(default)]
    pub repro_minimal_output: Option<PathBuf>,
    /// Around the minimal case: each dimension's boundary, which dimensions the failure needs,
    /// in words and field by field (certificates from before it have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<Region>,
    /// The problem the kernel's output answers (or the nearest one and what it explains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identification: Option<Identification>,
    /// What the time bound after the first failure stopped before its end, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unfinished: Vec<String>,
}

impl FailureReport {
    /// The `check` command that replays the kernel's output on the minimal data, where both
    /// files were written.
    pub fn replay_minimal(&self) -> Option<String> {
        Some(format!(
            "nvfp4-oracle check --case {} --output {}",
            self.repro_minimal_data.as_ref()?.display(),
            self.repro_minimal_output.as_ref()?.display()
        ))
    }

    /// The report of a campaign's `failure`, its repro files (named from `stem`) written into
    /// `dir`: the minimal case with its reference and the kernel's output, and where the data
    /// was shrunk further, the minimal data and the kernel's output on it.
    pub fn written(
        kernel: &dyn KernelUnderTest,
        limits: &CampaignLimits,
        failure: Failure,
        stem: &str,
        dir: &Path,
    ) -> Result<FailureReport> {
        let minimal = &failure.minimal;
        let regenerate = regenerate_command(kernel.problem(), minimal.spec);
        let (m, n, l) = minimal.case.inputs.output_dims();
        let shape = nvfp4_model::problem::Shape {
            m,
            n,
            k: minimal.spec.shape.k,
            l,
        };
        let repro_case = dir.join(format!("{stem}-repro-case.safetensors"));
        let repro_output = dir.join(format!("{stem}-repro-output.safetensors"));
        let mut writer = CaseWriter::default();
        writer
            .problem_inputs(&minimal.case.inputs, minimal.case.padding_fill)
            .meta("distribution", minimal.spec.dist.name())
            .meta("seed", minimal.spec.seed)
            .meta(
                "blocked_padding_fill",
                format!("{:#04x}", minimal.case.padding_fill),
            );
        writer.reference(shape, &minimal.reference, limits.order_for(kernel));
        writer.write(&repro_case)?;
        CaseWriter::default()
            .tensor(
                "c",
                Dtype::F16,
                vec![shape.m, shape.n, shape.l],
                fp16_bytes(&minimal.output),
            )
            .meta("kernel", kernel.name())
            .write(&repro_output)?;
        let mut repro_minimal_output = None;
        let repro_minimal_data = match failure.data.as_ref().and_then(|d| d.inputs.as_ref()) {
            Some(inputs) => {
                let path = dir.join(format!("{stem}-repro-minimal-data.safetensors"));
                let problem = nvfp4_model::problem::ProblemInputs::DualGemm(inputs.clone());
                let reference =
                    nvfp4_model::model::problem_reference(&problem, limits.order_for(kernel));
                let mut writer = CaseWriter::default();
                writer
                    .problem_inputs(&problem, minimal.case.padding_fill)
                    .meta("shrunk_from_seed", minimal.spec.seed);
                writer.reference(inputs.shape, &reference, limits.order_for(kernel));
                writer.write(&path)?;
                if let Some(output) = failure.data.as_ref().and_then(|d| d.output.as_ref()) {
                    let output_path = dir.join(format!("{stem}-repro-minimal-output.safetensors"));
                    let (m, n, l) = problem.output_dims();
                    CaseWriter::default()
                        .tensor("c", Dtype::F16, vec![m, n, l], fp16_bytes(output))
                        .meta("kernel", kernel.name())
                        .write(&output_path)?;
                    repro_minimal_output = Some(output_path);
                }
                Some(path)
            }
            None => None,
        };
        let (verdict, failed_elements, worst, map) = match &minimal.result {
            Ok(v) => (
                v.render().lines().next().unwrap_or_default().to_string(),
                v.failed,
                v.worst.and_then(|w| w.ulps_outside),
                v.render(),
            ),
            Err(err) => (err.to_string(), 0, None, String::new()),
        };
        Ok(FailureReport {
            case_index: failure.case_index,
            first_case: failure.first,
            minimal_case: minimal.spec,
            shrink_steps: failure.shrink_steps,
            verdict,
            failed_elements,
            worst_ulps_outside: worst,
            failure_map: map,
            diagnosis: failure.diagnosis.as_ref().map_or_else(
                || match &minimal.result {
                    Err(err) => match super::failure_class::failure_class(err) {
                        Some(class) => format!("{err} ({class:?})"),
                        None => err.to_string(),
                    },
                    Ok(_) => "not diagnosed".to_string(),
                },
                |d| with_localization(d, failure.data.as_ref()),
            ),
            diagnosis_candidates: failure
                .diagnosis
                .map(|d| d.candidates.into_iter().take(3).collect())
                .unwrap_or_default(),
            replay: format!(
                "nvfp4-oracle check --case {} --output {}",
                repro_case.display(),
                repro_output.display()
            ),
            regenerate,
            repro_case,
            repro_output,
            minimal_data: failure.data,
            repro_minimal_data,
            repro_minimal_output,
            region: failure.region,
            identification: failure.identification,
            unfinished: failure.unfinished,
        })
    }
}

/// The Markdown lines of the failing region, the identified wrong problem and what the time
/// bound left unfinished, beside the minimal repro (none where the failure has none of them).
pub fn region_and_identification_lines(report: &FailureReport) -> String {
    let mut lines = String::new();
    if let Some(identification) = &report.identification {
        lines.push_str(&format!(
            "- wrong problem: **{}**\n",
            identification.sentence()
        ));
    }
    if let Some(region) = &report.region {
        let needs = region
            .needs
            .as_ref()
            .map_or(String::new(), |needs| format!("; {needs}"));
        let unfinished = if region.finished {
            ""
        } else {
            " (not every dimension checked in time)"
        };
        lines.push_str(&format!(
            "- failing region: {}{needs}{unfinished}\n",
            region.words
        ));
    }
    if !report.unfinished.is_empty() {
        lines.push_str(&format!(
            "- not finished within {} s of the first failing case: {}\n",
            super::time_bound::AFTER_FIRST_FAILURE.as_secs(),
            report.unfinished.join("; ")
        ));
    }
    lines
}

/// The command that regenerates a campaign case's inputs and reference from its seed: the same
/// generator the campaign ran, so its output is byte for byte the case the kernel saw.
pub fn regenerate_command(problem: nvfp4_model::problem::ProblemKind, spec: CaseSpec) -> String {
    let shape = spec.shape;
    format!(
        "nvfp4-oracle reference --problem {} --shape {}x{}x{}x{} --dist {} --seed {} --out case.safetensors",
        problem.name(),
        shape.m,
        shape.n,
        shape.k,
        shape.l,
        spec.dist.name(),
        spec.seed
    )
}

/// The diagnosis in one line; when no known class explains the failure, what the shrunk case
/// showed instead ("B1[0, 6, 0] read as -2 instead of -3", "depends on the batch").
fn with_localization(diagnosis: &Diagnosis, data: Option<&ShrunkData>) -> String {
    let summary = diagnosis.summary();
    if diagnosis.best.is_some() || diagnosis.unwritten > 0 {
        return summary;
    }
    // The single misread input that reproduces the output, if any, and what the failure was
    // found to depend on: an input read differently can reproduce an output without being the
    // cause (a sign-set scale acts as a negated FP4 code), and the dependency names the cause.
    let words = data.and_then(|data| {
        let depends = data
            .localization
            .iter()
            .find(|sentence| sentence.contains("depends on"));
        let parts: Vec<&str> = data
            .explanation
            .as_deref()
            .into_iter()
            .chain(depends.map(String::as_str))
            .collect();
        if parts.is_empty() {
            (!data.localization.is_empty()).then(|| data.localization.join("; "))
        } else {
            Some(parts.join("; "))
        }
    });
    match words {
        Some(words) => format!("{summary}: in the minimal data, {words}"),
        None => summary,
    }
}
