//! Small things a user meets, each said plainly: a report directory that is a file, a HOME
//! where the key's folder cannot be made, a usage error that leaves no folder behind, bench of a
//! kernel with no certificate.

use crate::common::{self, code_and_text, oracle_with_key, scratch_dir};

#[test]
fn a_report_dir_that_is_a_file_is_named_as_such() {
    let dir = scratch_dir("usage-report-file");
    let file = dir.join("report");
    std::fs::write(&file, "not a folder").unwrap();
    let (code, text) = oracle_with_key(
        &dir.join("secrets"),
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--quick",
            "--report-dir",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("is a file, not a folder"), "{text}");
    assert!(!text.contains("os error 17"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_home_where_the_key_cannot_be_made_names_the_variable_that_moves_it() {
    let out = common::oracle_command()
        .args(["certify", "--plan", "--kernel", "cpu-tiled", "--seed", "1"])
        .env("HOME", "/dev/null/home")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("NVFP4_ORACLE_SECRETS")
        .output()
        .unwrap();
    let (code, text) = code_and_text(out);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("cannot create the secrets directory")
            && text.contains("NVFP4_ORACLE_SECRETS=DIR"),
        "{text}"
    );
}

#[test]
fn a_shard_usage_error_leaves_no_report_directory() {
    let dir = scratch_dir("usage-shard");
    let report = dir.join("certify-report");
    for shard in ["5/2", "x"] {
        let (code, text) = oracle_with_key(
            &dir.join("secrets"),
            &[
                "certify",
                "--kernel",
                "cpu-tiled",
                "--seed",
                "1",
                "--shard",
                shard,
                "--report-dir",
                report.to_str().unwrap(),
            ],
        );
        assert_eq!(code, 2, "{shard}: {text}");
        assert!(
            !report.exists(),
            "{shard}: an empty report directory was left"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bench_of_a_submission_with_no_certificate_says_so() {
    let dir = scratch_dir("usage-bench-uncertified");
    let submission = dir.join("submission.py");
    std::fs::write(&submission, "def custom_kernel(data):\n    return None\n").unwrap();
    let report = dir.join("report");
    std::fs::create_dir(&report).unwrap();
    let (code, text) = oracle_with_key(
        &dir.join("secrets"),
        &[
            "bench",
            "--no-torch",
            "--submission",
            submission.to_str().unwrap(),
            "--report-dir",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("no certificate of this kernel's files"),
        "{text}"
    );
    assert!(
        text.contains("no selected kernel has a certificate"),
        "{text}"
    );
    assert!(!text.contains("can run on this machine"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}
