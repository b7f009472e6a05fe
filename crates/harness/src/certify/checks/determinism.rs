//! Checks beyond the outputs of single runs, for kernels that run on a GPU: the
//! determinism check (the sample of cases they share is [`super::fixed_cases::check_cases`]). compute-sanitizer is in
//! [`super::sanitize`].
//!
//! The determinism check runs each sampled case with shared memory filled with 0x00 just before
//! the launch, then again ([`RunConditions`]): the same way, the same with other work running on
//! the GPU, and with shared memory filled with 0xFF. Any bit that differs from the first run is a
//! finding: "nondeterministic output" when the output changes from run to run or under load,
//! "reads shared memory it never wrote" when it follows what shared memory held before the
//! launch (checked by a second 0xFF run).
//!
//! Both checks fail closed: a checked run that fails (raises, crashes, hangs) is a finding, not a
//! note, because a kernel can tell a checked run from a plain one (compute-sanitizer shows itself
//! in the process; the determinism check repeats inputs) and fail on purpose to skip it.

use super::fixed_cases::check_cases;
use crate::kernels::{KernelUnderTest, RunConditions};
use nvfp4_model::problem::POISON;
use serde::{Deserialize, Serialize};

/// Every run starts with shared memory filled, so that no run sees what the one before left
/// there: the first with 0x00, then the same again, the same under other work, and with 0xFF.
const FIRST: RunConditions = RunConditions {
    shared_memory_fill: Some(0x00),
    concurrent_load: false,
};
pub const RERUNS: [RunConditions; 3] = [
    FIRST,
    RunConditions {
        shared_memory_fill: Some(0x00),
        concurrent_load: true,
    },
    RunConditions {
        shared_memory_fill: Some(0xFF),
        concurrent_load: false,
    },
];

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeterminismReport {
    pub cases: usize,
    pub runs_per_case: usize,
    pub seconds: f64,
    /// The manifest declares the kernel nondeterministic: nothing was run.
    pub skipped_as_declared: bool,
    /// A run that failed (crashed, hung) instead of giving an output; it is also a finding.
    pub note: Option<String>,
    pub findings: Vec<DeterminismFinding>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeterminismFinding {
    /// "nondeterministic output", "reads shared memory it never wrote", or [`COULD_NOT_RUN`].
    pub verdict: String,
    pub case: String,
    pub conditions: String,
    /// The first differing element, its bits in the first run and in this one, and how many
    /// elements differ; for a run that failed, how it failed.
    pub first_difference: String,
    pub elements_differing: usize,
}

/// The verdict of a checked run that failed instead of giving an output.
pub const COULD_NOT_RUN: &str =
    "the determinism check could not run: the kernel failed in a checked run, and a check that cannot run does not pass";

/// Whether a kernel whose bits moved under `conditions` reads shared memory it never wrote: they
/// moved under another fill than the first run's, the same way again when that was repeated,
/// and in no rerun with the first run's fill.
fn verdict(conditions: RunConditions, moved_without_fill: bool, reproduced: bool) -> &'static str {
    if conditions.shared_memory_fill != FIRST.shared_memory_fill
        && !moved_without_fill
        && reproduced
    {
        "reads shared memory it never wrote: its output follows what shared memory held before the launch"
    } else {
        "nondeterministic output"
    }
}

/// Runs `cases` sampled cases of `kernel` once, then under each of [`RERUNS`], and compares bits.
pub fn determinism(kernel: &dyn KernelUnderTest, cases: usize, seed: u64) -> DeterminismReport {
    let started = std::time::Instant::now();
    let mut report = DeterminismReport {
        cases: 0,
        runs_per_case: 1 + RERUNS.len(),
        seconds: 0.0,
        skipped_as_declared: kernel.declares_nondeterminism(),
        note: None,
        findings: Vec::new(),
    };
    if report.skipped_as_declared {
        return report;
    }
    'cases: for (spec, case) in check_cases(kernel, cases, seed ^ 0xD5) {
        let (m, n, l) = case.inputs.output_dims();
        let run = |conditions: RunConditions| {
            let mut output = vec![POISON; m * n * l];
            kernel
                .run_under(&case, conditions, &mut output)
                .map(|()| output)
        };
        let name = format!("{} {} seed {}", spec.shape, spec.dist.name(), spec.seed);
        let failed = |report: &mut DeterminismReport,
                      conditions: RunConditions,
                      failure: crate::kernels::KernelFailure| {
            report.note = Some(format!("{name}, {}: {failure}", conditions.describe()));
            report.findings.push(DeterminismFinding {
                verdict: COULD_NOT_RUN.to_string(),
                case: name.clone(),
                conditions: conditions.describe(),
                first_difference: format!("{failure}"),
                elements_differing: 0,
            });
        };
        let first = match run(FIRST) {
            Ok(output) => output,
            Err(failure) => {
                failed(&mut report, FIRST, failure);
                break 'cases;
            }
        };
        report.cases += 1;
        let mut differences = Vec::new();
        for conditions in RERUNS {
            let output = match run(conditions) {
                Ok(output) => output,
                Err(failure) => {
                    failed(&mut report, conditions, failure);
                    break 'cases;
                }
            };
            let differing: Vec<usize> = (0..first.len())
                .filter(|&i| first[i].to_bits() != output[i].to_bits())
                .collect();
            if let Some(&i) = differing.first() {
                differences.push((conditions, i, output, differing.len()));
            }
        }
        let moved_without_fill = differences
            .iter()
            .any(|(c, ..)| c.shared_memory_fill == FIRST.shared_memory_fill);
        for (conditions, i, output, count) in differences {
            // A fill that moved the bits is repeated: stale shared memory moves them the same way.
            let reproduced = conditions.shared_memory_fill != FIRST.shared_memory_fill
                && run(conditions).is_ok_and(|again| {
                    again
                        .iter()
                        .map(|x| x.to_bits())
                        .eq(output.iter().map(|x| x.to_bits()))
                });
            let now = output[i];
            let (row, col, batch) = (i / (n * l), (i / l) % n, i % l);
            report.findings.push(DeterminismFinding {
                verdict: verdict(conditions, moved_without_fill, reproduced).to_string(),
                case: name.clone(),
                conditions: conditions.describe(),
                first_difference: format!(
                    "c[{row}, {col}, {batch}] was 0x{:04X} ({}) in the first run, 0x{:04X} ({}) here",
                    first[i].to_bits(),
                    first[i],
                    now.to_bits(),
                    now
                ),
                elements_differing: count,
            });
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// How a certificate's `checks_skipped` begins where no compute-sanitizer was installed.
pub const SANITIZER_NOT_FOUND: &str = "compute-sanitizer: not found";

/// Both checks for a kernel that runs on a GPU and passed its preparation: compute-sanitizer
/// on `sanitize_cases` cases per tool (its logs under `scratch`), the determinism check on
/// `determinism_cases`; 0 skips one. Returns (sanitizer, determinism, why one did not run).
pub fn run_checks(
    kernel: &dyn KernelUnderTest,
    sanitize_cases: usize,
    determinism_cases: usize,
    seed: u64,
    scratch: &std::path::Path,
) -> (
    Option<super::sanitize::SanitizerReport>,
    Option<DeterminismReport>,
    Vec<String>,
) {
    let mut skipped = Vec::new();
    if !kernel.runs_on_gpu() {
        return (None, None, skipped);
    }
    let determinism = (determinism_cases > 0).then(|| {
        eprintln!(
            "{}: determinism check ({determinism_cases} cases)",
            kernel.name()
        );
        determinism(kernel, determinism_cases, seed)
    });
    if determinism_cases == 0 {
        skipped.push("determinism check (--determinism 0)".to_string());
    }
    // The two ways the tool does not run, both decided here before any worker starts, by the
    // operator's options and machine, never by the kernel: they are recorded, not failures
    // (src/cli/bench.rs says why bench still trusts such a certificate). A tool that is found and
    // then cannot run is a failure (super::sanitize).
    let sanitizer = match (sanitize_cases, super::sanitize::find_sanitizer()) {
        (0, _) => {
            skipped.push("compute-sanitizer (--sanitize 0)".to_string());
            None
        }
        (_, None) => {
            skipped.push(format!(
                "{SANITIZER_NOT_FOUND} (put the CUDA toolkit's bin on PATH, or name it with NVFP4_ORACLE_SANITIZER)"
            ));
            None
        }
        (cases, Some(tool)) => {
            eprintln!(
                "{}: compute-sanitizer memcheck, racecheck, synccheck, initcheck ({cases} cases each)",
                kernel.name()
            );
            Some(super::sanitize::sanitize(
                kernel, cases, &tool, scratch, seed,
            ))
        }
    };
    (sanitizer, determinism, skipped)
}

/// The certificate's section on these checks.
pub fn markdown(
    sanitizer: Option<&super::sanitize::SanitizerReport>,
    determinism: Option<&DeterminismReport>,
    skipped: &[String],
) -> String {
    if sanitizer.is_none() && determinism.is_none() && skipped.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n## Beyond the outputs\n\n");
    for reason in skipped {
        md.push_str(&format!("- not run: {reason}\n"));
    }
    if let Some(report) = sanitizer {
        md.push_str(&format!(
            "- compute-sanitizer, {} sampled cases per tool:\n",
            report.cases
        ));
        for run in &report.tools {
            md.push_str(&format!(
                "  - {}: {} cases, {:.1} s, {}{}\n",
                run.tool.name(),
                run.cases_run,
                run.seconds,
                if run.findings.is_empty() {
                    "no finding".to_string()
                } else {
                    format!("**{} finding(s)**", run.findings.len())
                },
                run.note
                    .as_ref()
                    .map_or(String::new(), |n| format!(" ({n})"))
            ));
            for f in &run.findings {
                md.push_str(&format!(
                    "    - **{}**{}{} ({} reports)\n\n```\n{}\n```\n",
                    f.verdict,
                    f.kernel
                        .as_ref()
                        .map_or(String::new(), |k| format!(" in {k}")),
                    f.location
                        .as_ref()
                        .map_or(String::new(), |l| format!(" at {l}")),
                    f.count,
                    f.report
                ));
            }
        }
    }
    if let Some(report) = determinism {
        if report.skipped_as_declared {
            md.push_str(
                "- determinism: not checked, the manifest declares the kernel nondeterministic\n",
            );
        } else {
            md.push_str(&format!(
                "- determinism: {} cases, {} runs each (shared memory 0x00 first, again, under load, shared memory 0xFF), {:.1} s: {}{}\n",
                report.cases,
                report.runs_per_case,
                report.seconds,
                if report.findings.is_empty() {
                    "the same bits every run".to_string()
                } else {
                    format!("**{} finding(s)**", report.findings.len())
                },
                report.note.as_ref().map_or(String::new(), |n| format!(" ({n})"))
            ));
            for f in &report.findings {
                let differing = if f.verdict == COULD_NOT_RUN {
                    String::new()
                } else {
                    format!(" ({} elements differ)", f.elements_differing)
                };
                md.push_str(&format!(
                    "    - **{}**: {}, {}: {}{differing}\n",
                    f.verdict, f.case, f.conditions, f.first_difference
                ));
            }
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{KernelCase, KernelFailure};
    use half::f16;

    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fake GPU kernel: writes 1.0 everywhere, except where `flaw` says otherwise.
    struct Fake {
        flaw: fn(RunConditions, usize) -> Option<f16>,
        calls: AtomicUsize,
        declared: bool,
        /// Raises on calls under these conditions (it recognises a checked run).
        raises_under: Option<fn(RunConditions, usize) -> bool>,
    }

    impl KernelUnderTest for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn is_deliberately_broken(&self) -> bool {
            true
        }
        fn declares_nondeterminism(&self) -> bool {
            self.declared
        }
        fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
            self.run_under(case, RunConditions::default(), output)
        }
        fn run_under(
            &self,
            _case: &KernelCase,
            conditions: RunConditions,
            output: &mut [f16],
        ) -> Result<(), KernelFailure> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            if self
                .raises_under
                .is_some_and(|raises| raises(conditions, call))
            {
                return Err(KernelFailure::Raised("RuntimeError: not today".into()));
            }
            output.fill(f16::ONE);
            if let Some(value) = (self.flaw)(conditions, call) {
                output[7] = value;
            }
            Ok(())
        }
    }

    fn check(flaw: fn(RunConditions, usize) -> Option<f16>) -> DeterminismReport {
        let fake = Fake {
            flaw,
            calls: AtomicUsize::new(0),
            declared: false,
            raises_under: None,
        };
        determinism(&fake, 2, 1)
    }

    #[test]
    fn a_deterministic_kernel_has_no_finding() {
        let report = check(|_, _| None);
        assert_eq!(report.cases, 2);
        assert!(report.findings.is_empty(), "{:#?}", report.findings);
    }

    #[test]
    fn a_kernel_that_follows_stale_shared_memory_is_named() {
        let report = check(|c, _| (c.shared_memory_fill == Some(0xFF)).then_some(f16::NAN));
        assert_eq!(report.findings.len(), 2, "{:#?}", report.findings); // one per case
        let f = &report.findings[0];
        assert!(
            f.verdict.starts_with("reads shared memory it never wrote"),
            "{f:?}"
        );
        assert!(f.conditions.contains("0xFF"), "{f:?}");
        assert!(
            f.first_difference.starts_with("c[0, 7, 0] was 0x3C00"),
            "{f:?}"
        );
        assert_eq!(f.elements_differing, 1);
    }

    #[test]
    fn a_kernel_whose_bits_move_between_runs_is_nondeterministic() {
        // Differs on every other call, whatever the conditions (atomics in another order).
        let report = check(|_, call| (call % 2 == 1).then_some(f16::from_f32(1.0009766)));
        assert!(!report.findings.is_empty());
        assert!(
            report
                .findings
                .iter()
                .all(|f| f.verdict == "nondeterministic output"),
            "{:#?}",
            report.findings
        );
    }

    #[test]
    fn a_declared_nondeterministic_kernel_is_not_run() {
        let fake = Fake {
            flaw: |_, _| Some(f16::NAN),
            calls: AtomicUsize::new(0),
            declared: true,
            raises_under: None,
        };
        let report = determinism(&fake, 2, 1);
        assert!(report.skipped_as_declared && report.findings.is_empty());
        assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_kernel_that_fails_when_checked_fails_the_check() {
        // Raises in the repeated runs only (it saw these inputs before), or in the very first.
        let cases: [fn(RunConditions, usize) -> bool; 2] = [|_, call| call >= 1, |_, _| true];
        for raises in cases {
            let fake = Fake {
                flaw: |_, _| None,
                calls: AtomicUsize::new(0),
                declared: false,
                raises_under: Some(raises),
            };
            let report = determinism(&fake, 2, 1);
            assert_eq!(report.findings.len(), 1, "{:#?}", report.findings);
            let f = &report.findings[0];
            assert_eq!(f.verdict, COULD_NOT_RUN);
            assert!(f.first_difference.contains("not today"), "{f:?}");
            assert!(report.note.is_some());
            let md = markdown(None, Some(&report), &[]);
            assert!(
                md.contains("could not run") && !md.contains("elements differ"),
                "{md}"
            );
        }
    }
}
