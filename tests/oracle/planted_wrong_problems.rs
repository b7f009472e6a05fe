//! Planted GPU kernels, each solving one wrong problem only where deployments go (a regime or
//! a conjunction of ranges: tests/regimes/, tests/planted/conjunctions/): a default campaign
//! must reject each, shrink it to its smallest trigger in every dimension, name the problem it
//! solved, and write its certificate within 90 s of its first failing case. Without a GPU the
//! table is checked against the files and the nearby problems the model can name; on a GPU
//! machine with torch (no Rust there: `cargo test --release --test oracle --no-run` here, the
//! binary and the release tool carried):
//!
//!     NVFP4_ORACLE_BIN=.carry/nvfp4-oracle .carry/oracle_test --include-ignored \
//!         --nocapture planted_wrong_problems::
//!
//! (PLANTED=NAME,NAME runs only those whose path contains a NAME.)

use crate::common;
use nvfp4_model::compare::nearby_problems::NearbyProblem;
use nvfp4_model::problem::Shape;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One planted kernel and what its certificate must say.
struct Planted {
    /// A submission file, or a folder's kernel.toml.
    path: &'static str,
    /// The smallest trigger, every dimension ("MxNxK" or "MxNxKxL").
    minimal: &'static str,
    /// The nearby problem it solves (named, or among those the runs cannot tell apart).
    problem: &'static str,
}

const PLANTED: [Planted; 13] = [
    Planted {
        path: "tests/regimes/many_batches.py",
        minimal: "1x1x16x5",
        problem: "batches-a-from-mod-4",
    },
    Planted {
        path: "tests/regimes/tall_m.py",
        minimal: "8193x1x16",
        problem: "rows-a-from-mod-8192",
    },
    Planted {
        path: "tests/regimes/wide_n.py",
        minimal: "1x8193x16",
        problem: "columns-b-from-mod-8192",
    },
    Planted {
        path: "tests/regimes/conj_experts_64.py",
        minimal: "1x1x4096x65",
        problem: "batches-a-from-mod-64",
    },
    Planted {
        path: "tests/regimes/conj_decode_experts.py",
        minimal: "1x1x2048x9",
        problem: "batches-b1-from-mod-8",
    },
    Planted {
        path: "tests/regimes/conj_batched_deep_k.py",
        minimal: "1x1x2048x5",
        problem: "batches-sfb2-from-mod-4",
    },
    Planted {
        path: "tests/regimes/conj_prefill_chunk.py",
        minimal: "16385x1x1024",
        problem: "rows-a-from-mod-16384",
    },
    Planted {
        path: "tests/regimes/conj_wide_n_8bit.py",
        minimal: "1x32769x16",
        problem: "columns-b-from-mod-32768",
    },
    Planted {
        path: "tests/planted/conjunctions/many_experts/kernel.toml",
        minimal: "1x1024x1024x65",
        problem: "batches-sfa-from-mod-64",
    },
    Planted {
        path: "tests/planted/conjunctions/decode_70b/kernel.toml",
        minimal: "10x8192x8192",
        problem: "k-range-b2-with-sfb1-second-half-of-k",
    },
    Planted {
        path: "tests/planted/conjunctions/mixtral_experts/kernel.toml",
        minimal: "1x8192x2048x5",
        problem: "batches-b1-from-0-for-the-last",
    },
    Planted {
        path: "tests/planted/conjunctions/long_prefill_wide/kernel.toml",
        minimal: "2049x16384x4096",
        problem: "fp16-silu-epilogue",
    },
    Planted {
        path: "tests/planted/conjunctions/row_past_tile/kernel.toml",
        minimal: "2049x4096x16",
        problem: "never-written",
    },
];

/// The longest a rejecting campaign may take from its first failing case to the end of its
/// failure's work (the shrink's time bound), plus the certificate's writing.
const AFTER_FIRST_FAILURE_SECONDS: f64 = 95.0;

fn repository() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    if here.join("tests/regimes").exists() {
        here.to_path_buf()
    } else {
        PathBuf::from(".")
    }
}

/// "1x1x16x5" or "8193x1x16" (L = 1).
fn shape_of(text: &str) -> Shape {
    let d: Vec<usize> = text.split('x').map(|v| v.parse().unwrap()).collect();
    Shape::new(d[0], d[1], d[2], d.get(3).copied().unwrap_or(1)).unwrap()
}

fn shape_text(shape: &serde_json::Value) -> String {
    let d = |k: &str| shape[k].as_u64().unwrap_or(0);
    if d("l") == 1 {
        format!("{}x{}x{}", d("m"), d("n"), d("k"))
    } else {
        format!("{}x{}x{}x{}", d("m"), d("n"), d("k"), d("l"))
    }
}

/// The table holds real files and problems the model can name at each minimal case: a typo
/// here would make the GPU test fail for the table's sake, not the harness's.
#[test]
fn every_planted_kernel_exists_and_its_problem_is_one_the_model_names() {
    let root = repository();
    for planted in &PLANTED {
        assert!(
            root.join(planted.path).exists(),
            "{}: no such file",
            planted.path
        );
        let shape = shape_of(planted.minimal);
        let slugs: Vec<String> = NearbyProblem::candidates(shape)
            .into_iter()
            .map(NearbyProblem::slug)
            .collect();
        assert!(
            planted.problem == "never-written" || slugs.iter().any(|s| s == planted.problem),
            "{}: {} is not among the nearby problems at {}",
            planted.path,
            planted.problem,
            planted.minimal
        );
    }
    let distinct: std::collections::BTreeSet<&str> = PLANTED.iter().map(|p| p.problem).collect();
    assert!(
        distinct.len() >= 10,
        "at least ten different wrong problems"
    );
}

/// What one campaign of a planted kernel gave.
struct Outcome {
    code: Option<i32>,
    seconds: f64,
    after_first_failure: Option<f64>,
    certificate: serde_json::Value,
}

fn campaign(planted: &Planted, seed: u64, report: &Path) -> Outcome {
    let path = repository().join(planted.path);
    let flag = if planted.path.ends_with(".toml") {
        "--manifest"
    } else {
        "--submission"
    };
    let started = Instant::now();
    let out = common::oracle_command()
        .args(["certify", flag])
        .arg(&path)
        .args(["--sanitize", "0", "--determinism", "0", "--seed"])
        .arg(seed.to_string())
        .arg("--report-dir")
        .arg(report)
        .env("NVFP4_ORACLE_TRACE", "1")
        .output()
        .expect("nvfp4-oracle runs");
    let seconds = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // "... data shrunk in 3.1 s; 41.2 s after the first failure"
    let after_first_failure = stderr
        .lines()
        .filter_map(|l| l.strip_suffix(" s after the first failure"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .last();
    let certificate = common::certificate_in(report);
    Outcome {
        code: out.status.code(),
        seconds,
        after_first_failure,
        certificate,
    }
}

#[test]
#[ignore = "needs a GPU and torch: see the module's documentation"]
fn planted_wrong_problems_are_rejected_shrunk_and_named_on_a_gpu() {
    let only = std::env::var("PLANTED").unwrap_or_default();
    let dir = std::env::temp_dir().join(format!("nvfp4-planted-{}", std::process::id()));
    let mut wrong = Vec::new();
    println!("| planted kernel | exit | first failing case | minimal case | after the first failure (s) | command to exit (s) | wrong problem | region |");
    println!("|---|---|---|---|---|---|---|---|");
    for (i, planted) in PLANTED.iter().enumerate() {
        if !only.is_empty() && !only.split(',').any(|name| planted.path.contains(name)) {
            continue;
        }
        let report = dir.join(i.to_string());
        std::fs::create_dir_all(&report).unwrap();
        let outcome = campaign(planted, 20261207 + i as u64, &report);
        let failure = &outcome.certificate["failure"];
        let identification = &failure["identification"];
        let named = identification["problem"] == planted.problem
            || identification["also_consistent"]
                .as_array()
                .is_some_and(|a| a.iter().any(|p| p == planted.problem));
        let minimal = shape_text(&failure["minimal_case"]["shape"]);
        println!(
            "| `{}` | {:?} | {} | {minimal} | {} | {:.0} | {} | {} |",
            planted.path,
            outcome.code,
            shape_text(&failure["first_case"]["shape"]),
            outcome
                .after_first_failure
                .map_or("-".into(), |s| format!("{s:.1}")),
            outcome.seconds,
            identification["words"].as_str().unwrap_or("(none)"),
            failure["region"]["words"].as_str().unwrap_or("(none)"),
        );
        let right = outcome.code == Some(1)
            && minimal == planted.minimal
            && named
            && identification["explains_all"] == true
            && outcome
                .after_first_failure
                .is_some_and(|s| s <= AFTER_FIRST_FAILURE_SECONDS);
        if !right {
            wrong.push(planted.path);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "not as expected: {wrong:?}");
}
