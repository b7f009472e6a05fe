//! The door for external kernels, on a machine with no GPU and no torch: the worker protocol's
//! parent side (crashes, hangs, unreadable and forged replies, restarts) against a fake worker,
//! the case files, manifest parsing and its errors, and the CLI's exit codes for bad input.
//! With torch and a GPU, the real door is exercised by results/door/door_run.sh.

use crate::common;

use half::f16;
use nvfp4_harness::kernels::manifest::{ArchRequirement, KernelCode, Manifest};
use nvfp4_harness::kernels::{
    KernelCase, KernelFailure, KernelUnderTest, PrepareError, ShapeSupport,
};
use nvfp4_harness::worker::command::WorkerCommand;
use nvfp4_harness::worker::isolated::{IsolatedKernel, KernelInfo};
use nvfp4_harness::worker::protocol::CaseFiles;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn python() -> Option<&'static str> {
    Command::new("python3")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "python3")
}

use crate::common::fixture;

fn fake_kernel(name: &str, args: &[&str], case_timeout: Duration) -> IsolatedKernel {
    let start = Duration::from_secs(3);
    common::fake_worker_kernel(name, args, Vec::new(), None, start, case_timeout)
}

fn small_case() -> (KernelCase, Vec<f16>) {
    let shape = Shape::new(3, 5, 32, 2).unwrap();
    let case = KernelCase::new(generate_dual_gemm(shape, Distribution::Full, 7), 0x7F);
    (case, vec![f16::NAN; 3 * 5 * 2])
}

macro_rules! need_python {
    () => {
        if python().is_none() {
            common::skip("no python3 here to run the fake worker");
            return;
        }
    };
}

#[test]
fn case_files_round_trip() {
    let (case, _) = small_case();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-files-{}", std::process::id()));
    let files = CaseFiles::write(&case, &dir).unwrap();
    let back = files.read().unwrap();
    assert_eq!(back.inputs, case.inputs);
    assert_eq!(back.blocked, case.blocked);
    assert_eq!(back.padding_fill, case.padding_fill);
    // A truncated tensor file is an error that names it.
    std::fs::write(files.tensor_path("sfb1_permuted"), [0u8; 3]).unwrap();
    let err = files.read().err().expect("size checked").to_string();
    assert!(err.contains("sfb1_permuted"), "{err}");
    // Every problem's case survives the trip.
    for problem in ProblemKind::ALL {
        let inputs = nvfp4_model::problem::generate::generate_problem(
            problem,
            Shape::new(70, 9, 48, 3).unwrap(),
            Distribution::Adversarial,
            11,
        );
        let case = KernelCase::new(inputs, 0x7F);
        let files = CaseFiles::write(&case, &dir.join(problem.name())).unwrap();
        let back = files.read().unwrap();
        assert_eq!(back.inputs, case.inputs, "{problem:?}");
        assert_eq!(back.blocked, case.blocked, "{problem:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_working_worker_answers_and_reports_its_environment() {
    need_python!();
    let kernel = fake_kernel("zeros", &["zeros"], Duration::from_secs(5));
    kernel.prepare().unwrap();
    assert_eq!(kernel.environment().torch.as_deref(), Some("0.fake"));
    let (case, mut output) = small_case();
    kernel.run(&case, &mut output).unwrap();
    assert!(
        output.iter().all(|x| x.to_bits() == 0),
        "the worker's zeros came back"
    );
}

#[test]
fn a_crash_is_a_verdict_with_the_workers_last_words_and_the_next_case_gets_a_new_worker() {
    need_python!();
    let counter = std::env::temp_dir().join(format!("nvfp4-door-starts-{}", std::process::id()));
    let _ = std::fs::remove_file(&counter);
    let kernel = fake_kernel(
        "crash-once",
        &["crash-once", &counter.display().to_string()],
        Duration::from_secs(5),
    );
    let (case, mut output) = small_case();
    match kernel.run(&case, &mut output) {
        Err(KernelFailure::Crashed(message)) => {
            assert!(
                message.contains("Segmentation fault (pretend)"),
                "{message}"
            )
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    kernel
        .run(&case, &mut output)
        .expect("a fresh worker serves the next case");
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "2");
    let _ = std::fs::remove_file(counter);
}

#[test]
fn a_hang_is_a_verdict_after_the_watchdog() {
    need_python!();
    let kernel = fake_kernel("hang", &["hang"], Duration::from_secs(1));
    let (case, mut output) = small_case();
    let started = std::time::Instant::now();
    assert!(matches!(
        kernel.run(&case, &mut output),
        Err(KernelFailure::Hung(_))
    ));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn unreadable_replies_are_crashes_and_unmarked_lines_are_never_replies() {
    need_python!();
    let (case, mut output) = small_case();
    let garbage = fake_kernel("garbage", &["garbage"], Duration::from_secs(5));
    match garbage.run(&case, &mut output) {
        Err(KernelFailure::Crashed(message)) => {
            assert!(message.contains("unreadable"), "{message}")
        }
        other => panic!("expected an unreadable reply, got {other:?}"),
    }
    let forge = fake_kernel("forge", &["forge"], Duration::from_secs(5));
    forge
        .run(&case, &mut output)
        .expect("the forged line is ignored, the real reply counts");
}

#[test]
fn start_failures_say_whether_the_machine_or_the_kernel_is_to_blame() {
    need_python!();
    let unavailable = fake_kernel("unavailable", &["unavailable"], Duration::from_secs(5));
    assert!(matches!(
        unavailable.prepare(),
        Err(PrepareError::Unavailable(reason)) if reason.contains("sm_100a")
    ));
    let unusable = fake_kernel("unusable", &["unusable"], Duration::from_secs(5));
    assert!(matches!(
        unusable.prepare(),
        Err(PrepareError::Unusable(reason)) if reason.contains("custom_kernel")
    ));
    let slow = fake_kernel("slow", &["slow-start"], Duration::from_secs(5));
    assert!(matches!(
        slow.prepare(),
        Err(PrepareError::Unusable(reason)) if reason.contains("did not start within 3 s")
    ));
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn manifests_are_validated_with_messages_that_name_the_problem() {
    let dir = std::env::temp_dir().join(format!("nvfp4-door-manifest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write(
        &dir,
        "submission.py",
        "def custom_kernel(data):\n    return data[-1]\n",
    );
    let good = write(
        &dir,
        "kernel.toml",
        "name = \"mine\"\nsubmission = \"submission.py\"\narch = \"sm_90a\"\n[shapes]\nk_multiple = 64\nmax_l = 2\n[schedule]\nmma = \"hopper-hmma-f16-f32\"\nk_order = \"increasing\"\nepilogue = \"silu-mul-f64-rne\"\n",
    );
    let manifest = Manifest::read(&good).unwrap();
    assert_eq!(manifest.name, "mine");
    assert_eq!(manifest.support.k_multiple, 64);
    assert_eq!(manifest.support.max_l, 2);
    assert_eq!(
        manifest.code,
        KernelCode::Submission(dir.join("submission.py"))
    );
    assert!(manifest.schedule.is_some());
    assert_eq!(manifest.hash.len(), 64);
    // The hash covers the submission: editing it changes the key certificates are stored under.
    write(
        &dir,
        "submission.py",
        "def custom_kernel(data):\n    return None\n",
    );
    assert_ne!(Manifest::read(&good).unwrap().hash, manifest.hash);

    let gemv = write(
        &dir,
        "gemv.toml",
        "name = \"v\"\nproblem = \"gemv\"\nsubmission = \"submission.py\"\n",
    );
    assert_eq!(Manifest::read(&gemv).unwrap().problem, ProblemKind::Gemv);
    assert_eq!(Manifest::read(&gemv).unwrap().accumulation, None);
    let fp32 = write(
        &dir,
        "fp32.toml",
        "name = \"f\"\naccumulation = \"per-product\"\nsubmission = \"submission.py\"\n",
    );
    assert_eq!(
        Manifest::read(&fp32).unwrap().accumulation,
        Some(nvfp4_model::model::bounds::KOrder::PerProduct)
    );
    // Without a manifest: the per-product intervals, which contain the default ones.
    assert_eq!(
        Manifest::for_code(
            KernelCode::Submission(dir.join("submission.py")),
            ProblemKind::DualGemm
        )
        .unwrap()
        .accumulation,
        Some(nvfp4_model::model::bounds::KOrder::PerProduct)
    );
    let production = write(
        &dir,
        "production.toml",
        "name = \"p\"\nsubmission = \"submission.py\"\n[shapes]\nk_multiple = 64\nproduction = [[256, 4096, 7168], [100, 200, 512, 3]]\n",
    );
    assert_eq!(
        Manifest::read(&production).unwrap().production_shapes,
        [
            nvfp4_model::problem::Shape::new(256, 4096, 7168, 1).unwrap(),
            nvfp4_model::problem::Shape::new(100, 200, 512, 3).unwrap()
        ]
    );

    // Packages the GPU machine lacks (CuTe DSL), installed beside the submission: first on the
    // worker's PYTHONPATH and readable in its sandbox, wherever they lie.
    std::fs::create_dir_all(dir.join("pkgs/dsl")).unwrap();
    let elsewhere = dir.with_extension("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let packaged = write(
        &dir,
        "packaged.toml",
        &format!(
            "name = \"p\"\nsubmission = \"submission.py\"\npython_path = [\"pkgs\", \"pkgs/dsl\", \"{}\"]\n",
            elsewhere.display()
        ),
    );
    let packaged = Manifest::read(&packaged).unwrap();
    let folders = [dir.join("pkgs"), dir.join("pkgs/dsl"), elsewhere.clone()];
    assert_eq!(packaged.python_path, folders);
    let kernel = nvfp4_harness::worker::external::external_kernel(&packaged).unwrap();
    let command = kernel.worker_command();
    let python_path = command
        .env
        .iter()
        .find(|(key, _)| key == "PYTHONPATH")
        .map(|(_, value)| value.clone())
        .expect("the worker's PYTHONPATH is set");
    let expected: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
    assert!(
        python_path.starts_with(&expected.join(":")),
        "{python_path}"
    );
    let readable = &command.sandbox.as_ref().expect("sandboxed").readable;
    assert!(readable.contains(&elsewhere), "{readable:?}");
    let _ = std::fs::remove_dir_all(&elsewhere);
    // Without python_path the worker's environment adds none.
    let plain =
        nvfp4_harness::worker::external::external_kernel(&Manifest::read(&gemv).unwrap()).unwrap();
    assert!(plain
        .worker_command()
        .env
        .iter()
        .all(|(key, _)| key != "PYTHONPATH"));

    let cases = [
        ("name = \"x\"\nsubmission = \"submission.py\"\npython_path = [\"missing\"]\n", "python_path 'missing'"),
        ("name = \"x\"\nlibrary = \"submission.py\"\nsymbol = \"f\"\npython_path = [\"pkgs\"]\n", "`python_path` goes with `submission`"),
        ("name = \"x\"\nsubmission = \"submission.py\"\ncolour = \"red\"\n", "colour"),
        ("name = \"x\"\nsubmission = \"submission.py\"\narch = \"hopper\"\n", "arch 'hopper'"),
        ("name = \"x\"\nsubmission = \"submission.py\"\n[shapes]\nk_multiple = 24\n", "multiple of 16"),
        ("name = \"x\"\nsubmission = \"submission.py\"\n[shapes]\nm_multiple = 0\n", "at least 1"),
        ("name = \"x\"\nlibrary = \"lib.so\"\n", "symbol"),
        ("name = \"x\"\nsubmission = \"submission.py\"\nlibrary = \"lib.so\"\nsymbol = \"f\"\n", "`symbol` goes with `library`"),
        ("name = \"x\"\n", "missing `submission`"),
        ("name = \"x\"\nsubmission = \"nope.py\"\n", "cannot open the submission"),
        ("name = \"a/b\"\nsubmission = \"submission.py\"\n", "letters, digits"),
        ("name = \"x\"\nproblem = \"matmul\"\nsubmission = \"submission.py\"\n", "unknown problem"),
        ("name = \"x\"\nsubmission = \"submission.py\"\n[schedule]\nmma = \"ampere\"\nk_order = \"increasing\"\nepilogue = \"silu-mul-f64-rne\"\n", "schedule.mma 'ampere'"),
        ("this is not toml", "invalid manifest"),
        ("name = \"x\"\naccumulation = \"fp16\"\nsubmission = \"submission.py\"\n", "accumulation 'fp16'"),
        ("name = \"x\"\nsubmission = \"submission.py\"\n[shapes]\nproduction = [[1, 2]]\n", "expected [M, N, K] or [M, N, K, L]"),
        ("name = \"x\"\nsubmission = \"submission.py\"\n[shapes]\nk_multiple = 64\nproduction = [[128, 128, 96]]\n", "outside the declared support (K % 64 == 0)"),
    ];
    for (text, expected) in cases {
        let path = write(&dir, "bad.toml", text);
        let err = Manifest::read(&path).expect_err(text).to_string();
        assert!(err.contains(expected), "{text:?}: {err}");
        assert!(
            err.contains("bad.toml"),
            "the message names the file: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn arch_requirements() {
    let exact = ArchRequirement::parse("sm_100a").unwrap();
    assert_eq!((exact.major, exact.minor, exact.exact), (10, 0, true));
    assert!(exact
        .unmet_by((9, 0))
        .unwrap()
        .contains("needs sm_100a; this GPU is sm_90"));
    assert!(exact.unmet_by((10, 0)).is_none());
    let at_least = ArchRequirement::parse("sm_80").unwrap();
    assert!(at_least.unmet_by((9, 0)).is_none());
    assert!(at_least.unmet_by((7, 5)).is_some());
    assert!(ArchRequirement::parse("sm_9").is_none());
    assert!(ArchRequirement::parse("90a").is_none());
}

/// Runs the oracle with `env` added, from the temporary directory; (exit code, stderr alone).
fn oracle(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = common::oracle_command()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(std::env::temp_dir())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn bad_input_at_the_door_exits_2_with_a_message_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("nvfp4-door-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("report").display().to_string();
    let missing = dir.join("missing.py").display().to_string();
    let (code, err) = oracle(
        &["certify", "--submission", &missing, "--report-dir", &report],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("missing.py") && err.contains("cannot open"),
        "{err}"
    );

    let bad = write(&dir, "bad.toml", "name = \"x\"\nsubmision = \"typo.py\"\n");
    let (code, err) = oracle(&["certify", "--manifest", &bad.display().to_string()], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("submision"), "{err}");

    let not_a_library = write(&dir, "lib.so", "not an ELF file");
    let (code, err) = oracle(
        &[
            "certify",
            "--library",
            &not_a_library.display().to_string(),
            "--symbol",
            "f",
            "--report-dir",
            &report,
        ],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("lib.so") && err.contains("cannot load"),
        "{err}"
    );
    // The loader's own reason, not libloading's bare "dlopen failed".
    assert!(
        err.contains("invalid ELF header") || err.contains("file too short"),
        "{err}"
    );

    let submission = write(
        &dir,
        "submission.py",
        "def custom_kernel(data):\n    return data[-1]\n",
    );
    let submission = submission.display().to_string();
    let (code, err) = oracle(
        &[
            "certify",
            "--submission",
            &submission,
            "--report-dir",
            &report,
        ],
        &[("NVFP4_ORACLE_PYTHON", "/nonexistent/python3")],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/python3"), "{err}");

    // No torch for this python3 (CI's): the machine cannot run it, exit 4, saying so, with an
    // "unavailable" certificate. With torch but no GPU: exit 4 too.
    if python().is_some() {
        let has_torch = Command::new("python3")
            .args(["-c", "import torch"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let (code, err) = oracle(
            &[
                "certify",
                "--submission",
                &submission,
                "--report-dir",
                &report,
            ],
            &[],
        );
        if has_torch {
            assert!(code == 4 || code == 0 || code == 1, "{code}: {err}");
        } else {
            assert_eq!(code, 4, "{err}");
            assert!(err.contains("certificate(s) written"), "{err}");
            // A submission without a manifest is named after its folder and file.
            let json = std::fs::read_dir(&report)
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .find(|path| path.extension().is_some_and(|e| e == "json"))
                .expect("a certificate was written");
            let certificate = std::fs::read_to_string(json).unwrap();
            assert!(
                certificate.contains("torch is not installed"),
                "{certificate}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// What is wrong with the file itself is a usage error on any machine, torch or not: exit 2,
/// the reason, and no certificate (it certifies nothing).
#[test]
fn a_broken_submission_is_bad_input_before_torch_is_asked_for() {
    need_python!();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-broken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table = [
        (
            "empty.py",
            "",
            "defines no custom_kernel(data) function (the file is empty)",
        ),
        (
            "syntax.py",
            "def custom_kernel(data)\n    return data[-1]\n",
            "syntax.py:1: syntax error",
        ),
        (
            "other_name.py",
            "import os\ndef kernel(data):\n    return data[-1]\n",
            "defines no custom_kernel(data) function",
        ),
    ];
    for (name, source, expected) in table {
        let submission = write(&dir, name, source).display().to_string();
        let report = dir.join(format!("report-{name}"));
        let (code, err) = oracle(
            &[
                "certify",
                "--submission",
                &submission,
                "--report-dir",
                &report.display().to_string(),
            ],
            &[],
        );
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains(expected), "{name}: {err}");
        let written: Vec<_> = std::fs::read_dir(&report)
            .map(|entries| entries.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        assert!(
            !written
                .iter()
                .any(|p| p.extension().is_some_and(|e| e == "json")),
            "{name}: no certificate for a usage error: {written:?}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_submission_worker_is_valid_python() {
    need_python!();
    let status = Command::new("python3")
        .args(["-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())"])
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("crates/harness/src/worker/submission_worker.py"),
        )
        .status()
        .unwrap();
    assert!(status.success());
}

/// A kernel of any problem computed from the model itself, optionally with a planted bug: it
/// exercises the campaign's plumbing (generation, judging, coverage, shrinking, repro files) for
/// the problems other than the dual GEMM, which no CPU kernel solves.
struct ModelKernel {
    name: &'static str,
    problem: ProblemKind,
    /// Drops the last element of every output (an "incomplete output" bug).
    drops_last: bool,
}

impl KernelUnderTest for ModelKernel {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "the model's own answer".into()
    }
    fn is_deliberately_broken(&self) -> bool {
        self.drops_last
    }
    fn problem(&self) -> ProblemKind {
        self.problem
    }
    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        use nvfp4_model::model::{bounds::KOrder, problem_reference};
        let reference = problem_reference(&case.inputs, KOrder::Contiguous);
        assert_eq!(output.len(), reference.expected.len());
        let keep = output.len() - usize::from(self.drops_last);
        output[..keep].copy_from_slice(&reference.expected[..keep]);
        Ok(())
    }
}

#[test]
fn every_problem_goes_through_the_campaign_and_its_failures_are_shrunk_and_written() {
    use nvfp4_harness::certify::{certify_variant, CampaignLimits};
    use nvfp4_harness::certify::{Certificate, Status};
    let limits = CampaignLimits {
        cases: 12,
        seed: 3,
        ..CampaignLimits::default()
    };
    let dir = std::env::temp_dir().join(format!("nvfp4-door-problems-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for problem in [ProblemKind::Gemm, ProblemKind::Gemv, ProblemKind::GroupGemm] {
        let good = ModelKernel {
            name: "model-good",
            problem,
            drops_last: false,
        };
        let result = certify_variant(&good, limits.clone(), &[], |_, _| {});
        assert!(result.failure.is_none(), "{problem:?}");
        assert_eq!(result.coverage.fp4_codes_seen.len(), 16, "{problem:?}");
        let broken = ModelKernel {
            name: "model-broken",
            problem,
            drops_last: true,
        };
        let result = certify_variant(&broken, limits.clone(), &[], |_, _| {});
        let failure = result
            .failure
            .as_ref()
            .expect("the dropped element is caught");
        let minimal = failure.minimal.spec.shape;
        assert_eq!(
            (minimal.m, minimal.n),
            (1, 1),
            "{problem:?} shrinks to one output"
        );
        let certificate = Certificate::from_campaign(&broken, &limits, result, &dir).unwrap();
        assert_eq!(certificate.status, Status::Failed);
        let repro = certificate.failure.unwrap();
        assert!(repro.repro_case.exists(), "{problem:?}: repro written");
        // The repro replays with `check`, exit 1.
        let out = common::oracle_command()
            .args(["check", "--case"])
            .arg(&repro.repro_case)
            .arg("--output")
            .arg(&repro.repro_output)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{problem:?}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_parents_clock_bounds_the_times_a_worker_reports() {
    need_python!();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-timing-{}", std::process::id()));
    let warmup: Vec<CaseFiles> = (0..3)
        .map(|i| {
            let (case, _) = small_case();
            CaseFiles::write(&case, &dir.join(format!("set{i}"))).unwrap()
        })
        .collect();
    // Counts the parent's cache resets: one before every request that calls, timed or not.
    struct CountingReset(usize);
    impl nvfp4_harness::gpu::l2::CacheReset for CountingReset {
        fn reset(&mut self) -> Result<(), nvfp4_harness::gpu::GpuError> {
            self.0 += 1;
            Ok(())
        }
    }
    for (mode, lies) in [("time-honest", false), ("time-liar", true)] {
        let baseline = fake_kernel("time-baseline", &["time-baseline"], Duration::from_secs(5));
        let kernel = fake_kernel(mode, &[mode], Duration::from_secs(5))
            .with_timing_baseline(baseline, false);
        let mut resets = CountingReset(0);
        let run = kernel
            .time(
                &mut resets,
                &warmup,
                20,
                |_| small_case().0,
                |n| vec![0, n - 1],
                Duration::from_secs(1),
            )
            .unwrap();
        assert_eq!(run.calls.samples_us.len(), 20);
        assert_eq!(
            run.null_loop.samples_us.len(),
            20,
            "as many calls without the kernel"
        );
        assert_eq!(resets.0, 40, "the cache reset before every call");
        assert_eq!(run.outputs.len(), 2, "the two picked outputs came back");
        assert!(run.outputs.iter().all(|(_, o)| o.len() == 3 * 5 * 2));
        // The fake hides 3 ms a call when it lies, nothing when honest. The slack itself is
        // measured on the GPU (results/parent-owned/); a busy CI machine's jitter is not
        // what this test is about, so the honest side is held to a millisecond.
        let unaccounted = run.unaccounted_us().unwrap();
        let finding = run.wall_clock_finding();
        if lies {
            assert!(unaccounted > 1500.0, "{mode}: {unaccounted} us");
            let text = finding.expect("the liar is caught");
            assert!(text.contains("outside its timed call"), "{text}");
        } else {
            assert!(unaccounted < 1000.0, "{mode}: {unaccounted} us");
        }
        // Each timed call's inputs existed during its call (the fake worker checks) and not after.
        assert!(!kernel.input_dir().join("timed-call").exists());
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A timed batch's slots in files (no GPU): one file per tensor of the data tuple, slot i at i
/// strides, shared with the workers as descriptors, as the GPU's batch memory is.
struct FileSlots {
    tensors: Vec<(nvfp4_harness::worker::protocol::SharedTensor, std::fs::File)>,
    slots: usize,
}

impl FileSlots {
    fn new(case: &KernelCase, slots: usize, dir: &Path) -> FileSlots {
        use nvfp4_harness::worker::protocol::{slot_stride, SharedTensor};
        std::fs::create_dir_all(dir).unwrap();
        let tensors = nvfp4_harness::worker::shared_inputs::device_tensors(case)
            .unwrap()
            .into_iter()
            .map(|(key, bytes)| {
                let len = slot_stride(bytes.len()) * (slots - 1) + bytes.len();
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(dir.join(&key))
                    .unwrap();
                file.set_len(len as u64).unwrap();
                let tensor = SharedTensor {
                    key,
                    len: bytes.len(),
                    mapped: len,
                    start: 0,
                };
                (tensor, file)
            })
            .collect();
        FileSlots { tensors, slots }
    }
}

impl nvfp4_harness::bench::batch_memory::BatchSlots for FileSlots {
    fn slots(&self) -> usize {
        self.slots
    }

    fn layout(&self) -> Vec<nvfp4_harness::worker::protocol::SharedTensor> {
        self.tensors.iter().map(|(t, _)| t.clone()).collect()
    }

    fn send_to(
        &self,
        socket: &std::os::unix::net::UnixStream,
    ) -> Result<(), nvfp4_harness::gpu::GpuError> {
        use std::os::fd::AsRawFd;
        let fds: Vec<_> = self.tensors.iter().map(|(_, f)| f.as_raw_fd()).collect();
        nvfp4_harness::worker::shared_inputs::send_fds(socket, &fds)
            .map_err(|e| nvfp4_harness::gpu::GpuError(e.to_string()))
    }

    fn write(&self, cases: &[KernelCase]) -> Result<(), nvfp4_harness::gpu::GpuError> {
        use nvfp4_harness::worker::protocol::slot_stride;
        use std::os::unix::fs::FileExt;
        for (slot, case) in cases.iter().enumerate() {
            let tensors = nvfp4_harness::worker::shared_inputs::device_tensors(case).unwrap();
            for ((_, bytes), (t, file)) in tensors.iter().zip(&self.tensors) {
                file.write_all_at(bytes, (slot * slot_stride(t.len)) as u64)
                    .unwrap();
            }
        }
        Ok(())
    }

    fn output(&self, slot: usize) -> Result<Vec<u8>, nvfp4_harness::gpu::GpuError> {
        use nvfp4_harness::worker::protocol::slot_stride;
        use std::os::unix::fs::FileExt;
        let (t, file) = self.tensors.last().unwrap();
        let mut bytes = vec![0u8; t.len];
        file.read_exact_at(&mut bytes, (slot * slot_stride(t.len)) as u64)
            .unwrap();
        Ok(bytes)
    }
}

/// The fake's batch inputs: batch b's slot i gets `fresh(100 + b * slots + i)`, and each
/// output is recorded in `judged` with whether it is its own call's `a` (what the fake writes);
/// a wrong one counts one element.
fn recorded_inputs<'a>(
    memory: &'a FileSlots,
    fresh: &'a (impl Fn(u64) -> KernelCase + Sync),
    slots: usize,
    judged: &'a mut Vec<(usize, usize, bool)>,
) -> nvfp4_harness::bench::batch_inputs::HostInputs<
    'a,
    impl Fn(usize, usize) -> KernelCase + Sync + 'a,
    impl FnMut(usize, usize, &KernelCase, Vec<u8>) -> usize + 'a,
> {
    nvfp4_harness::bench::batch_inputs::HostInputs::new(
        memory,
        move |b, i| fresh(100 + (b * slots + i) as u64),
        move |b, i, case: &KernelCase, output: Vec<u8>| {
            let a = case.inputs.operands()[0].1.data().to_vec();
            let right = output == a[..output.len()];
            judged.push((b, i, right));
            usize::from(!right)
        },
    )
}

#[test]
fn a_batch_is_timed_by_the_parents_clock_and_every_output_is_judged() {
    use nvfp4_harness::bench::batch_clock::{latency_finding, lone_finding, median};
    need_python!();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-batch-{}", std::process::id()));
    let warmup = vec![CaseFiles::write(&small_case().0, &dir.join("set0")).unwrap()];
    struct CountingReset(usize);
    impl nvfp4_harness::gpu::l2::CacheReset for CountingReset {
        fn reset(&mut self) -> Result<(), nvfp4_harness::gpu::GpuError> {
            self.0 += 1;
            Ok(())
        }
    }
    // Sixteen calls a batch: the parent's clock over a batch, less the baseline's request, over
    // the calls, holds the fake's sleeps to within a sixteenth of the requests' jitter on a busy
    // machine (eight let it drift 0.14 ms a call below the sleep under the whole test suite).
    const SLOTS: usize = 16;
    let shape = Shape::new(3, 5, 32, 2).unwrap();
    let fresh =
        |seed: u64| KernelCase::new(generate_dual_gemm(shape, Distribution::Full, seed), 0x7F);
    for mode in ["time-honest", "time-liar", "time-shaver", "time-lazy-batch"] {
        let baseline = fake_kernel("time-baseline", &["time-baseline"], Duration::from_secs(5));
        let kernel = fake_kernel(mode, &[mode], Duration::from_secs(5))
            .with_timing_baseline(baseline, false);
        let run = kernel
            .time(
                &mut CountingReset(0),
                &warmup,
                5,
                |_| small_case().0,
                |n| (0..n).collect(),
                Duration::from_secs(1),
            )
            .unwrap();
        let latency = median(&run.calls.samples_us).unwrap();
        let slots = FileSlots::new(&fresh(0), SLOTS, &dir.join(mode));
        let described = CaseFiles::describe(&fresh(0), Path::new(""));
        let mut resets = CountingReset(0);
        // Every output of every call, and whether it was made from its own call's inputs (the
        // fake writes the first bytes of `a` as its output).
        let mut judged = Vec::new();
        let batch = kernel
            .time_batches(
                &mut resets,
                &nvfp4_harness::bench::batch::BatchPlan {
                    memory: &slots,
                    described: &described,
                    batches: 3,
                    lone_batches: 2,
                    first_batch: 0,
                    timeout: Duration::from_secs(10),
                },
                &mut recorded_inputs(&slots, &fresh, SLOTS, &mut judged),
            )
            .unwrap();
        assert_eq!(
            judged.len(),
            5 * SLOTS,
            "{mode}: 3 batches of {SLOTS} calls and 2 lone-call batches, every output"
        );
        let wrong: Vec<_> = judged.iter().filter(|(_, _, right)| !right).collect();
        assert_eq!(
            batch.judged,
            5 * SLOTS,
            "{mode}: the run counts every judged output"
        );
        assert_eq!(
            batch
                .wrong
                .iter()
                .map(|call| (call.batch, call.slot, call.elements))
                .collect::<Vec<_>>(),
            wrong
                .iter()
                .map(|(b, i, _)| (*b, *i, 1))
                .collect::<Vec<_>>(),
            "{mode}: the run names each wrong call as the judge found it"
        );
        if mode == "time-lazy-batch" {
            // One call a batch left its poison: each batch's middle call, found every time.
            let middle = SLOTS / 2;
            assert_eq!(
                wrong.iter().map(|(b, i, _)| (*b, *i)).collect::<Vec<_>>(),
                (0..5).map(|b| (b, middle)).collect::<Vec<_>>()
            );
        } else {
            assert!(wrong.is_empty(), "{mode}: {wrong:?}");
        }
        assert_eq!(
            resets.0, 10,
            "the cache reset before each batch, the kernel's and the baseline's"
        );
        assert_eq!(batch.clock.kernel_batch_us.len(), 3);
        assert_eq!(batch.clock.baseline_batch_us.len(), 3);
        assert_eq!(batch.clock.lone_kernel_batch_us.len(), 2);
        assert_eq!(batch.clock.lone_baseline_batch_us.len(), 2);
        assert_eq!(
            batch.lone_samples_us.len(),
            2 * SLOTS,
            "a sample per lone call"
        );
        // The parent's clock holds the 1 ms each call of a batch in a stream sleeps and the
        // 2 ms of a lone call, whatever the worker reports; the fake's calls one at a time
        // sleep 3 ms. (The fake's lone calls are shorter than its calls one at a time so that
        // the test is about the rules' direction, not a busy CI machine's jitter, which is
        // larger than the allowance the GPU's honest runs set.)
        let per_call = batch.clock.median_per_call_us().unwrap();
        assert!(
            per_call > 900.0 && per_call < 20_000.0,
            "{mode}: {per_call} us a call"
        );
        let lone = batch.clock.lone_us().unwrap();
        assert!(lone > 1_900.0 && lone < 20_000.0, "{mode}: {lone} us alone");
        let finding = latency_finding(latency, per_call);
        let lone_found = lone_finding(latency, lone);
        match mode {
            "time-liar" => {
                let text = finding.expect("the liar's 10 us latency is not trusted");
                assert!(text.contains("10.0 us"), "{text}");
                assert!(lone_found.is_some(), "and it is below the lone calls");
            }
            "time-shaver" => {
                // 1.5 ms shaved off 3 ms: above the time per call in a stream (1 ms), so the
                // stream's rule does not see it; below the parent's lone call (2 ms).
                assert_eq!(finding, None, "{mode}: latency {latency} us");
                let text = lone_found.expect("the shaved latency is not trusted");
                assert!(text.contains("a call alone"), "{text}");
            }
            _ => {
                assert_eq!(
                    finding, None,
                    "{mode}: latency {latency} us, batch {per_call} us"
                );
                assert_eq!(
                    lone_found, None,
                    "{mode}: latency {latency} us, alone {lone} us"
                );
            }
        }
        if mode == "time-shaver" {
            // The recheck bench makes before a lone finding stands: one more round of lone
            // batches on the same workers, numbered past the first round's batches (fresh
            // inputs), added to the run. The shaver stays below every lone batch.
            let mut batch = batch;
            judged.clear();
            let again = kernel
                .time_batches(
                    &mut resets,
                    &nvfp4_harness::bench::batch::BatchPlan {
                        memory: &slots,
                        described: &described,
                        batches: 0,
                        lone_batches: 1,
                        first_batch: 5,
                        timeout: Duration::from_secs(10),
                    },
                    &mut recorded_inputs(&slots, &fresh, SLOTS, &mut judged),
                )
                .unwrap();
            assert_eq!(
                judged,
                (0..SLOTS).map(|i| (5, i, true)).collect::<Vec<_>>(),
                "the recheck's calls are batch 5's, every output judged"
            );
            assert!(again.clock.kernel_batch_us.is_empty());
            batch.add_lone_round(again);
            assert_eq!(batch.clock.lone_kernel_batch_us.len(), 3);
            assert_eq!(batch.clock.lone_baseline_batch_us.len(), 3);
            assert_eq!(batch.lone_samples_us.len(), 3 * SLOTS);
            assert_eq!(batch.judged, 6 * SLOTS);
            let lone = batch.clock.lone_us().unwrap();
            assert!(
                lone_finding(latency, lone).is_some(),
                "the shaver is below the fastest of three lone batches ({lone} us)"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_kernel_without_a_timing_baseline_is_not_timed() {
    need_python!();
    struct NoReset;
    impl nvfp4_harness::gpu::l2::CacheReset for NoReset {
        fn reset(&mut self) -> Result<(), nvfp4_harness::gpu::GpuError> {
            Ok(())
        }
    }
    let dir = std::env::temp_dir().join(format!("nvfp4-door-no-baseline-{}", std::process::id()));
    let warmup = vec![CaseFiles::write(&small_case().0, &dir.join("set0")).unwrap()];
    let kernel = fake_kernel("time-honest", &["time-honest"], Duration::from_secs(5));
    let failure = kernel
        .time(
            &mut NoReset,
            &warmup,
            3,
            |_| small_case().0,
            |_| vec![],
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert!(
        failure.to_string().contains("no timing baseline"),
        "{failure}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

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

/// The worker's reading of a Blackwell-only submission (started on an older GPU, it is "unable
/// to run here", pointed to preflight, instead of a failed verdict from its first compile).
#[test]
fn a_blackwell_only_submission_is_recognized_from_its_source() {
    need_python!();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/harness/src/worker/submission_worker.py");
    let check = r#"
import importlib.util, sys
spec = importlib.util.spec_from_file_location("worker", sys.argv[1])
worker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worker)
blackwell = "import cutlass\nfrom cutlass.cute.nvgpu import cpasync, tcgen05\n"
assert worker.blackwell_only(blackwell) == "`tcgen05` (line 2)", worker.blackwell_only(blackwell)
# A Hopper path beside it: the worker runs it and lets the GPU decide.
assert worker.blackwell_only(blackwell + "from cutlass.cute.nvgpu import warpgroup\n") is None
assert worker.blackwell_only("import torch\ndef custom_kernel(data):\n    return data[-1]\n") is None
print("ok")
"#;
    let out = Command::new("python3")
        .args(["-c", check])
        .arg(&script)
        .output()
        .unwrap();
    let (code, text) = common::code_and_text(out);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("ok"), "{text}");
}

/// Cases of M = 3, 5, 7 and 9 (the fake batch worker writes each case's M as its output).
fn batch_cases() -> Vec<KernelCase> {
    [3, 5, 7, 9]
        .iter()
        .map(|&m| {
            let shape = Shape::new(m, 4, 32, 2).unwrap();
            KernelCase::new(
                generate_dual_gemm(shape, Distribution::Full, m as u64),
                0x7F,
            )
        })
        .collect()
}

/// Runs `cases` as one batch of `kernel`'s; the results and the outputs.
fn run_batch(
    kernel: &IsolatedKernel,
    cases: &[KernelCase],
) -> (Vec<Result<(), KernelFailure>>, Vec<Vec<f16>>) {
    let refs: Vec<&KernelCase> = cases.iter().collect();
    let mut outputs: Vec<Vec<f16>> = cases
        .iter()
        .map(|case| vec![f16::NAN; case.inputs.output_len()])
        .collect();
    let results = kernel.run_batch(&refs, &mut outputs);
    (results, outputs)
}

/// Each output holds its own case's M, everywhere: it landed in its own buffer.
fn landed_in_own_buffer(case: &KernelCase, output: &[f16]) -> bool {
    let m = case.shape().m as u16;
    output.iter().all(|x| x.to_bits() == m)
}

/// A batch in one request: every case's output lands in its own buffer; a case the worker
/// raised on is that case's failure alone and the batch goes on.
#[test]
fn a_batchs_outputs_land_in_their_own_buffers_and_a_raise_is_its_cases() {
    need_python!();
    let cases = batch_cases();
    let kernel = fake_kernel("batch", &["batch"], Duration::from_secs(5));
    kernel.prepare().unwrap();
    assert!(
        kernel.environment().batches,
        "the fake says it serves batches"
    );
    let (results, outputs) = run_batch(&kernel, &cases);
    assert_eq!(results.len(), 4);
    for ((case, output), result) in cases.iter().zip(&outputs).zip(&results) {
        assert!(result.is_ok(), "{result:?}");
        assert!(landed_in_own_buffer(case, output), "M = {}", case.shape().m);
    }
    let counter = std::env::temp_dir().join(format!("nvfp4-batch-raise-{}", std::process::id()));
    let _ = std::fs::remove_file(&counter);
    let raising = fake_kernel(
        "batch-raise",
        &["batch-raise-on-7", &counter.display().to_string()],
        Duration::from_secs(5),
    );
    let (results, outputs) = run_batch(&raising, &cases);
    for (i, (result, (case, output))) in results.iter().zip(cases.iter().zip(&outputs)).enumerate()
    {
        if i == 2 {
            assert!(
                matches!(result, Err(KernelFailure::Raised(why)) if why.contains("M = 7")),
                "{result:?}"
            );
        } else {
            assert!(
                result.is_ok() && landed_in_own_buffer(case, output),
                "case {i}: {result:?}"
            );
        }
    }
    // One worker served the whole batch: a raise does not end it.
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "1");
    let _ = std::fs::remove_file(counter);
}

/// A worker that dies inside a batch: the batch's cases run again one by one in a fresh
/// worker, so that the verdict names the case that crashes, and the others' outputs land in
/// their own buffers. Where no case fails alone, the batch's failure is its first case's,
/// never a pass.
#[test]
fn a_crash_inside_a_batch_is_narrowed_to_its_case() {
    need_python!();
    let cases = batch_cases();
    let kernel = fake_kernel("batch-crash", &["batch-crash-on-7"], Duration::from_secs(5));
    let (results, outputs) = run_batch(&kernel, &cases);
    for (i, (result, (case, output))) in results.iter().zip(cases.iter().zip(&outputs)).enumerate()
    {
        if i == 2 {
            assert!(
                matches!(result, Err(KernelFailure::Crashed(why)) if why.contains("M = 7")),
                "{result:?}"
            );
        } else {
            assert!(
                result.is_ok() && landed_in_own_buffer(case, output),
                "case {i}: {result:?}"
            );
        }
    }
    let only_in_batches = fake_kernel(
        "batch-crash-in-batch",
        &["batch-crash-in-batch"],
        Duration::from_secs(5),
    );
    let (results, outputs) = run_batch(&only_in_batches, &cases);
    assert!(
        matches!(&results[0], Err(KernelFailure::Crashed(why)) if why.contains("depends on the cases run before it")),
        "{:?}",
        results[0]
    );
    for (result, (case, output)) in results.iter().zip(cases.iter().zip(&outputs)).skip(1) {
        assert!(
            result.is_ok() && landed_in_own_buffer(case, output),
            "{result:?}"
        );
    }
}
