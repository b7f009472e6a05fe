//! What a CI system reads of a certify run: JUnit XML (one test case per kernel and check, written
//! with `quick-junit`, the crate cargo-nextest writes its own with) and a short Markdown summary
//! fit for a pull-request comment.

use super::baseline::{verdict, Change};
use super::report::{Certificate, Status};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

fn failed(message: &str, description: String) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
    status.set_message(message).set_description(description);
    status
}

fn skipped(message: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::skipped();
    status.set_message(message);
    status
}

/// The test cases of one certificate: the campaign, the compute-sanitizer runs, the determinism
/// check and, with a baseline, the comparison.
fn test_cases(certificate: &Certificate, changes: Option<&[Change]>) -> Vec<TestCase> {
    let kernel = &certificate.kernel;
    let (words, _) = verdict(certificate);
    let mut cases = Vec::new();
    let campaign = match (&certificate.failure, certificate.status) {
        (_, Status::Unavailable) => skipped(
            certificate
                .unavailable_reason
                .as_deref()
                .unwrap_or("cannot run here"),
        ),
        (Some(failure), _) => failed(
            &failure.verdict,
            format!(
                "{}\nminimal case: {} {} seed {}\ndiagnosis: {}\nreplay: {}\nregenerate: {}",
                failure.verdict,
                failure.minimal_case.shape,
                failure.minimal_case.dist.name(),
                failure.minimal_case.seed,
                failure.diagnosis,
                failure.replay,
                failure.regenerate
            ),
        ),
        (None, Status::ScheduleDiffers) => failed(
            "correct within interval, schedule differs from declared",
            certificate
                .exact
                .as_ref()
                .and_then(|e| e.mismatch.as_ref())
                .map_or_else(String::new, |m| m.difference.clone()),
        ),
        _ => TestCaseStatus::success(),
    };
    let mut case = TestCase::new("campaign", campaign);
    case.set_classname(kernel.as_str())
        .set_assertions(certificate.coverage.cases)
        .set_time(std::time::Duration::from_secs_f64(
            certificate.elapsed_seconds.max(0.0),
        ))
        .set_system_out(format!("{words}: {} cases", certificate.coverage.cases));
    cases.push(case);
    // Why a check did not run: the certificate's words, or a CPU kernel's (it has none).
    let not_run = |tool: &str| {
        let reason = certificate
            .checks_skipped
            .iter()
            .find(|line| line.contains(tool))
            .cloned()
            .unwrap_or_else(|| "not run (a CPU kernel has no GPU checks)".to_string());
        skipped(&reason)
    };
    let sanitizer = match &certificate.sanitizer {
        None => not_run("sanitizer"),
        Some(report) => {
            let findings: Vec<String> = report
                .findings()
                .map(|f| format!("{} ({})", f.verdict, f.tool.name()))
                .collect();
            if findings.is_empty() {
                TestCaseStatus::success()
            } else {
                failed(&findings[0], findings.join("\n"))
            }
        }
    };
    let determinism = match &certificate.determinism {
        None => not_run("determinism"),
        Some(report) if report.findings.is_empty() => TestCaseStatus::success(),
        Some(report) => failed(
            &report.findings[0].verdict,
            report
                .findings
                .iter()
                .map(|f| format!("{}: {}", f.verdict, f.first_difference))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    };
    for (name, status) in [
        ("compute-sanitizer", sanitizer),
        ("determinism", determinism),
    ] {
        let mut case = TestCase::new(name, status);
        case.set_classname(kernel.as_str());
        cases.push(case);
    }
    if let Some(changes) = changes {
        let worse: Vec<&Change> = changes.iter().filter(|c| c.worse).collect();
        let status = if worse.is_empty() {
            TestCaseStatus::success()
        } else {
            failed(
                &worse[0].what,
                worse
                    .iter()
                    .map(|c| c.what.as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        };
        let mut case = TestCase::new("baseline", status);
        case.set_classname(kernel.as_str());
        cases.push(case);
    }
    cases
}

/// JUnit XML for the run: one test suite, its test cases per kernel. `baseline`: each kernel's
/// changes against the baseline, where it had one.
pub fn junit(certificates: &[Certificate], baseline: &[(String, Vec<Change>)]) -> String {
    let mut suite = TestSuite::new("nvfp4-oracle certify");
    for certificate in certificates {
        let changes = baseline
            .iter()
            .find(|(kernel, _)| *kernel == certificate.kernel)
            .map(|(_, changes)| changes.as_slice());
        suite.add_test_cases(test_cases(certificate, changes));
    }
    let mut report = Report::new("nvfp4-oracle");
    report.add_test_suite(suite);
    report
        .to_string()
        .unwrap_or_else(|err| format!("<!-- JUnit report could not be written: {err} -->"))
}

/// A Markdown summary for a pull-request comment: a line per kernel, its verdict and cases, and
/// what changed against the baseline.
pub fn summary(certificates: &[Certificate], baseline: &[(String, Vec<Change>)]) -> String {
    let worse = baseline
        .iter()
        .flat_map(|(_, changes)| changes)
        .filter(|c| c.worse)
        .count();
    let failed = certificates
        .iter()
        .filter(|c| c.status == Status::Failed)
        .count();
    let mut md = format!(
        "### nvfp4-oracle: {}\n\n",
        if failed > 0 {
            format!("{failed} of {} kernel(s) failed", certificates.len())
        } else if worse > 0 {
            format!("{worse} regression(s) against the baseline")
        } else {
            format!("{} kernel(s), no failure", certificates.len())
        }
    );
    md.push_str("| kernel | verdict | cases | minimal repro | against the baseline |\n");
    md.push_str("|---|---|---|---|---|\n");
    for certificate in certificates {
        let (words, _) = verdict(certificate);
        let repro = certificate.failure.as_ref().map_or("-".to_string(), |f| {
            format!(
                "{} {} seed {}",
                f.minimal_case.shape,
                f.minimal_case.dist.name(),
                f.minimal_case.seed
            )
        });
        let changes = baseline
            .iter()
            .find(|(kernel, _)| *kernel == certificate.kernel)
            .map_or("no baseline".to_string(), |(_, changes)| {
                if changes.is_empty() {
                    "unchanged".to_string()
                } else {
                    changes
                        .iter()
                        .map(|c| {
                            if c.worse {
                                format!("**{}**", c.what)
                            } else {
                                c.what.clone()
                            }
                        })
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            });
        md.push_str(&format!(
            "| {} | {words} | {} | {repro} | {changes} |\n",
            certificate.kernel, certificate.coverage.cases
        ));
    }
    md
}
