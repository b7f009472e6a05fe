//! The planted regime kernels (tests/regimes/*.py): each a torch submission that is correct
//! everywhere but in one deployment regime (crates/harness/src/certify/regimes.rs), where it has
//! the kind of bug that only shows there (a split-K decode epilogue, a tile table that wraps
//! past N = 8192, a batch table of four, a 32-bit output offset...). Its docstring names the
//! regime on a `REGIME:` line. Without a GPU the catalogue is checked against the regimes; on a
//! GPU machine a default campaign must reject every one, at a case of its regime.
//!
//! On the GPU machine without Rust: `cargo test --release --test oracle --no-run` prints the
//! binary; from the repository root, `NVFP4_ORACLE_BIN=./nvfp4-oracle ./oracle-<hash> regimes::
//! --include-ignored` (REGIME=decode,wide-n runs only those).

use crate::common;

use nvfp4_harness::certify::regimes::Regime;
use std::path::{Path, PathBuf};

fn folder() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regimes");
    if here.exists() {
        here
    } else {
        PathBuf::from("tests/regimes")
    }
}

/// (file, the regime its docstring names) for every planted kernel.
fn planted() -> Vec<(PathBuf, String)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('_'))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let regime = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("REGIME: "))
                .unwrap_or_else(|| panic!("{}: no REGIME line", file.display()))
                .trim()
                .to_string();
            (file, regime)
        })
        .collect()
}

#[test]
fn every_regime_has_a_planted_kernel_named_after_it() {
    let planted = planted();
    for regime in Regime::ALL {
        let file = folder().join(format!("{}.py", regime.name().replace('-', "_")));
        assert!(
            planted
                .iter()
                .any(|(f, r)| *f == file && r == regime.name()),
            "no planted kernel {} naming the regime {}",
            file.display(),
            regime.name()
        );
    }
    for (file, regime) in &planted {
        assert!(
            Regime::ALL.iter().any(|r| r.name() == regime),
            "{}: unknown regime {regime}",
            file.display()
        );
    }
}

#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn a_default_campaign_rejects_every_planted_regime_kernel_in_its_regime() {
    common::require_torch_gpu();
    // REGIME=a,b runs only those (unset or empty: every one).
    let only: Option<Vec<String>> = std::env::var("REGIME")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let mut failures = Vec::new();
    eprintln!("| planted | regime | outcome |\n|---|---|---|");
    for (file, regime) in planted() {
        if only.as_ref().is_some_and(|o| !o.contains(&regime)) {
            continue;
        }
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        let report =
            std::env::temp_dir().join(format!("nvfp4-regime-{stem}-{}", std::process::id()));
        let out = common::oracle_command()
            .args(["certify", "--submission"])
            .arg(&file)
            .args(["--sanitize", "0", "--report-dir"])
            .arg(&report)
            .output()
            .expect("nvfp4-oracle runs");
        let code = out.status.code().unwrap_or(-1);
        let certificate: serde_json::Value = std::fs::read_dir(&report)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter_map(|p| serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok())
            .find(|v: &serde_json::Value| v.get("kernel").is_some())
            .unwrap_or_default();
        let first = &certificate["failure"]["first_case"]["shape"];
        let dim = |d: &str| first[d].as_u64().unwrap_or(0) as usize;
        let in_regime = nvfp4_model::problem::Shape::new(dim("m"), dim("n"), dim("k"), dim("l"))
            .ok()
            .is_some_and(|shape| {
                Regime::ALL
                    .iter()
                    .any(|r| r.name() == regime && r.contains(shape))
            });
        let outcome = format!("certify exit {code}, first failing case {first}");
        eprintln!("| {stem} | {regime} | {outcome} |");
        if code != 1 || !in_regime {
            failures.push(format!(
                "{stem}: expected a failure in the {regime} regime, got {outcome}\n{}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
        let _ = std::fs::remove_dir_all(&report);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
