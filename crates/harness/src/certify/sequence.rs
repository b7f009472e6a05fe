//! The certify sequence for one kernel, as the `certify` command and the Python package both run
//! it: start the kernel, run its campaign, make its certificate, run the checks a GPU kernel gets
//! (compute-sanitizer, determinism), and write the certificate. What to print, and which exit
//! code the outcomes of several kernels add up to, is the caller's.

use super::campaign::cases::CaseSpec;
use super::campaign::cases::MadeAhead;
use super::campaign::limits::CampaignLimits;
use super::campaign::reference_engine;
use super::campaign::references_ahead::ReferencesAhead;
use super::certificate::report::Certificate;
use super::checks::determinism::run_checks;
use super::run_campaign::certify_variant_with;
use crate::error::Result;
use crate::kernels::{KernelUnderTest, PrepareError};
use std::path::Path;

/// What one kernel's certification is asked besides its campaign's limits.
#[derive(Debug, Clone)]
pub struct CertifyRequest<'a> {
    pub limits: CampaignLimits,
    /// Cases of the golden set, run before the campaign's own.
    pub golden: &'a [CaseSpec],
    /// Where the certificate, the failure's reproducers and the sanitizer's logs go.
    pub report_dir: &'a Path,
    /// Sampled cases per compute-sanitizer tool, and for the determinism check (0: not run,
    /// and the certificate says so). Only kernels that run on a GPU get these checks.
    pub sanitize_cases: usize,
    pub determinism_cases: usize,
    /// Start the kernel even where it says it cannot run here: a user's kernel (a submission,
    /// a library) is always started, so that a broken one is reported on any machine.
    pub start_when_unavailable: bool,
    /// The command that reads the kernel's compiled code without running it (a submission's
    /// `nvfp4-oracle preflight ...`): named in the certificate where the kernel cannot run here.
    pub preflight: Option<&'a str>,
    /// Write the certificate (signed JSON and Markdown) into `report_dir`.
    pub write: bool,
}

/// How one kernel's certification ended.
#[derive(Debug)]
pub enum KernelOutcome {
    /// A certificate: of a campaign (with its checks), or saying that the kernel cannot run on
    /// this machine and why.
    Certificate(Box<Certificate>),
    /// The kernel could not be started as given (a submission that does not import, a library
    /// without its symbol): no certificate, and why.
    Unusable(String),
}

/// Certifies `kernel` as `request` asks; `progress(done, planned)` follows the campaign's cases.
pub fn certify_kernel(
    kernel: &dyn KernelUnderTest,
    request: &CertifyRequest,
    progress: impl FnMut(usize, usize),
) -> Result<KernelOutcome> {
    let limits = &request.limits;
    crate::trace::trace_step("starting the kernel");
    let before = reference_engine::report();
    let starts = match kernel.availability() {
        Err(reason) if !request.start_when_unavailable => Err(reason),
        _ => Ok(()),
    };
    // While the kernel starts (seconds for a Python submission), the references of its small
    // random cases are made.
    let ahead = starts
        .is_ok()
        .then(|| ReferencesAhead::start(kernel, limits, request.golden));
    let prepared = match starts {
        Err(reason) => Err(PrepareError::Unavailable(reason.0)),
        Ok(()) => kernel.prepare(),
    };
    let ahead = ahead.map_or_else(MadeAhead::default, ReferencesAhead::stop);
    let certificate = match prepared {
        Err(PrepareError::Unusable(reason)) => return Ok(KernelOutcome::Unusable(reason)),
        Err(PrepareError::Unavailable(reason)) => Certificate::unavailable(
            kernel,
            limits,
            with_preflight_hint(reason, request.preflight),
        ),
        Ok(()) => {
            crate::trace::trace_step("kernel started; the campaign begins");
            let result =
                certify_variant_with(kernel, limits.clone(), request.golden, &ahead, progress);
            let mut certificate =
                Certificate::from_campaign(kernel, limits, result, request.report_dir)?;
            let reference = reference_engine::report().since(&before);
            crate::trace::trace_step("campaign ended");
            certificate.reference = (reference.cases + reference.declined > 0
                || !reference.mismatches.is_empty())
            .then_some(reference);
            // The checks run on cases drawn from the seed alone: once, in shard 1.
            let (sanitizer, determinism, skipped) = match limits.shard {
                Some(shard) if shard.index != 1 => (
                    None,
                    None,
                    vec![format!(
                        "compute-sanitizer and the determinism check run in shard 1/{}",
                        shard.count
                    )],
                ),
                _ => run_checks(
                    kernel,
                    request.sanitize_cases,
                    request.determinism_cases,
                    limits.seed,
                    &request.report_dir.join("sanitizer-logs"),
                ),
            };
            certificate.add_checks(sanitizer, determinism);
            certificate.checks_skipped = skipped;
            certificate
        }
    };
    let mut certificate = certificate;
    crate::trace::trace_step("checks ended");
    if request.write {
        certificate.kept_instead = certificate.write(request.report_dir)?;
    }
    Ok(KernelOutcome::Certificate(Box::new(certificate)))
}

/// A kernel for another architecture than this GPU's (a Blackwell kernel on a Hopper machine)
/// can still be checked statically: the reason says how. A submission that cannot run here for
/// any reason (no GPU, another one, no torch) gets the exact command (`preflight`), which needs
/// none of these.
pub fn with_preflight_hint(reason: String, preflight: Option<&str>) -> String {
    if let Some(command) = preflight {
        format!(
            "{reason}; to check its code here without running it: `{command}` (it compiles \
             the kernels for that architecture and reads their instructions, registers and \
             shared memory; docs/guides/preflight.md)"
        )
    } else if reason.starts_with("needs sm_") {
        format!(
            "{reason}; `nvfp4-oracle preflight` reads its compiled code for that architecture \
             on any machine without running it (docs/guides/preflight.md)"
        )
    } else {
        reason
    }
}

#[cfg(test)]
mod tests {
    use super::with_preflight_hint;

    #[test]
    fn a_kernel_for_another_architecture_is_pointed_to_preflight() {
        let hinted = with_preflight_hint("needs sm_100a; this GPU is sm_90".into(), None);
        assert!(hinted.starts_with("needs sm_100a; this GPU is sm_90; `nvfp4-oracle preflight`"));
        let other = with_preflight_hint("no CUDA driver found".into(), None);
        assert_eq!(other, "no CUDA driver found");
        // A submission: its own command, whatever kept it from running here.
        let command = "nvfp4-oracle preflight --submission /s/submission.py --arch sm_100a";
        let hinted = with_preflight_hint("torch sees no CUDA GPU".into(), Some(command));
        assert!(
            hinted.starts_with("torch sees no CUDA GPU; to check its code here without running it")
                && hinted.contains(&format!("`{command}`")),
            "{hinted}"
        );
    }
}
