//! What a certify run's kernels add up to, and so its exit code: the most serious outcome wins
//! (a kernel that could not be used, a harness error, a failure, a regression against the
//! baseline, not exact, a named kernel that cannot run here).

use crate::cli::exit_code::{
    EXIT_BAD_INPUT, EXIT_FAIL, EXIT_HARNESS_ERROR, EXIT_NOT_EXACT, EXIT_REGRESSION,
    EXIT_UNAVAILABLE,
};
use nvfp4_harness::certify::{Certificate, ExactOutcome, Status};
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Default)]
pub(super) struct Outcomes {
    /// Kernels that could not be started, or whose output broke the kernel contract.
    unusable: Vec<String>,
    failed: bool,
    not_exact: bool,
    unavailable: bool,
    /// Certificates written (not kept in place of a better one already there).
    written: usize,
    /// Certificates made, written or not.
    certified: usize,
    /// Some certificate is worse than the baseline's (`--baseline`).
    pub worse: bool,
    /// Differences between the GPU reference and the CPU model.
    pub harness_errors: usize,
}

impl Outcomes {
    /// A kernel that could not be used: no certificate, exit 2.
    pub fn unusable(&mut self, kernel: &str, reason: &str) {
        eprintln!("error: {kernel}: {reason}");
        self.unusable.push(kernel.to_string());
    }

    /// A kernel's certificate, with what it says on stderr beyond its row.
    pub fn add(&mut self, certificate: &Certificate) {
        self.certified += 1;
        self.unavailable |= certificate.unavailable_reason.is_some();
        if let Some(kept) = &certificate.kept_instead {
            eprintln!("note: {}: {kept}", certificate.kernel);
        }
        self.written += usize::from(certificate.kept_instead.is_none());
        if let Some(contract) = certificate.broken_contract() {
            eprintln!("error: {}: {contract}", certificate.kernel);
            self.unusable.push(certificate.kernel.clone());
        }
        self.failed |= certificate.status == Status::Failed;
        self.not_exact |= matches!(
            certificate.exact.as_ref().map(|e| e.outcome),
            Some(ExactOutcome::ScheduleDiffers | ExactOutcome::NoScheduleDeclared)
        );
    }

    /// Where the certificates went, and for kernels named on the command line (`explicit`)
    /// that cannot run here, that exit 4 follows.
    pub fn say_written(&self, report_dir: &Path, explicit: bool) {
        if self.written > 0 {
            eprintln!(
                "{} certificate(s) written to {}",
                self.written,
                report_dir.display()
            );
        } else if self.certified > 0 {
            eprintln!("no certificate written: the ones already in the report directory were kept");
        } else {
            eprintln!("no certificate written: no kernel could be started");
        }
        if self.unavailable && explicit {
            eprintln!("note: some kernel named on the command line cannot run on this machine (exit 4 unless a worse outcome)");
        }
    }

    /// The run's exit code; a kernel that cannot run here counts only where it was named
    /// (`explicit`).
    pub fn exit_code(&self, explicit: bool) -> ExitCode {
        ExitCode::from(if !self.unusable.is_empty() {
            EXIT_BAD_INPUT
        } else if self.harness_errors > 0 {
            EXIT_HARNESS_ERROR
        } else if self.failed {
            EXIT_FAIL
        } else if self.worse {
            EXIT_REGRESSION
        } else if self.not_exact {
            EXIT_NOT_EXACT
        } else if self.unavailable && explicit {
            EXIT_UNAVAILABLE
        } else {
            0
        })
    }
}
