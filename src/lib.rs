//! nvfp4-oracle: a bit-exact CPU model of NVFP4 block-scaled GEMMs, and the tools built on it.
//!
//! Map of the crate (the README has the same map for the whole repository):
//! - [`formats`]: e2m1 and e4m3fn, bit by bit, and FP4 packing.
//! - [`quant`]: NVFP4 quantization with torchao's semantics.
//! - [`layout`]: plain and blocked (tensor-core) scale layouts.
//! - [`problem`]: shapes, typed inputs, deterministic input generators.
//! - [`case_file`]: safetensors case files.
//! - [`cli`]: the `nvfp4-oracle` subcommands.

pub mod case_file;
pub mod certify;
pub mod cli;
pub mod compare;
pub mod error;
pub mod formats;
pub mod fuzzing;
pub mod golden;
pub mod gpu;
pub mod kernels;
pub mod layout;
pub mod model;
pub mod problem;
pub mod quant;

pub use error::{Error, Result};
