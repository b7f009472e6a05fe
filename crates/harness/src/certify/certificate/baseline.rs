//! A certificate against the main branch's (`certify --baseline`): what a pull request changed
//! in a kernel's verdict and in what its campaign covered. A verdict can only get worse in one
//! direction (certified exact, then certified, then "schedule differs", then failed); coverage
//! shrinks when fewer cases ran, or a distribution, a shape class, an FP4 code or a scale
//! exponent that the baseline's campaign reached is no longer reached.

use super::report::Certificate;
use crate::error::{Error, Result};
use std::path::Path;

/// One difference from the baseline.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    pub kernel: String,
    /// What changed, in words.
    pub what: String,
    /// A regression: the gate fails on it.
    pub worse: bool,
}

pub use super::report::verdict;

/// The baseline certificate of `kernel` in `path`: a directory of certificates (the main
/// branch's report directory), or one certificate file (used when it is that kernel's). Its
/// signature must hold: a baseline anyone could edit would let a regression through.
pub fn read_baseline(path: &Path, kernel: &str) -> Result<Option<Certificate>> {
    let file = if path.is_dir() {
        path.join(format!("{kernel}.json"))
    } else {
        path.to_path_buf()
    };
    if path.is_dir() && !file.exists() {
        return Ok(None);
    }
    let value = super::signing::read_verified(&file, "baseline")?;
    let certificate: Certificate = serde_json::from_value(value)
        .map_err(|err| Error::file(&file, format!("not a certificate of this oracle: {err}")))?;
    Ok((certificate.kernel == kernel).then_some(certificate))
}

/// What changed from `old` to `new` (the same kernel).
pub fn compare_with_baseline(old: &Certificate, new: &Certificate) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut change = |what: String, worse: bool| {
        changes.push(Change {
            kernel: new.kernel.clone(),
            what,
            worse,
        })
    };
    let ((was, old_rank), (now, new_rank)) = (verdict(old), verdict(new));
    if was != now {
        let worse = matches!((old_rank, new_rank), (Some(a), Some(b)) if b < a);
        change(format!("verdict: {was} -> {now}"), worse);
    }
    if old.source_hash != new.source_hash {
        change("source changed".into(), false);
    }
    if old.model_version != new.model_version {
        change(
            format!(
                "model version: {} -> {}",
                old.model_version, new.model_version
            ),
            false,
        );
    }
    // Coverage is compared only between campaigns that ran to the end: a failure stops one.
    if old.failure.is_some() || new.failure.is_some() || new_rank.is_none() || old_rank.is_none() {
        return changes;
    }
    let (a, b) = (&old.coverage, &new.coverage);
    if b.cases < a.cases {
        change(format!("cases run: {} -> {}", a.cases, b.cases), true);
    }
    if b.production_size_skipped && !a.production_size_skipped {
        change("production-size cases now skipped (--quick)".into(), true);
    }
    for (words, before, after) in [
        (
            "production-shape cases planned",
            a.planned_production_cases,
            b.planned_production_cases,
        ),
        (
            "random large cases planned",
            a.planned_large_cases,
            b.planned_large_cases,
        ),
        (
            "deployment-regime cases planned",
            a.planned_regime_cases.unwrap_or(0),
            b.planned_regime_cases.unwrap_or(0),
        ),
    ] {
        if after < before {
            change(format!("{words}: {before} -> {after}"), true);
        }
    }
    for (words, before, after) in [
        (
            "distributions",
            a.by_distribution.keys().cloned().collect::<Vec<_>>(),
            b.by_distribution.keys().cloned().collect::<Vec<_>>(),
        ),
        (
            "shape classes",
            a.by_shape_class.keys().cloned().collect(),
            b.by_shape_class.keys().cloned().collect(),
        ),
        (
            "deployment regimes",
            a.by_regime.keys().cloned().collect(),
            b.by_regime.keys().cloned().collect(),
        ),
        (
            "FP4 codes",
            a.fp4_codes_seen.iter().map(u8::to_string).collect(),
            b.fp4_codes_seen.iter().map(u8::to_string).collect(),
        ),
        (
            "scale exponent fields",
            a.scale_exponents_seen.iter().map(u8::to_string).collect(),
            b.scale_exponents_seen.iter().map(u8::to_string).collect(),
        ),
    ] {
        let lost: Vec<String> = before.into_iter().filter(|x| !after.contains(x)).collect();
        if !lost.is_empty() {
            change(
                format!("{words} no longer reached: {}", lost.join(", ")),
                true,
            );
        }
    }
    if a.nan_scales_seen && !b.nan_scales_seen {
        change("NaN scales no longer reached".into(), true);
    }
    changes
}
