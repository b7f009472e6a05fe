//! A long command is never silent in a CI log: with stderr a pipe (no bar can be drawn), certify
//! and preflight each say within 20 s that they are still working.

use crate::common;
use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The first line of `child`'s stderr that starts with `prefix`, within `within`; the child is
/// then ended (SIGTERM, which it cleans up after) and reaped.
fn first_note(mut child: Child, prefix: &str, within: Duration) -> Result<String, String> {
    let stderr = child.stderr.take().expect("piped");
    let (send, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    let found = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.starts_with(prefix) => break Ok(line),
            Ok(line) => seen.push(line),
            Err(_) => break Err(seen.join("\n")),
        }
    };
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    found
}

#[test]
fn certify_says_it_is_working_on_a_stderr_that_is_not_a_terminal() {
    let dir = common::scratch_dir("progress-certify");
    let child = common::with_key(&mut common::oracle_command(), &dir.join("secrets"))
        .args([
            "certify",
            "--kernel",
            "cpu-tiled",
            "--cases",
            "100000",
            "--time-budget",
            "60",
            "--seed",
            "6",
            "--report-dir",
        ])
        .arg(dir.join("report"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let note = first_note(child, "certify: cpu-tiled: ", Duration::from_secs(20));
    let note = note.unwrap_or_else(|seen| panic!("no note within 20 s; stderr:\n{seen}"));
    assert!(note.contains(" cases, ") && note.ends_with(" s"), "{note}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn preflight_says_it_is_working_while_a_submission_hangs() {
    let dir = common::scratch_dir("progress-preflight");
    let python = dir.join("python");
    std::fs::write(&python, "#!/bin/sh\nexec sleep 60\n").unwrap();
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let submission = dir.join("submission.py");
    std::fs::write(&submission, "def compile_kernel():\n    pass\n").unwrap();
    let child = common::oracle_command()
        .env("NVFP4_ORACLE_PYTHON", &python)
        .env("NVFP4_ORACLE_SANDBOX", "0")
        .args(["preflight", "--timeout", "50", "--submission"])
        .arg(&submission)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let note = first_note(child, "preflight: still working", Duration::from_secs(20));
    let note = note.unwrap_or_else(|seen| panic!("no note within 20 s; stderr:\n{seen}"));
    assert!(note.contains("of the 50 s that --timeout allows"), "{note}");
    let _ = std::fs::remove_dir_all(dir);
}
