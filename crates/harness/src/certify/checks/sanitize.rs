//! NVIDIA compute-sanitizer around a sample of cases, for bugs that outputs do not show: races,
//! uninitialized reads and out-of-bounds reads that do not change a tested output still ship bugs. For each tool the
//! kernel gets a fresh worker started under `compute-sanitizer --tool T` (through
//! [`KernelUnderTest::under_tool`]), runs the sample, and shuts down; the tool's log is then read
//! into findings in words. The worker's environment and buffers are those of a plain run: every
//! tensor ends at unmapped memory (crates/harness/src/gpu/fenced.rs) in every run, so a kernel gains nothing by
//! behaving differently under the tool.

use super::fixed_cases::check_cases;
use super::tool_log::LogChannel;
use crate::kernels::{KernelUnderTest, ToolWrapper};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tool {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
}

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::Memcheck,
        Tool::Racecheck,
        Tool::Synccheck,
        Tool::Initcheck,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
            Tool::Synccheck => "synccheck",
            Tool::Initcheck => "initcheck",
        }
    }

    /// The tool's own options: no leak report (the worker frees at exit, which may not come),
    /// racecheck's analysis mode (one report per pair of source locations, not per thread).
    fn options(self) -> &'static [&'static str] {
        match self {
            Tool::Memcheck => &["--leak-check", "no"],
            Tool::Racecheck => &["--racecheck-report", "analysis"],
            Tool::Synccheck | Tool::Initcheck => &[],
        }
    }
}

/// Where compute-sanitizer is: `NVFP4_ORACLE_SANITIZER`, then `PATH`, then the CUDA toolkit.
pub fn find_sanitizer() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NVFP4_ORACLE_SANITIZER") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    let toolkit = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(|var| std::env::var_os(var).map(|dir| PathBuf::from(dir).join("bin")))
        .chain([PathBuf::from("/usr/local/cuda/bin")]);
    on_path
        .into_iter()
        .chain(toolkit)
        .map(|dir| dir.join("compute-sanitizer"))
        .find(|path| path.is_file())
}

/// One kind of report, with how often it came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SanitizerFinding {
    pub tool: Tool,
    /// In words: "shared-memory race between a write and a read of another thread".
    pub verdict: String,
    /// The kernel the tool named, and where ("file.cu:120"), when it gives them.
    pub kernel: Option<String>,
    pub location: Option<String>,
    /// Reports of this kind (racecheck: hazards).
    pub count: usize,
    /// The tool's first report of this kind, as it wrote it.
    pub report: String,
}

impl SanitizerFinding {
    /// A finding of the tool's run as a whole (its log cut short, the sample not run), not of
    /// one report in its log.
    fn of_run(tool: Tool, verdict: String, report: String) -> SanitizerFinding {
        SanitizerFinding {
            tool,
            verdict,
            kernel: None,
            location: None,
            count: 1,
            report,
        }
    }
}

/// A report compute-sanitizer makes on correct code, suppressed with its reason.
struct Suppression {
    tool: Tool,
    /// Part of the kernel name the tool reports, and of its report's first line.
    kernel_contains: &'static str,
    headline_contains: &'static str,
    #[allow(dead_code)] // documentation: why this report is not a finding
    reason: &'static str,
}

/// None so far: the H100 runs in results/sanitize/ found no report on the five Hopper
/// variants. A suppression names the tool, the kernel, the report and the reason.
const SUPPRESSIONS: &[Suppression] = &[];

/// The findings in a compute-sanitizer log (whether the log can be trusted is
/// [`super::tool_log::audit`]'s question).
pub fn parse_log(tool: Tool, log: &str) -> Vec<SanitizerFinding> {
    let blocks = super::tool_log::outline(log).blocks;
    let mut findings: BTreeMap<(String, Option<String>, Option<String>), SanitizerFinding> =
        BTreeMap::new();
    for block in blocks.into_iter().filter(|b| !b.is_empty()) {
        let headline = block[0];
        let Some(verdict) = verdict(tool, headline, &block) else {
            continue;
        };
        let at = block
            .iter()
            .find_map(|l| l.strip_prefix("at "))
            .or_else(|| headline.split(" access at ").nth(1));
        // "kernel+0x1a70 in file.cu:18 [N hazards]" -> (kernel, "file.cu:18")
        let code_and_place = |at: &str| {
            let (code, place) = at.split_once(" in ").unwrap_or((at, ""));
            let kernel = code.split('+').next().unwrap_or(code).trim().to_string();
            let place = place.split(" [").next().unwrap_or(place).trim().to_string();
            (kernel, (!place.is_empty()).then_some(place))
        };
        let (kernel, mut location) = match at {
            Some(at) => {
                let (kernel, place) = code_and_place(at);
                (Some(kernel), place)
            }
            None => (None, None),
        };
        // A race names both sides: where the write is, and where the first racing read is.
        if let (Some(write), Some(other)) = (&location, block.get(1)) {
            if let Some((_, (_, Some(read)))) = other
                .split_once(" access at ")
                .map(|(kind, at)| (kind, code_and_place(at)))
            {
                location = Some(format!("{write} and {read}"));
            }
        }
        let suppressed = SUPPRESSIONS.iter().any(|s| {
            s.tool == tool
                && kernel.as_deref().unwrap_or("").contains(s.kernel_contains)
                && headline.contains(s.headline_contains)
        });
        if suppressed {
            continue;
        }
        // racecheck: "[N hazards]" after each access that races with the write.
        let hazards: usize = block
            .iter()
            .filter_map(|l| {
                let (_, tail) = l.rsplit_once('[')?;
                tail.strip_suffix(" hazards]")
                    .or_else(|| tail.strip_suffix(" hazard]"))?
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .sum();
        let hazards = hazards.max(1);
        findings
            .entry((verdict.clone(), kernel.clone(), location.clone()))
            .and_modify(|f| f.count += hazards)
            .or_insert(SanitizerFinding {
                tool,
                verdict,
                kernel,
                location,
                count: hazards,
                report: block.join("\n"),
            });
    }
    findings.into_values().collect()
}

/// A report's first line in words; None for what is not a finding about the kernel (host API
/// errors, the tool's own notices).
fn verdict(tool: Tool, headline: &str, block: &[&str]) -> Option<String> {
    let lower = headline.to_lowercase();
    let access = |text: &str| {
        if text.contains("write") {
            "write"
        } else {
            "read"
        }
    };
    let space = |text: &str| {
        if text.contains("__shared__") {
            "shared-memory"
        } else if text.contains("__local__") {
            "local-memory"
        } else {
            "global"
        }
    };
    if lower.contains("race reported between") {
        let text = block.join(" ").to_lowercase();
        let kinds: Vec<&str> = text
            .split(" access at ")
            .filter_map(|part| part.split_whitespace().last())
            .collect();
        let first = kinds.first().copied().unwrap_or("write");
        let second = kinds.get(1).copied().unwrap_or("read");
        let (a, b) = (access(first), access(second));
        return Some(if a == b {
            format!("shared-memory race between two {a}s of different threads")
        } else {
            "shared-memory race between a write and a read of another thread".to_string()
        });
    }
    if lower.starts_with("invalid ") {
        return Some(format!(
            "out-of-bounds {} {}",
            space(headline),
            access(&lower)
        ));
    }
    if lower.starts_with("misaligned") {
        return Some(format!("misaligned {} {}", space(headline), access(&lower)));
    }
    if lower.starts_with("uninitialized") {
        return Some(format!("uninitialized {} read", space(headline)));
    }
    if tool == Tool::Synccheck || lower.contains("barrier") || lower.contains("divergent") {
        return Some(format!("barrier misuse: {headline}"));
    }
    if lower.starts_with("program hit") || lower.contains("api call") {
        return None; // host API errors, reported elsewhere if they matter
    }
    Some(format!("compute-sanitizer {}: {headline}", tool.name()))
}

/// What the sanitizer runs found for one kernel.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SanitizerReport {
    pub cases: usize,
    pub tools: Vec<ToolRun>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolRun {
    pub tool: Tool,
    pub seconds: f64,
    pub cases_run: usize,
    /// Why the tool could not run the cases, or what went wrong while it did (a crash under
    /// memcheck usually comes with a finding that explains it).
    pub note: Option<String>,
    pub findings: Vec<SanitizerFinding>,
}

impl SanitizerReport {
    pub fn findings(&self) -> impl Iterator<Item = &SanitizerFinding> {
        self.tools.iter().flat_map(|t| &t.findings)
    }
}

/// Runs `cases` sample cases of `kernel` under each tool. `scratch` holds the FIFOs the tools
/// write their logs into ([`super::tool_log::LogChannel`]), read by this process as they write,
/// and then the logs as read, as files.
///
/// Fail-closed: a tool run that could not start, crashed, raised, hung or was cut short is a
/// finding, and so is a log that does not read as the tool wrote it. A kernel that makes the
/// checked runs fail (it can tell them apart) fails the certificate instead of skipping a check.
pub fn sanitize(
    kernel: &dyn KernelUnderTest,
    cases: usize,
    sanitizer: &Path,
    scratch: &Path,
    seed: u64,
) -> SanitizerReport {
    let sample = check_cases(kernel, cases, seed);
    let mut report = SanitizerReport {
        cases: sample.len(),
        tools: Vec::new(),
    };
    for tool in Tool::ALL {
        let started = std::time::Instant::now();
        let mut run = ToolRun {
            tool,
            seconds: 0.0,
            cases_run: 0,
            note: None,
            findings: Vec::new(),
        };
        let name = format!("{}-{}.log", kernel.name(), tool.name());
        match LogChannel::open(scratch, &name) {
            Err(err) => {
                run.note = Some(format!(
                    "could not make its log's FIFO in {}: {err}",
                    scratch.display()
                ));
            }
            Ok(channel) => {
                let ran_to_end =
                    run_tool(kernel, tool, sanitizer, channel.path(), &sample, &mut run);
                // The worker is gone (finish, or dropped after a failure): every writer the
                // sandbox held has closed the FIFO.
                let captured = channel.finish(super::tool_log::DRAIN_WAIT);
                // Kept for the reader, now that nothing of the kernel's is left to touch it.
                let _ = std::fs::write(scratch.join(&name), &captured.text);
                run.findings = parse_log(tool, &captured.text);
                run.findings.extend(
                    super::tool_log::audit(&captured, ran_to_end)
                        .into_iter()
                        .map(|verdict| SanitizerFinding::of_run(tool, verdict, String::new())),
                );
            }
        }
        if run.note.is_some() || run.cases_run < sample.len() {
            let verdict = format!(
                "compute-sanitizer {} could not run the sample ({} of {} cases ran): a check \
                 that cannot run does not pass",
                tool.name(),
                run.cases_run,
                sample.len()
            );
            let note = run.note.clone().unwrap_or_default();
            run.findings
                .push(SanitizerFinding::of_run(tool, verdict, note));
        }
        run.seconds = started.elapsed().as_secs_f64();
        report.tools.push(run);
    }
    report
}

/// Runs the sample in a fresh worker under `tool`, its log going to `log`; whether every case
/// ran and the worker was then let exit (so that the tool wrote its summary). What went wrong
/// goes into `run.note`.
fn run_tool(
    kernel: &dyn KernelUnderTest,
    tool: Tool,
    sanitizer: &Path,
    log: &Path,
    sample: &[(super::campaign::CaseSpec, crate::kernels::KernelCase)],
    run: &mut ToolRun,
) -> bool {
    let mut args: Vec<String> = [
        "--tool",
        tool.name(),
        "--target-processes",
        "all",
        "--report-api-errors",
        "no",
        "--print-limit",
        &super::tool_log::PRINT_LIMIT.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(tool.options().iter().map(|s| s.to_string()))
    .collect();
    args.extend(["--log-file".to_string(), log.display().to_string()]);
    let wrapper = ToolWrapper {
        program: sanitizer.to_path_buf(),
        args,
        slowdown: 20,
    };
    // Every GPU kernel runs in a worker; one that did not could not be checked, which fails.
    let Some(wrapped) = kernel.under_tool(&wrapper) else {
        run.note = Some("this kernel does not run in a worker process".into());
        return false;
    };
    if let Err(err) = wrapped.prepare() {
        run.note = Some(format!("could not start under {}: {err}", tool.name()));
        return false;
    }
    for (spec, case) in sample {
        let (m, n, l) = case.inputs.output_dims();
        let mut output = vec![nvfp4_model::problem::POISON; m * n * l];
        if let Err(failure) = wrapped.run(case, &mut output) {
            run.note = Some(format!(
                "case {} {} seed {}: {}",
                spec.shape,
                spec.dist.name(),
                spec.seed,
                failure
            ));
            break; // a crash under the tool leaves the context unusable
        }
        run.cases_run += 1;
    }
    // Lets the worker exit, so that the tool writes what it saw (a crash's report included).
    wrapped.finish();
    run.note.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    const RACE: &str = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at nvfp4_dual_gemm_race_missing_barrier+0x1f40 in kernels/test/../hopper/common.cuh:61
=========     and Read access at nvfp4_dual_gemm_race_missing_barrier+0x2a80 in kernels/hopper/baseline.cu:162 [8192 hazards]
=========
========= Error: Race reported between Write access at nvfp4_dual_gemm_race_missing_barrier+0x1f40 in kernels/hopper/common.cuh:61
=========     and Read access at nvfp4_dual_gemm_race_missing_barrier+0x2a80 in kernels/hopper/baseline.cu:162 [4096 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
";

    const OOB: &str = "\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at nvfp4_dual_gemm_oob_read_unused+0x3c10 in kernels/test/oob_read_unused.cu:17
=========     by thread (0,0,0) in block (1,1,0)
=========     Address 0x7f3a5e001000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a5e000000 of size 4096 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: [0x2f1d3] in libcuda.so.1
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to \"unspecified launch failure\" on CUDA API call to cuStreamSynchronize.
=========
========= ERROR SUMMARY: 2 errors
";

    #[test]
    fn a_race_report_becomes_one_finding_with_its_hazards_counted() {
        let findings = parse_log(Tool::Racecheck, RACE);
        assert_eq!(findings.len(), 2, "{findings:#?}"); // two distinct write locations
        let total: usize = findings.iter().map(|f| f.count).sum();
        assert_eq!(total, 8192 + 4096);
        let f = &findings[0];
        assert_eq!(
            f.verdict,
            "shared-memory race between a write and a read of another thread"
        );
        assert_eq!(
            f.kernel.as_deref(),
            Some("nvfp4_dual_gemm_race_missing_barrier")
        );
        assert!(
            f.location
                .as_deref()
                .unwrap()
                .ends_with("common.cuh:61 and kernels/hopper/baseline.cu:162"),
            "{f:?}"
        );
    }

    #[test]
    fn racecheck_without_line_information_counts_every_racing_read() {
        // As the H100 printed it for hopper-test-race (results/sanitize/logs/).
        let log = "\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at nvfp4_dual_gemm_race_missing_barrier+0x14d0
=========     and Read access at nvfp4_dual_gemm_race_missing_barrier+0x2300 [4096 hazards]
=========     and Read access at nvfp4_dual_gemm_race_missing_barrier+0x76c0 [4352 hazards]
========= 
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
";
        let findings = parse_log(Tool::Racecheck, log);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].count, 4096 + 4352);
        assert_eq!(
            findings[0].kernel.as_deref(),
            Some("nvfp4_dual_gemm_race_missing_barrier")
        );
        assert_eq!(findings[0].location, None);
    }

    #[test]
    fn an_out_of_bounds_read_is_named_and_host_api_errors_are_not_findings() {
        let findings = parse_log(Tool::Memcheck, OOB);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].verdict, "out-of-bounds global read");
        assert_eq!(
            findings[0].location.as_deref(),
            Some("kernels/test/oob_read_unused.cu:17")
        );
        assert!(findings[0]
            .report
            .contains("1 bytes after the nearest allocation"));
    }

    #[test]
    fn uninitialized_reads_and_barrier_errors_are_named() {
        let log = "\
========= Uninitialized __global__ memory read of size 4 bytes
=========     at k+0x10 in a.cu:3
=========
========= Barrier error detected. Divergent thread(s) in warp
=========     at k+0x20 in a.cu:9
";
        let init = parse_log(Tool::Initcheck, log);
        assert_eq!(init[1].verdict, "uninitialized global read", "{init:#?}");
        let sync = parse_log(Tool::Synccheck, log);
        assert!(sync
            .iter()
            .any(|f| f.verdict.starts_with("barrier misuse: Barrier error")));
    }

    #[test]
    fn a_clean_log_has_no_findings() {
        let log = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n";
        for tool in Tool::ALL {
            assert!(parse_log(tool, log).is_empty());
        }
        assert!(parse_log(
            Tool::Racecheck,
            "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
        )
        .is_empty());
    }
}
