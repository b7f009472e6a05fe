//! What certify says of itself is what it does: its help's defaults are the constants the
//! campaign uses, its first line counts the regime cases this run draws, and the coverage guide
//! lists the `source` and `class` values a plan writes.

use crate::common::{self, code_and_text, repo_path, scratch_dir};
use nvfp4_harness::certify::{
    DEFAULT_CASES, DEFAULT_CPU_REGIME_CASES, DEFAULT_GPU_CASES, DEFAULT_GPU_RANGE_CASES,
    DEFAULT_GPU_REGIME_CASES,
};
use std::collections::BTreeSet;
use std::io::BufRead;

/// The help paragraph of `flag` in `certify --help`.
fn flag_help(flag: &str) -> String {
    let out = common::oracle_command()
        .args(["certify", "--help"])
        .output()
        .unwrap();
    let (code, text) = code_and_text(out);
    assert_eq!(code, 0, "{text}");
    let start = text
        .find(&format!("  {flag} "))
        .unwrap_or_else(|| panic!("no {flag} in {text}"));
    let rest = &text[start..];
    rest[..rest.find("\n\n").unwrap_or(rest.len())].to_string()
}

#[test]
fn certify_help_gives_the_defaults_the_campaign_uses() {
    let cases = flag_help("--cases");
    assert!(
        cases.contains(&format!("Default: {DEFAULT_GPU_CASES} "))
            && cases.contains(&format!("else {DEFAULT_CASES}.")),
        "{cases}"
    );
    let regime = flag_help("--regime-cases");
    assert!(
        regime.contains(&format!("Default: {DEFAULT_GPU_REGIME_CASES} "))
            && regime.contains(&format!("({DEFAULT_CPU_REGIME_CASES})")),
        "{regime}"
    );
    let range = flag_help("--range-cases");
    assert!(
        range.contains(&format!("Default: {DEFAULT_GPU_RANGE_CASES} ")),
        "{range}"
    );
    let tokens = flag_help("--max-tokens");
    let default = nvfp4_harness::certify::DEFAULT_MAX_TOKENS;
    assert!(
        tokens.contains(&format!("[default: {default}]")),
        "{tokens}"
    );
}

/// certify's first line on stderr, for `args`; the run is then ended.
fn first_line(args: &[&str], secrets: &std::path::Path) -> String {
    let mut child = common::with_key(&mut common::oracle_command(), secrets)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let line = stderr
        .lines()
        .map_while(Result::ok)
        .find(|line| line.starts_with("certifying "))
        .unwrap_or_default();
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    line
}

#[test]
fn the_first_line_counts_the_regime_cases_this_run_draws() {
    let dir = scratch_dir("help-first-line");
    let report = dir.join("report");
    let report = report.to_str().unwrap();
    let secrets = dir.join("secrets");
    let cpu = first_line(
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--seed",
            "1",
            "--report-dir",
            report,
        ],
        &secrets,
    );
    assert!(cpu.starts_with("certifying 1 kernel(s)"), "{cpu}");
    assert!(
        !cpu.contains("deployment regimes"),
        "a CPU kernel draws none: {cpu}"
    );
    let submission = dir.join("kernel").join("submission.py");
    std::fs::create_dir_all(submission.parent().unwrap()).unwrap();
    std::fs::write(&submission, "def custom_kernel(data):\n    return None\n").unwrap();
    let gpu = first_line(
        &[
            "certify",
            "--submission",
            submission.to_str().unwrap(),
            "--reference",
            "cpu",
            "--seed",
            "1",
            "--report-dir",
            report,
        ],
        &secrets,
    );
    assert!(
        gpu.contains(&format!(
            "{DEFAULT_CPU_REGIME_CASES} in deployment regimes: one per regime"
        )),
        "{gpu}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The `source` and `class` values in the coverage guide's table of what runs are those a GPU
/// campaign's plan writes, no more and no fewer.
#[test]
fn the_coverage_guide_lists_the_sources_and_classes_plans_write() {
    let dir = scratch_dir("help-coverage-sources");
    let submission = dir.join("submission.py");
    std::fs::write(&submission, "def custom_kernel(data):\n    return None\n").unwrap();
    let out = common::with_key(&mut common::oracle_command(), &dir.join("secrets"))
        .args([
            "certify",
            "--plan",
            "--reference",
            "gpu",
            "--seed",
            "1",
            "--model",
            "llama-3-8b",
        ])
        .arg("--submission")
        .arg(&submission)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let planned: BTreeSet<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let field = |name: &str| row[name].as_str().unwrap().to_string();
            (field("source"), field("class"))
        })
        .collect();
    let guide = std::fs::read_to_string(repo_path("docs/guides/coverage.md")).unwrap();
    let table = &guide[guide.find("| source | class |").expect("the table")..];
    let mut listed = BTreeSet::new();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        for class in cells[2].split(", ") {
            listed.insert((cells[1].to_string(), class.to_string()));
        }
    }
    assert_eq!(listed, planned);
    let _ = std::fs::remove_dir_all(dir);
}
