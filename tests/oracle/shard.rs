//! `certify --shard I/N` and `merge`, through the command line as a CI job runs them: the
//! shards of a campaign merged give the unsharded campaign's certificate (cases, coverage,
//! verdict; a failure's minimal repro), and merge refuses shards that are not one campaign.

use crate::common;

use std::path::{Path, PathBuf};

use crate::common::{oracle_with_key as oracle, read_json as json};

fn scratch(name: &str) -> PathBuf {
    common::scratch_dir(&format!("shard-{name}"))
}

/// The coverage without the seconds it took (the one thing shards change).
fn coverage(certificate: &serde_json::Value) -> serde_json::Value {
    let mut coverage = certificate["coverage"].clone();
    let object = coverage.as_object_mut().unwrap();
    object.remove("seconds_by_shape_class");
    object.remove("seconds_by_phase");
    coverage
}

/// Certifies `kernel` whole into `dir/whole` and as `n` shards into `dir/shards`, then merges
/// the shards into `dir/merged`; returns the exit codes of the whole run and of the merge.
fn whole_and_merged(dir: &Path, kernel: &str, n: usize) -> (i32, i32) {
    whole_and_merged_with(dir, kernel, n, &[])
}

/// The same with more certify options (`--exact`).
fn whole_and_merged_with(dir: &Path, kernel: &str, n: usize, more: &[&str]) -> (i32, i32) {
    let secrets = dir.join("secrets");
    let campaign = [
        &[
            "certify",
            "--kernel",
            kernel,
            "--cases",
            "40",
            "--seed",
            "5",
            "--no-golden",
        ][..],
        more,
    ]
    .concat();
    let whole = dir.join("whole").display().to_string();
    let (whole_code, out) = oracle(
        &secrets,
        &[&campaign[..], &["--report-dir", &whole]].concat(),
    );
    assert!([0, 1, 3].contains(&whole_code), "{out}");
    let shards = dir.join("shards").display().to_string();
    let mut files = Vec::new();
    for i in 1..=n {
        let shard = format!("{i}/{n}");
        let (code, out) = oracle(
            &secrets,
            &[&campaign[..], &["--report-dir", &shards, "--shard", &shard]].concat(),
        );
        assert!([0, 1, 3].contains(&code), "{out}");
        assert!(out.contains(&format!("shard {shard}")), "{out}");
        files.push(format!("{shards}/{kernel}.shard-{i}-of-{n}.json"));
    }
    let merged = dir.join("merged").display().to_string();
    let mut args = vec!["merge", "--report-dir", &merged];
    args.extend(files.iter().map(String::as_str));
    let (merge_code, out) = oracle(&secrets, &args);
    assert!(out.contains(&format!("| {kernel} | {n} |")), "{out}");
    (whole_code, merge_code)
}

#[test]
fn four_shards_merged_are_the_unsharded_campaign() {
    let dir = scratch("pass");
    let (whole_code, merge_code) = whole_and_merged(&dir, "cpu-tiled", 4);
    assert_eq!((whole_code, merge_code), (0, 0));
    let whole = json(&dir.join("whole/cpu-tiled.json"));
    let merged = json(&dir.join("merged/cpu-tiled.json"));
    assert_eq!(merged["status"], "certified");
    assert_eq!(merged["merged_shards"], 4);
    assert!(merged["shard"].is_null());
    assert!(whole["coverage"]["cases"].as_u64().unwrap() > 40);
    assert_eq!(coverage(&merged), coverage(&whole));
    for field in [
        "status",
        "seed",
        "cases_requested",
        "kernel",
        "failure",
        "checks_skipped",
    ] {
        assert_eq!(merged[field], whole[field], "{field}");
    }
    // Each shard ran a quarter, none the whole.
    let shard = json(&dir.join("shards/cpu-tiled.shard-2-of-4.json"));
    let cases = |c: &serde_json::Value| c["coverage"]["cases"].as_u64().unwrap();
    assert!(
        cases(&shard) * 3 < cases(&whole),
        "{} of {}",
        cases(&shard),
        cases(&whole)
    );
    // bench trusts the merged certificate's signature, and no shard's.
    assert!(shard["shard"]["count"] == 4);
}

#[test]
fn a_failing_mutant_sharded_gives_one_failure_with_the_unsharded_minimal_repro() {
    let dir = scratch("fail");
    let kernel = "cpu-mutant-batch-ignored";
    let (whole_code, merge_code) = whole_and_merged(&dir, kernel, 4);
    assert_eq!((whole_code, merge_code), (1, 1));
    let whole = json(&dir.join(format!("whole/{kernel}.json")));
    let merged = json(&dir.join(format!("merged/{kernel}.json")));
    assert_eq!(merged["status"], "failed");
    for field in [
        "case_index",
        "first_case",
        "minimal_case",
        "shrink_steps",
        "verdict",
        "diagnosis",
        "regenerate",
    ] {
        assert_eq!(
            merged["failure"][field], whole["failure"][field],
            "failure.{field}"
        );
    }
    // The repro files came along, under the kernel's own names, and replay.
    let case = dir.join(format!("merged/{kernel}-repro-case.safetensors"));
    let output = dir.join(format!("merged/{kernel}-repro-output.safetensors"));
    assert!(case.exists() && output.exists());
    let (code, out) = oracle(
        &dir.join("secrets"),
        &[
            "check",
            "--case",
            &case.display().to_string(),
            "--output",
            &output.display().to_string(),
        ],
    );
    assert_eq!(code, 1, "the repro still fails: {out}");
}

#[test]
fn merge_refuses_shards_that_are_not_one_whole_campaign() {
    let dir = scratch("refuse");
    let secrets = dir.join("secrets");
    let shards = dir.join("shards");
    let shards_s = shards.display().to_string();
    let certify = |seed: &str, shard: &str| {
        let (code, out) = oracle(
            &secrets,
            &[
                "certify",
                "--kernel",
                "cpu-tiled",
                "--cases",
                "8",
                "--seed",
                seed,
                "--no-golden",
                "--quick",
                "--report-dir",
                &shards_s,
                "--shard",
                shard,
            ],
        );
        assert_eq!(code, 0, "{out}");
    };
    certify("1", "1/3");
    certify("1", "2/3");
    let file = |i: usize| format!("{shards_s}/cpu-tiled.shard-{i}-of-3.json");
    let merged = dir.join("merged").display().to_string();
    let merge = |files: &[String]| {
        let mut args = vec!["merge", "--report-dir", &merged];
        args.extend(files.iter().map(String::as_str));
        oracle(&secrets, &args)
    };
    let (code, out) = merge(&[file(1), file(2)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("shard 3/3 missing"), "{out}");
    let (code, out) = merge(&[file(1), file(2), file(2)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("shard 2/3 given more than once"), "{out}");
    // Shard 3 of another seed.
    certify("2", "3/3");
    let (code, out) = merge(&[file(1), file(2), file(3)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("their seed differs (1 vs 2)"), "{out}");
    // An edited shard: its signature no longer holds.
    certify("1", "3/3");
    let text = std::fs::read_to_string(file(3)).unwrap();
    std::fs::write(file(3), text.replace("\"cases\": ", "\"cases\": 1")).unwrap();
    let (code, out) = merge(&[file(1), file(2), file(3)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not trusted"), "{out}");
    // Signed by another key (another machine that does not share it).
    certify("1", "3/3");
    let (code, out) = oracle(
        &dir.join("other-secrets"),
        &[
            "merge",
            "--report-dir",
            &merged,
            &file(1),
            &file(2),
            &file(3),
        ],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not trusted"), "{out}");
    // An unsharded certificate is not a shard.
    let whole = dir.join("whole").display().to_string();
    let (code, out) = oracle(
        &secrets,
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--cases",
            "8",
            "--seed",
            "1",
            "--no-golden",
            "--quick",
            "--report-dir",
            &whole,
        ],
    );
    assert_eq!(code, 0, "{out}");
    let (code, out) = merge(&[format!("{whole}/cpu-tiled.json")]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("made without --shard"), "{out}");
    // The three shards of one campaign merge.
    let (code, out) = merge(&[file(1), file(2), file(3)]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_schedulers_variables_name_the_shard() {
    let dir = scratch("env");
    let run = |vars: &[(&str, &str)]| {
        let mut command = common::oracle_command();
        command
            .args([
                "certify",
                "--kernel",
                "cpu-tiled",
                "--cases",
                "4",
                "--seed",
                "3",
                "--no-golden",
                "--quick",
                "--report-dir",
            ])
            .arg(&dir)
            .env("NVFP4_ORACLE_SECRETS", dir.join("secrets"));
        for (k, v) in vars {
            command.env(k, v);
        }
        let out = command.output().unwrap();
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    assert!(run(&[("NVFP4_ORACLE_SHARD", "2/5")]).contains("shard 2/5"));
    let slurm = run(&[
        ("SLURM_ARRAY_TASK_ID", "0"),
        ("SLURM_ARRAY_TASK_MIN", "0"),
        ("SLURM_ARRAY_TASK_COUNT", "3"),
    ]);
    assert!(slurm.contains("shard 1/3"), "{slurm}");
    assert!(dir.join("cpu-tiled.shard-1-of-3.json").exists());
    let k8s = run(&[
        ("JOB_COMPLETION_INDEX", "3"),
        ("NVFP4_ORACLE_SHARD_COUNT", "4"),
    ]);
    assert!(k8s.contains("shard 4/4"), "{k8s}");
    let missing = run(&[("JOB_COMPLETION_INDEX", "3")]);
    assert!(missing.contains("NVFP4_ORACLE_SHARD_COUNT"), "{missing}");
}

#[test]
fn gpus_spreads_one_campaign_over_shard_processes_and_merges_them() {
    // On a machine without a GPU the CPU kernel runs in each process alike: the split and the
    // merge are what is tested (the GPU machines' run is in results/multi-gpu/).
    let dir = scratch("gpus");
    let secrets = dir.join("secrets");
    let campaign = [
        "certify",
        "--kernel",
        "cpu-tiled",
        "--cases",
        "20",
        "--seed",
        "8",
        "--no-golden",
        "--quick",
    ];
    let split = dir.join("split").display().to_string();
    // Without a GPU, --gpus names none that exists: refused at once.
    let (code, out) = crate::common::oracle_run(
        crate::common::with_key(&mut crate::common::oracle_command(), &secrets)
            .env("NVFP4_ORACLE_TEST_GPU_COUNT", "0")
            .args([&campaign[..], &["--gpus", "0,1", "--report-dir", &split]].concat()),
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("there is no GPU 0"), "{out}");
    let (code, out) = crate::common::oracle_run(
        crate::common::with_key(&mut crate::common::oracle_command(), &secrets)
            .env("NVFP4_ORACLE_TEST_GPU_COUNT", "2")
            .args([&campaign[..], &["--gpus", "0,1", "--report-dir", &split]].concat()),
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("certifying on 2 GPU(s)"), "{out}");
    let whole = dir.join("whole").display().to_string();
    assert_eq!(
        oracle(
            &secrets,
            &[&campaign[..], &["--report-dir", &whole]].concat()
        )
        .0,
        0
    );
    let merged = json(&dir.join("split/cpu-tiled.json"));
    assert_eq!(merged["merged_shards"], 2);
    assert_eq!(
        coverage(&merged),
        coverage(&json(&dir.join("whole/cpu-tiled.json")))
    );
    assert!(dir.join("split/gpu-shards/gpu-1.log").exists());
    // Each shard was pinned to its own half of the cores and used that share alone.
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        for gpu in ["0", "1"] {
            let log = std::fs::read_to_string(dir.join(format!("split/gpu-shards/gpu-{gpu}.log")))
                .unwrap();
            assert!(
                log.contains("cores: the ") && log.contains("cores this process may run on"),
                "shard {gpu} was not pinned: {log}"
            );
        }
    }
    let (code, out) = oracle(
        &secrets,
        &[&campaign[..], &["--gpus", "0,x", "--report-dir", &split]].concat(),
    );
    assert_eq!(code, 2, "{out}");
}

#[test]
fn exact_campaigns_merge_to_the_unsharded_outcome() {
    // Certified exact, and a schedule that differs (the earliest differing case is kept).
    for (kernel, code, outcome) in [
        ("cpu-hopper-sim", 0, "certified-exact"),
        ("cpu-mutant-reordered-k", 3, "schedule-differs"),
    ] {
        let dir = scratch(&format!("exact-{kernel}"));
        let (whole_code, merge_code) = whole_and_merged_with(&dir, kernel, 3, &["--exact"]);
        assert_eq!((whole_code, merge_code), (code, code), "{kernel}");
        let whole = json(&dir.join(format!("whole/{kernel}.json")));
        let merged = json(&dir.join(format!("merged/{kernel}.json")));
        assert_eq!(merged["exact"]["outcome"], outcome, "{kernel}");
        assert_eq!(merged["status"], whole["status"], "{kernel}");
        assert_eq!(
            merged["exact"]["coverage"], whole["exact"]["coverage"],
            "{kernel}"
        );
        assert_eq!(coverage(&merged), coverage(&whole), "{kernel}");
        for field in ["case_index", "first_case", "minimal_case", "difference"] {
            assert_eq!(
                merged["exact"]["mismatch"][field], whole["exact"]["mismatch"][field],
                "{kernel}: exact.mismatch.{field}"
            );
        }
    }
}

/// A campaign's inputs follow from its seed, drawn per run unless given: two runs without
/// --seed draw different production-shape inputs, the seed each drew is printed and recorded,
/// and --seed repeats it. A shard without --seed is refused: its cases would be another
/// campaign's.
#[test]
fn a_campaign_draws_its_seed_per_run_records_it_and_repeats_it() {
    use nvfp4_harness::certify::production_cases;
    use nvfp4_harness::kernels::ShapeSupport;
    use nvfp4_model::problem::{Distribution, ProblemKind};
    let dir = scratch("seed");
    let secrets = dir.join("secrets");
    let run = |name: &str, more: &[&str]| {
        let report = dir.join(name).display().to_string();
        let (code, out) = oracle(
            &secrets,
            &[
                &[
                    "certify",
                    "--kernel",
                    "cpu-tiled",
                    "--cases",
                    "2",
                    "--quick",
                    "--no-golden",
                    "--report-dir",
                    &report,
                ][..],
                more,
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{out}");
        let seed = json(&dir.join(name).join("cpu-tiled.json"))["seed"]
            .as_u64()
            .expect("the certificate records its seed");
        assert!(out.contains(&format!("repeat with --seed {seed}")), "{out}");
        seed
    };
    let (first, second) = (run("first", &[]), run("second", &[]));
    assert_ne!(first, second, "two runs drew one seed");
    let production = |seed: u64| {
        production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            false,
            &Distribution::ALL,
            &[],
            seed,
        )
        .0
    };
    let (a, b) = (production(first), production(second));
    assert!(a
        .iter()
        .zip(&b)
        .all(|(a, b)| a.shape == b.shape && a.seed != b.seed));
    let given = first.to_string();
    assert_eq!(run("again", &["--seed", &given]), first);
    assert_eq!(production(first), a);
    let (code, out) = oracle(
        &secrets,
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--shard",
            "1/2",
            "--report-dir",
            &dir.join("shard").display().to_string(),
        ],
    );
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("a shard needs --seed"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
