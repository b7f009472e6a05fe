//! The checks the libraries that ship block-scaled kernels use in their own tests, written out so
//! that they can be compared with the oracle on the same outputs (README, "What tolerance tests
//! miss"). Each is the library's assertion as its test file states it:
//! - FlashInfer `tests/gemm/test_mm_fp4.py`: cosine similarity > 0.97 against the product of the
//!   unquantized operands;
//! - vLLM `tests/kernels/quantization/test_nvfp4_scaled_mm.py` (and SGLang): `assert_close` with
//!   atol = rtol = 0.1 against the dequantized product;
//! - torchao and PyTorch's `test_scaled_matmul_cuda.py`: SQNR >= 16 dB against it;
//! - TensorRT-LLM: `allclose` with atol = rtol = 1e-2 against it;
//! - TransformerEngine `test_nvfp4_gemm_exact.py`: atol = rtol = 8e-3 against it;
//! - DeepGEMM: its `calc_diff`, 1 - 2 sum(x y) / sum(x^2 + y^2), below 0.02 against it.
//!
//! NaN fails every one of them, as in torch (`equal_nan` is off, and a NaN cosine or SQNR is not
//! above its threshold); equal infinities pass the elementwise ones.

/// One library's check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldCheck {
    Cosine,
    AssertClose,
    Sqnr,
    Allclose,
    TightClose,
    CalcDiff,
}

impl FieldCheck {
    pub const ALL: [FieldCheck; 6] = [
        FieldCheck::Cosine,
        FieldCheck::AssertClose,
        FieldCheck::Sqnr,
        FieldCheck::Allclose,
        FieldCheck::TightClose,
        FieldCheck::CalcDiff,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FieldCheck::Cosine => "cosine > 0.97 (FlashInfer)",
            FieldCheck::AssertClose => "atol = rtol = 0.1 (vLLM, SGLang)",
            FieldCheck::Sqnr => "SQNR >= 16 dB (torchao, PyTorch)",
            FieldCheck::Allclose => "allclose 1e-2 (TensorRT-LLM)",
            FieldCheck::TightClose => "atol = rtol = 8e-3 (TransformerEngine)",
            FieldCheck::CalcDiff => "calc_diff < 0.02 (DeepGEMM)",
        }
    }

    /// Whether `out` passes, given the dequantized reference (the exact product of the operands
    /// as quantized, in the output type) and the unquantized one (the operands before
    /// quantization).
    pub fn passes(self, out: &[f64], dequantized: &[f64], unquantized: &[f64]) -> bool {
        match self {
            FieldCheck::Cosine => cosine(out, unquantized) > 0.97,
            FieldCheck::AssertClose => close(out, dequantized, 0.1, 0.1),
            FieldCheck::Sqnr => sqnr_db(dequantized, out) >= 16.0,
            FieldCheck::Allclose => close(out, dequantized, 1e-2, 1e-2),
            FieldCheck::TightClose => close(out, dequantized, 8e-3, 8e-3),
            FieldCheck::CalcDiff => calc_diff(out, dequantized) < 0.02,
        }
    }
}

/// Cosine similarity of two flattened tensors (NaN if either holds NaN).
pub fn cosine(x: &[f64], y: &[f64]) -> f64 {
    let dot: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    dot / (norm(x) * norm(y))
}

/// DeepGEMM's `calc_diff`: 1 - 2 sum(x y) / sum(x^2 + y^2) (NaN if either holds NaN).
pub fn calc_diff(x: &[f64], y: &[f64]) -> f64 {
    let denominator: f64 = x.iter().zip(y).map(|(a, b)| a * a + b * b).sum();
    let dot: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    1.0 - 2.0 * dot / denominator
}

/// torchao's `compute_error`: 20 log10(|reference| / |reference - out|).
pub fn sqnr_db(reference: &[f64], out: &[f64]) -> f64 {
    let signal: f64 = reference.iter().map(|a| a * a).sum::<f64>().sqrt();
    let noise: f64 = reference
        .iter()
        .zip(out)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    20.0 * (signal / noise).log10()
}

/// torch's `allclose` / `assert_close`: |out - reference| <= atol + rtol |reference| everywhere.
pub fn close(out: &[f64], reference: &[f64], atol: f64, rtol: f64) -> bool {
    out.iter().zip(reference).all(|(&got, &want)| {
        if got.is_infinite() || want.is_infinite() {
            return got == want;
        }
        (got - want).abs() <= atol + rtol * want.abs()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_behave_as_torch_does() {
        let reference = [1.0, -2.0, 4.0];
        assert!(close(&[1.05, -2.1, 4.3], &reference, 0.1, 0.1));
        assert!(!close(&[1.3, -2.0, 4.0], &reference, 0.1, 0.1));
        assert!(!close(&[f64::NAN, -2.0, 4.0], &reference, 0.1, 0.1));
        assert!((cosine(&reference, &[2.0, -4.0, 8.0]) - 1.0).abs() < 1e-12);
        assert!(sqnr_db(&reference, &reference).is_infinite());
        let noisy = [1.1, -2.2, 4.4];
        assert!((sqnr_db(&reference, &noisy) - 20.0).abs() < 1e-9);
        assert!(!FieldCheck::Sqnr.passes(&[f64::NAN; 3], &reference, &reference));
        assert_eq!(calc_diff(&reference, &reference), 0.0);
        assert!((calc_diff(&reference, &[-1.0, 2.0, -4.0]) - 2.0).abs() < 1e-12);
    }
}
