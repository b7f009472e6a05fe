//! Bit-for-bit conformance of NVFP4 quantization against torchao 0.18.0 (torch 2.11), on the CPU
//! and on CUDA (golden/conformance/nvfp4_quant.safetensors, written by
//! scripts/gen_quant_vectors.py; the semantics are in docs/research/torchao-nvfp4-semantics.md).

use crate::common::{as_f32, float_input, load_vectors, tensor};
use nvfp4_model::quant::{per_tensor_scale, quantize_nvfp4, QuantRecipe, TorchDevice};
use std::collections::HashMap;

const FILE: &str = "golden/conformance/nvfp4_quant.safetensors";
const K: usize = 128;
const RECIPES: [&str; 3] = ["single_level", "two_level", "two_level_fixed"];
const DTYPES: [&str; 2] = ["f32", "bf16"];
const DEVICES: [(TorchDevice, &str); 2] = [(TorchDevice::Cpu, ""), (TorchDevice::Cuda, "cuda_")];

/// Quantizes one stored input and compares data and scales; returns the element count compared.
fn check(
    vectors: &HashMap<String, Vec<u8>>,
    recipe: &str,
    dtype: &str,
    suffix: &str,
    device: TorchDevice,
    prefix: &str,
) -> usize {
    let values = float_input(vectors, &format!("{recipe}_{dtype}_input{suffix}"), dtype);
    let rows = values.len() / K;
    let quant_recipe = if recipe == "single_level" {
        QuantRecipe::SingleLevel
    } else {
        let stored = as_f32(tensor(
            vectors,
            &format!("{prefix}{recipe}_{dtype}_tensor_scale{suffix}"),
        ))[0];
        if recipe == "two_level" {
            assert_eq!(
                per_tensor_scale(&values, device).unwrap().to_bits(),
                stored.to_bits(),
                "{prefix}{recipe}_{dtype}{suffix}: tensor scale"
            );
        }
        QuantRecipe::TwoLevel {
            tensor_scale: stored,
        }
    };
    let ours = quantize_nvfp4(&values, rows, K, quant_recipe, device).unwrap();
    let label = format!("{prefix}{recipe}_{dtype}{suffix}");
    let expected_scales = tensor(vectors, &format!("{prefix}{recipe}_{dtype}_scale{suffix}"));
    let expected_data = tensor(vectors, &format!("{prefix}{recipe}_{dtype}_data{suffix}"));
    for (i, (ours, theirs)) in ours.scales.iter().zip(expected_scales).enumerate() {
        assert_eq!(
            ours,
            theirs,
            "{label}: scale of row {}, block {}: {ours:#04x} vs {theirs:#04x}",
            i / (K / 16),
            i % (K / 16)
        );
    }
    for (i, (ours, theirs)) in ours.data.iter().zip(expected_data).enumerate() {
        assert_eq!(
            ours,
            theirs,
            "{label}: data byte of row {}, k {}: {ours:#04x} vs {theirs:#04x}",
            i / (K / 2),
            2 * (i % (K / 2))
        );
    }
    assert_eq!(
        (ours.scales.len(), ours.data.len()),
        (expected_scales.len(), expected_data.len())
    );
    values.len()
}

#[test]
fn finite_inputs_match_torchao_bit_for_bit() {
    let vectors = load_vectors(FILE);
    let mut compared = 0;
    for (device, prefix) in DEVICES {
        for recipe in RECIPES {
            for dtype in DTYPES {
                compared += check(&vectors, recipe, dtype, "", device, prefix);
            }
        }
    }
    assert_eq!(compared, 2 * 3 * 2 * 32 * K);
}

#[test]
fn infinite_inputs_match_torchao_where_torchao_defines_them() {
    let vectors = load_vectors(FILE);
    for (device, prefix) in DEVICES {
        for dtype in DTYPES {
            check(
                &vectors,
                "single_level",
                dtype,
                "_special_inf",
                device,
                prefix,
            );
            check(
                &vectors,
                "two_level_fixed",
                dtype,
                "_special_inf",
                device,
                prefix,
            );
            // torchao's dynamic per-tensor scale becomes inf and its output garbage: we refuse.
            let values = float_input(
                &vectors,
                &format!("two_level_{dtype}_input_special_inf"),
                dtype,
            );
            let err = per_tensor_scale(&values, device).unwrap_err().to_string();
            assert!(err.contains("not finite"), "{err}");
        }
    }
}

#[test]
fn nan_inputs_are_refused_with_the_position() {
    let vectors = load_vectors(FILE);
    for recipe in RECIPES {
        for dtype in DTYPES {
            let values = float_input(&vectors, &format!("{recipe}_{dtype}_input_special"), dtype);
            let err = quantize_nvfp4(
                &values,
                values.len() / K,
                K,
                QuantRecipe::SingleLevel,
                TorchDevice::Cpu,
            )
            .unwrap_err();
            assert!(err.to_string().contains("is NaN"), "{err}");
        }
    }
}

#[test]
fn torchaos_swizzled_scales_match_our_blocked_layout() {
    use nvfp4_model::layout::{plain_to_blocked, ScaleDims};
    let vectors = load_vectors(FILE);
    let plain = tensor(&vectors, "single_level_f32_scale");
    let swizzled = tensor(&vectors, "single_level_f32_scale_swizzled");
    // torchao zero-pads the 32 x 8 scales to 128 x 8 before swizzling.
    let ours = plain_to_blocked(
        plain,
        ScaleDims {
            rows: 32,
            cols: K / 16,
            batches: 1,
        },
        0,
    );
    assert_eq!(ours, swizzled);
}
