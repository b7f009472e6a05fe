//! Shared helpers for the integration tests: reading committed vector files.
#![allow(dead_code)]

use safetensors::SafeTensors;
use std::collections::HashMap;
use std::path::PathBuf;

pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(relative)
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

pub fn tensor<'a>(vectors: &'a HashMap<String, Vec<u8>>, name: &str) -> &'a [u8] {
    vectors
        .get(name)
        .unwrap_or_else(|| panic!("vector file has no tensor '{name}'"))
}
