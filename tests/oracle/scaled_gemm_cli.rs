//! `scaled-gemm reference` and `scaled-gemm check` end to end: a case written, an output that is
//! the exact reference passes, one element off fails and is named, a case file's operands read
//! back with --inputs give the same reference, and bad input exits 2 with a message.

use crate::common;

use nvfp4_model::case_file::{f64_from_bytes, CaseReader, CaseWriter};
use safetensors::Dtype;
use std::path::Path;

use crate::common::oracle;

/// `scaled-gemm check --case CASE --output OUTPUT`.
fn check(case: &str, output: &str) -> (i32, String) {
    oracle(&["scaled-gemm", "check", "--case", case, "--output", output])
}

/// Writes `values` (bf16 values as f64) as tensor `c`, BF16 [m, n].
fn write_output(path: &Path, values: &[f64], m: usize, n: usize) {
    let bytes = values
        .iter()
        .flat_map(|&x| half::bf16::from_f64(x).to_le_bytes())
        .collect();
    CaseWriter::default()
        .tensor("c", Dtype::BF16, vec![m, n], bytes)
        .write(path)
        .unwrap();
}

#[test]
fn a_case_judges_outputs_and_carries_its_operands() {
    let dir = common::scratch_dir("scaled-gemm-cli");
    let case = dir.join("case.safetensors");
    let case_text = case.display().to_string();
    let (code, text) = oracle(&[
        "scaled-gemm",
        "reference",
        "--a-format",
        "mxfp8-e4m3",
        "--b-format",
        "mxfp4",
        "--shape",
        "48x24x256",
        "--bias",
        "--alpha",
        "0.5",
        "--out",
        &case_text,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("mxfp8-e4m3 x mxfp4, alpha 0.5, bf16 output"),
        "{text}"
    );
    let reader = CaseReader::open(&case).unwrap();
    let expected = f64_from_bytes(&reader.tensor("expected", Dtype::F64, &[48, 24]).unwrap());
    let output = dir.join("out.safetensors");
    let output_text = output.display().to_string();
    write_output(&output, &expected, 48, 24);
    let (code, text) = check(&case_text, &output_text);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("PASS: all 1152 elements"), "{text}");
    let mut wrong = expected.clone();
    wrong[5 * 24 + 7] = wrong[5 * 24 + 7] * 1.02 + 0.05;
    write_output(&output, &wrong, 48, 24);
    let (code, text) = check(&case_text, &output_text);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("FAIL: 1 of 1152") && text.contains("[5, 7]: got"),
        "{text}"
    );
    // The case file's operands, read back as a user's inputs, give the same reference.
    let again = dir.join("again.safetensors");
    let (code, text) = oracle(&[
        "scaled-gemm",
        "reference",
        "--a-format",
        "mxfp8-e4m3",
        "--b-format",
        "mxfp4",
        "--inputs",
        &case_text,
        "--alpha",
        "0.5",
        "--out",
        &again.display().to_string(),
    ]);
    assert_eq!(code, 0, "{text}");
    let reread = CaseReader::open(&again).unwrap();
    assert_eq!(
        f64_from_bytes(&reread.tensor("expected", Dtype::F64, &[48, 24]).unwrap()),
        expected
    );
    // Bad input: another problem's case, the wrong output type, formats that do not fit.
    let dual = dir.join("dual.safetensors").display().to_string();
    assert_eq!(
        oracle(&["reference", "--shape", "16x16x64", "--out", &dual]).0,
        0
    );
    let (code, text) = check(&dual, &output_text);
    assert_eq!(code, 2, "{text}");
    let f16_output = dir.join("f16.safetensors");
    CaseWriter::default()
        .tensor("c", Dtype::F16, vec![48, 24], vec![0; 48 * 24 * 2])
        .write(&f16_output)
        .unwrap();
    let (code, text) = check(&case_text, &f16_output.display().to_string());
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("tensor 'c' is F16"), "{text}");
    let (code, text) = oracle(&[
        "scaled-gemm",
        "reference",
        "--a-format",
        "nvfp4",
        "--b-format",
        "mxfp4",
        "--inputs",
        &case_text,
        "--out",
        &again.display().to_string(),
    ]);
    assert_eq!(code, 2, "{text}");
    // An output too large to hold a reference for is refused before any work.
    let (code, text) = oracle(&[
        "scaled-gemm",
        "reference",
        "--dist",
        "moderate",
        "--shape",
        "65536x8192x32",
        "--out",
        &again.display().to_string(),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("more than 2^28 elements"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `--mx-scaling rceil` draws `normal` MX operands with cuBLAS's rule: every scale at least
/// FLOOR's (RCEIL rounds up so that amax fits), some above it; an unknown rule exits 2.
#[test]
fn rceil_scales_are_at_least_floor_scales() {
    let dir = common::scratch_dir("scaled-gemm-rceil");
    let scales = |rule: &str| -> Vec<u8> {
        let path = dir.join(format!("{rule}.safetensors"));
        let (code, text) = oracle(&[
            "scaled-gemm",
            "reference",
            "--a-format",
            "mxfp8-e4m3",
            "--b-format",
            "mxfp4",
            "--shape",
            "16x8x256",
            "--mx-scaling",
            rule,
            "--out",
            &path.display().to_string(),
        ]);
        assert_eq!(code, 0, "{text}");
        let reader = CaseReader::open(&path).unwrap();
        let mut bytes = reader.tensor("a_scale", Dtype::U8, &[16, 8]).unwrap();
        bytes.extend(reader.tensor("b_scale", Dtype::U8, &[8, 8]).unwrap());
        bytes
    };
    let (floor, rceil) = (scales("floor"), scales("rceil"));
    assert!(floor.iter().zip(&rceil).all(|(f, r)| r >= f));
    assert!(floor.iter().zip(&rceil).any(|(f, r)| r > f));
    let (code, text) = oracle(&[
        "scaled-gemm",
        "reference",
        "--shape",
        "16x8x256",
        "--mx-scaling",
        "ceil",
        "--out",
        &dir.join("x.safetensors").display().to_string(),
    ]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("floor, rceil"), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}
