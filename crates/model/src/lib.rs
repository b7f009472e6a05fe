//! nvfp4-model: the numerics of nvfp4-oracle, a bit-exact CPU model of NVFP4 block-scaled GEMMs.
//! Nothing here starts a process, loads CUDA or parses a command line: the harness
//! (`nvfp4-oracle`'s library) and the Python package build on it.
//!
//! Map of the crate, every public module (the README maps the whole repository):
//! - [`formats`]: e2m1, e4m3fn, e5m2 and UE8M0, bit by bit, FP4 packing, the shared rounding
//!   core, and every value decoded exactly.
//! - [`quant`]: NVFP4 quantization and dequantization with torchao's semantics; the MX formats
//!   (FLOOR and RCEIL), FP8 with a per-tensor scale, and quantizers and drawn cases for every
//!   operand format of the block-scaled family.
//! - [`layout`]: plain and blocked (tensor-core, 512-byte atom) scale layouts, and 8x4 tiles.
//! - [`problem`]: the dual GEMM, GEMM, GEMV and grouped GEMM: shapes, typed and validated
//!   inputs, deterministic input generators, inputs from named tensors, the output's poison
//!   fill; the block-scaled family (NVFP4, MX, FP8 and bf16 operands, alpha, bias, output
//!   types).
//! - [`model`]: exact dot products, the declared reference answer, acceptance intervals,
//!   tensor-core adder models and the replay of a declared schedule; the block-scaled family's
//!   reference and intervals.
//! - [`compare`]: verdicts on a kernel's output (which elements fail, by how much, where) and
//!   diagnosis against a catalogue of known bugs; the libraries' own tolerance checks.
//! - [`golden`]: the golden set's definition, its manifest, generate and verify; the
//!   block-scaled family's golden hashes.
//! - [`bounded_read`]: every file read from a user, bounded by its format before its body.
//! - [`case_file`]: safetensors case files (inputs, and for reference cases the answer and
//!   its intervals), read and written with validation.
//! - [`error`]: the model's error type, whose messages say what was wrong and what to do.

pub mod bounded_read;
pub mod case_file;
pub mod compare;
pub mod error;
pub mod formats;
pub mod fuzzing;
pub mod golden;
pub mod layout;
pub mod model;
pub mod problem;
pub mod quant;

pub use error::{Error, Result};
