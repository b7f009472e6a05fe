//! The pre-merge gate: `certify --baseline` against the main branch's certificates, and the
//! reports a CI system reads (JUnit XML, a Markdown summary).

use nvfp4_harness::certify::compare_with_baseline;
use nvfp4_harness::certify::Certificate;
use nvfp4_harness::certify::{certify_variant, CampaignLimits};
use nvfp4_harness::kernels::cpu::{Bug, CpuKernel};
use std::path::{Path, PathBuf};

fn limits(cases: usize) -> CampaignLimits {
    CampaignLimits {
        cases,
        seed: 9,
        quick: true,
        ..CampaignLimits::default()
    }
}

fn certificate(kernel: &CpuKernel, dir: &Path) -> Certificate {
    let result = certify_variant(kernel, limits(20), &[], |_, _| {});
    Certificate::from_campaign(kernel, &limits(20), result, dir).unwrap()
}

#[test]
fn a_verdict_that_got_worse_is_a_regression_and_a_better_one_is_not() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gate-verdict");
    std::fs::create_dir_all(&dir).unwrap();
    let main = certificate(&CpuKernel::correct(), &dir);
    // The pull request's kernel: the same name, now with a planted bug.
    let mut pull_request = certificate(&CpuKernel::mutant(Bug::KTailDropped), &dir);
    pull_request.kernel = main.kernel.clone();
    let changes = compare_with_baseline(&main, &pull_request);
    let verdict = changes
        .iter()
        .find(|c| c.what.starts_with("verdict"))
        .expect("the verdict changed");
    assert_eq!(verdict.what, "verdict: certified -> failed");
    assert!(verdict.worse);
    // Fixed again: better is not a regression.
    let back = compare_with_baseline(&pull_request, &main);
    assert!(back.iter().all(|c| !c.worse), "{back:?}");
    assert!(compare_with_baseline(&main, &main).is_empty());
}

#[test]
fn a_deployment_regime_no_longer_reached_is_a_regression() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gate-regimes");
    std::fs::create_dir_all(&dir).unwrap();
    let main = certificate(&CpuKernel::correct(), &dir);
    let mut pull_request = main.clone();
    pull_request.coverage.by_regime.insert(
        "decode".into(),
        nvfp4_harness::certify::RegimeCount {
            cases: 3,
            sampled: 0,
        },
    );
    pull_request.coverage.planned_regime_cases = Some(9);
    // More regimes reached than the baseline: no regression.
    assert!(compare_with_baseline(&main, &pull_request)
        .iter()
        .all(|c| !c.worse));
    let back = compare_with_baseline(&pull_request, &main);
    for expected in [
        "deployment regimes no longer reached: decode",
        "deployment-regime cases planned: 9 -> 0",
    ] {
        assert!(
            back.iter().any(|c| c.worse && c.what == expected),
            "{expected}: {back:?}"
        );
    }
}

use crate::common::oracle_with_key as oracle;

#[test]
fn a_campaign_that_covers_less_than_the_baseline_fails_the_gate_with_exit_5() {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("gate-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let secrets = dir.join("secrets");
    let path = |name: &str| dir.join(name).display().to_string();
    let campaign = [
        "certify",
        "--kernel",
        "cpu-tiled",
        "--seed",
        "4",
        "--no-golden",
        "--quick",
    ];
    let (code, out) = oracle(
        &secrets,
        &[
            &campaign[..],
            &["--cases", "30", "--report-dir", &path("main")],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}");
    // The same campaign against it: unchanged, exit 0, and the reports say so.
    let (code, out) = oracle(
        &secrets,
        &[
            &campaign[..],
            &[
                "--cases",
                "30",
                "--report-dir",
                &path("same"),
                "--baseline",
                &path("main"),
                "--junit",
                &path("same.xml"),
                "--summary",
                &path("same.md"),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("| cpu-tiled | unchanged | - |"), "{out}");
    let junit = std::fs::read_to_string(dir.join("same.xml")).unwrap();
    for case in ["campaign", "compute-sanitizer", "determinism", "baseline"] {
        assert!(
            junit.contains(&format!("name=\"{case}\" classname=\"cpu-tiled\"")),
            "{case}: {junit}"
        );
    }
    assert!(!junit.contains("<failure"), "{junit}");
    let summary = std::fs::read_to_string(dir.join("same.md")).unwrap();
    assert!(summary.contains("| cpu-tiled | certified |"), "{summary}");
    assert!(summary.contains("| unchanged |"), "{summary}");
    // Fewer cases: coverage shrank, exit 5, a failing baseline test case, a bold line.
    let (code, out) = oracle(
        &secrets,
        &[
            &campaign[..],
            &[
                "--cases",
                "10",
                "--report-dir",
                &path("less"),
                "--baseline",
                &path("main"),
                "--junit",
                &path("less.xml"),
                "--summary",
                &path("less.md"),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 5, "{out}");
    assert!(out.contains("cases run:"), "{out}");
    let junit = std::fs::read_to_string(dir.join("less.xml")).unwrap();
    assert!(junit.contains("<failure"), "{junit}");
    assert!(std::fs::read_to_string(dir.join("less.md"))
        .unwrap()
        .contains("**cases run:"),);
    // A baseline edited after it was signed is not trusted: bad input, exit 2.
    let baseline = dir.join("main/cpu-tiled.json");
    let text = std::fs::read_to_string(&baseline).unwrap();
    std::fs::write(&baseline, text.replace("\"seed\": 4", "\"seed\": 44")).unwrap();
    let (code, out) = oracle(
        &secrets,
        &[
            &campaign[..],
            &[
                "--cases",
                "10",
                "--report-dir",
                &path("edited"),
                "--baseline",
                &path("main"),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("baseline not trusted"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn verify_says_whether_a_certificate_is_this_oracles_and_of_a_whole_campaign() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("gate-verify-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let secrets = dir.join("secrets");
    let report = dir.display().to_string();
    let campaign = [
        "certify",
        "--kernel",
        "cpu-tiled",
        "--seed",
        "4",
        "--cases",
        "6",
        "--no-golden",
        "--quick",
        "--report-dir",
        &report,
    ];
    assert_eq!(oracle(&secrets, &campaign).0, 0);
    let whole = dir.join("cpu-tiled.json").display().to_string();
    let (code, out) = oracle(&secrets, &["verify", &whole]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("signed with this machine's key | yes"),
        "{out}"
    );
    assert!(out.contains("source hash"), "{out}");
    assert!(out.contains("verdict: certified | yes"), "{out}");
    // A sound certificate of a kernel that could not run is no pass: exit 4, as certify's was.
    let unavailable = dir.join("unavailable");
    let (code, out) = oracle(
        &secrets,
        &[
            "certify",
            "--kernel",
            "hopper-baseline",
            "--report-dir",
            unavailable.to_str().unwrap(),
        ],
    );
    if code == 4 {
        let path = unavailable.join("hopper-baseline.json");
        let (code, out) = oracle(&secrets, &["verify", path.to_str().unwrap()]);
        assert_eq!(code, 4, "{out}");
        assert!(out.contains("verdict: unavailable | **no**"), "{out}");
    } else {
        eprintln!("hopper-baseline runs here ({code}): {out}");
    }
    // A certificate committed by an older build: a row that says so, not a parser's error.
    let old = crate::common::repo_path("results/sanitize/certs/hopper-baseline.json");
    if old.exists() {
        let (code, out) = oracle(&secrets, &["verify", old.to_str().unwrap()]);
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("certify the kernel again | **no**"), "{out}");
    }
    // Another machine's key.
    let (code, out) = oracle(&dir.join("other"), &["verify", &whole]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("signature: the signing key"), "{out}");
    // A shard is not a whole campaign.
    assert_eq!(
        oracle(&secrets, &[&campaign[..], &["--shard", "1/2"]].concat()).0,
        0
    );
    let shard = dir
        .join("cpu-tiled.shard-1-of-2.json")
        .display()
        .to_string();
    let (code, out) = oracle(&secrets, &["verify", &shard]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("it is shard 1/2; merge the shards | **no**"),
        "{out}"
    );
    // Edited after signing.
    let text = std::fs::read_to_string(&whole).unwrap();
    std::fs::write(&whole, text.replace("\"seed\": 4", "\"seed\": 5")).unwrap();
    let (code, out) = oracle(&secrets, &["verify", &whole]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not match its content"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
