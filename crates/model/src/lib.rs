//! nvfp4-model: the numerics of nvfp4-oracle, a bit-exact CPU model of NVFP4 block-scaled GEMMs.
//! Nothing here starts a process, loads CUDA or parses a command line: the harness
//! (`nvfp4-harness`), the tool and the Python package build on it.
//!
//! Three steps carry the crate: **inputs** drawn from a seed ([`problem::generate`]: the same
//! bytes on every machine), the **reference** for every output element (the declared answer
//! and the interval of fp16 values any correct kernel may give, whatever its accumulation order:
//! [`model::problem_reference`]), and the **verdict** on a kernel's output ([`compare::judge`]:
//! pass or fail, by how much and where).
//!
//! ```
//! use half::f16;
//! use nvfp4_model::compare::{judge, OutputShape};
//! use nvfp4_model::model::bounds::KOrder;
//! use nvfp4_model::model::problem_reference;
//! use nvfp4_model::problem::generate::generate_problem;
//! use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
//!
//! // A small dual GEMM, C = fp16(silu(A @ B1^T) * (A @ B2^T)), in the competition's distribution.
//! let shape: Shape = "64x32x128".parse()?;
//! let inputs = generate_problem(ProblemKind::DualGemm, shape, Distribution::Gpumode, 7);
//! let reference = problem_reference(&inputs, KOrder::Contiguous);
//! let output = OutputShape { m: 64, n: 32, l: 1 };
//! // The declared answer passes ...
//! let (expected, lo, hi) = (&reference.expected, &reference.lo, &reference.hi);
//! assert!(judge(output, expected, expected, lo, hi).pass);
//! // ... and an output with one element lost to NaN does not.
//! let mut lost = expected.clone();
//! lost[5] = f16::NAN;
//! let verdict = judge(output, &lost, expected, lo, hi);
//! assert!(!verdict.pass && verdict.failed == 1);
//! # Ok::<(), nvfp4_model::Error>(())
//! ```
//!
//! Map of the crate, every public module (docs/architecture.md maps the whole repository):
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
//! - [`fuzzing`]: the bodies of the fuzz targets under `fuzz/`, which
//!   `crates/model/tests/model/fuzz_inputs.rs` drives with proptest on the stable toolchain.
//! - [`case_file`]: safetensors case files (inputs, and for reference cases the answer and
//!   its intervals), read and written with validation; the block-scaled family's layout.
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
