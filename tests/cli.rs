//! The command line end to end: generate, reference, check, exit codes and messages.

use half::f16;
use nvfp4_oracle::case_file::{CaseReader, CaseWriter};
use nvfp4_oracle::model::bounds::KOrder;
use nvfp4_oracle::model::dual_gemm_reference;
use nvfp4_oracle::problem::generate::generate_dual_gemm;
use nvfp4_oracle::problem::{Distribution, Shape};
use safetensors::Dtype;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nvfp4-oracle"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn write_output(path: &Path, shape: [usize; 3], values: &[f16]) {
    let bytes = values
        .iter()
        .flat_map(|x| x.to_bits().to_le_bytes())
        .collect();
    CaseWriter::default()
        .tensor("c", Dtype::F16, shape.to_vec(), bytes)
        .write(path)
        .unwrap();
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn reference_then_check_round_trip() {
    let case = scratch("case.safetensors");
    let out = tool(&[
        "reference",
        "--problem",
        "dual-gemm",
        "--shape",
        "128x256x512x2",
        "--dist",
        "gpumode",
        "--seed",
        "7",
        "--out",
        case.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));

    let reader = CaseReader::open(&case).unwrap();
    let dims = [128, 256, 2];
    let expected: Vec<f16> = reader
        .tensor("expected", Dtype::F16, &dims)
        .unwrap()
        .chunks_exact(2)
        .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
        .collect();
    let hi: Vec<f16> = reader
        .tensor("hi", Dtype::F16, &dims)
        .unwrap()
        .chunks_exact(2)
        .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
        .collect();
    assert!(
        reader.dual_gemm_inputs().is_ok(),
        "the case's inputs read back, permuted scales consistent"
    );

    let good = scratch("good.safetensors");
    write_output(&good, dims, &expected);
    let out = tool(&[
        "check",
        "--case",
        case.to_str().unwrap(),
        "--output",
        good.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("PASS"));

    // Two ulps above the top of one element's interval (element m=3, n=5, l=1).
    let index = (3 * 256 + 5) * 2 + 1;
    let mut bad = expected.clone();
    bad[index] = f16::from_bits(hi[index].to_bits().wrapping_add(
        if hi[index].is_sign_negative() {
            -2i16 as u16
        } else {
            2
        },
    ));
    let bad_path = scratch("bad.safetensors");
    write_output(&bad_path, dims, &bad);
    let out = tool(&[
        "check",
        "--case",
        case.to_str().unwrap(),
        "--output",
        bad_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("c[m=3, n=5, l=1]"), "{}", text(&out));
    assert!(text(&out).contains("2 fp16 ulps outside"), "{}", text(&out));

    let out = tool(&[
        "check",
        "--json",
        "--case",
        case.to_str().unwrap(),
        "--output",
        bad_path.to_str().unwrap(),
    ]);
    let verdict: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(verdict["pass"], false);
    assert_eq!(verdict["failed"], 1);
    assert_eq!(verdict["worst"]["m"], 3);
}

#[test]
fn bad_inputs_exit_2_with_a_message() {
    let case = scratch("case2.safetensors");
    assert!(tool(&[
        "reference",
        "--shape",
        "128x128x256",
        "--out",
        case.to_str().unwrap()
    ])
    .status
    .success());

    let truncated = scratch("truncated.safetensors");
    let bytes = std::fs::read(&case).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let out = tool(&[
        "check",
        "--case",
        truncated.to_str().unwrap(),
        "--output",
        case.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("not a valid safetensors file"),
        "{}",
        text(&out)
    );

    // The case itself has no tensor `c`.
    let out = tool(&[
        "check",
        "--case",
        case.to_str().unwrap(),
        "--output",
        case.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("has no tensor 'c'"), "{}", text(&out));

    let wrong_shape = scratch("wrong_shape.safetensors");
    write_output(&wrong_shape, [128, 127, 1], &vec![f16::ZERO; 128 * 127]);
    let out = tool(&[
        "check",
        "--case",
        case.to_str().unwrap(),
        "--output",
        wrong_shape.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("expected F16 [128, 128, 1]"),
        "{}",
        text(&out)
    );

    let out = tool(&[
        "check",
        "--case",
        "/nonexistent/case.safetensors",
        "--output",
        case.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("cannot read"), "{}", text(&out));

    for args in [
        vec!["reference", "--shape", "128x128x100", "--out", "x"],
        vec![
            "reference",
            "--shape",
            "128x128x128",
            "--dist",
            "uniform",
            "--out",
            "x",
        ],
        vec!["generate", "--shape", "0x1x16", "--out", "x"],
    ] {
        let out = tool(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
}

#[test]
fn generate_writes_every_documented_tensor() {
    let path = scratch("inputs.safetensors");
    let out = tool(&[
        "generate",
        "--problem",
        "dual-gemm",
        "--shape",
        "200x130x96",
        "--dist",
        "adversarial",
        "--seed",
        "3",
        "--out",
        path.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let reader = CaseReader::open(&path).unwrap();
    let inputs = reader.dual_gemm_inputs().unwrap();
    assert_eq!(
        inputs,
        generate_dual_gemm(
            Shape::new(200, 130, 96, 1).unwrap(),
            Distribution::Adversarial,
            3
        )
    );
    // 200 rows pad to 256, 6 scale columns to 8: 2 x 2 atoms of 512 bytes.
    assert_eq!(
        reader
            .tensor("sfa_permuted", Dtype::F8_E4M3, &[1, 2, 2, 32, 4, 4])
            .unwrap()
            .len(),
        2048
    );
    assert_eq!(reader.meta("distribution").unwrap(), "adversarial");
}

/// The model gives the same bits on every run and thread count, pinned by a hash.
#[test]
fn reference_is_bit_identical_across_thread_counts() {
    let inputs = generate_dual_gemm(Shape::new(96, 80, 1024, 1).unwrap(), Distribution::Full, 42);
    let hash_with = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let reference = pool.install(|| dual_gemm_reference(&inputs, KOrder::Contiguous));
        let mut hasher = Sha256::new();
        for values in [&reference.expected, &reference.lo, &reference.hi] {
            hasher.update(
                values
                    .iter()
                    .flat_map(|x| x.to_bits().to_le_bytes())
                    .collect::<Vec<u8>>(),
            );
        }
        format!("{:x}", hasher.finalize())
    };
    let one = hash_with(1);
    assert_eq!(one, hash_with(3));
    assert_eq!(
        one,
        "e4ae3afcfe7ca035c2ddb182a4170d2e1bb9045cdf661eab5e530abf0feeda93"
    );
}
