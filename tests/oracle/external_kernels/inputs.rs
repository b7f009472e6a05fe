//! What a user brings to the door: manifests validated with messages that name the problem,
//! architecture requirements, bad input at the CLI (exit 2, the file named), broken and
//! Blackwell-only submissions, the submission worker's own Python.

use super::{oracle, python, write};
use crate::common;
use nvfp4_harness::kernels::manifest::{ArchRequirement, KernelCode, Manifest};
use nvfp4_model::problem::ProblemKind;
use std::path::Path;
use std::process::Command;

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
        ("name = \"x\"\nsubmission = \"submission.py\"\narch = \"sm_77\"\n", "arch 'sm_77': not a GPU architecture"),
        ("name = \"x\"\nsubmission = \"submission.py\"\narch = \"sm_80a\"\n", "arch 'sm_80a': not a GPU architecture"),
        ("name = \"x\"\nsubmission = \"submission.py\"\n[shapes]\nproduction = [[65536, 65536, 65536, 512]]\n", "past 2^31 elements"),
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
    assert!(ArchRequirement::parse("sm_90a").unwrap().is_known());
    assert!(ArchRequirement::parse("sm_121").unwrap().is_known());
    assert!(!ArchRequirement::parse("sm_77").unwrap().is_known());
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
