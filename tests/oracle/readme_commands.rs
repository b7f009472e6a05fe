//! The README and the guides as a new user reads them: every `nvfp4-oracle SUBCOMMAND --flag`
//! they show must be a subcommand the tool has and a flag its `--help` lists, and the cheap
//! commands they give to copy run as shown from a fresh checkout.

use crate::common;

use crate::common::{code_and_text, repo_path, scratch_dir};
use std::collections::{BTreeMap, BTreeSet};

/// The documents whose commands are checked.
const DOCUMENTS: [&str; 6] = [
    "README.md",
    "docs/guides/door.md",
    "docs/guides/b200-runbook.md",
    "docs/guides/commands.md",
    "docs/guides/ci.md",
    "docs/guides/gpu-machine.md",
];
/// Subcommands that have subcommands of their own.
const NESTED: [&str; 2] = ["scaled-gemm", "golden"];

/// The code a document shows: its indented and fenced blocks (continuation lines joined) and
/// its inline `code`, each with `# comments` removed.
fn code_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut fenced = false;
    let mut pending = String::new();
    // Prose is read a paragraph at a time: inline code may wrap onto the next line.
    let mut paragraph = String::new();
    let inline = |paragraph: &mut String, lines: &mut Vec<String>| {
        lines.extend(paragraph.split('`').skip(1).step_by(2).map(str::to_string));
        paragraph.clear();
    };
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            inline(&mut paragraph, &mut lines);
            fenced = !fenced;
            continue;
        }
        if fenced || line.starts_with("    ") {
            inline(&mut paragraph, &mut lines);
            let code = line.split(" #").next().unwrap_or("").trim();
            match code.strip_suffix('\\') {
                Some(head) => pending.push_str(head),
                None => {
                    pending.push_str(code);
                    lines.push(std::mem::take(&mut pending));
                }
            }
        } else if line.trim().is_empty() {
            inline(&mut paragraph, &mut lines);
        } else {
            paragraph.push(' ');
            paragraph.push_str(line.trim());
        }
    }
    inline(&mut paragraph, &mut lines);
    lines
}

/// The subcommands prose names without the binary ("`certify --gpus all`").
const SUBCOMMANDS: [&str; 11] = [
    "generate",
    "reference",
    "check",
    "scaled-gemm",
    "certify",
    "merge",
    "verify",
    "preflight",
    "variants",
    "bench",
    "golden",
];

/// (subcommand path, flags) of every `nvfp4-oracle ...` invocation in `line`, and of the line
/// itself when it starts with a subcommand.
fn invocations(line: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let line = match line.split_whitespace().next() {
        Some(first) if SUBCOMMANDS.contains(&first) => format!("nvfp4-oracle {line}"),
        _ => line.to_string(),
    };
    line.split("nvfp4-oracle ")
        .skip(1)
        .filter_map(|rest| {
            let words: Vec<&str> = rest
                .split_whitespace()
                .take_while(|w| !w.starts_with('|') && !w.contains("nvfp4-oracle"))
                .collect();
            let first = *words.first()?;
            // Prose that names the binary ("`nvfp4-oracle` into ~/.cargo/bin") is no command.
            if !first.chars().all(|c| c.is_ascii_lowercase() || c == '-') || first == "-" {
                return None;
            }
            let mut path = vec![first.to_string()];
            if NESTED.contains(&first) {
                path.push(words.get(1)?.to_string());
            }
            let flags = words
                .iter()
                .map(|w| w.trim_start_matches(['[', '(', '\'', '"']))
                .filter(|w| w.starts_with("--") && w.len() > 2)
                .map(|w| {
                    let end = w[2..]
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                        .map_or(w.len(), |i| i + 2);
                    w[..end].to_string()
                })
                .collect();
            Some((path, flags))
        })
        .collect()
}

fn help_of(path: &[String]) -> (i32, String) {
    code_and_text(
        common::oracle_command()
            .args(path)
            .arg("--help")
            .output()
            .unwrap(),
    )
}

#[test]
fn every_subcommand_and_flag_the_docs_show_exists() {
    let mut wanted: BTreeMap<Vec<String>, BTreeSet<String>> = BTreeMap::new();
    for document in DOCUMENTS {
        let text = std::fs::read_to_string(repo_path(document)).unwrap();
        for line in code_lines(&text) {
            for (path, flags) in invocations(&line) {
                wanted.entry(path).or_default().extend(flags);
            }
        }
    }
    // The extraction itself is checked: the documents show these.
    for (path, flag) in [
        (vec!["certify"], "--time-budget"),
        (vec!["scaled-gemm", "reference"], "--epilogue"),
        (vec!["golden", "verify"], "--max-cost"),
        (vec!["preflight"], "--dynamic-smem"),
        (vec!["certify"], "--gpus"),
        (vec!["bench"], "--baseline"),
    ] {
        let path: Vec<String> = path.into_iter().map(str::to_string).collect();
        assert!(
            wanted.get(&path).is_some_and(|flags| flags.contains(flag)),
            "{path:?} {flag} not found in the documents: {wanted:?}"
        );
    }
    let mut missing = Vec::new();
    for (path, flags) in &wanted {
        let (code, help) = help_of(path);
        if code != 0 {
            missing.push(format!(
                "nvfp4-oracle {}: no such subcommand",
                path.join(" ")
            ));
            continue;
        }
        for flag in flags {
            let listed = help.match_indices(flag.as_str()).any(|(at, _)| {
                !help[at + flag.len()..]
                    .starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
            });
            if !listed && flag != "--help" {
                missing.push(format!("nvfp4-oracle {} {flag}", path.join(" ")));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the documents show what the tool does not have: {missing:#?}"
    );
}

/// The documents' cheap commands, as they are written (a placeholder shape, the one thing the
/// user must fill in, replaced): each must run, from the repository root, with exit 0.
#[test]
fn the_cheap_commands_run_as_written() {
    let dir = scratch_dir("readme-commands");
    let readme = std::fs::read_to_string(repo_path("README.md")).unwrap();
    let lines = code_lines(&readme);
    let find = |start: &str| -> String {
        lines
            .iter()
            .find(|line| line.starts_with(start))
            .unwrap_or_else(|| panic!("the README no longer shows `{start}...`"))
            .clone()
    };
    let commands = [
        find("nvfp4-oracle variants"),
        find("nvfp4-oracle generate  --problem dual-gemm"),
        find("nvfp4-oracle reference --problem dual-gemm"),
        find("nvfp4-oracle scaled-gemm reference --a-format"),
        find("nvfp4-oracle golden verify --max-cost"),
    ];
    for command in commands {
        let words: Vec<String> = command
            .split_whitespace()
            .skip(1)
            .map(|w| match w {
                "MxNxK[xL]" => "64x64x64".to_string(),
                // Outputs go to the scratch directory, not the checkout.
                w if w.ends_with(".safetensors") => dir.join(w).display().to_string(),
                w => w.to_string(),
            })
            .collect();
        let out = common::oracle_command()
            .args(&words)
            .current_dir(repo_path(""))
            .output()
            .unwrap();
        let (code, text) = code_and_text(out);
        assert_eq!(code, 0, "`{command}`: {text}");
    }
}
