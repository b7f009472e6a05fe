//! `certify --plan`: the cases each campaign would run, printed instead of run.

use nvfp4_harness::certify::{CampaignLimits, CampaignPlan, CaseSpec, Coverage};
use nvfp4_harness::kernels::KernelUnderTest;
use nvfp4_harness::Result;
use std::process::ExitCode;

/// `certify --plan`: each kernel's cases as JSON Lines on stdout, what they reach of the shape
/// space on stderr.
pub(super) fn print_plans(
    kernels: &[Box<dyn KernelUnderTest>],
    limits: &CampaignLimits,
    golden: &[CaseSpec],
    seed: u64,
) -> Result<ExitCode> {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for kernel in kernels {
        let mut coverage = Coverage::default();
        let plan = CampaignPlan::new(kernel.as_ref(), limits, golden, &mut coverage);
        let rows = plan.rows();
        let mut ranges = coverage.ranges.clone().unwrap_or_default();
        for row in &rows {
            let mut line = serde_json::to_value(row).expect("a plan row serializes");
            line["kernel"] = kernel.name().into();
            ranges.record(nvfp4_model::problem::Shape {
                m: row.m,
                n: row.n,
                k: row.k,
                l: row.l,
            });
            writeln!(out, "{line}").map_err(crate::cli::stdout_error)?;
        }
        eprintln!(
            "plan: {}: {} cases (seed {seed}), {} range cases; pairs of ranges reached {} of {} \
             ({} left: outside the support or past the per-case bound), band triples {} of {}",
            kernel.name(),
            rows.len(),
            ranges.planned_cases,
            ranges.pairs_covered,
            ranges.pairs_total,
            ranges.pairs_left.len(),
            ranges.triples_covered,
            ranges.triples_total,
        );
    }
    out.flush().map_err(crate::cli::stdout_error)?;
    Ok(ExitCode::SUCCESS)
}
