//! nvfp4-oracle: a bit-exact CPU model of NVFP4 block-scaled GEMMs, and the tools built on it.
//!
//! Map of the crate, every public module (the README maps the whole repository):
//! - [`formats`]: e2m1, e4m3fn, e5m2 and UE8M0, bit by bit, FP4 packing, the shared rounding
//!   core, and every value decoded exactly.
//! - [`quant`]: NVFP4 quantization and dequantization with torchao's semantics; the MX formats
//!   (FLOOR and RCEIL), FP8 with a per-tensor scale, and quantizers and drawn cases for every
//!   operand format of the block-scaled family.
//! - [`layout`]: plain and blocked (tensor-core, 512-byte atom) scale layouts, and 8x4 tiles.
//! - [`problem`]: the dual GEMM, GEMM, GEMV and grouped GEMM: shapes, typed and validated
//!   inputs, deterministic input generators, inputs from named tensors; the block-scaled
//!   family (NVFP4, MX, FP8 and bf16 operands, alpha, bias, output types).
//! - [`model`]: exact dot products, the declared reference answer, acceptance intervals,
//!   tensor-core adder models and the replay of a declared schedule; the block-scaled family's
//!   reference and intervals.
//! - [`compare`]: verdicts on a kernel's output (which elements fail, by how much, where) and
//!   diagnosis against a catalogue of known bugs; the libraries' own tolerance checks.
//! - [`kernels`]: the interface every kernel under test meets, the CPU kernels and planted-bug
//!   mutants that run in process, and the manifest that describes an external kernel; the
//!   block-scaled family's CPU kernel and its planted bugs.
//! - [`certify`]: campaigns of cases against the model (the production shapes, random large
//!   shapes judged on sampled rows, and per-product rounding's worst case among them),
//!   shrinking of the first failure, compute-sanitizer and determinism checks, signed
//!   certificates, shards of a campaign and their merge, the gate against a baseline; the
//!   planted bugs judged by the libraries' checks and by the oracle.
//! - [`preflight`]: what a kernel's compiled code shows before any GPU runs it (a CuTe DSL
//!   submission compiled for sm_100a in the sandbox; the census of its PTX: MMA kind and scale
//!   block, CTA pair, warp roles, TMA, cluster, variant).
//! - [`gpu`]: device discovery, NVRTC compilation with a cache, the variant registry, the
//!   fenced buffers every launch uses, the roofline floor bench checks times against, the
//!   hardened launch, C-ABI libraries and the in-process bench; CUDA is loaded at run time.
//! - [`worker`]: the process boundary: the worker protocol, the parent's side (starting workers,
//!   the watchdog, worker-backed kernels: the built-in GPU variants, submissions and C-ABI
//!   libraries, and the registry of every kernel), the serving sides (`gpu-worker` in Rust,
//!   `submission_worker.py` in Python), timing that the kernel cannot falsify, the sandbox.
//! - [`golden`]: the golden set's definition, its manifest, generate and verify; the
//!   block-scaled family's golden hashes.
//! - [`case_file`]: safetensors case files (inputs, and for reference cases the answer and
//!   its intervals), read and written with validation.
//! - [`fuzzing`]: the bodies of the fuzz targets under `fuzz/`, shared with
//!   `tests/fuzz_inputs.rs`.
//! - [`error`]: the crate's error type, whose messages say what was wrong and what to do.
//! - [`cli`]: the `nvfp4-oracle` subcommands and their exit codes.

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
pub mod preflight;
pub mod problem;
pub mod quant;
pub mod sandbox;
pub mod worker;

pub use error::{Error, Result};
