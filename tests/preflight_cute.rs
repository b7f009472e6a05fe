//! Preflight on real sm_100a code compiled by CuTe DSL on a machine without a GPU (the kernel
//! and its compile script are in docs/results/preflight/). Ignored by default: it needs the
//! CuTe DSL package (~100 MB), named by the interpreter that has it:
//!
//!     NVFP4_ORACLE_CUTE_PYTHON=/tmp/cute/bin/python \
//!       cargo test --release --test preflight_cute -- --ignored
//!
//! (`python3 -m venv /tmp/cute && /tmp/cute/bin/pip install nvidia-cutlass-dsl==4.8.1 numpy`),
//! and ptxas for the occupancy case (NVFP4_ORACLE_PTXAS, PATH or the CUDA toolkit).

mod common;

use std::path::Path;
use std::process::Command;

/// Compiles the test kernel with `vars` into `dir`; (exit code, what it printed).
fn compile(python: &str, dir: &Path, vars: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(python)
        .arg(common::repo_path("docs/results/preflight/compile_cute.py"))
        .arg(dir)
        .env("CUTE_DSL_ARCH", "sm_100a")
        .env("CUTE_DSL_NO_CACHE", "1")
        .envs(vars.iter().copied())
        .output()
        .expect("the CuTe DSL interpreter runs");
    common::code_and_text(out)
}

fn preflight(dir: &Path, dynamic_smem: &str) -> (i32, String) {
    let ptx = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "ptx"))
        .expect("the compile wrote PTX");
    let out = Command::new(common::oracle_binary())
        .args(["preflight", "--ptx"])
        .arg(&ptx)
        .args(["--dynamic-smem", dynamic_smem])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
    )
}

#[test]
#[ignore = "needs the CuTe DSL package: NVFP4_ORACLE_CUTE_PYTHON=... cargo test --release --test preflight_cute -- --ignored"]
fn the_cute_dsl_test_kernels_get_their_expected_preflight() {
    let python = std::env::var("NVFP4_ORACLE_CUTE_PYTHON")
        .expect("NVFP4_ORACLE_CUTE_PYTHON names a python with nvidia-cutlass-dsl installed");
    let root = common::scratch_dir("preflight-cute");
    // A valid NVFP4 block-scaled MMA kernel, one CTA and a CTA pair.
    for (cg, m, group) in [("1", "128", "cta_group::1"), ("2", "256", "cta_group::2")] {
        let dir = root.join(format!("valid-{cg}"));
        let (code, out) = compile(&python, &dir, &[("CG", cg), ("MMA_M", m)]);
        assert_eq!(code, 0, "{out}");
        let (code, report) = preflight(&dir, "65536");
        assert_eq!(code, 0, "{report}");
        assert!(
            report.contains(&format!("tcgen05.mma kind::mxf4nvf4 block16 {group}")),
            "{report}"
        );
        if cg == "2" {
            assert!(report.contains("2SM (cta_group::2)"), "{report}");
        }
    }
    // An invalid tile: refused while tracing, with the MMA's own words.
    let (code, out) = compile(&python, &root.join("bad-tile"), &[("MMA_M", "64")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("expects the M-mode to be 128, but got 64"),
        "{out}"
    );
    // MXFP4's scales where NVFP4 is meant: a kernel for another format.
    let dir = root.join("mx");
    assert_eq!(compile(&python, &dir, &[("SCALES", "mx")]).0, 0);
    let (code, report) = preflight(&dir, "65536");
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("a kernel for another format"), "{report}");
    // Past the shared-memory limit: compiles, and fails only at launch.
    if nvfp4_oracle::preflight::resources::find_ptxas().is_some() {
        let dir = root.join("smem");
        assert_eq!(compile(&python, &dir, &[("SMEM_BYTES", "240000")]).0, 0);
        let (code, report) = preflight(&dir, "240000");
        assert_eq!(code, 1, "{report}");
        assert!(
            report.contains("it compiles and fails at launch"),
            "{report}"
        );
    } else {
        common::skip("no ptxas: the shared-memory case was not checked");
    }
    let _ = std::fs::remove_dir_all(root);
}
