//! The command line end to end: generate, reference, check, exit codes and messages.

use half::f16;
use nvfp4_model::case_file::{CaseReader, CaseWriter};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::dual_gemm_reference;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};
use safetensors::Dtype;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Output;

fn tool(args: &[&str]) -> Output {
    crate::common::oracle_command()
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

/// `reference --inputs`: a user's own tensors (plain scales only, 2-D for L = 1, no metadata)
/// give the same reference as the generated case they came from; the permuted scales, when
/// given, must agree; wrong dtypes, shapes and missing tensors are exit 2 naming the tensor.
#[test]
fn reference_of_your_own_inputs() {
    use nvfp4_model::model::gemm_reference;
    use nvfp4_model::problem::generate::generate_gemm;
    let shape = Shape::new(40, 72, 160, 1).unwrap();
    let inputs = generate_dual_gemm(shape, Distribution::AdversarialNan, 8);
    let want = dual_gemm_reference(&inputs, KOrder::Contiguous);
    let user_file = |extra: &dyn Fn(&mut CaseWriter)| {
        let mut writer = CaseWriter::default();
        for (name, op) in [("a", &inputs.a), ("b1", &inputs.b1), ("b2", &inputs.b2)] {
            writer
                .tensor(
                    name,
                    Dtype::U8,
                    vec![op.rows(), op.k() / 2],
                    op.data().to_vec(),
                )
                .tensor(
                    &format!("sf{name}"),
                    Dtype::F8_E4M3,
                    vec![op.rows(), op.k() / 16],
                    op.scales().to_vec(),
                );
        }
        extra(&mut writer);
        writer
    };
    let path = scratch("user-inputs.safetensors");
    let out = scratch("user-reference.safetensors");
    let run = |writer: &mut CaseWriter| {
        writer.write(&path).unwrap();
        tool(&[
            "reference",
            "--inputs",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let ok = run(&mut user_file(&|_| {}));
    assert!(ok.status.success(), "{}", text(&ok));
    let case = CaseReader::open(&out).unwrap();
    for (name, values) in [
        ("expected", &want.expected),
        ("lo", &want.lo),
        ("hi", &want.hi),
    ] {
        let got = nvfp4_model::case_file::fp16_from_bytes(
            &case.tensor(name, Dtype::F16, &[40, 72, 1]).unwrap(),
        );
        assert!(
            got.iter()
                .zip(values.iter())
                .all(|(g, w)| g.to_bits() == w.to_bits()),
            "{name}"
        );
    }
    // The written case is a full case file: its own operands read back, permuted scales included.
    assert_eq!(case.dual_gemm_inputs().unwrap(), inputs);

    // The data as safetensors F4 (shape in 4-bit elements: [rows, K]) reads the same.
    let as_f4 = run(&mut user_file(&|w| {
        w.tensor("a", Dtype::F4, vec![40, 160], inputs.a.data().to_vec());
    }));
    assert!(as_f4.status.success(), "{}", text(&as_f4));
    let f4_expected = nvfp4_model::case_file::fp16_from_bytes(
        &CaseReader::open(&out)
            .unwrap()
            .tensor("expected", Dtype::F16, &[40, 72, 1])
            .unwrap(),
    );
    assert!(f4_expected
        .iter()
        .zip(&want.expected)
        .all(|(g, w)| g.to_bits() == w.to_bits()));

    // Permuted scales that disagree with the plain ones.
    let mut bad_permuted = inputs.b1.blocked_scales(0);
    bad_permuted[0] ^= 0x08;
    let storage = nvfp4_model::layout::BlockedScaleLayout(inputs.b1.scale_dims()).storage_shape();
    let refused = run(&mut user_file(&|w| {
        w.tensor(
            "sfb1_permuted",
            Dtype::F8_E4M3,
            storage.to_vec(),
            bad_permuted.clone(),
        );
    }));
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        text(&refused).contains("'sfb1_permuted' does not hold the same scales as 'sfb1'"),
        "{}",
        text(&refused)
    );
    // The right permuted scales are accepted.
    let good = inputs.b1.blocked_scales(0);
    let accepted = run(&mut user_file(&|w| {
        w.tensor(
            "sfb1_permuted",
            Dtype::F8_E4M3,
            storage.to_vec(),
            good.clone(),
        );
    }));
    assert!(accepted.status.success(), "{}", text(&accepted));

    // Floats where packed FP4 belongs; scales of the wrong shape; a missing operand.
    let floats = run(&mut user_file(&|w| {
        w.tensor("a", Dtype::F32, vec![40, 40], vec![0; 40 * 40 * 4]);
    }));
    assert_eq!(floats.status.code(), Some(2));
    assert!(
        text(&floats).contains("tensor 'a' is F32: FP4 data must be packed bytes"),
        "{}",
        text(&floats)
    );
    let bad_scales = run(&mut user_file(&|w| {
        w.tensor("sfb2", Dtype::F8_E4M3, vec![72, 9], vec![0x38; 72 * 9]);
    }));
    assert_eq!(bad_scales.status.code(), Some(2));
    assert!(
        text(&bad_scales).contains("'sfb2' has shape [72, 9]"),
        "{}",
        text(&bad_scales)
    );
    let mut no_b2 = CaseWriter::default();
    no_b2.tensor("a", Dtype::U8, vec![1, 8], vec![0; 8]);
    let missing = run(&mut no_b2);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing).contains("no tensor 'sfa'"),
        "{}",
        text(&missing)
    );

    // The GEMM, from the same reader.
    let gemm = generate_gemm(Shape::new(8, 24, 64, 2).unwrap(), Distribution::Full, 4);
    let mut writer = CaseWriter::default();
    for (name, op) in [("a", &gemm.a), ("b", &gemm.b)] {
        writer
            .tensor(
                name,
                Dtype::U8,
                vec![2, op.rows(), op.k() / 2],
                op.data().to_vec(),
            )
            .tensor(
                &format!("sf{name}"),
                Dtype::U8,
                vec![2, op.rows(), op.k() / 16],
                op.scales().to_vec(),
            );
    }
    writer.write(&path).unwrap();
    let gemm_run = tool(&[
        "reference",
        "--problem",
        "gemm",
        "--inputs",
        path.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(gemm_run.status.success(), "{}", text(&gemm_run));
    let want = gemm_reference(&gemm, KOrder::Contiguous);
    let got = nvfp4_model::case_file::fp16_from_bytes(
        &CaseReader::open(&out)
            .unwrap()
            .tensor("expected", Dtype::F16, &[8, 24, 2])
            .unwrap(),
    );
    assert!(got
        .iter()
        .zip(&want.expected)
        .all(|(g, w)| g.to_bits() == w.to_bits()));
}

#[test]
fn a_shape_past_the_machines_memory_is_refused_at_once_with_its_size() {
    let out_path = scratch("huge.safetensors");
    let started = std::time::Instant::now();
    let out = tool(&[
        "reference",
        "--problem",
        "dual-gemm",
        "--shape",
        "100000x100000x16",
        "--out",
        out_path.to_str().unwrap(),
    ]);
    let message = text(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "{message}"
    );
    assert!(
        message.contains("needs about") && message.contains("GiB"),
        "{message}"
    );
    assert!(!out_path.exists());
}

#[test]
fn bench_with_nothing_to_time_exits_non_zero() {
    if nvfp4_harness::gpu::device::device_info().is_ok() {
        return; // with a GPU, bench has something to time: tested on the GPU machine
    }
    let dir = scratch("bench-report");
    let out = tool(&["bench", "--no-torch", "--report-dir", dir.to_str().unwrap()]);
    let message = text(&out);
    assert_eq!(out.status.code(), Some(4), "{message}");
    assert!(message.contains("nothing timed"), "{message}");
    assert!(!dir.join("bench.json").exists(), "no report of nothing");
}

/// A K deeper than the error bound of the chosen order holds is a usage error, not a panic.
#[test]
fn reference_refuses_a_k_too_deep_for_its_order() {
    let out_path = scratch("deep-any.safetensors");
    let out = tool(&[
        "reference",
        "--problem",
        "gemm",
        "--shape",
        "1x1x40000",
        "--k-order",
        "any",
        "--out",
        out_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("too deep for --k-order any"),
        "{}",
        text(&out)
    );
    // The default order holds there.
    let out = tool(&[
        "reference",
        "--problem",
        "gemm",
        "--shape",
        "1x1x40000",
        "--out",
        out_path.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}
