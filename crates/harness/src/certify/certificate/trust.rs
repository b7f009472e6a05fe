//! Whether a certificate lets `bench` time a kernel: signed by this oracle, of this source hash,
//! model version and outcome, covering the production shapes, with every check that was started
//! run to its end, and its worker sandboxed.

use std::path::{Path, PathBuf};

/// What a report folder says of one kernel's timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trust {
    /// No readable certificate of this kernel in the folder, or one of another source hash,
    /// model version or outcome.
    Absent,
    /// A certificate of this kernel that does not let it be timed, and why in words (a
    /// signature that does not hold, a shard, a check that did not run...).
    Refused { path: PathBuf, why: String },
    /// Certified: the checks it says did not run (by the operator's options or machine), in
    /// words, if any.
    Trusted {
        path: PathBuf,
        checks_not_run: Option<String>,
        /// The certificate's coverage (its JSON): bench times a shape only where it reached the
        /// shape's deployment regimes ([`super::regimes::uncovered_regime`]).
        coverage: serde_json::Value,
    },
}

/// What `dir`'s certificate of `name` says of timing the kernel whose source hash is `hash`.
pub fn timing_trust(dir: &Path, name: &str, hash: &str) -> Trust {
    let path = dir.join(format!("{name}.json"));
    let Ok(text) = nvfp4_model::bounded_read::read_text(
        &path,
        "certificate",
        nvfp4_model::bounded_read::JSON_CAP,
    ) else {
        return Trust::Absent;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Trust::Absent;
    };
    if let Err(why) = super::signing::verify(&value) {
        return Trust::Refused {
            path,
            why: why.to_string(),
        };
    }
    match allows_timing(&value, hash) {
        Ok(()) => Trust::Trusted {
            checks_not_run: checks_not_run(&value),
            coverage: value["coverage"].clone(),
            path,
        },
        Err(Refusal::NotThisKernel) => Trust::Absent,
        Err(Refusal::Refused(why)) => Trust::Refused { path, why },
    }
}

/// The checks a certified kernel's certificate says did not run, in words, if any.
///
/// Such a certificate is still trusted. Whether the checks ran was settled in the parent before
/// any of the kernel's code ran, by the operator's options (`--sanitize 0`, `--determinism 0`)
/// or machine (no compute-sanitizer installed), so a kernel cannot bring it about; and a user
/// without the CUDA toolkit's sanitizer must still be able to certify and time. What a kernel
/// can bring about, a check that was started and could not run (it raised, crashed or hung
/// when checked, or the tool's log does not read as the tool's), is a finding and fails the
/// certificate (crates/harness/src/certify/checks/determinism.rs, crates/harness/src/certify/checks/sanitize.rs), which bench never times.
pub(crate) fn checks_not_run(value: &serde_json::Value) -> Option<String> {
    let skipped: Vec<&str> = value["checks_skipped"]
        .as_array()?
        .iter()
        .filter_map(|reason| reason.as_str())
        .collect();
    (!skipped.is_empty()).then(|| skipped.join("; "))
}

/// The check a certificate started and did not complete, in words, if any: the determinism
/// check's failed run, or a compute-sanitizer tool that did not run the whole sample.
fn check_that_did_not_run(value: &serde_json::Value) -> Option<String> {
    if let Some(note) = value["determinism"]["note"].as_str() {
        return Some(format!(
            "its determinism check did not run to its end ({note})"
        ));
    }
    let sanitizer = &value["sanitizer"];
    let planned = sanitizer["cases"].as_u64().unwrap_or(0);
    sanitizer["tools"].as_array()?.iter().find_map(|run| {
        let short = run["cases_run"].as_u64().unwrap_or(0) < planned;
        let note = run["note"].as_str();
        (short || note.is_some()).then(|| {
            format!(
                "compute-sanitizer {} did not run its sample to its end ({})",
                run["tool"].as_str().unwrap_or("?"),
                note.unwrap_or("cut short")
            )
        })
    })
}

/// Why a certificate whose signature holds does not let bench time the kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// A certificate of another kernel, source, model version or outcome: nothing to report.
    #[error("not a passing certificate of this kernel and model")]
    NotThisKernel,
    /// A certificate of this kernel that cannot be trusted for timing, and why in words.
    #[error("{0}")]
    Refused(String),
}

/// Whether a certificate whose signature holds lets bench time the kernel; why not, if not.
pub(crate) fn allows_timing(
    value: &serde_json::Value,
    hash: &str,
) -> std::result::Result<(), Refusal> {
    if value["status"] != serde_json::json!("certified")
        || value["source_hash"] != serde_json::json!(hash)
        || value["model_version"] != serde_json::json!(nvfp4_model::model::MODEL_VERSION)
    {
        return Err(Refusal::NotThisKernel);
    }
    if let Some(shard) = value["shard"].as_object() {
        return Err(Refusal::Refused(format!(
            "it covers shard {}/{} of the campaign only; `nvfp4-oracle merge` the shards first",
            shard.get("index").unwrap_or(&serde_json::Value::Null),
            shard.get("count").unwrap_or(&serde_json::Value::Null)
        )));
    }
    // A worker that ran without the sandbox could reach the key that signs certificates.
    if let Some(isolation) = value["environment"]["isolation"].as_str() {
        if !isolation.starts_with("sandboxed") {
            return Err(Refusal::Refused(format!(
                "its worker ran without the sandbox ({isolation}), within reach of the key that \
                 signs certificates; certify it where the sandbox holds, or time it with \
                 --force-untrusted"
            )));
        }
    }
    // A check that was started and could not run fails the certificate; a certificate written
    // before that rule (where it was a note beside "certified") is not trusted either.
    if let Some(why) = check_that_did_not_run(value) {
        return Err(Refusal::Refused(format!(
            "{why}; a check that could not run does not pass: certify it again"
        )));
    }
    // bench times production shapes: the certificate must have covered them.
    match production_coverage_gap(&value["coverage"]) {
        Some(why) => Err(Refusal::Refused(why)),
        None => Ok(()),
    }
}

/// Why a certificate's coverage (its JSON) does not back timings at production sizes, if it does
/// not: every production-size case it planned (the benchmark and test shapes, the random large
/// shapes) must have run, and a certificate from before a class was planned says nothing of it.
pub fn production_coverage_gap(coverage: &serde_json::Value) -> Option<String> {
    if coverage["production_size_skipped"] == serde_json::json!(true) {
        return Some(
            "certified with --quick (no production-size case ran); certify it again without it"
                .to_string(),
        );
    }
    // A certificate from before the regimes says nothing of them: bench's per-shape rule
    // (regimes::uncovered_regime) refuses the shapes that lie in one.
    let regimes_ran = coverage["by_shape_class"]["regime"].as_u64().unwrap_or(0);
    if let Some(planned) = coverage["planned_regime_cases"].as_u64() {
        if regimes_ran < planned {
            return Some(format!(
                "{regimes_ran} of its {planned} deployment-regime cases ran; certify it again \
                 without a time budget"
            ));
        }
    }
    let ranges_ran = coverage["by_shape_class"]["range"].as_u64().unwrap_or(0);
    if let Some(planned) = coverage["ranges"]["planned_cases"].as_u64() {
        if ranges_ran < planned {
            return Some(format!(
                "{ranges_ran} of its {planned} shape-range cases ran; certify it again"
            ));
        }
    }
    [
        ("production", "planned_production_cases", "production-shape"),
        ("large", "planned_large_cases", "random large-shape"),
    ]
    .into_iter()
    .find_map(|(class, planned_key, words)| {
        let ran = coverage["by_shape_class"][class].as_u64().unwrap_or(0);
        match coverage[planned_key].as_u64() {
            None => Some(format!(
                "certified before {words} cases were part of every campaign; certify it again"
            )),
            Some(planned) if ran < planned => Some(format!(
                "{ran} of its {planned} {words} cases ran; certify it again without a time budget"
            )),
            Some(_) => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_times_only_what_a_sandboxed_campaign_covered() {
        let hash = "ab".repeat(32);
        let good = serde_json::json!({
            "status": "certified",
            "source_hash": hash,
            "model_version": nvfp4_model::model::MODEL_VERSION,
            "environment": {"isolation": "sandboxed: own mount, PID namespaces"},
            "coverage": {
                "planned_production_cases": 13, "planned_large_cases": 8,
                "by_shape_class": {"production": 13, "large": 8},
            },
        });
        assert_eq!(allows_timing(&good, &hash), Ok(()));
        let mut other = good.clone();
        other["source_hash"] = serde_json::json!("cd".repeat(32));
        assert_eq!(allows_timing(&other, &hash), Err(Refusal::NotThisKernel));
        let mut open = good.clone();
        open["environment"]["isolation"] = serde_json::json!("NOT sandboxed: no user namespaces");
        assert!(allows_timing(&open, &hash)
            .unwrap_err()
            .to_string()
            .contains("without the sandbox"));
        // A check that could not run failed the certificate: not timed.
        let mut unchecked = good.clone();
        unchecked["status"] = serde_json::json!("failed");
        unchecked["determinism"] = serde_json::json!({"findings": [
            {"verdict": super::super::checks::determinism::COULD_NOT_RUN}]});
        assert_eq!(
            allows_timing(&unchecked, &hash),
            Err(Refusal::NotThisKernel)
        );
        // Written before checks failed closed: "certified", its failed run a note.
        let mut noted = good.clone();
        noted["determinism"] = serde_json::json!({"note": "RuntimeError", "findings": []});
        assert!(allows_timing(&noted, &hash)
            .unwrap_err()
            .to_string()
            .contains("determinism check did not run to its end"));
        let mut cut = good.clone();
        cut["sanitizer"] = serde_json::json!({"cases": 2, "tools": [
            {"tool": "memcheck", "cases_run": 2, "note": null},
            {"tool": "initcheck", "cases_run": 1, "note": "case 1: raised"}]});
        assert!(allows_timing(&cut, &hash)
            .unwrap_err()
            .to_string()
            .contains("compute-sanitizer initcheck did not run"));
        cut["sanitizer"]["tools"][1] =
            serde_json::json!({"tool": "initcheck", "cases_run": 2, "note": null});
        assert_eq!(allows_timing(&cut, &hash), Ok(()));
        // No compute-sanitizer on the machine: timed, and said so.
        let mut no_tool = good.clone();
        no_tool["checks_skipped"] = serde_json::json!([format!(
            "{} (put the CUDA toolkit's bin on PATH)",
            super::super::checks::determinism::SANITIZER_NOT_FOUND
        )]);
        assert_eq!(allows_timing(&no_tool, &hash), Ok(()));
        assert!(checks_not_run(&no_tool)
            .unwrap()
            .starts_with("compute-sanitizer: not found"));
        assert_eq!(checks_not_run(&good), None);
        let mut built_in = good.clone();
        built_in["environment"] = serde_json::json!({"isolation": null});
        assert_eq!(allows_timing(&built_in, &hash), Ok(()));
        let mut short = good.clone();
        short["coverage"]["by_shape_class"]["production"] = serde_json::json!(5);
        assert!(allows_timing(&short, &hash)
            .unwrap_err()
            .to_string()
            .contains("5 of its 13"));
        let mut shard = good.clone();
        shard["shard"] = serde_json::json!({"index": 2, "count": 4});
        assert!(allows_timing(&shard, &hash)
            .unwrap_err()
            .to_string()
            .contains("shard 2/4 of the campaign only"));
        let mut merged = good.clone();
        merged["shard"] = serde_json::Value::Null;
        merged["merged_shards"] = serde_json::json!(4);
        assert_eq!(allows_timing(&merged, &hash), Ok(()));
        let mut old = good;
        old["coverage"] = serde_json::json!({"by_shape_class": {}});
        assert!(allows_timing(&old, &hash)
            .unwrap_err()
            .to_string()
            .contains("certify it again"));
    }

    #[test]
    fn timings_need_every_planned_production_size_case_run() {
        let full = serde_json::json!({
            "planned_production_cases": 13, "planned_large_cases": 2,
            "by_shape_class": {"production": 13, "large": 2, "tiny": 40},
        });
        assert_eq!(production_coverage_gap(&full), None);
        let stopped = serde_json::json!({
            "planned_production_cases": 13, "planned_large_cases": 8,
            "by_shape_class": {"production": 13, "large": 3},
        });
        assert_eq!(
            production_coverage_gap(&stopped).unwrap(),
            "3 of its 8 random large-shape cases ran; certify it again without a time budget"
        );
        let none_ran = serde_json::json!({
            "planned_production_cases": 52, "planned_large_cases": 8, "by_shape_class": {},
        });
        assert!(production_coverage_gap(&none_ran)
            .unwrap()
            .starts_with("0 of its 52 production-shape cases ran"));
        let regimes_cut = serde_json::json!({
            "planned_production_cases": 13, "planned_large_cases": 2, "planned_regime_cases": 9,
            "by_shape_class": {"production": 13, "large": 2, "regime": 4},
        });
        assert_eq!(
            production_coverage_gap(&regimes_cut).unwrap(),
            "4 of its 9 deployment-regime cases ran; certify it again without a time budget"
        );
        let older = serde_json::json!({"planned_production_cases": 13, "by_shape_class": {"production": 13}});
        assert!(production_coverage_gap(&older)
            .unwrap()
            .contains("certified before random large-shape cases were part of every campaign"));
    }
}
