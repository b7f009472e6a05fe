//! What a newcomer's third hour ran into: a file given by mistake read until memory ran out, a
//! worker script anyone could plant in /tmp, temporary folders left behind, sandbox failures
//! called crashes, certificates silently replaced, numbers that overflow. Each test here fails
//! where the fix it guards is undone.

use crate::common::{
    code_and_text, fake_worker_kernel, oracle_command, oracle_with_key, repo_path, sandbox_here,
    scratch_dir, skip, with_key,
};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

fn has_python() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs the oracle from the checkout's root with `env`; (exit code, stdout + stderr, seconds).
fn oracle_env(secrets: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, f64) {
    let started = Instant::now();
    let out = with_key(&mut oracle_command(), secrets)
        .current_dir(repo_path(""))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (code, text) = code_and_text(out);
    (code, text, started.elapsed().as_secs_f64())
}

/// The entries of `dir` named like the oracle's temporary folders.
fn oracle_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.starts_with("nvfp4-oracle"))
                .collect()
        })
        .unwrap_or_default()
}

fn write(path: &Path, text: &str) -> String {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.display().to_string()
}

const SUBMISSION: &str = "def custom_kernel(data):\n    return data[-1]\n";

#[test]
fn every_reader_refuses_an_endless_or_oversized_file_at_once() {
    let dir = scratch_dir("hardening-reads");
    let secrets = dir.join("secrets");
    // A header that declares a terabyte of tensors: refused before any body is read.
    let huge = dir.join("huge.safetensors");
    let header =
        br#"{"c":{"dtype":"F16","shape":[500000000000],"data_offsets":[0,1000000000000]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    std::fs::write(&huge, bytes).unwrap();
    let huge = huge.display().to_string();
    let table: &[(&[&str], &str)] = &[
        (
            &["check", "--case", "/dev/zero", "--output", "/dev/zero"],
            "not a valid safetensors file",
        ),
        (&["check", "--case", &huge, "--output", &huge], "declares"),
        (&["verify", "/dev/zero"], "longer than"),
        (&["certify", "--manifest", "/dev/zero"], "longer than"),
        (&["preflight", "--ptx", "/dev/zero"], "longer than"),
    ];
    for (args, words) in table {
        let (code, text, seconds) = oracle_env(&secrets, args, &[]);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(words), "{args:?}: {text}");
        assert!(seconds < 20.0, "{args:?} took {seconds} s");
    }
}

/// A fake python that records the worker script's path and its folders' modes, then runs the
/// real python3 (or, with `hang`, never answers).
fn fake_python(dir: &Path, log: &Path, hang: bool) -> String {
    let script = format!(
        "#!/bin/sh\nd=$(dirname \"$2\")\nprintf '%s %s\\n' \"$2\" \"$(stat -c %a \"$(dirname \"$d\")\")\" >> {}\n{}",
        log.display(),
        if hang {
            "exec sleep 120\n"
        } else {
            "exec python3 \"$@\"\n"
        }
    );
    let path = dir.join("fake-python");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// A scratch folder with its own TMPDIR, a fake python recording the worker's script path
/// (hanging with `hang`), a submission and a report folder.
struct FakeRun {
    dir: PathBuf,
    tmp: PathBuf,
    log: PathBuf,
    python: String,
    submission: String,
    report: String,
}

fn fake_run(name: &str, hang: bool) -> FakeRun {
    let dir = scratch_dir(name);
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let log = dir.join("worker-paths.log");
    let python = fake_python(&dir, &log, hang);
    let submission = write(&dir.join("kernel/submission.py"), SUBMISSION);
    let report = dir.join("report").display().to_string();
    FakeRun {
        dir,
        tmp,
        log,
        python,
        submission,
        report,
    }
}

#[test]
fn the_worker_script_lives_in_a_fresh_private_folder_that_goes_at_exit() {
    if !has_python() {
        return skip("no python3 to run the submission's worker");
    }
    let FakeRun {
        dir,
        tmp,
        log,
        python,
        submission,
        report,
    } = fake_run("hardening-private-tmp", false);
    let (code, text, _) = oracle_env(
        &dir.join("secrets"),
        &[
            "certify",
            "--submission",
            &submission,
            "--quick",
            "--cases",
            "1",
            "--no-golden",
            "--report-dir",
            &report,
        ],
        &[
            ("TMPDIR", tmp.to_str().unwrap()),
            ("NVFP4_ORACLE_PYTHON", &python),
            ("NVFP4_ORACLE_SANDBOX", "0"),
        ],
    );
    assert!([0, 1, 4].contains(&code), "{code}: {text}");
    let recorded = std::fs::read_to_string(&log).unwrap();
    let line = recorded.lines().next().expect("the worker ran");
    let (script, mode) = line.rsplit_once(' ').unwrap();
    let script = PathBuf::from(script);
    let private = script.parent().unwrap().parent().unwrap();
    assert_eq!(private.parent().unwrap(), tmp, "{line}");
    let name = private.file_name().unwrap().to_str().unwrap();
    // mkdtemp's six random characters, not a pid anyone can guess and plant beforehand.
    assert!(
        name.starts_with("nvfp4-oracle-") && name.len() == "nvfp4-oracle-".len() + 6,
        "{name}"
    );
    assert!(!name.ends_with("-worker"), "{name}");
    assert_eq!(mode, "700", "{line}");
    assert_eq!(
        oracle_leftovers(&tmp),
        Vec::<String>::new(),
        "left in TMPDIR"
    );
}

#[test]
fn an_import_that_hangs_is_stopped_by_start_timeout_and_ctrl_c_leaves_nothing() {
    if !has_python() {
        return skip("no python3 for the submission's worker");
    }
    let FakeRun {
        dir,
        tmp,
        log,
        python,
        submission,
        report,
    } = fake_run("hardening-hang", true);
    let args = [
        "certify",
        "--submission",
        &submission,
        "--quick",
        "--cases",
        "1",
        "--no-golden",
        "--report-dir",
        &report,
    ];
    let env = [
        ("TMPDIR", tmp.to_str().unwrap()),
        ("NVFP4_ORACLE_PYTHON", python.as_str()),
        ("NVFP4_ORACLE_SANDBOX", "0"),
    ];
    let (code, text, seconds) = oracle_env(
        &dir.join("secrets"),
        &[&args[..], &["--start-timeout", "2"]].concat(),
        &env,
    );
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("did not start within 2 s") && text.contains("--start-timeout"),
        "{text}"
    );
    assert!(seconds < 60.0, "{seconds} s");
    assert_eq!(oracle_leftovers(&tmp), Vec::<String>::new());

    // Interrupted while the worker starts: the private folder goes too. SIGINT restored to its
    // default in the child: a test run started in the background by a non-interactive shell
    // ignores it, the oracle keeps an ignored signal ignored (as nohup asks), and Ctrl-C would
    // not be what this test sends.
    let mut command = oracle_command();
    // SAFETY: signal(2) is async-signal-safe, and the closure touches nothing else.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = with_key(&mut command, &dir.join("secrets"))
        .args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log.exists() || std::fs::read_to_string(&log).unwrap().lines().count() < 2 {
        assert!(Instant::now() < deadline, "the worker never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        oracle_leftovers(&tmp).len(),
        1,
        "the private folder while it runs"
    );
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !oracle_leftovers(&tmp).is_empty() {
        assert!(
            Instant::now() < deadline,
            "left after Ctrl-C: {:?}",
            oracle_leftovers(&tmp)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn sandbox_start_failures_are_called_what_they_are() {
    if let Err(why) = sandbox_here() {
        return skip(&format!("the sandbox cannot be built here: {why}"));
    }
    // A folder the launcher cannot bind: the sandbox, not the kernel, fails.
    let kernel = fake_worker_kernel(
        "sandbox-fails",
        &[],
        Vec::new(),
        Some(nvfp4_harness::sandbox::SandboxPaths {
            readable: vec![PathBuf::from("/nonexistent/nvfp4-oracle-test")],
            ..Default::default()
        }),
        Duration::from_secs(20),
        Duration::from_secs(20),
    );
    use nvfp4_harness::kernels::{KernelUnderTest, PrepareError};
    match kernel.prepare() {
        Err(PrepareError::Unusable(reason)) => {
            assert!(
                reason.contains("the sandbox could not be built"),
                "{reason}"
            );
            assert!(!reason.contains("crashed"), "{reason}");
        }
        other => panic!("{:?}", other.err()),
    }
    if !has_python() {
        return skip("no python3 for the submission's worker");
    }
    let dir = scratch_dir("hardening-sandbox");
    let secrets = dir.join("secrets");
    let submission = write(&dir.join("kernel/submission.py"), SUBMISSION);
    let report = dir.join("report").display().to_string();
    let args = [
        "certify",
        "--submission",
        &submission,
        "--quick",
        "--cases",
        "1",
        "--no-golden",
        "--report-dir",
        &report,
    ];
    // A python in /bin, whose prefix is the root: the root is not bound over the private /tmp.
    let python = ["/bin/python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    if let Some(python) = python {
        let (code, text, _) = oracle_env(&secrets, &args, &[("NVFP4_ORACLE_PYTHON", python)]);
        assert!([0, 1, 4].contains(&code), "{code}: {text}");
        assert!(!text.contains("Read-only file system"), "{text}");
        assert!(!text.contains("crashed"), "{text}");
    }
    // A kernel directly in /tmp: its folder cannot be shown whole; said before anything runs.
    let in_tmp = PathBuf::from(format!("/tmp/nvfp4-hardening-{}.py", std::process::id()));
    std::fs::write(&in_tmp, SUBMISSION).unwrap();
    let (code, text, _) = oracle_env(
        &secrets,
        &["certify", "--submission", in_tmp.to_str().unwrap()],
        &[],
    );
    let _ = std::fs::remove_file(&in_tmp);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("a folder of its own"), "{text}");
}

#[test]
fn certificates_are_never_silently_replaced_and_report_paths_are_checked_first() {
    let dir = scratch_dir("hardening-certificates");
    let secrets = dir.join("secrets");
    let report = dir.join("report");
    let report_arg = report.display().to_string();
    // A manifest that takes a built-in kernel's name.
    let manifest = write(
        &dir.join("kernel/kernel.toml"),
        "name = \"cpu-tiled\"\nsubmission = \"submission.py\"\n",
    );
    write(&dir.join("kernel/submission.py"), SUBMISSION);
    let (code, text) = oracle_with_key(&secrets, &["certify", "--manifest", &manifest]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("name of a built-in kernel"), "{text}");
    // Paths that cannot be written: refused at once, before a campaign.
    for args in [
        &["--report-dir", "/proc"][..],
        &["--junit", "/proc/junit.xml", "--report-dir", &report_arg][..],
        &[
            "--summary",
            "/nonexistent-dir/summary.md",
            "--report-dir",
            &report_arg,
        ][..],
    ] {
        let (code, text, seconds) = oracle_env(
            &secrets,
            &[&["certify", "--kernel", "cpu-tiled"][..], args].concat(),
            &[],
        );
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(seconds < 10.0, "{args:?}: {seconds} s: {text}");
    }
    // A certificate of a run that ran, then a run of the same kernel that cannot run here.
    let (code, text) = oracle_with_key(
        &secrets,
        &[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--quick",
            "--cases",
            "1",
            "--no-golden",
            "--seed",
            "2",
            "--report-dir",
            &report_arg,
        ],
    );
    assert_eq!(code, 0, "{text}");
    let ran = std::fs::read_to_string(report.join("cpu-tiled.json")).unwrap();
    // Stands for a GPU variant's certificate made on a GPU machine.
    let gpu = ran.replace(
        "\"kernel\": \"cpu-tiled\"",
        "\"kernel\": \"hopper-baseline\"",
    );
    std::fs::write(report.join("hopper-baseline.json"), &gpu).unwrap();
    let (code, text) = oracle_with_key(
        &secrets,
        &[
            "certify",
            "--kernel",
            "hopper-baseline",
            "--report-dir",
            &report_arg,
        ],
    );
    if code == 4 {
        assert!(text.contains("kept"), "{text}");
        assert_eq!(
            std::fs::read_to_string(report.join("hopper-baseline.json")).unwrap(),
            gpu,
            "the certificate of the run that ran is kept"
        );
    }
    // Another kernel's certificate under the name a manifest gives: refused before the run.
    let other = ran
        .replace("\"kernel\": \"cpu-tiled\"", "\"kernel\": \"mine\"")
        .replace("\"problem\": \"dual-gemm\"", "\"problem\": \"gemv\"");
    assert_ne!(other, ran);
    std::fs::write(report.join("mine.json"), &other).unwrap();
    let mine = write(
        &dir.join("kernel/mine.toml"),
        "name = \"mine\"\nsubmission = \"submission.py\"\n",
    );
    let (code, text) = oracle_with_key(
        &secrets,
        &["certify", "--manifest", &mine, "--report-dir", &report_arg],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("another kernel named 'mine'"), "{text}");
    assert_eq!(
        std::fs::read_to_string(report.join("mine.json")).unwrap(),
        other
    );
}

#[test]
fn numeric_flags_are_range_checked_and_lone_flags_refused() {
    let dir = scratch_dir("hardening-flags");
    let secrets = dir.join("secrets");
    let table: &[(&[&str], &str)] = &[
        (&["certify", "--cases", "-1"], "-1 is negative"),
        (
            &["certify", "--cases", "18446744073709551615"],
            "out of range",
        ),
        (&["certify", "--regime-cases", "-5"], "negative"),
        (
            &["certify", "--time-budget", "abc"],
            "expected a whole number",
        ),
        (&["certify", "--seed", "-3"], "negative"),
        (&["bench", "--reps", "0"], "out of range"),
        (
            &["preflight", "--ptx", "x.ptx", "--timeout", "0"],
            "out of range",
        ),
        (&["certify", "--symbol", "f"], "--library"),
        (&["certify", "--gpus", "0,0"], "named twice"),
        (&["certify", "--start-timeout", "-1"], "negative"),
    ];
    for (args, words) in table {
        let (code, text, seconds) = oracle_env(&secrets, args, &[]);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(words), "{args:?}: {text}");
        assert!(!text.contains("unexpected argument"), "{args:?}: {text}");
        assert!(seconds < 10.0, "{args:?}");
    }
    // No GPU 99 (nor any, on a machine without one).
    let (code, text, _) = oracle_env(
        &secrets,
        &["certify", "--gpus", "99"],
        &[("NVFP4_ORACLE_TEST_GPU_COUNT", "2")],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("there is no GPU 99"), "{text}");
    // bench names kernels as certify does, wildcards too.
    let (code, text, _) = oracle_env(&secrets, &["bench", "--kernel", "nope-*"], &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("unknown GPU variant 'nope-*'"), "{text}");
    let (_, text, _) = oracle_env(&secrets, &["bench", "--kernel", "hopper-*"], &[]);
    assert!(!text.contains("no GPU variant selected"), "{text}");
}
