//! The door with torch and a GPU: each example submission under examples/submissions/ certified
//! on a short campaign and its deliberately broken copy rejected. Skips, saying why, where python3
//! has no torch or torch sees no GPU (CI). On the GPU machine without Rust: build with
//! `cargo test --release --test oracle --no-run`, carry the test binary and nvfp4-oracle, run
//! `NVFP4_ORACLE_BIN=./nvfp4-oracle ./oracle-<hash> external_kernels_gpu:: --include-ignored
//! --test-threads 1` from the repository root (one campaign on the GPU at a time), or one test by
//! its name per device call.

use crate::common;

use std::path::{Path, PathBuf};

fn certify(manifest: &Path, cases: usize) -> (i32, String) {
    let report = std::env::temp_dir().join(format!("nvfp4-door-gpu-{}", std::process::id()));
    let out = common::oracle_command()
        .args(["certify", "--manifest"])
        .arg(manifest)
        .args(["--cases", &cases.to_string(), "--seed", "5", "--report-dir"])
        .arg(&report)
        .output()
        .expect("nvfp4-oracle runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn examples() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/submissions");
    if root.exists() {
        root
    } else {
        PathBuf::from("examples/submissions")
    }
}

/// A Python example certified on a short campaign and its broken copy rejected. One test per
/// example, so that each fits a device call of its own (the three together took over five
/// minutes on an H100).
fn certified_and_broken_copy_rejected(example: &str) {
    common::require_torch_gpu();
    let root = examples();
    let (code, text) = certify(&root.join(example).join("kernel.toml"), 30);
    assert_eq!(code, 0, "{example} should be certified:\n{text}");
    let (code, text) = certify(&root.join(example).join("broken/kernel.toml"), 200);
    assert_eq!(code, 1, "{example}'s broken copy should fail:\n{text}");
    eprintln!("{example}: certified; broken copy rejected");
}

#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn python_example_torch_certified_and_its_broken_copy_rejected() {
    certified_and_broken_copy_rejected("torch");
}

#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn python_example_triton_certified_and_its_broken_copy_rejected() {
    certified_and_broken_copy_rejected("triton");
}

#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn python_example_cuda_inline_certified_and_its_broken_copy_rejected() {
    certified_and_broken_copy_rejected("cuda_inline");
}

/// The CuTe DSL example (its GEMMs in CuTe DSL, warp MMAs on sm_90a), with CuTe DSL installed in
/// its folder as its README says (`pip install --target examples/submissions/cute_dsl/pkgs
/// nvidia-cutlass-dsl==4.8.1`); its manifest's `python_path` gives the worker the packages.
#[test]
#[ignore = "needs torch, a Hopper GPU and CuTe DSL installed in examples/submissions/cute_dsl/pkgs"]
fn the_cute_dsl_example_is_certified_on_hopper() {
    common::require_torch_gpu();
    let manifest = examples().join("cute_dsl/kernel.toml");
    let pkgs = examples().join("cute_dsl/pkgs");
    assert!(
        pkgs.is_dir(),
        "CuTe DSL is not installed for the example: pip install --target {} nvidia-cutlass-dsl==4.8.1",
        pkgs.display()
    );
    let (code, text) = certify(&manifest, 30);
    assert_eq!(code, 0, "the CuTe DSL example should be certified:\n{text}");
}

/// A Python submission's large dual-GEMM case runs on device memory the parent shares (no
/// files): the torch example's output there is its output on files, bit for bit, and a
/// submission that uses an input as scratch space is caught by the parent's own check of it.
#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn a_python_submissions_large_case_on_shared_memory_is_its_case_on_files() {
    use half::f16;
    use nvfp4_harness::kernels::manifest::{KernelCode, Manifest};
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};
    use nvfp4_harness::worker::external::external_kernel;
    use nvfp4_harness::worker::shared_run::runs_shared;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
    common::require_torch_gpu();
    common::oracle_as_worker();
    let shape = Shape::new(40, 4096, 2048, 2).unwrap();
    let case = KernelCase::new(
        generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 7),
        Distribution::Full.blocked_padding_fill(),
    );
    assert!(runs_shared(&case), "the case is large enough to be shared");
    let run = |kernel: &dyn KernelUnderTest| {
        let mut output = vec![f16::ZERO; 40 * 4096 * 2];
        kernel.run(&case, &mut output).map(|()| output)
    };
    let manifest = Manifest::read(&examples().join("torch/kernel.toml")).expect("manifest");
    let shared = external_kernel(&manifest).expect("torch example");
    let on_files = external_kernel(&manifest)
        .expect("torch example")
        .with_shared_runs(None);
    let (a, b) = (run(&shared).unwrap(), run(&on_files).unwrap());
    assert!(
        a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
        "shared and file outputs differ"
    );
    assert!(a.iter().any(|x| x.to_bits() != 0), "an output was written");
    let scratch = common::repo_path("tests/exploits/answer_into_input.py");
    let hostile = Manifest::for_code(KernelCode::Submission(scratch), ProblemKind::DualGemm)
        .expect("manifest");
    match run(&external_kernel(&hostile).expect("exploit")) {
        Err(KernelFailure::ModifiedInputs(why)) => {
            assert!(why.contains("input sfa"), "{why}")
        }
        other => panic!("expected modified inputs, got {:?}", other.map(|_| ())),
    }
}
