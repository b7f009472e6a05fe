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
/// `--pass-env NAME` for each variable the test kernel reads (a worker's environment is the
/// allow-list otherwise).
fn pass_env(vars: &[(&str, &str)]) -> Vec<String> {
    vars.iter()
        .flat_map(|(name, _)| ["--pass-env".to_string(), name.to_string()])
        .collect()
}

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
        .args(pass_env(vars))
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
            // The cluster is set at launch: read from the host code.
            assert!(
                report.contains("launched with 2 x 1 x 1 (host code)"),
                "{report}"
            );
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

/// The Hopper CuTe DSL example (examples/submissions/cute_dsl: its GEMMs in CuTe DSL, certified
/// and timed on the H100, results/cute-dsl/) compiles for sm_90a with no GPU, and preflight reads
/// its warp MMAs and its launch: what a user checks before the GPU run.
#[test]
fn the_hopper_cute_dsl_example_compiles_for_sm_90a() {
    let Some(python) = cute_python() else {
        return;
    };
    let example = common::repo_path("examples/submissions/cute_dsl/submission.py");
    let dir = std::env::temp_dir().join(format!("nvfp4-cute-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (code, report) = preflight_file(&python, &example, &dir, &[], &["--arch", "sm_90a"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, 0, "{report}");
    assert!(
        report.contains("mma.sync m16n8k16.row.col.f32.f16.f16.f32"),
        "{report}"
    );
    // Its launch read from the host code: 128 threads a CTA, 40,960 bytes of dynamic shared
    // memory, no cluster.
    assert!(
        report.contains("40960 dynamic") && report.contains("CTA(s) of 128 threads"),
        "{report}"
    );
    assert!(report.contains("launched without a cluster"), "{report}");
    assert!(report.contains("No finding"), "{report}");
}

/// A hand-made PTX of a 2SM kernel, as a submission might leave it where the compiler dumps.
const HAND_MADE_PTX: &str = ".version 8.8\n.target sm_100a\n.address_size 64\n\
    .visible .entry hand_made_2sm()\n.reqnctapercluster 2, 1, 1\n{\n\
    tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;\n\
    ret;\n}\n";

/// `preflight --submission FILE` with the CuTe DSL interpreter, from `cwd`, with `vars`.
fn preflight_file(
    python: &str,
    submission: &std::path::Path,
    cwd: &std::path::Path,
    vars: &[(&str, &str)],
    extra: &[&str],
) -> (i32, String) {
    let out = common::oracle_command()
        .current_dir(cwd)
        .env("NVFP4_ORACLE_PYTHON", python)
        .args(["preflight", "--submission"])
        .arg(submission)
        .args(extra)
        .args(pass_env(vars))
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    common::code_and_text(out)
}

/// Files the submission writes where CuTe DSL dumps (and in its working directory) are not the
/// compiler's output: a compile_kernel() that never compiles is "nothing was compiled", and one
/// that compiles a kernel and leaves a hand-made PTX beside it is reported with its compiled
/// kernel only.
#[test]
fn files_the_submission_leaves_are_not_read_as_compiled() {
    let Some(python) = cute_python() else {
        return;
    };
    let dir = common::scratch_dir("preflight-cute-forged");
    let plant = format!(
        "import os\nPTX = {HAND_MADE_PTX:?}\n\ndef plant():\n    \
         for folder in {{os.environ.get('CUTE_DSL_DUMP_DIR', '.'), '.'}}:\n        \
         with open(os.path.join(folder, 'hand_made.sm_100a.ptx'), 'w') as out:\n            \
         out.write(PTX)\n"
    );
    let never_compiles = dir.join("never_compiles.py");
    std::fs::write(
        &never_compiles,
        format!("{plant}\n\ndef compile_kernel():\n    plant()\n"),
    )
    .unwrap();
    let (code, text) = preflight_file(&python, &never_compiles, &dir, &[], &["--claim", "two-sm"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("nothing was compiled"), "{text}");
    assert!(!text.contains("compiled by"), "{text}");
    assert!(!text.contains("hand_made_2sm"), "{text}");
    // A real kernel compiled, the hand-made one beside it: only the compiled one is read. The
    // real one is copied beside the submission: only the submission's folder is bound into the
    // sandbox, and a checkout under /tmp (which the sandbox replaces) would not be seen.
    let test_kernel = common::repo_path("results/preflight/submission_nvfp4_mma.py");
    for file in ["submission_nvfp4_mma.py", "cute_nvfp4_mma.py"] {
        std::fs::copy(test_kernel.with_file_name(file), dir.join(file)).unwrap();
    }
    let beside = dir.join("beside.py");
    std::fs::write(
        &beside,
        format!(
            "{plant}\nimport sys\nsys.path.insert(0, {:?})\nimport submission_nvfp4_mma as real\n\n\
             def compile_kernel():\n    compiled = real.compile_kernel()\n    plant()\n    \
             return compiled\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    let (code, text) = preflight_file(&python, &beside, &dir, &[], &["--claim", "two-sm"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("tcgen05.mma kind::mxf4nvf4 block16 cta_group::1"),
        "{text}"
    );
    assert!(text.contains("claimed 2SM"), "{text}");
    assert!(!text.contains("hand_made_2sm"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// With the sandbox off the compilation works as with it, and writes nothing where preflight
/// was started.
#[test]
fn a_submission_compiles_with_the_sandbox_off() {
    let Some(python) = cute_python() else {
        return;
    };
    let cwd = common::scratch_dir("preflight-cute-unsandboxed");
    let submission = common::repo_path("results/preflight/submission_nvfp4_mma.py");
    let (code, text) = preflight_file(
        &python,
        &submission,
        &cwd,
        &[("NVFP4_ORACLE_SANDBOX", "0")],
        &[],
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("NOT sandboxed"), "{text}");
    assert!(
        text.contains("tcgen05.mma kind::mxf4nvf4 block16"),
        "{text}"
    );
    let left: Vec<_> = std::fs::read_dir(&cwd).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    let _ = std::fs::remove_dir_all(cwd);
}

/// Two runs of submissions under the same file name do not share CuTe DSL's JIT cache: each
/// gets an empty one (here without the sandbox, whose private /tmp would hide a shared one),
/// removed when it ends.
#[test]
fn each_compilation_gets_its_own_cute_dsl_cache() {
    let Some(python) = cute_python() else {
        return;
    };
    let dir = common::scratch_dir("preflight-cute-cache");
    let mut seen = Vec::new();
    for run in ["first", "second"] {
        let folder = dir.join(run);
        std::fs::create_dir_all(&folder).unwrap();
        let submission = folder.join("submission.py");
        // It leaves a marker in the DSL's cache and says (by failing at import) whether a
        // marker was there already and where the cache is.
        std::fs::write(
            &submission,
            "import os\nfrom cutlass.base_dsl.cache_helpers import default_generated_ir_path as cache\n\
             marker = os.path.join(cache, 'marker')\nseen = os.path.exists(marker)\n\
             os.makedirs(cache, exist_ok=True)\nopen(marker, 'w').close()\n\
             raise RuntimeError(f'cache={cache} seen={seen}')\n",
        )
        .unwrap();
        let (code, text) = preflight_file(
            &python,
            &submission,
            &dir,
            &[("NVFP4_ORACLE_SANDBOX", "0")],
            &[],
        );
        assert_eq!(code, 1, "{text}");
        assert!(text.contains("seen=False"), "{run}: {text}");
        let cache = text
            .split("cache=")
            .nth(1)
            .and_then(|rest| rest.split(" seen=").next())
            .unwrap_or_else(|| panic!("{text}"))
            .to_string();
        assert!(!std::path::Path::new(&cache).exists(), "{cache} kept");
        seen.push(cache);
    }
    assert_ne!(seen[0], seen[1]);
    let _ = std::fs::remove_dir_all(dir);
}

/// An MLIR verification error (the MMA's operands of another layout: an M tile of 128 over a
/// CTA pair, here with an N tile of 64) names no line of the submission in CuTe DSL's words: the
/// report gives the line of the submission's own code where it arose, the path to it, and what
/// it means, read from the MMA's type in the message: the M tile, not the N tile (an M tile of
/// 256 over the pair compiles at N 64) nor the cluster.
#[test]
fn a_layout_error_is_explained_at_the_submissions_line() {
    if cute_python().is_none() {
        return;
    }
    let kernel =
        std::fs::read_to_string(common::repo_path("results/preflight/cute_nvfp4_mma.py")).unwrap();
    let gemm_line = kernel
        .lines()
        .position(|l| l.trim_start().starts_with("cute.gemm("))
        .expect("the test kernel issues cute.gemm")
        + 1;
    let (code, report, err) = preflight(&[("MMA_N", "64"), ("CG", "2")], &[]);
    assert_eq!(code, 1, "{report}{err}");
    assert!(report.contains("Did not compile"), "{report}");
    assert!(
        report.contains(&format!(
            "In the submission: cute_nvfp4_mma.py:{gemm_line} in mma_kernel: cute.gemm("
        )),
        "{report}"
    );
    assert!(
        report.contains("- submission_nvfp4_mma.py:") && report.contains("in compile_kernel"),
        "{report}"
    );
    assert!(report.contains("What it means: "), "{report}");
    assert!(
        report.contains("its M tile is 128 over a CTA pair"),
        "{report}"
    );
    assert!(
        report.contains("not the N tile nor the cluster"),
        "{report}"
    );
    let (code, report, err) = preflight(&[("MMA_N", "64"), ("CG", "2"), ("MMA_M", "256")], &[]);
    assert_eq!(code, 0, "{report}{err}");
    assert!(
        report.contains("tcgen05.mma kind::mxf4nvf4 block16 cta_group::2"),
        "{report}"
    );
}

/// Scale layouts (and so the copies that fill them) made for one scale per 32 K elements under
/// NVFP4's block16 MMA compile, and only took less shared memory; the MMA shows it: every second
/// 64-K MMA is told to start reading its scales at byte 2 of a tensor-memory scale word
/// (scale-factor ID 2), where block16's four scales per row fill the word from byte 0.
#[test]
fn scales_laid_out_per_32_under_nvfp4s_mma_are_a_finding() {
    if cute_python().is_none() {
        return;
    }
    for (cg, m, group) in [("1", "128", "cta_group::1"), ("2", "256", "cta_group::2")] {
        let vars = [("CG", cg), ("MMA_M", m), ("SF_LAYOUT_VEC", "32")];
        let (code, report, err) = preflight(&vars, &[]);
        assert_eq!(code, 1, "{report}{err}");
        assert!(
            report.contains(&format!(
                "its scales are laid out one per 32 K elements, but its MMA (kind::mxf4nvf4 \
                 block16 {group}) reads one per 16"
            )),
            "{report}"
        );
        assert!(report.contains("scale-factor ID 2"), "{report}");
        assert!(
            report.contains("scale-factor IDs A {0, 2}, B {0, 2}"),
            "{report}"
        );
        // The same kernel with its scales laid out per 16, as its MMA reads them: no finding.
        let vars = [("CG", cg), ("MMA_M", m), ("SF_LAYOUT_VEC", "16")];
        let (code, report, err) = preflight(&vars, &[]);
        assert_eq!(code, 0, "{report}{err}");
        assert!(report.contains("scale-factor IDs A {0}, B {0}"), "{report}");
    }
    // MXFP4's block32 MMA reads two scales per 64-K MMA: byte 2 is where its second MMA
    // starts, not a finding of granularity (the format finding is another).
    let (_, report, _) = preflight(&[("SCALES", "mx")], &["--any-format"]);
    assert!(report.contains("No finding"), "{report}");
}

/// A CTA-pair MMA (cta_group::2) launched without a cluster of two compiles with CuTe DSL (its
/// PTX is the same with or without the cluster, which is set at launch); the launch in the host
/// code shows it. A cluster of two, or of four, along the first dimension is no finding.
#[test]
fn a_cta_pair_launched_without_a_cluster_of_two_is_a_finding() {
    if cute_python().is_none() {
        return;
    }
    let pair = [("CG", "2"), ("MMA_M", "256")];
    let with = |cluster: &'static str| {
        let mut vars = pair.to_vec();
        vars.push(("CLUSTER", cluster));
        preflight(&vars, &[])
    };
    let (code, report, err) = with("none");
    assert_eq!(code, 1, "{report}{err}");
    assert!(
        report.contains("| cluster | none required; launched without a cluster (host code) |"),
        "{report}"
    );
    assert!(
        report.contains(
            "its MMA runs on a CTA pair (cta_group::2), but the host code launches it without \
             a cluster: the pair does not exist at run time"
        ),
        "{report}"
    );
    let (code, report, err) = with("1,1,1");
    assert_eq!(code, 1, "{report}{err}");
    assert!(
        report.contains("a cluster of one CTA (1 x 1 x 1)"),
        "{report}"
    );
    let (code, report, err) = with("1,2,1");
    assert_eq!(code, 1, "{report}{err}");
    assert!(
        report.contains("a cluster of 1 x 2 x 1, whose first extent is odd"),
        "{report}"
    );
    for cluster in ["2,1,1", "4,1,1"] {
        let (code, report, err) = with(cluster);
        assert_eq!(code, 0, "{cluster}: {report}{err}");
        assert!(report.contains("No finding"), "{report}");
    }
    // A cluster of two around one-CTA MMAs is no finding either.
    let (code, report, err) = preflight(&[("CLUSTER", "2,1,1")], &[]);
    assert_eq!(code, 0, "{report}{err}");
    assert!(
        report.contains("launched with 2 x 1 x 1 (host code)"),
        "{report}"
    );
}
