//! Each step of a preflight bounded and cleaned up, whatever the code does: ptxas under
//! `--timeout` and killed with what it started, nothing left on disk when preflight times out or
//! is killed, a ptxas refusal a finding, a timeout its own exit code. Stand-in programs (sh
//! scripts) play ptxas and the interpreter, so no CUDA or CuTe DSL is needed.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `preflight`'s exit code for a step past `--timeout`.
const EXIT_TIMEOUT: i32 = 6;

/// A one-entry PTX module for sm_90a.
const SMALL_KERNEL: &str = ".version 8.0\n.target sm_90a\n.address_size 64\n\n\
    .visible .entry small()\n.maxntid 128, 1, 1\n{\n    ret;\n}\n";

/// An executable sh script `dir/name` running `body`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A process that is gone, or a zombie no one reaped yet: killed either way. SIGKILL is
/// delivered when the process next runs, so on a busy machine one killed a moment ago may still
/// show as running: it gets 5 s to finish dying; one never signalled lives on past them.
fn dead(pid: &str) -> bool {
    let started = std::time::Instant::now();
    loop {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        let state = stat.rsplit(')').next().unwrap_or("").trim_start();
        if state.is_empty() || state.starts_with('Z') {
            return true;
        }
        if started.elapsed() > std::time::Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Waits up to 10 s for `file` to be written (a stand-in says it started).
fn wait_for(file: &Path) -> String {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Ok(text) = std::fs::read_to_string(file) {
            if text.ends_with('\n') {
                return text;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{} was not written", file.display());
}

/// A folder's entries, for "nothing left behind".
fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect()
}

/// `preflight --ptx` of the small kernel with the stand-in `ptxas`, its temporary folder `tmp`.
fn preflight_ptx(dir: &Path, ptxas: &Path, tmp: &Path, extra: &[&str]) -> Command {
    let ptx = dir.join("small.ptx");
    std::fs::write(&ptx, SMALL_KERNEL).unwrap();
    let mut command = common::oracle_command();
    command
        .env("NVFP4_ORACLE_PTXAS", ptxas)
        .env("TMPDIR", tmp)
        .args(["preflight", "--ptx"])
        .arg(&ptx)
        .args(extra);
    command
}

/// A ptxas that never ends (and starts a process of its own that never ends either): killed at
/// --timeout with what it started, exit 6, a message naming the step and the flag, and no
/// temporary file left.
#[test]
fn ptxas_past_the_timeout_is_killed_with_what_it_started() {
    let dir = common::scratch_dir("preflight-ptxas-hang");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let pids = dir.join("pids");
    let ptxas = script(
        &dir,
        "ptxas",
        &format!("sleep 120 &\necho $$ $! > {}\nwait\n", pids.display()),
    );
    let started = Instant::now();
    let out = preflight_ptx(&dir, &ptxas, &tmp, &["--timeout", "2"])
        .output()
        .unwrap();
    let (code, text) = common::code_and_text(out);
    assert!(started.elapsed() < Duration::from_secs(60), "{text}");
    assert_eq!(code, EXIT_TIMEOUT, "{text}");
    assert!(text.contains("ptxas"), "{text}");
    assert!(text.contains("did not end within the 2 s"), "{text}");
    assert!(text.contains("--timeout"), "{text}");
    let pids = wait_for(&pids);
    for pid in pids.split_whitespace() {
        assert!(dead(pid), "process {pid} of ptxas outlived the timeout");
    }
    assert_eq!(entries(&tmp), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

/// Preflight killed (SIGTERM) while ptxas runs: ptxas and what it started end with it, and
/// nothing of it is left in the temporary folder.
#[test]
fn preflight_killed_during_ptxas_leaves_no_process_and_no_file() {
    let dir = common::scratch_dir("preflight-ptxas-killed");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let pids = dir.join("pids");
    let ptxas = script(
        &dir,
        "ptxas",
        &format!("sleep 120 &\necho $$ $! > {}\nwait\n", pids.display()),
    );
    let mut child = preflight_ptx(&dir, &ptxas, &tmp, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = wait_for(&pids);
    // SAFETY: a signal to the preflight this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("preflight did not end on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
    for pid in pids.split_whitespace() {
        assert!(dead(pid), "process {pid} of ptxas outlived preflight");
    }
    assert_eq!(entries(&tmp), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

/// Code that ptxas refuses would not load on the GPU either: a finding (exit 1) that quotes
/// ptxas, never "No finding".
#[test]
fn a_ptxas_refusal_is_a_finding() {
    let dir = common::scratch_dir("preflight-ptxas-refuses");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let said = "ptxas fatal   : Unresolved extern function 'helper_not_linked'";
    let ptxas = script(&dir, "ptxas", &format!("echo \"{said}\" >&2\nexit 255\n"));
    let out = preflight_ptx(&dir, &ptxas, &tmp, &[]).output().unwrap();
    let (code, text) = common::code_and_text(out);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("ptxas refused the code for sm_90a"), "{text}");
    assert!(text.contains(said), "{text}");
    assert!(!text.contains("No finding"), "{text}");
    // The same through the real ptxas, where there is one: an instruction that does not exist.
    if let Some(real) = nvfp4_harness::preflight::resources::find_ptxas() {
        let bad = SMALL_KERNEL.replace("ret;", "no_such_instruction.b32 %r1;\n    ret;");
        let ptx = dir.join("bad.ptx");
        std::fs::write(&ptx, bad).unwrap();
        let out = common::oracle_command()
            .env("NVFP4_ORACLE_PTXAS", &real)
            .args(["preflight", "--ptx"])
            .arg(&ptx)
            .output()
            .unwrap();
        let (code, text) = common::code_and_text(out);
        assert_eq!(code, 1, "{text}");
        assert!(text.contains("ptxas refused the code"), "{text}");
        assert!(text.contains("no_such_instruction"), "{text}");
    } else {
        common::skip("no ptxas here: the real refusal was not checked");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A stand-in interpreter `dir/bin/python` running `body` (sh), and a submission beside it.
fn fake_python(dir: &Path, body: &str) -> (PathBuf, PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let python = script(&bin, "python", body);
    let submission = dir.join("submission.py");
    std::fs::write(&submission, "def compile_kernel():\n    pass\n").unwrap();
    (python, submission)
}

/// A compile worker's result for one compilation: `ptx`'s kernels and host code naming `host`.
fn result_json(ptx: &str, host: &str) -> String {
    serde_json::json!({
        "phase": null, "error": null, "torch": "installed", "driven_by": "compile_kernel()",
        "compiles": [{"ptx": ptx, "host": host}],
    })
    .to_string()
}

/// `preflight --submission` with the stand-in `python`, from the working directory `cwd`, its
/// temporary folder `tmp`, the sandbox off where `sandbox_off`.
fn preflight_submission(
    python: &Path,
    submission: &Path,
    cwd: &Path,
    tmp: &Path,
    sandbox_off: bool,
) -> Command {
    let mut command = common::oracle_command();
    command
        .current_dir(cwd)
        .env("NVFP4_ORACLE_PYTHON", python)
        .env("TMPDIR", tmp)
        .env_remove("NVFP4_ORACLE_PTXAS")
        .env("PATH", "/usr/bin:/bin")
        .args(["preflight", "--submission"])
        .arg(submission);
    if sandbox_off {
        command.env("NVFP4_ORACLE_SANDBOX", "0");
    }
    command
}

/// With the sandbox off, the compilation still runs in a fresh folder of its own (never the
/// caller's working directory), is warned about, is read, and leaves nothing behind.
#[test]
fn with_the_sandbox_off_the_compilation_works_in_a_fresh_folder() {
    let dir = common::scratch_dir("preflight-unsandboxed");
    let (cwd, tmp) = (dir.join("cwd"), dir.join("tmp"));
    for d in [&cwd, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let ptx = SMALL_KERNEL.replace("sm_90a", "sm_100a");
    let where_file = dir.join("where");
    let mode_file = dir.join("mode");
    // The mode of the compilation's folder, the one preflight made in the temporary directory.
    let folder_mode = format!(
        "d=$PWD\nwhile [ \"$(dirname \"$d\")\" != {} ]; do d=$(dirname \"$d\"); done\n\
         stat -c %a \"$d\" > {}\n",
        tmp.display(),
        mode_file.display()
    );
    let (python, submission) = fake_python(
        &dir,
        &format!(
            "read token\npwd > {}\n{folder_mode}cat > result-$token.json <<'EOF'\n{}\nEOF\n",
            where_file.display(),
            result_json(&ptx, "gpu.launch_func @kernels::@small")
        ),
    );
    let out = preflight_submission(&python, &submission, &cwd, &tmp, true)
        .output()
        .unwrap();
    let (code, text) = common::code_and_text(out);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("# Preflight of "), "{text}");
    assert!(text.contains("## small"), "{text}");
    assert!(text.contains("NOT sandboxed"), "{text}");
    let worked_in = std::fs::read_to_string(&where_file).unwrap();
    assert!(
        Path::new(worked_in.trim()).starts_with(&tmp),
        "worked in {worked_in}"
    );
    let mode = std::fs::read_to_string(&mode_file).unwrap();
    assert_eq!(mode.trim(), "700", "private, as certify's folders are");
    assert_eq!(entries(&cwd), Vec::<String>::new());
    assert_eq!(entries(&tmp), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

/// A PTX whose kernel the host code of the same compilation does not launch is not what one
/// `cute.compile` made: refused, never reported as compiled.
#[test]
fn a_ptx_its_host_code_does_not_launch_is_refused() {
    let dir = common::scratch_dir("preflight-forged-ptx");
    let (cwd, tmp) = (dir.join("cwd"), dir.join("tmp"));
    for d in [&cwd, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let ptx = SMALL_KERNEL.replace("sm_90a", "sm_100a");
    let (python, submission) = fake_python(
        &dir,
        &format!(
            "read token\ncat > result-$token.json <<'EOF'\n{}\nEOF\n",
            result_json(&ptx, "gpu.launch_func @kernels::@another_kernel")
        ),
    );
    let out = preflight_submission(&python, &submission, &cwd, &tmp, false)
        .output()
        .unwrap();
    let (code, text) = common::code_and_text(out);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains(
            "holds the kernel small, which the host code of the same compilation does not launch"
        ),
        "{text}"
    );
    assert!(!text.contains("# Preflight"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Preflight killed while the compilation runs (and has started a process of its own): both
/// end with it, and its folder is removed.
#[test]
fn preflight_killed_during_the_compilation_leaves_no_process_and_no_file() {
    let dir = common::scratch_dir("preflight-compile-killed");
    let (cwd, tmp) = (dir.join("cwd"), dir.join("tmp"));
    for d in [&cwd, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let pids = dir.join("pids");
    let (python, submission) = fake_python(
        &dir,
        &format!("sleep 120 &\necho $$ $! > {}\nwait\n", pids.display()),
    );
    let mut child = preflight_submission(&python, &submission, &cwd, &tmp, true)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pids = wait_for(&pids);
    // SAFETY: a signal to the preflight this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no end on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for pid in pids.split_whitespace() {
        assert!(
            dead(pid),
            "process {pid} of the compilation outlived preflight"
        );
    }
    assert_eq!(entries(&tmp), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(dir);
}

/// `certify` of a submission this machine cannot run (here: no torch, or no GPU, or another
/// one) says how to check its code anyway: the preflight command, with its path and the
/// architecture, in the certificate's reason.
#[test]
fn certify_of_a_submission_that_cannot_run_here_names_its_preflight() {
    let python = "python3";
    let can_run = Command::new(python)
        .args([
            "-c",
            "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)",
        ])
        .output()
        .is_ok_and(|o| o.status.success());
    if can_run {
        common::skip("torch sees a GPU here: the submission might run, so nothing to point to");
        return;
    }
    let dir = common::scratch_dir("certify-points-to-preflight");
    let submission = dir.join("submission.py");
    std::fs::write(
        &submission,
        "def custom_kernel(data):\n    return data[-1]\n",
    )
    .unwrap();
    let manifest = dir.join("kernel.toml");
    std::fs::write(
        &manifest,
        "name = \"blackwell-only\"\nproblem = \"dual-gemm\"\nsubmission = \"submission.py\"\n\
         description = \"a submission for the B200\"\narch = \"sm_100a\"\n",
    )
    .unwrap();
    let out = common::oracle_command()
        .env("NVFP4_ORACLE_PYTHON", python)
        .env("NVFP4_ORACLE_SECRETS", dir.join("secrets"))
        .args(["certify", "--cases", "4", "--manifest"])
        .arg(&manifest)
        .arg("--report-dir")
        .arg(dir.join("report"))
        .output()
        .unwrap();
    let (code, text) = common::code_and_text(out);
    assert_eq!(code, 4, "{text}");
    let command = format!(
        "`nvfp4-oracle preflight --submission {} --arch sm_100a`",
        submission.display()
    );
    assert!(text.contains(&command), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}
