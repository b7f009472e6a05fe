//! A report directory as users share it: another kernel's certificate under the same name is
//! never replaced, and two runs writing one certificate at once are not both told "written".

use crate::common::{oracle_with_key, scratch_dir};

/// Two `submission.py` in folders of one name are both `<folder>-submission`: the second is
/// refused, naming both files, instead of replacing the first's certificate.
#[test]
fn same_named_submissions_from_two_folders_never_share_a_certificate() {
    let dir = scratch_dir("report-dir-same-name");
    let secrets = dir.join("secrets");
    let report = dir.join("report");
    let report_arg = report.to_str().unwrap();
    let mut paths = Vec::new();
    for (folder, body) in [("a", "# mine\n"), ("b", "# theirs\n")] {
        let path = dir.join(folder).join("kernel").join("submission.py");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            format!("{body}def custom_kernel(data):\n    return None\n"),
        )
        .unwrap();
        paths.push(path.to_str().unwrap().to_string());
    }
    let certify = |submission: &str| {
        oracle_with_key(
            &secrets,
            &[
                "certify",
                "--submission",
                submission,
                "--quick",
                "--cases",
                "1",
                "--no-golden",
                "--sanitize",
                "0",
                "--determinism",
                "0",
                "--seed",
                "3",
                "--report-dir",
                report_arg,
            ],
        )
    };
    let (code, text) = certify(&paths[0]);
    assert!([0, 1, 4].contains(&code), "{text}");
    let first = std::fs::read_to_string(report.join("kernel-submission.json")).unwrap();
    assert!(
        first.contains(&paths[0]),
        "the certificate names its file: {first}"
    );
    let (code, text) = certify(&paths[1]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("another kernel named 'kernel-submission'")
            && text.contains(&paths[0])
            && text.contains(&paths[1]),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(report.join("kernel-submission.json")).unwrap(),
        first,
        "the first kernel's certificate is kept"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A second run certifying a kernel into a directory where another run is writing its
/// certificate is refused at once, naming the run that holds it.
#[test]
fn a_second_run_into_one_report_directory_is_refused() {
    let dir = scratch_dir("report-dir-locked");
    let report = dir.join("report");
    let held = nvfp4_harness::certify::ReportLock::take(&report, "cpu-tiled").unwrap();
    let args = [
        "certify",
        "--kernel",
        "cpu-tiled",
        "--quick",
        "--cases",
        "1",
        "--no-golden",
        "--seed",
        "4",
        "--report-dir",
        report.to_str().unwrap(),
    ];
    let (code, text) = oracle_with_key(&dir.join("secrets"), &args);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("another nvfp4-oracle run")
            && text.contains(&format!("process {}", std::process::id())),
        "{text}"
    );
    assert!(!report.join("cpu-tiled.json").exists());
    drop(held);
    let (code, text) = oracle_with_key(&dir.join("secrets"), &args);
    assert_eq!(code, 0, "{text}");
    assert!(report.join("cpu-tiled.json").exists());
    assert!(
        !report.join(".cpu-tiled.lock").exists(),
        "released and removed"
    );
    let _ = std::fs::remove_dir_all(dir);
}
