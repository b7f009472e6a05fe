//! Nothing of the host's in a sandboxed worker: an interpreter (a shell script standing in for
//! python, as NVFP4_ORACLE_PYTHON) that prints, as its last words, its environment, the head of
//! /etc/shadow and the names in the caller's home folder, run by certify and by preflight. Its
//! last words are quoted in the verdict; none of the host's must be among them. No GPU needed.

use crate::common;

use std::path::{Path, PathBuf};

const TOKEN: &str = "ghp_secret123";

/// A folder of its own with the fake interpreter and a submission, under the build's target
/// folder (a checkout, which the sandbox covers but for the folders a worker needs).
fn fixture(name: &str, home: &Path) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("sandbox-root-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("fakepy.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n\
             echo \"LEAKENV: $(env | wc -l) vars; token=$FAKE_CI_TOKEN; passed=$PASSED_ON_PURPOSE\" >&2\n\
             echo \"LEAKFILE: $(head -c 24 /etc/shadow 2>/dev/null)\" >&2\n\
             echo \"LEAKHOME: $(ls -A {} 2>/dev/null | tr '\\n' ' ')\" >&2\n\
             exit 3\n",
            home.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("sub.py"),
        "def custom_kernel(data):\n    return None\n",
    )
    .unwrap();
    dir
}

/// The line of `text` that starts with `marker`, what follows it.
fn line_after<'a>(text: &'a str, marker: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.find(marker).map(|at| &line[at + marker.len()..]))
}

fn assert_nothing_of_the_hosts(what: &str, text: &str, home: &Path) {
    // The fake ran and its last words were quoted: otherwise nothing below means anything.
    let env =
        line_after(text, "LEAKENV:").unwrap_or_else(|| panic!("{what}: no last words: {text}"));
    assert!(
        !text.contains(TOKEN),
        "{what}: the caller's token reached the worker: {text}"
    );
    assert!(
        env.contains("passed=visible"),
        "{what}: a --pass-env variable did not reach the worker: {env}"
    );
    if let Ok(shadow) = std::fs::read_to_string("/etc/shadow") {
        let head: String = shadow.chars().take(24).collect();
        assert!(
            head.len() < 6 || !text.contains(head.trim()),
            "{what}: /etc/shadow was read: {text}"
        );
    }
    let shown = line_after(text, "LEAKHOME:").unwrap_or_default();
    let names: Vec<String> = std::fs::read_dir(home)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    for name in &names {
        assert!(
            !shown.split_whitespace().any(|seen| seen == name),
            "{what}: the caller's home folder {} shows {name}: {shown}",
            home.display()
        );
    }
}

#[test]
fn a_sandboxed_worker_sees_no_variable_file_or_home_of_the_callers() {
    if let Err(why) = common::sandbox_here() {
        common::skip(&format!("no sandbox on this machine ({why})"));
        return;
    }
    let home = PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()));
    for (name, args) in [
        (
            "certify",
            &[
                "certify",
                "--submission",
                "sub.py",
                "--cases",
                "3",
                "--report-dir",
                "rep",
            ][..],
        ),
        (
            "preflight",
            &["preflight", "--submission", "sub.py", "--arch", "sm_100a"][..],
        ),
    ] {
        let dir = fixture(name, &home);
        let out = common::oracle_command()
            .args(args)
            .args(["--pass-env", "PASSED_ON_PURPOSE"])
            .current_dir(&dir)
            .env("FAKE_CI_TOKEN", TOKEN)
            .env("PASSED_ON_PURPOSE", "visible")
            .env("NVFP4_ORACLE_PYTHON", dir.join("fakepy.sh"))
            .output()
            .unwrap();
        let (_, mut text) = common::code_and_text(out);
        // What certify wrote (a certificate, JUnit, a summary), where it wrote any.
        for entry in walk(&dir.join("rep")) {
            text.push_str(&std::fs::read_to_string(entry).unwrap_or_default());
        }
        assert!(
            !text.contains("NOT sandboxed"),
            "{name}: the worker ran without the sandbox: {text}"
        );
        assert_nothing_of_the_hosts(name, &text, &home);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .flat_map(|p| if p.is_dir() { walk(&p) } else { vec![p] })
        .collect()
}
