//! The checks that run a worker under a tool or a sandbox: a tool's reports become findings, a
//! missing or rewritten tool log hides nothing, a kernel that fails when checked is not
//! certified, the determinism check through the protocol, a sandboxed worker's reach.

use super::{fake_kernel, python, small_case};
use crate::common;
use crate::common::fixture;
use nvfp4_harness::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_harness::worker::command::WorkerCommand;
use nvfp4_harness::worker::isolated::{IsolatedKernel, KernelInfo};
use nvfp4_model::problem::ProblemKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn a_worker_runs_under_a_tool_whose_reports_become_findings() {
    need_python!();
    use nvfp4_harness::certify::{sanitize, Tool};
    let kernel = fake_kernel("tool", &["zeros"], Duration::from_secs(5));
    let scratch = std::env::temp_dir().join(format!("nvfp4-tool-{}", std::process::id()));
    let report = sanitize(&kernel, 2, &fixture("fake_sanitizer.sh"), &scratch, 1);
    // The worker under the tool gets the environment of a plain run: nothing the harness sets
    // tells a kernel that it is being checked.
    let logged = std::fs::read_dir(&scratch)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".env"))
        .expect("the fake sanitizer writes the environment it was given");
    let given = std::fs::read_to_string(&logged).unwrap();
    // Every worker's own compiler cache, plain or not (tests/oracle/worker_isolation.rs compares a
    // plain worker's view with a checked one's, paths included).
    let per_worker: Vec<String> = nvfp4_harness::worker::command::cache_env(Path::new("/"))
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    for (key, value) in given.lines().filter_map(|l| l.split_once('=')) {
        if per_worker.iter().any(|k| k == key) {
            continue;
        }
        if key == nvfp4_harness::worker::protocol::INPUT_SOCKET_ENV {
            // Set for every worker, plainly run or not: where its input socket is.
            assert_eq!(value, "3");
            continue;
        }
        if ["NVFP4_ORACLE", "PYTORCH", "CUDA"]
            .iter()
            .any(|prefix| key.starts_with(prefix))
        {
            assert_eq!(
                std::env::var(key).ok().as_deref(),
                Some(value),
                "the harness set {key} for the run under the tool only"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    assert_eq!(report.tools.len(), 4);
    for run in &report.tools {
        // Every tool started the worker and ran both cases.
        assert_eq!((run.cases_run, &run.note), (2, &None), "{run:?}");
    }
    let findings: Vec<_> = report.findings().collect();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0].tool, Tool::Racecheck);
    assert_eq!(
        findings[0].location.as_deref(),
        Some("fake.cu:7 and fake.cu:9")
    );
    assert_eq!(findings[0].count, 12);
}

/// A tool that leaves no log after a sample that ran to its end (stopped before it wrote
/// anything): a finding for every tool, not a clean report.
#[test]
fn a_missing_tool_log_is_a_finding_not_a_clean_report() {
    need_python!();
    use nvfp4_harness::certify::sanitize;
    let kernel = fake_kernel("tool-no-log", &["zeros"], Duration::from_secs(5));
    let scratch = std::env::temp_dir().join(format!("nvfp4-tool-no-log-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    // Takes the options as compute-sanitizer does, runs the command, writes nothing.
    let tool = scratch.join("silent_sanitizer.sh");
    std::fs::write(
        &tool,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do case \"$1\" in --*) shift 2 ;; *) break ;; esac; done\nexec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let report = sanitize(&kernel, 2, &tool, &scratch.join("logs"), 1);
    let _ = std::fs::remove_dir_all(&scratch);
    assert_eq!(report.tools.len(), 4);
    for run in &report.tools {
        assert_eq!((run.cases_run, &run.note), (2, &None), "{run:?}");
        assert_eq!(run.findings.len(), 1, "{run:?}");
        assert!(
            run.findings[0].verdict.contains("it is missing or empty"),
            "{:?}",
            run.findings[0]
        );
    }
}

/// A worker that finds the tool's --log-file on its parent's command line, replaces the file
/// with a clean log (what hid an uninitialized read on the H100) and appends a clean summary
/// through the tool's own descriptor: the parent reads the log from a FIFO it opened before the
/// worker started, so the race report is still there, and the extra summary fails every tool.
#[test]
fn a_worker_that_rewrites_the_tool_log_hides_nothing() {
    need_python!();
    use nvfp4_harness::certify::{sanitize, Tool};
    let kernel = fake_kernel("tamper", &["tamper-log"], Duration::from_secs(5));
    let scratch = std::env::temp_dir().join(format!("nvfp4-tool-tamper-{}", std::process::id()));
    let report = sanitize(&kernel, 2, &fixture("fake_sanitizer.sh"), &scratch, 1);
    let _ = std::fs::remove_dir_all(&scratch);
    assert_eq!(report.tools.len(), 4);
    for run in &report.tools {
        assert_eq!((run.cases_run, &run.note), (2, &None), "{run:?}");
        assert!(
            run.findings
                .iter()
                .any(|f| f.verdict.contains("tampered with") && f.verdict.contains("2 summaries")),
            "{run:#?}"
        );
    }
    let race: Vec<_> = report
        .findings()
        .filter(|f| f.tool == Tool::Racecheck && f.location.is_some())
        .collect();
    assert_eq!(race.len(), 1, "{:#?}", report.tools);
    assert_eq!(race[0].location.as_deref(), Some("fake.cu:7 and fake.cu:9"));
}

/// The same inside the sandbox, where the tool is PID 1 and the FIFO's folder (under /tmp) is
/// bound in read-only: the tool can still write its log into the FIFO, the worker cannot remove
/// it, and what it writes into it, through its name or /proc/1/fd, shows.
#[test]
fn a_sandboxed_worker_that_rewrites_the_tool_log_hides_nothing() {
    need_python!();
    use nvfp4_harness::certify::{sanitize, Tool};
    // The launcher is the oracle binary (the test harness is not), set once for the process.
    let launcher = common::oracle_as_worker();
    let isolation = nvfp4_harness::sandbox::isolation(&launcher);
    if !isolation.sandboxed {
        common::skip(&format!(
            "no sandbox on this machine: {}",
            isolation.description
        ));
        return;
    }
    let kernel = common::fake_worker_kernel(
        "sandboxed-tamper",
        &["tamper-log"],
        vec![("PYTHONDONTWRITEBYTECODE".into(), "1".into())],
        Some(nvfp4_harness::sandbox::SandboxPaths::default()),
        Duration::from_secs(10),
        Duration::from_secs(5),
    );
    let scratch = std::env::temp_dir().join(format!("nvfp4-tool-sandboxed-{}", std::process::id()));
    let report = sanitize(&kernel, 2, &fixture("fake_sanitizer.sh"), &scratch, 1);
    let _ = std::fs::remove_dir_all(&scratch);
    for run in &report.tools {
        assert_eq!((run.cases_run, &run.note), (2, &None), "{run:?}");
        assert!(
            run.findings
                .iter()
                .any(|f| f.verdict.contains("tampered with")),
            "{run:#?}"
        );
    }
    let race: Vec<_> = report
        .findings()
        .filter(|f| f.tool == Tool::Racecheck && f.location.is_some())
        .collect();
    assert_eq!(race.len(), 1, "{:#?}", report.tools);
}

/// A kernel that raises, or dies, whenever it recognises a checked run (under the tool's
/// --log-file, or on inputs it saw before): both checks fail, and so does the certificate of a
/// campaign that passed, which `certify` answers with exit 1 and `bench` does not time.
#[test]
fn a_kernel_that_fails_when_checked_is_not_certified() {
    need_python!();
    use nvfp4_harness::certify::sanitize;
    use nvfp4_harness::certify::{determinism, COULD_NOT_RUN};
    use nvfp4_harness::certify::{CampaignLimits, CampaignResult};
    use nvfp4_harness::certify::{Certificate, Status};
    for mode in ["raise-when-checked", "crash-when-checked"] {
        let kernel = fake_kernel(mode, &[mode], Duration::from_secs(5));
        // Its plain runs answer.
        let (case, mut output) = small_case();
        kernel.run(&case, &mut output).unwrap();
        let scratch = std::env::temp_dir().join(format!("nvfp4-{mode}-{}", std::process::id()));
        let sanitizer = sanitize(&kernel, 2, &fixture("fake_sanitizer.sh"), &scratch, 1);
        for run in &sanitizer.tools {
            assert!(run.note.is_some(), "{run:?}");
            assert!(
                run.findings.iter().any(|f| f
                    .verdict
                    .contains("could not run the sample (0 of 2 cases ran)")),
                "{run:#?}"
            );
        }
        let checked = determinism(&kernel, 2, 1);
        assert_eq!(checked.findings.len(), 1, "{checked:#?}");
        assert_eq!(checked.findings[0].verdict, COULD_NOT_RUN);
        let limits = CampaignLimits {
            cases: 0,
            seed: 1,
            ..CampaignLimits::default()
        };
        let passed = CampaignResult {
            coverage: Default::default(),
            ran: Vec::new(),
            failure: None,
            elapsed: Duration::ZERO,
            exact: None,
        };
        let mut certificate =
            Certificate::from_campaign(&kernel, &limits, passed, &scratch).unwrap();
        assert_eq!(certificate.status, Status::Certified);
        certificate.add_checks(Some(sanitizer), Some(checked));
        assert_eq!(certificate.status, Status::Failed, "{mode}");
        let findings = certificate.check_findings().join("\n");
        assert!(findings.contains("could not run"), "{findings}");
        let _ = std::fs::remove_dir_all(&scratch);
    }
}

#[test]
fn the_determinism_check_reaches_the_worker_through_the_protocol() {
    need_python!();
    use nvfp4_harness::certify::determinism;
    let honest = fake_kernel("steady", &["zeros"], Duration::from_secs(5));
    assert!(determinism(&honest, 2, 1).findings.is_empty());
    let stale = fake_kernel("stale", &["stale-shared"], Duration::from_secs(5));
    let report = determinism(&stale, 2, 1);
    assert_eq!(report.cases, 2);
    assert_eq!(report.findings.len(), 2, "{:#?}", report.findings);
    assert!(report.findings[0]
        .verdict
        .starts_with("reads shared memory it never wrote"));
}

/// The sandbox, tried from inside by a hostile fake worker: it cannot read the parent's memory
/// or ptrace it, cannot write the report directory, and the daemon it starts dies with it.
#[test]
fn a_sandboxed_worker_cannot_reach_the_parent_the_reports_or_outlive_itself() {
    need_python!();
    if let Err(why) = common::sandbox_here() {
        common::skip(&format!("no sandbox on this machine: {why}"));
        return;
    }
    let reports =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("reports-{}", std::process::id()));
    std::fs::create_dir_all(&reports).unwrap();
    let marker = format!("nvfp4-sandbox-test-{}", std::process::id());
    // A host daemon's socket where daemons keep them (/run, where this test may write: it runs
    // as root on CI and on the GPU machines).
    let socket_path = PathBuf::from(format!(
        "/run/nvfp4-oracle-test-{}.sock",
        std::process::id()
    ));
    let daemon = std::os::unix::net::UnixListener::bind(&socket_path).ok();
    if daemon.is_none() {
        eprintln!("skipping the host-socket attempt: cannot create a socket under /run here");
    }
    if let Some(daemon) = &daemon {
        daemon.set_nonblocking(true).unwrap();
    }
    let mut kernel = fake_kernel("hostile", &["hostile"], Duration::from_secs(5));
    kernel = {
        let mut command = WorkerCommand {
            program: PathBuf::from("python3"),
            args: vec![
                fixture("fake_worker.py").display().to_string(),
                "hostile".into(),
            ],
            env: vec![
                (
                    "NVFP4_TEST_PARENT_PID".into(),
                    std::process::id().to_string(),
                ),
                (
                    "NVFP4_TEST_REPORT_DIR".into(),
                    reports.display().to_string(),
                ),
                ("NVFP4_TEST_MARKER".into(), marker.clone()),
                (
                    "NVFP4_TEST_HOST_SOCKET".into(),
                    socket_path.display().to_string(),
                ),
            ],
            start_timeout: Duration::from_secs(10),
            sandbox: Some(nvfp4_harness::sandbox::SandboxPaths::default()),
            clean_env: false,
        };
        command
            .env
            .push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
        drop(kernel);
        IsolatedKernel::new(
            KernelInfo {
                name: format!("fake-hostile-{}", std::process::id()),
                description: "hostile fake worker".into(),
                problem: ProblemKind::DualGemm,
                support: ShapeSupport::ANY,
                schedule: None,
                source_hash: "0".repeat(64),
                deliberately_broken: true,
                nondeterministic: false,
                accumulation: None,
                source_path: None,
            },
            command,
            std::sync::Arc::new(|| Ok(())),
            Duration::from_secs(5),
        )
    };
    kernel.prepare().unwrap();
    let environment = kernel.environment();
    let results: serde_json::Value =
        serde_json::from_str(environment.python.as_deref().unwrap()).unwrap();
    assert!(
        environment
            .isolation
            .as_deref()
            .unwrap()
            .starts_with("sandboxed:"),
        "{environment:?}"
    );
    let socket_attempt = daemon.is_some().then_some("connect-host-socket");
    for attempt in [
        "read-parent-memory",
        "write-report-dir",
        "ptrace-parent",
        "clone-new-user-namespace",
    ]
    .into_iter()
    .chain(socket_attempt)
    {
        let outcome = results[attempt].as_str().unwrap();
        assert!(outcome.starts_with("refused"), "{attempt}: {outcome}");
    }
    assert_eq!(results["thread"], "ran", "threads start under the filter");
    assert_eq!(
        results["input-socket"], "a Unix socket",
        "the input socket reaches the worker through the launcher"
    );
    if let Some(daemon) = daemon {
        assert!(
            daemon.accept().is_err(),
            "the worker reached the host's socket"
        );
        let _ = std::fs::remove_file(&socket_path);
    }
    assert_eq!(results["daemon"], "started");
    assert!(!reports.join("forged.json").exists());
    drop(kernel);
    // The daemon's command line holds the marker: nothing may be left running with it.
    let alive = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
            .any(|cmdline| String::from_utf8_lossy(&cmdline).contains(&marker))
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(), "a process the worker started outlived it");
    let _ = std::fs::remove_dir_all(reports);
}
