//! Preflight of CuTe DSL submissions compiled for sm_100a on a machine without a GPU: the test
//! kernel of results/preflight/ (its tile from the environment) as a GPU MODE submission,
//! and GPU MODE's own NVFP4 dual-GEMM submission where a copy is named. They need the CuTe DSL
//! package (~100 MB), named by the interpreter that has it (`.ci/run` installs it), and skip
//! with a printed reason without it:
//!
//!     NVFP4_ORACLE_CUTE_PYTHON=/tmp/cute/bin/python cargo test --release --test oracle preflight_cute::
//!
//! (`python3 -m venv /tmp/cute && /tmp/cute/bin/pip install nvidia-cutlass-dsl==4.8.1 numpy`;
//! torch is not needed), ptxas for registers and occupancy (NVFP4_ORACLE_PTXAS, PATH or the CUDA
//! toolkit), and for GPU MODE's submission NVFP4_ORACLE_GPUMODE_DUAL_GEMM naming a copy of
//! gpu-mode/reference-kernels' problems/nvidia/nvfp4_dual_gemm/submission.py (never committed).

use crate::common;

/// The interpreter with CuTe DSL, or None (the test is skipped, saying why).
fn cute_python() -> Option<String> {
    let python = std::env::var("NVFP4_ORACLE_CUTE_PYTHON").ok();
    if python.is_none() {
        common::skip("NVFP4_ORACLE_CUTE_PYTHON does not name a python with nvidia-cutlass-dsl");
    }
    python
}

/// `preflight --submission` of the test kernel with `vars`: (exit code, report, stderr).
fn preflight(vars: &[(&str, &str)], extra: &[&str]) -> (i32, String, String) {
    let out = common::oracle_command()
        .env(
            "NVFP4_ORACLE_PYTHON",
            std::env::var("NVFP4_ORACLE_CUTE_PYTHON").unwrap(),
        )
        .args(["preflight", "--submission"])
        .arg(common::repo_path(
            "results/preflight/submission_nvfp4_mma.py",
        ))
        .args(extra)
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn the_cute_dsl_test_kernels_get_their_expected_preflight() {
    if cute_python().is_none() {
        return;
    }
    let ptxas = nvfp4_harness::preflight::resources::find_ptxas().is_some();
    // A valid NVFP4 block-scaled MMA kernel, one CTA and a CTA pair; the launch's 64 KiB of
    // dynamic shared memory read from the host code.
    for (cg, m, group) in [("1", "128", "cta_group::1"), ("2", "256", "cta_group::2")] {
        let (code, report, err) = preflight(&[("CG", cg), ("MMA_M", m)], &[]);
        assert_eq!(code, 0, "{report}{err}");
        assert!(report.starts_with("# Preflight of "), "{report}");
        assert!(report.contains("Nothing was run"), "{report}");
        assert!(
            report.contains(&format!("tcgen05.mma kind::mxf4nvf4 block16 {group}")),
            "{report}"
        );
        if ptxas {
            assert!(report.contains("+ 65536 dynamic"), "{report}");
        }
        if cg == "2" {
            assert!(report.contains("2SM (cta_group::2)"), "{report}");
        } else {
            // A claim the code does not bear out is a finding.
            let (code, report, _) = preflight(&[("CG", cg)], &["--claim", "two-sm"]);
            assert_eq!(code, 1, "{report}");
            assert!(report.contains("claimed 2SM"), "{report}");
        }
    }
    // An invalid tile: refused while tracing, the MMA's words and what they mean.
    let (code, report, err) = preflight(&[("MMA_M", "64")], &[]);
    assert_eq!(code, 1, "{report}{err}");
    assert!(report.contains("Did not compile"), "{report}");
    assert!(
        report.contains("expects the M-mode to be 128, but got 64"),
        "{report}"
    );
    assert!(report.contains("an M tile of 128 per CTA"), "{report}");
    // MXFP4's scales where NVFP4 is meant: a kernel for another format.
    let (code, report, _) = preflight(&[("SCALES", "mx")], &[]);
    assert_eq!(code, 1, "{report}");
    assert!(report.contains("a kernel for another format"), "{report}");
    // Warp roles (setmaxnreg.dec in one warpgroup, .inc in the other): warp-specialized, as
    // claimed.
    let (code, report, err) = preflight(&[("WS", "1")], &["--claim", "warp-specialized"]);
    assert_eq!(code, 0, "{report}{err}");
    assert!(report.contains("| variant | warp-specialized"), "{report}");
    assert!(report.contains("up to 232 / down to 40"), "{report}");
    // Past the shared-memory limit: compiles, and would fail only at launch.
    if ptxas {
        let (code, report, _) = preflight(&[("SMEM_BYTES", "240000")], &[]);
        assert_eq!(code, 1, "{report}");
        assert!(report.contains("+ 240000 dynamic"), "{report}");
        assert!(
            report.contains("it compiles and fails at launch"),
            "{report}"
        );
    } else {
        common::skip("no ptxas: the shared-memory case was not checked");
    }
}

#[test]
fn gpu_modes_dual_gemm_submission_compiles_for_sm_100a() {
    let Some(python) = cute_python() else {
        return;
    };
    let Some(path) = std::env::var_os("NVFP4_ORACLE_GPUMODE_DUAL_GEMM") else {
        common::skip("NVFP4_ORACLE_GPUMODE_DUAL_GEMM does not name GPU MODE's submission");
        return;
    };
    let out = common::oracle_command()
        .env("NVFP4_ORACLE_PYTHON", python)
        .args(["preflight", "--submission"])
        .arg(path)
        .output()
        .unwrap();
    let (code, report) = common::code_and_text(out);
    assert_eq!(code, 0, "{report}");
    assert!(
        report.contains("tcgen05.mma kind::mxf4nvf4 block16 cta_group::1"),
        "{report}"
    );
    assert!(report.contains("| variant | baseline"), "{report}");
}
