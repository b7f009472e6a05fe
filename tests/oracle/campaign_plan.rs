//! `certify --plan` (the cases a campaign would run, without running them) and `certify --model`
//! (a model's own shapes), through the binary.

use crate::common::{oracle, oracle_command, scratch_dir};

/// One planned case as `--plan` prints it: (index, shape as a certificate writes it, dist).
fn planned(args: &[&str]) -> Vec<(usize, String, String)> {
    let out = oracle_command()
        .args(["certify", "--plan"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let dim = |name: &str| row[name].as_u64().unwrap();
            let mut shape = format!("{}x{}x{}", dim("m"), dim("n"), dim("k"));
            if dim("l") != 1 {
                shape.push_str(&format!("x{}", dim("l")));
            }
            (
                dim("index") as usize,
                shape,
                row["dist"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn plan_is_in_the_help() {
    let (code, help) = oracle(&["certify", "--help"]);
    assert_eq!(code, 0);
    assert!(help.contains("--plan") && help.contains("--model") && help.contains("--range-cases"));
}

/// The plan is the campaign: every case a run executes (its trace names each, in order) is the
/// plan's case at that index, and the run executes all of them.
#[test]
fn the_plan_equals_the_cases_a_run_executes() {
    let args = [
        "--kernel",
        "cpu-tiled",
        "--cases",
        "40",
        "--seed",
        "17",
        "--quick",
    ];
    let plan = planned(&args);
    assert!(plan.len() > 40, "{}", plan.len());
    let dir = scratch_dir("plan-equals-run");
    let run = oracle_command()
        .args(["certify"])
        .args(args)
        .arg("--report-dir")
        .arg(&dir)
        .env("NVFP4_ORACLE_TRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    // "trace: [    0.123] case 12 1x1x16 full tiny: 0.00 s (...), passed"
    let ran: Vec<(usize, String, String)> = stderr
        .lines()
        .filter_map(|line| {
            line.strip_prefix("trace: ")?
                .split_once("] ")?
                .1
                .strip_prefix("case ")
        })
        .map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            (
                words[0].parse().unwrap(),
                words[1].to_string(),
                words[2].to_string(),
            )
        })
        .collect();
    assert_eq!(ran, plan);
    let _ = std::fs::remove_dir_all(dir);
}

/// A GPU campaign's plan, on a machine with no GPU: the range cases and what they reach.
#[test]
fn a_gpu_plan_puts_a_case_in_every_pair_of_ranges_it_can_hold() {
    let gpu_plan = || {
        oracle_command()
            .args([
                "certify",
                "--plan",
                "--reference",
                "gpu",
                "--seed",
                "3",
                "--manifest",
            ])
            .arg(crate::common::repo_path(
                "examples/submissions/torch/kernel.toml",
            ))
            .output()
            .unwrap()
    };
    let out = gpu_plan();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let ranges = stdout
        .lines()
        .filter(|line| line.contains("\"class\":\"range\""))
        .count();
    assert!(ranges > 300, "{ranges}");
    // Every range case names the cell it was drawn for.
    assert!(stdout
        .lines()
        .filter(|line| line.contains("\"class\":\"range\""))
        .all(|line| line.contains("\"cell\":\"")));
    // The summary: every pair of the space reached but those past the bound.
    let summary = stderr.lines().find(|l| l.starts_with("plan: ")).unwrap();
    assert!(summary.contains("pairs of ranges reached"), "{summary}");
    // The same seed, the same plan.
    assert_eq!(String::from_utf8(gpu_plan().stdout).unwrap(), stdout);
}

/// `--model` with a built-in name and with a config.json: the model's shapes run (thin, on a
/// CPU kernel) and the certificate names the models.
#[test]
fn a_campaign_runs_a_models_shapes_by_name_and_from_its_config() {
    let dir = scratch_dir("model-shapes");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("tiny-moe.json");
    std::fs::write(
        &config,
        r#"{"hidden_size": 512, "intermediate_size": 1536, "moe_intermediate_size": 256,
            "n_routed_experts": 4, "num_experts_per_tok": 2}"#,
    )
    .unwrap();
    let report = dir.join("report");
    let run = oracle_command()
        .args([
            "certify",
            "--kernel",
            "cpu-tiled",
            "--cases",
            "5",
            "--seed",
            "4",
        ])
        .args(["--model", "qwen2.5-7b", "--model"])
        .arg(&config)
        .arg("--report-dir")
        .arg(&report)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let certificate: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("cpu-tiled.json")).unwrap())
            .unwrap();
    let models = certificate["coverage"]["models"].as_array().unwrap();
    let names: Vec<&str> = models
        .iter()
        .map(|m| m["model"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["qwen2.5-7b", "tiny-moe"]);
    for model in models {
        assert!(model["planned"].as_u64().unwrap() > 0, "{model}");
    }
    assert!(
        certificate["coverage"]["by_shape_class"]["model"]
            .as_u64()
            .unwrap()
            > 0
    );
    let markdown = std::fs::read_to_string(report.join("cpu-tiled.md")).unwrap();
    assert!(
        markdown.contains("| models (--model) | qwen2.5-7b: "),
        "{markdown}"
    );
    // An unknown name is refused before anything runs, with the names it knows.
    let (code, text) = oracle(&[
        "certify",
        "--kernel",
        "cpu-tiled",
        "--model",
        "no-such-model",
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("deepseek-v3"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}
