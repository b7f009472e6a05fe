//! Preflight on real PTX: the Hopper variants compiled by NVRTC (no GPU needed) are told apart
//! as the variants they are, and a claim the code does not back is a finding (exit 1).

use crate::common;

use nvfp4_harness::gpu::compile::{compile_variant, nvrtc_present};
use nvfp4_harness::gpu::variants::gpu_variants;
use nvfp4_harness::preflight::census::{census, Census, Variant};
use std::path::{Path, PathBuf};
use std::process::Command;

fn entry(variant: &str, entry: &str) -> Option<Census> {
    let variant = gpu_variants().into_iter().find(|v| v.name == variant)?;
    let ptx = compile_variant(&variant).unwrap_or_else(|err| panic!("{err}"));
    census(&ptx.to_src()).into_iter().find(|c| c.entry == entry)
}

fn variants(census: &Census) -> Vec<Variant> {
    census.variant().into_iter().map(|(v, _)| v).collect()
}

#[test]
fn the_hopper_variants_are_recognized_from_their_ptx() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    let baseline = entry("hopper-baseline", "nvfp4_dual_gemm").unwrap();
    assert_eq!(variants(&baseline), [Variant::Baseline]);
    assert!(baseline.mma_sync.keys().any(|k| k.starts_with("m16n8k16")));
    assert!(baseline.static_shared_bytes > 0);
    let persistent = entry("hopper-persistent", "nvfp4_dual_gemm_persistent").unwrap();
    assert_eq!(variants(&persistent), [Variant::Persistent]);
    let ws = entry(
        "hopper-warp-specialized",
        "nvfp4_dual_gemm_warp_specialized",
    )
    .unwrap();
    assert_eq!(variants(&ws), [Variant::WarpSpecialized]);
    assert!(ws.wgmma.keys().any(|k| k.starts_with("m64n128k16")));
    assert!(ws.tma_copies > 0 && ws.mbarrier_ops > 0 && ws.dynamic_shared);
    let pair = entry("hopper-cluster-pair", "nvfp4_dual_gemm_cluster_pair").unwrap();
    assert_eq!(pair.cluster, Some([2, 1, 1]));
    assert!(pair.tma_multicast > 0);
    // Through the command line: a claim the baseline's code does not back.
    let out = common::oracle_command()
        .args([
            "preflight",
            "--kernel",
            "hopper-baseline",
            "--claim",
            "warp-specialized",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("# Preflight of hopper-baseline (sm_90a)"),
        "{text}"
    );
    assert!(text.contains("Nothing was run and no numerical claim is made"));
    assert!(
        text.contains("claimed warp-specialized, but the code shows baseline"),
        "{text}"
    );
}

#[test]
fn a_kernel_for_another_format_is_a_finding() {
    let ptx = "\n.visible .entry mx(\n)\n{\n\
        tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32 [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;\n\
        ret;\n}\n";
    let dir = common::scratch_dir("preflight-format");
    let file = dir.join("mx.ptx");
    std::fs::write(&file, ptx).unwrap();
    let run = |extra: &[&str]| {
        common::oracle_command()
            .args(["preflight", "--ptx"])
            .arg(&file)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("not NVFP4's kind::mxf4nvf4 block16"),
        "{text}"
    );
    assert_eq!(run(&["--any-format"]).status.code(), Some(0));
    std::fs::write(&file, "// no entry\n").unwrap();
    assert_eq!(run(&[]).status.code(), Some(2));
}

#[test]
fn ptxas_says_what_fits_on_an_sm_and_what_fails_at_launch() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    if nvfp4_harness::preflight::resources::find_ptxas().is_none() {
        common::skip("no ptxas here; .ci/run installs it from PyPI (nvidia-cuda-nvcc-cu12)");
        return;
    }
    let run = |extra: &[&str]| {
        let out = common::oracle_command()
            .args(["preflight", "--kernel", "hopper-warp-specialized"])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    // Its own launch: 384 threads and its dynamic shared memory; registers allow one CTA.
    let (code, text) = run(&[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("ptxas for sm_90a: "), "{text}");
    assert!(
        text.contains("per SM: 1 CTA(s) of 384 threads (limited by registers)"),
        "{text}"
    );
    // A deeper pipeline past the per-CTA shared-memory limit compiles and fails at launch.
    let (code, text) = run(&["--dynamic-smem", "240000"]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("it compiles and fails at launch"), "{text}");
}

/// A small kernel as PTX (one CTA of 128 threads reading dynamic shared memory).
const SMALL_KERNEL: &str = ".version 8.0
.target sm_90a
.address_size 64

.extern .shared .align 16 .b8 buf[];

.visible .entry small(
    .param .u64 out
)
.maxntid 128, 1, 1
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    ld.shared.u32 %r2, [buf];
    st.global.u32 [%rd2], %r2;
    ret;
}
";

#[test]
fn a_deeper_pipeline_against_the_baseline_is_shared_memory_up_and_ctas_down() {
    if nvfp4_harness::preflight::resources::find_ptxas().is_none() {
        common::skip("no ptxas here; .ci/run installs it from PyPI (nvidia-cuda-nvcc-cu12)");
        return;
    }
    let dir = common::scratch_dir("preflight-baseline");
    let ptx = dir.join("small.ptx");
    std::fs::write(&ptx, SMALL_KERNEL).unwrap();
    let run = |extra: &[&str]| {
        let out = common::oracle_command()
            .arg("preflight")
            .arg("--ptx")
            .arg(&ptx)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let base = dir.join("base.json").display().to_string();
    let (code, text) = run(&["--dynamic-smem", "100000", "--json", &base]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("per SM: 2 CTA(s) of 128 threads (limited by shared memory)"),
        "{text}"
    );
    let (code, text) = run(&["--dynamic-smem", "100000", "--baseline", &base]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("unchanged"), "{text}");
    let (code, text) = run(&["--dynamic-smem", "150000", "--baseline", &base]);
    assert_eq!(code, Some(5), "{text}");
    assert!(
        text.contains("small: shared memory bytes 100000 -> 150000"),
        "{text}"
    );
    assert!(
        text.contains("small: CTAs per SM 2 -> 1 (**regression**)"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A submission preflight where the interpreter has no CuTe DSL, or the file is missing: a
/// clear message and exit 2, never a report that claims anything.
#[test]
fn a_submission_preflight_without_cute_dsl_says_what_is_missing() {
    let python = std::env::var("NVFP4_ORACLE_TEST_PLAIN_PYTHON").unwrap_or("python3".into());
    if Command::new(&python)
        .arg("-c")
        .arg("import cutlass")
        .output()
        .map_or(true, |o| o.status.success())
    {
        common::skip("no python3 without CuTe DSL to try (NVFP4_ORACLE_TEST_PLAIN_PYTHON)");
        return;
    }
    let dir = common::scratch_dir("preflight-no-cute");
    let submission = dir.join("submission.py");
    std::fs::write(
        &submission,
        "def custom_kernel(data):\n    return data[-1]\n",
    )
    .unwrap();
    let (code, text) = preflight_submission(Path::new(&python), &submission, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("CuTe DSL is not installed"), "{text}");
    assert!(text.contains("pip install nvidia-cutlass-dsl"), "{text}");
    assert!(!text.contains("# Preflight"), "{text}");
    let out = common::oracle_command()
        .args(["preflight", "--submission"])
        .arg(dir.join("missing.py"))
        .output()
        .unwrap();
    let (code, text) = common::code_and_text(out);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("missing.py"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `preflight --submission` with `python` as the interpreter and `extra` arguments first.
fn preflight_submission(python: &Path, submission: &Path, extra: &[&str]) -> (i32, String) {
    let out = common::oracle_command()
        .env("NVFP4_ORACLE_PYTHON", python)
        .arg("preflight")
        .args(extra)
        .arg("--submission")
        .arg(submission)
        .output()
        .unwrap();
    common::code_and_text(out)
}

/// A stand-in interpreter `dir/bin/python` running `script` (sh), and a submission beside it.
fn fake_python_and_submission(dir: &Path, script: &str) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let fake = dir.join("bin").join("python");
    std::fs::create_dir_all(fake.parent().unwrap()).unwrap();
    std::fs::write(&fake, format!("#!/bin/sh\n{script}")).unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let submission = dir.join("submission.py");
    std::fs::write(&submission, "def compile_kernel():\n    pass\n").unwrap();
    (fake, submission)
}

/// A hostile submission's compilation that plants, as its result, a link to a file of the
/// parent's: refused, the file never read into a report.
#[test]
fn a_link_left_by_the_compilation_is_refused() {
    let dir = common::scratch_dir("preflight-link");
    let secret = dir.join("secret.json");
    std::fs::write(
        &secret,
        r#"{"phase": null, "error": null, "torch": "installed", "driven_by": "compile_kernel()", "compiles": [{"ptx": ".visible .entry secret_kernel()\n{\n ret;\n}\n", "host": "@secret_kernel"}]}"#,
    )
    .unwrap();
    // In its working directory the stand-in leaves, under the result's name (the token it
    // reads from stdin), a link to the secret.
    let (fake, submission) = fake_python_and_submission(
        &dir,
        &format!(
            "read token\nln -s {} result-$token.json\n",
            secret.display()
        ),
    );
    let (code, text) = preflight_submission(&fake, &submission, &[]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("something other than a regular file"),
        "{text}"
    );
    assert!(!text.contains("secret_kernel"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A compilation that never ends is killed at --timeout, with a message naming the step and the
/// flag, and the exit code of a timeout (6), not bad input's.
#[test]
fn a_compilation_past_its_timeout_is_killed() {
    let dir = common::scratch_dir("preflight-hang");
    let (fake, submission) = fake_python_and_submission(&dir, "sleep 300\n");
    let started = std::time::Instant::now();
    let (code, text) = preflight_submission(&fake, &submission, &["--timeout", "2"]);
    assert_eq!(code, 6, "{text}");
    assert!(
        text.contains("the submission's compilation did not end within the 2 s"),
        "{text}"
    );
    assert!(text.contains("--timeout SECONDS"), "{text}");
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let _ = std::fs::remove_dir_all(dir);
}
