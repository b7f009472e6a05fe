//! Helpers shared by the model's integration tests: reading committed vector files.
#![allow(dead_code)]

use safetensors::SafeTensors;
use std::collections::HashMap;
use std::path::PathBuf;

/// A path of the checkout: the committed vectors live at its root (golden/), two levels above
/// this crate.
pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(relative)
}

/// Loads every tensor of a committed safetensors file as raw bytes. A missing file fails the
/// test: conformance vectors are never optional.
pub fn load_vectors(relative: &str) -> HashMap<String, Vec<u8>> {
    let path = repo_path(relative);
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|err| panic!("conformance vectors {} missing: {err}", path.display()));
    let tensors =
        SafeTensors::deserialize(&bytes).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    tensors
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.data().to_vec()))
        .collect()
}

pub fn as_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

pub fn as_u16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// A stored input tensor of f32 or bf16 values (`dtype` "f32" or "bf16"), as f32.
pub fn float_input(vectors: &HashMap<String, Vec<u8>>, name: &str, dtype: &str) -> Vec<f32> {
    let bytes = tensor(vectors, name);
    match dtype {
        "f32" => as_f32(bytes),
        _ => as_u16(bytes)
            .into_iter()
            .map(|bits| half::bf16::from_bits(bits).to_f32())
            .collect(),
    }
}

pub fn tensor<'a>(vectors: &'a HashMap<String, Vec<u8>>, name: &str) -> &'a [u8] {
    vectors
        .get(name)
        .unwrap_or_else(|| panic!("vector file has no tensor '{name}'"))
}
