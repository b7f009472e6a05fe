//! The CI gate that certify and merge share: a baseline to compare the new certificates with
//! (a verdict or coverage that got worse exits 5), and the JUnit and Markdown reports.

use clap::Args;
use nvfp4_harness::certify::Certificate;
use nvfp4_harness::{Error, Result};
use std::path::PathBuf;

/// What a CI gate asks of certify and merge: a baseline to compare with and reports to write.
#[derive(Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// The main branch's certificates (its report directory, or one certificate): say what
    /// changed for each kernel, and exit 5 when a verdict got worse (certified exact ->
    /// certified -> schedule differs -> failed) or the campaign covered less (fewer cases, a
    /// distribution, shape class, FP4 code or scale exponent no longer reached). Baselines must
    /// be signed with this machine's key.
    #[arg(long, value_name = "PATH")]
    pub baseline: Option<PathBuf>,
    /// Also write a JUnit XML report: one test case per kernel and check (campaign,
    /// compute-sanitizer, determinism, baseline).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a short Markdown summary (a pull-request comment).
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
}

impl GateArgs {
    /// Reads the baseline of each of `kernels` (what [`gate_reports`] will compare with), so that
    /// a missing, unreadable or untrusted baseline is refused before any work, naming --baseline;
    /// and checks that the --junit and --summary files can be written, which a campaign would
    /// otherwise find out only at its end.
    pub(super) fn check_baseline(&self, kernels: &[&str]) -> Result<()> {
        for (flag, path) in [("--junit", &self.junit), ("--summary", &self.summary)] {
            if let Some(path) = path {
                nvfp4_harness::certify::check_file_writable(path)
                    .map_err(|err| Error::Usage(format!("{flag}: {err}")))?;
            }
        }
        let Some(path) = &self.baseline else {
            return Ok(());
        };
        if !path.exists() {
            return Err(Error::Usage(format!(
                "--baseline {}: no such file or directory (give the main branch's report \
                 directory, or one of its certificates)",
                path.display()
            )));
        }
        for kernel in kernels {
            read_baseline_of(path, kernel)?;
        }
        Ok(())
    }
}

/// [`nvfp4_harness::certify::read_baseline`], its errors naming --baseline.
fn read_baseline_of(path: &std::path::Path, kernel: &str) -> Result<Option<Certificate>> {
    nvfp4_harness::certify::read_baseline(path, kernel)
        .map_err(|err| Error::Usage(format!("--baseline: {err}")))
}

/// The baseline comparison (printed), the JUnit and Markdown reports; whether any kernel got
/// worse than its baseline.
pub(super) fn gate_reports(gate: &GateArgs, certificates: &[Certificate]) -> Result<bool> {
    use nvfp4_harness::certify::compare_with_baseline;
    let mut changes = Vec::new();
    if let Some(path) = &gate.baseline {
        println!("\nAgainst the baseline {}:\n", path.display());
        println!("| kernel | change | regression |\n|---|---|---|");
        for certificate in certificates {
            match read_baseline_of(path, &certificate.kernel)? {
                None => println!("| {} | no baseline certificate | - |", certificate.kernel),
                Some(old) => {
                    let found = compare_with_baseline(&old, certificate);
                    if found.is_empty() {
                        println!("| {} | unchanged | - |", certificate.kernel);
                    }
                    for change in &found {
                        let worse = if change.worse { "**yes**" } else { "no" };
                        println!("| {} | {} | {worse} |", certificate.kernel, change.what);
                    }
                    changes.push((certificate.kernel.clone(), found));
                }
            }
        }
    }
    let write = |path: &std::path::Path, text: String| {
        nvfp4_harness::certify::write_atomically(path, text.as_bytes())
    };
    if let Some(path) = &gate.junit {
        write(
            path,
            nvfp4_harness::certify::ci_junit(certificates, &changes),
        )?;
    }
    if let Some(path) = &gate.summary {
        write(
            path,
            nvfp4_harness::certify::ci_summary(certificates, &changes),
        )?;
    }
    Ok(changes.iter().flat_map(|(_, c)| c).any(|c| c.worse))
}
