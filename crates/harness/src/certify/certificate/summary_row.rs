//! A certificate in one row of the table `certify` prints: its status, cases, time, minimal
//! repro and diagnosis, in the words verify and the gate use.

use super::report::{verdict, Certificate, ExactOutcome};

impl Certificate {
    /// The table's header, its two lines.
    pub const SUMMARY_HEADER: &'static str =
        "| kernel | status | cases | time (s) | minimal repro | diagnosis |\n|---|---|---|---|---|---|";

    /// The certificate's row of the table under [`Certificate::SUMMARY_HEADER`].
    pub fn summary_row(&self) -> String {
        let (repro, diagnosis) = self.repro_and_diagnosis();
        format!(
            "| {} | {} | {} | {:.1} | {repro} | {diagnosis} |",
            self.kernel,
            self.status_in_words(),
            self.coverage.cases,
            self.elapsed_seconds
        )
    }

    /// The status in words, as verify and the gate say it; a kernel that declares no schedule
    /// under `--exact` is certified, and the words say why not exact.
    pub fn status_in_words(&self) -> String {
        match self.exact.as_ref().map(|e| e.outcome) {
            Some(ExactOutcome::NoScheduleDeclared) => {
                "certified (no schedule declared)".to_string()
            }
            _ => verdict(self).0.to_string(),
        }
    }

    /// The minimal repro (shape, distribution and, for a schedule difference, seed) and the
    /// diagnosis: of the failure, of the exact comparison, why the kernel could not run, or
    /// what the checks found; "-" where there is none.
    pub fn repro_and_diagnosis(&self) -> (String, String) {
        match (&self.failure, &self.exact) {
            (Some(f), _) => (
                format!("{} {}", f.minimal_case.shape, f.minimal_case.dist.name()),
                f.diagnosis.clone(),
            ),
            (None, Some(exact)) if exact.mismatch.is_some() => {
                let m = exact.mismatch.as_ref().expect("checked");
                (
                    format!(
                        "{} {} seed {}",
                        m.minimal_case.shape,
                        m.minimal_case.dist.name(),
                        m.minimal_case.seed
                    ),
                    format!(
                        "{}: first difference at {}; the first differing output matches: {}",
                        ExactOutcome::ScheduleDiffers.describe(),
                        m.difference,
                        if m.matching_schedules.is_empty() {
                            "no modelled schedule".to_string()
                        } else {
                            m.matching_schedules.join("; ")
                        }
                    ),
                )
            }
            (None, Some(exact)) => (
                "-".to_string(),
                format!(
                    "{}{}",
                    exact.outcome.describe(),
                    exact
                        .schedule_name
                        .as_ref()
                        .map_or(String::new(), |s| format!(
                            " ({s}; {} elements, {} ambiguous)",
                            exact.coverage.elements_compared, exact.coverage.ambiguous_elements
                        ))
                ),
            ),
            (None, None) => (
                "-".to_string(),
                self.unavailable_reason.clone().unwrap_or_else(|| {
                    let findings = self.check_findings();
                    if findings.is_empty() {
                        "-".to_string()
                    } else {
                        findings.join("; ")
                    }
                }),
            ),
        }
    }

    /// Where the kernel's output broke the contract every kernel meets (a wrong length, a
    /// write it must not make): the verdict's words. Not a verdict on the numerics: the kernel
    /// is unusable, like one that could not start.
    pub fn broken_contract(&self) -> Option<&str> {
        self.failure
            .as_ref()
            .map(|f| f.verdict.as_str())
            .filter(|v| v.starts_with("the kernel's output breaks the contract"))
    }
}
