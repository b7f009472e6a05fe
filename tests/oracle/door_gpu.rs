//! The door with torch and a GPU: each example submission under examples/submissions/ certified
//! on a short campaign and its deliberately broken copy rejected. Skips, saying why, where python3
//! has no torch or torch sees no GPU (CI). On the GPU machine without Rust: build with
//! `cargo test --release --test oracle --no-run`, carry the test binary and nvfp4-oracle, run
//! `NVFP4_ORACLE_BIN=./nvfp4-oracle ./oracle-<hash> door_gpu::` from the repository root.

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

#[test]
#[ignore = "needs torch and a CUDA GPU: run with -- --include-ignored on a GPU machine"]
fn python_examples_certified_and_their_broken_copies_rejected() {
    common::require_torch_gpu();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/submissions");
    let root = if root.exists() {
        root
    } else {
        PathBuf::from("examples/submissions")
    };
    for example in ["torch", "triton", "cuda_inline"] {
        let (code, text) = certify(&root.join(example).join("kernel.toml"), 30);
        assert_eq!(code, 0, "{example} should be certified:\n{text}");
        let (code, text) = certify(&root.join(example).join("broken/kernel.toml"), 200);
        assert_eq!(code, 1, "{example}'s broken copy should fail:\n{text}");
        eprintln!("{example}: certified; broken copy rejected");
    }
}
