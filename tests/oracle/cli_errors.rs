//! What a new user runs into first: bad usage and bad input refused at once with a message that
//! names the culprit (exit 2), numbers that look like flags, a reader that stops reading, and the
//! messages of commands that work but used to say the wrong thing.

use crate::common;

use crate::common::{code_and_text, oracle_with_key, repo_path, scratch_dir};
use nvfp4_model::case_file::{CaseReader, CaseWriter};
use safetensors::SafeTensors;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Runs the oracle from the checkout's root (the paths the tests give are relative to it).
fn oracle(args: &[&str]) -> (i32, String) {
    common::oracle_in(&repo_path(""), args)
}

/// Usage errors refused at once: (arguments, words the message must hold). Each must exit 2
/// within a second, before any large allocation or any campaign.
#[test]
fn usage_errors_exit_2_at_once_naming_the_culprit() {
    let dir = scratch_dir("cli-errors-usage");
    let out = dir.join("never.safetensors");
    let out = out.to_str().unwrap();
    let table: &[(&[&str], &[&str])] = &[
        // An output past 2^28 elements: refused before the operands are drawn.
        (
            &[
                "scaled-gemm",
                "reference",
                "--shape",
                "100000x100000x100000",
                "--out",
                out,
            ],
            &["more than 2^28 elements"],
        ),
        // A small output with operands past the machine's memory: refused before drawing.
        (
            &[
                "scaled-gemm",
                "reference",
                "--shape",
                "16384x16384x4194304",
                "--out",
                out,
            ],
            &["needs about", "GiB"],
        ),
        (
            &["golden", "verify", "--max-cost=-5"],
            &["--max-cost -5", "positive"],
        ),
        (
            &["golden", "verify", "--max-cost", "-5"],
            &["--max-cost -5", "positive"],
        ),
        (
            &["golden", "verify", "--max-cost", "0"],
            &["--max-cost 0", "positive"],
        ),
        (
            &["golden", "verify", "--max-cost", "1"],
            &["no golden case is that cheap"],
        ),
        // Every K order the model has, in clap's error as in the help.
        (
            &[
                "reference",
                "--shape",
                "8x8x16",
                "--k-order",
                "reverse",
                "--out",
                out,
            ],
            &["contiguous", "any", "per-product"],
        ),
        (
            &[
                "generate", "--shape", "8x8x16", "--dist", "normal", "--out", out,
            ],
            &["stagnation", "adversarial-nan"],
        ),
        // A table is printed only once everything was read: no header before the error.
        (
            &["verify", "/nonexistent/cpu-tiled.json"],
            &["cpu-tiled.json", "No such file"],
        ),
    ];
    for (args, words) in table {
        let started = Instant::now();
        let (code, text) = oracle(args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{args:?} took {:?}",
            started.elapsed()
        );
        for word in *words {
            assert!(text.contains(word), "{args:?}: no '{word}' in: {text}");
        }
        assert!(!text.contains("| certificate |"), "{args:?}: {text}");
        assert!(!text.contains("panicked"), "{args:?}: {text}");
    }
    assert!(!Path::new(out).exists());
}

/// A missing baseline is refused before the campaign runs, and the message names --baseline.
#[test]
fn a_missing_baseline_is_refused_before_the_campaign() {
    let dir = scratch_dir("cli-errors-baseline");
    let secrets = dir.join("secrets");
    let report = dir.join("report");
    let started = Instant::now();
    let (code, text) = oracle_with_key(
        &secrets,
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--baseline",
            "/nonexistent/main-certificates",
            "--report-dir",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("--baseline /nonexistent/main-certificates"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the campaign ran first: {text}"
    );
    assert!(!report.join("cpu-tiled.json").exists(), "{text}");

    // A baseline that is not a signed certificate: named too.
    let forged = dir.join("forged.json");
    std::fs::write(&forged, "{\"kernel\": \"cpu-tiled\"}").unwrap();
    let (code, text) = oracle_with_key(
        &secrets,
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--baseline",
            forged.to_str().unwrap(),
            "--report-dir",
            report.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("--baseline") && text.contains("not signed"),
        "{text}"
    );
    assert!(!report.join("cpu-tiled.json").exists(), "{text}");
}

/// A file of the case format whose tensors are `file`'s with `rename` applied to their names.
fn rewrite_with_names(file: &Path, to: &Path, rename: impl Fn(&str) -> String) {
    let bytes = std::fs::read(file).unwrap();
    let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
    let tensors = SafeTensors::deserialize(&bytes).unwrap();
    let mut writer = CaseWriter::default();
    for (name, view) in tensors.tensors() {
        writer.tensor(
            &rename(&name),
            view.dtype(),
            view.shape().to_vec(),
            view.data().to_vec(),
        );
    }
    for (key, value) in header.metadata().clone().unwrap_or_default() {
        writer.meta(&key, value);
    }
    writer.write(to).unwrap();
}

/// Cases that are not what `check` needs: refused as bad input (exit 2), saying what they are.
#[test]
fn check_refuses_an_empty_interval_and_an_inputs_file() {
    let dir = scratch_dir("cli-errors-check");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    let (code, text) = oracle(&["reference", "--shape", "8x8x32", "--out", &path("case.st")]);
    assert_eq!(code, 0, "{text}");
    let case = CaseReader::open(&dir.join("case.st")).unwrap();
    let expected = case
        .tensor("expected", safetensors::Dtype::F16, &[8, 8, 1])
        .unwrap();
    CaseWriter::default()
        .tensor("c", safetensors::Dtype::F16, vec![8, 8, 1], expected)
        .write(&dir.join("out.st"))
        .unwrap();
    let swap = |name: &str| match name {
        "lo" => "hi".to_string(),
        "hi" => "lo".to_string(),
        other => other.to_string(),
    };
    rewrite_with_names(&dir.join("case.st"), &dir.join("swapped.st"), swap);
    let (code, text) = oracle(&["generate", "--shape", "8x8x32", "--out", &path("inputs.st")]);
    assert_eq!(code, 0, "{text}");

    let table = [
        ("case.st", 0, vec!["PASS"]),
        (
            "swapped.st",
            2,
            vec!["swapped.st", "element [", "above hi", "swapped"],
        ),
        (
            "inputs.st",
            2,
            vec![
                "inputs.st",
                "is an inputs file",
                "run `nvfp4-oracle reference` first",
            ],
        ),
    ];
    for (file, want, words) in table {
        let (code, text) = oracle(&["check", "--case", &path(file), "--output", &path("out.st")]);
        assert_eq!(code, want, "{file}: {text}");
        for word in words {
            assert!(text.contains(word), "{file}: no '{word}' in: {text}");
        }
    }
}

/// `--alpha -0.5` is a number, not a flag.
#[test]
fn a_negative_alpha_is_a_number() {
    let dir = scratch_dir("cli-errors-alpha");
    let out = dir.join("case.st");
    let (code, text) = oracle(&[
        "scaled-gemm",
        "reference",
        "--shape",
        "16x8x32",
        "--dist",
        "moderate",
        "--alpha",
        "-0.5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("alpha -0.5"), "{text}");
    assert_eq!(
        CaseReader::open(&out).unwrap().meta("alpha").unwrap(),
        "-0.5"
    );
}

/// A gemv is written with N = 1 whatever --shape said, and the message says what was written.
#[test]
fn a_gemv_is_described_by_the_shape_written() {
    let dir = scratch_dir("cli-errors-gemv");
    for command in ["generate", "reference"] {
        let out = dir.join(format!("{command}.st"));
        let (code, text) = oracle(&[
            command,
            "--problem",
            "gemv",
            "--shape",
            "128x7x64",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{text}");
        assert!(text.contains("gemv 128x1x64"), "{command}: {text}");
        assert!(text.contains("N set to 1"), "{command}: {text}");
        assert!(!text.contains("128x7x64 gpumode"), "{command}: {text}");
        assert_eq!(CaseReader::open(&out).unwrap().shape().unwrap().n, 1);
    }
}

/// A reader that stops reading ends the oracle quietly, as it ends any Unix tool: no panic, no
/// backtrace, the status of SIGPIPE.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::os::fd::FromRawFd;
    use std::os::unix::process::ExitStatusExt;
    let out = scratch_dir("cli-errors-pipe").join("inputs.st");
    let generate = [
        "generate",
        "--shape",
        "8x8x16",
        "--out",
        out.to_str().unwrap(),
    ];
    let plan = ["certify", "--plan", "--kernel", "cpu-tiled", "--seed", "1"];
    for args in [&["variants"][..], &generate[..], &plan[..]] {
        // The reader goes away before the first line is printed: here before the child starts,
        // since the tests run as threads of one process and a reader's end still open while
        // another test forks would reach that child too, for a moment in which a write succeeds.
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills `fds` with two new descriptors, closed on exec.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: the reader's end, made above and used nowhere else.
        unsafe { libc::close(fds[0]) };
        // SAFETY: the writer's end, made above and owned by nothing else.
        let writer = unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[1]) };
        let child = common::oracle_command()
            .args(args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
        assert!(
            out.status.signal() == Some(libc::SIGPIPE) || out.status.code() == Some(141),
            "{args:?}: {:?} {stderr}",
            out.status
        );
    }
}

/// Without NVRTC, the hint names PyPI's package too (what .ci/run installs), not only the toolkit.
#[test]
fn the_nvrtc_hint_names_the_pypi_package() {
    let out = common::oracle_command()
        .args(["preflight", "--kernel", "hopper-baseline"])
        .env("LD_LIBRARY_PATH", "")
        .output()
        .unwrap();
    let (code, text) = code_and_text(out);
    if !text.contains("NVRTC not found") {
        common::skip("NVRTC is installed system-wide here: its absence cannot be shown");
        return;
    }
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("nvidia-cuda-nvrtc-cu12"), "{text}");
}

/// A merge refused (here: a shard missing) is an error with no half-printed table before it.
#[test]
fn a_refused_merge_prints_no_table() {
    let dir = scratch_dir("cli-errors-merge");
    let secrets = dir.join("secrets");
    let shards = dir.join("shards");
    let (code, text) = oracle_with_key(
        &secrets,
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--cases",
            "0",
            "--quick",
            "--no-golden",
            "--seed",
            "3",
            "--shard",
            "1/2",
            "--report-dir",
            shards.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{text}");
    let (code, text) = oracle_with_key(
        &secrets,
        &[
            "merge",
            shards.join("cpu-tiled.shard-1-of-2.json").to_str().unwrap(),
            "--report-dir",
            dir.join("merged").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("cpu-tiled"), "{text}");
    assert!(
        !text.contains("| kernel |"),
        "a table header before the error: {text}"
    );
}
