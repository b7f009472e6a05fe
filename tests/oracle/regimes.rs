//! The planted regime kernels (tests/regimes/*.py): each a torch submission that is correct
//! everywhere but in one deployment regime (crates/harness/src/certify/campaign/regimes.rs), where it has
//! the kind of bug that only shows there (a split-K decode epilogue, a tile table that wraps
//! past N = 8192, a batch table of four, a 32-bit output offset...). Its docstring names the
//! regime on a `REGIME:` line. Without a GPU the catalogue is checked against the regimes; on a
//! GPU machine a default campaign must reject every one, at a case of its regime.
//!
//! On the GPU machine without Rust: `cargo test --release --test oracle --no-run` prints the
//! binary; from the repository root, `NVFP4_ORACLE_BIN=./nvfp4-oracle ./oracle-<hash> regimes::
//! --include-ignored` (REGIME=decode,wide-n runs only those).

use crate::common;

use nvfp4_harness::certify::Regime;
use std::path::{Path, PathBuf};

fn folder() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/regimes");
    if here.exists() {
        here
    } else {
        PathBuf::from("tests/regimes")
    }
}

/// The planted kernels' files, sorted, `_honest.py` left out.
fn planted_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('_'))
        .collect();
    files.sort();
    files
}

/// A planted conjunction's box: per dimension (m, n, k, l) its inclusive range, from the
/// docstring's `BOX: m 129-2047, n 4097-8192, k 512-4096` (`l 65-`: no upper end).
type Box4 = Vec<(char, usize, usize)>;

/// (file, box) for every planted conjunction kernel (`conj_*.py`).
fn planted_conjunctions() -> Vec<(PathBuf, Box4)> {
    planted_files()
        .into_iter()
        .filter_map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let spec = text.lines().find_map(|l| l.trim().strip_prefix("BOX: "))?;
            let parsed = spec
                .split(',')
                .map(|part| {
                    let (dim, range) = part.trim().split_once(' ').expect("`dim lo-hi`");
                    let (lo, hi) = range.split_once('-').expect("`lo-hi` or `lo-`");
                    (
                        dim.chars().next().unwrap(),
                        lo.parse().unwrap(),
                        if hi.is_empty() {
                            usize::MAX
                        } else {
                            hi.parse().unwrap()
                        },
                    )
                })
                .collect();
            Some((file, parsed))
        })
        .collect()
}

fn in_box(bounds: &Box4, shape: nvfp4_model::problem::Shape) -> bool {
    bounds.iter().all(|&(dim, lo, hi)| {
        let v = match dim {
            'm' => shape.m,
            'n' => shape.n,
            'k' => shape.k,
            _ => shape.l,
        };
        (lo..=hi).contains(&v)
    })
}

/// A default campaign of the planted submission `file` (with `args`), and its certificate (the
/// JSON in `report` that names a kernel; null where none was written).
fn certify_planted(
    file: &Path,
    args: &[&str],
    report: &Path,
) -> (std::process::Output, serde_json::Value) {
    let out = common::oracle_command()
        .args(["certify", "--submission"])
        .arg(file)
        .args(args)
        .arg("--report-dir")
        .arg(report)
        .output()
        .expect("nvfp4-oracle runs");
    let certificate = common::certificate_in(report);
    (out, certificate)
}

/// (file, the regime its docstring names) for every planted regime kernel.
fn planted() -> Vec<(PathBuf, String)> {
    planted_files()
        .into_iter()
        .filter(|file| {
            !file
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("conj_")
        })
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
        let (out, certificate) = certify_planted(&file, &["--sanitize", "0"], &report);
        let code = out.status.code().unwrap_or(-1);
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

/// Every planted conjunction kernel declares a box, and it is a conjunction of at least one
/// range.
#[test]
fn every_planted_conjunction_declares_its_box() {
    let conjunctions = planted_conjunctions();
    assert!(conjunctions.len() >= 6, "{}", conjunctions.len());
    for (file, bounds) in &conjunctions {
        assert!(!bounds.is_empty(), "{}", file.display());
        assert!(bounds
            .iter()
            .all(|&(d, lo, hi)| "mnkl".contains(d) && lo <= hi));
    }
}

/// On a GPU machine: each planted conjunction kernel (wrong only inside its box) is rejected by
/// a default campaign, its first failing case inside the box. CONJ=experts_64,mid_mnk runs only
/// those.
#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn a_default_campaign_rejects_every_planted_conjunction_kernel_inside_its_box() {
    common::require_torch_gpu();
    let only: Option<Vec<String>> = std::env::var("CONJ")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|s| format!("conj_{}", s.trim())).collect());
    let mut failures = Vec::new();
    eprintln!("| planted | box | outcome |\n|---|---|---|");
    for (file, bounds) in planted_conjunctions() {
        let stem = file.file_stem().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|o| !o.contains(&stem)) {
            continue;
        }
        let report = std::env::temp_dir().join(format!("nvfp4-conj-{stem}-{}", std::process::id()));
        let started = std::time::Instant::now();
        let (out, certificate) =
            certify_planted(&file, &["--sanitize", "0", "--determinism", "0"], &report);
        let code = out.status.code().unwrap_or(-1);
        let first = &certificate["failure"]["first_case"]["shape"];
        let minimal = &certificate["failure"]["minimal_case"]["shape"];
        let dim = |d: &str| first[d].as_u64().unwrap_or(0) as usize;
        let inside = nvfp4_model::problem::Shape::new(dim("m"), dim("n"), dim("k"), dim("l"))
            .ok()
            .is_some_and(|shape| in_box(&bounds, shape));
        let outcome = format!(
            "certify exit {code} in {:.0} s, first failing case {first}, minimal {minimal}",
            started.elapsed().as_secs_f64()
        );
        eprintln!("| {stem} | {bounds:?} | {outcome} |");
        if code != 1 || !inside {
            failures.push(format!(
                "{stem}: expected a failure inside {bounds:?}, got {outcome}\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let _ = std::fs::remove_dir_all(&report);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
