//! nvfp4-harness: what runs a kernel under test and judges it against the model (the
//! `nvfp4-model` crate): the kernel contract, campaigns and certificates, the GPU backend, the
//! worker processes and their sandbox, preflight. The certify sequence is a library call
//! ([`certify::sequence`]); the `nvfp4-oracle` tool (the root crate) parses, prints and exits,
//! and the Python package certifies through the same calls.
//!
//! The `gpu` feature (on by default) brings [`gpu`]'s backend, [`worker`]'s processes,
//! `sandbox` and `preflight`; without it the crate is the kernel contract, the campaign and
//! its certificates, for kernels that run in the caller's process (what the Python package
//! builds on, with neither CUDA's bindings nor seccomp).
//!
//! Map of the crate, every public module (the README maps the whole repository):
//! - [`kernels`]: the interface every kernel under test meets, the CPU kernels and planted-bug
//!   mutants that run in process, and the manifest that describes an external kernel; the
//!   block-scaled family's CPU kernel and its planted bugs.
//! - [`certify`]: campaigns of cases against the model (the production shapes, random large
//!   shapes judged on sampled rows, and per-product rounding's worst case among them),
//!   shrinking of the first failure, compute-sanitizer and determinism checks, signed
//!   certificates and whether one lets bench time a kernel, shards of a campaign and their
//!   merge, the gate against a baseline; the planted bugs judged by the libraries' checks and
//!   by the oracle.
//! - [`bench`]: timing a certified kernel so that the kernel cannot move the clock: batches
//!   timed by the parent against a baseline worker, every timed output judged, the per-call
//!   latency trusted only where it agrees.
//! - [`preflight`]: what a kernel's compiled code shows before any GPU runs it (a CuTe DSL
//!   submission compiled for sm_100a in the sandbox; the census of its PTX: MMA kind and scale
//!   block, CTA pair, warp roles, TMA, cluster, variant).
//! - [`gpu`]: device discovery, NVRTC compilation with a cache, the variant registry, the
//!   fenced buffers every launch uses, the hardened launch, C-ABI libraries, the L2 reset
//!   before every timed call; CUDA is loaded at run time.
//! - [`worker`]: the process boundary: the worker protocol, the parent's side (starting workers,
//!   the watchdog, worker-backed kernels: the built-in GPU variants, submissions and C-ABI
//!   libraries, and the registry of every kernel), the serving sides (`gpu-worker` in Rust,
//!   `submission_worker.py` in Python) and the device memory they share with the parent.
//! - [`sandbox`]: the operating-system boundary around a worker process (namespaces, a
//!   read-only file system, its own `/dev`, no capabilities, a seccomp filter), and where the
//!   oracle's secrets live.
//! - [`fuzzing`]: the bodies of the fuzz targets under `fuzz/`, shared with
//!   `crates/harness/tests/harness/fuzz_inputs.rs`.
//! - [`error`]: the harness's error type (the model's, a GPU that failed, bad usage).

pub mod bench;
pub mod certify;
pub mod error;
pub mod fuzzing;
pub mod gpu;
pub mod kernels;
#[cfg(feature = "gpu")]
pub mod preflight;
#[cfg(unix)]
pub mod private_tmp;
#[cfg(feature = "gpu")]
pub mod sandbox;
pub mod worker;

pub use error::{Error, Result};
