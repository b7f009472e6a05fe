//! The CI templates of examples/ci/, run as far as a machine without their schedulers allows:
//! the Slurm scripts as they are with the array's variables set by hand, the Kubernetes Job's
//! shard count against its completions (and its shard variables by hand), the GitHub Actions
//! workflow parsed and its matrix against its shard count.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A small CPU campaign in place of a kernel's manifest.
const CAMPAIGN: &str = "--kernel cpu-tiled --cases 12 --no-golden --quick";

fn template(name: &str) -> PathBuf {
    common::repo_path(&format!("examples/ci/{name}"))
}

use crate::common::read_json as json;

fn scratch(name: &str) -> PathBuf {
    common::scratch_dir(&format!("ci-{name}"))
}

/// The unsharded campaign's certificate, for comparison.
fn unsharded(dir: &Path) -> serde_json::Value {
    let report = dir.join("whole");
    let status = common::oracle_command()
        .arg("certify")
        .args(CAMPAIGN.split(' '))
        .args(["--seed", "2026", "--report-dir"])
        .arg(&report)
        .env("NVFP4_ORACLE_SECRETS", dir.join("secrets"))
        .status()
        .unwrap();
    assert!(status.success());
    json(&report.join("cpu-tiled.json"))
}

#[test]
fn the_slurm_scripts_shard_and_merge_a_campaign() {
    let dir = scratch("slurm");
    let reports = dir.join("reports");
    let run = |script: &str, vars: &[(&str, String)]| {
        let mut command = Command::new("bash");
        command
            .arg(template(script))
            .env("ORACLE", common::oracle_binary())
            .env("ORACLE_ARGS", CAMPAIGN)
            .env("REPORTS", &reports)
            .env("NVFP4_ORACLE_SECRETS", dir.join("secrets"))
            .env_remove("NVFP4_ORACLE_SHARD");
        for (k, v) in vars {
            command.env(k, v);
        }
        common::code_and_text(command.output().unwrap())
    };
    // The array as `#SBATCH --array=0-3` makes it.
    let array = std::fs::read_to_string(template("slurm-certify.sh")).unwrap();
    assert!(array.contains("#SBATCH --array=0-3"));
    for id in 0..4 {
        let (code, out) = run(
            "slurm-certify.sh",
            &[
                ("SLURM_ARRAY_TASK_ID", id.to_string()),
                ("SLURM_ARRAY_TASK_MIN", "0".into()),
                ("SLURM_ARRAY_TASK_COUNT", "4".into()),
            ],
        );
        assert_eq!(code, 0, "{out}");
        assert!(out.contains(&format!("shard {}/4", id + 1)), "{out}");
    }
    let (code, out) = run("slurm-merge.sh", &[]);
    assert_eq!(code, 0, "{out}");
    let merged = json(&reports.join("merged/cpu-tiled.json"));
    let whole = unsharded(&dir);
    assert_eq!(merged["status"], "certified");
    assert_eq!(merged["coverage"]["cases"], whole["coverage"]["cases"]);
    assert!(reports.join("junit.xml").exists() && reports.join("summary.md").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_kubernetes_job_names_as_many_shards_as_it_completes() {
    let text = std::fs::read_to_string(template("k8s-indexed-job.yaml")).unwrap();
    let value_after = |key: &str| -> String {
        let at = text.find(key).unwrap_or_else(|| panic!("{key} missing"));
        text[at + key.len()..]
            .lines()
            .next()
            .unwrap()
            .trim()
            .trim_matches('"')
            .to_string()
    };
    let completions = value_after("completions:");
    let count_at = text.find("- name: NVFP4_ORACLE_SHARD_COUNT").unwrap();
    let count = text[count_at..]
        .lines()
        .nth(1)
        .and_then(|l| l.split("value:").nth(1))
        .unwrap()
        .trim()
        .trim_matches('"')
        .to_string();
    assert_eq!(completions, count);
    assert!(text.contains(&format!("*.shard-*-of-{count}.json")));
    assert!(text.contains("completionMode: Indexed"));
    // Its shards, with the variables Kubernetes sets by hand, merge into the whole campaign.
    let dir = scratch("k8s");
    let secrets = dir.join("secrets");
    let shards = dir.join("shards");
    let count: usize = count.parse().unwrap();
    for index in 0..count {
        let out = common::oracle_command()
            .arg("certify")
            .args(CAMPAIGN.split(' '))
            .args(["--seed", "2026", "--report-dir"])
            .arg(&shards)
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("NVFP4_ORACLE_SHARD_COUNT", count.to_string())
            .env("NVFP4_ORACLE_SECRETS", &secrets)
            .env_remove("NVFP4_ORACLE_SHARD")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let files: Vec<PathBuf> = (1..=count)
        .map(|i| shards.join(format!("cpu-tiled.shard-{i}-of-{count}.json")))
        .collect();
    let merged = dir.join("merged");
    let out = common::oracle_command()
        .arg("merge")
        .args(&files)
        .arg("--report-dir")
        .arg(&merged)
        .env("NVFP4_ORACLE_SECRETS", &secrets)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        json(&merged.join("cpu-tiled.json"))["coverage"]["cases"],
        unsharded(&dir)["coverage"]["cases"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_github_workflow_parses_and_its_matrix_is_every_shard() {
    let path = template("github-actions.yml");
    let script = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        _ => {
            common::skip("python3 with PyYAML is not available to parse the workflow");
            return;
        }
    };
    let workflow: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shards: usize = workflow["env"]["SHARDS"].as_str().unwrap().parse().unwrap();
    let matrix: Vec<u64> = workflow["jobs"]["certify"]["strategy"]["matrix"]["shard"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(matrix, (1..=shards as u64).collect::<Vec<_>>());
    assert_eq!(workflow["jobs"]["merge"]["needs"], "certify");
    let steps = workflow["jobs"]["merge"]["steps"].to_string();
    for command in [
        "nvfp4-oracle merge",
        "--baseline",
        "--junit",
        "nvfp4-oracle bench",
    ] {
        assert!(steps.contains(command), "the merge job runs {command}");
    }
}
