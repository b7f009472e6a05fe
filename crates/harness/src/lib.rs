//! nvfp4-harness: what runs a kernel under test and judges it against the model (the
//! `nvfp4-model` crate). The `nvfp4-oracle` tool (the root crate) parses, prints and exits on
//! it; the Python package certifies callables through the same calls.
//!
//! Three ideas carry the crate:
//! - a **kernel under test** ([`kernels::KernelUnderTest`]): anything that takes a case's inputs
//!   and writes its output, in this process (the CPU kernels, a Python callable) or in a worker
//!   process of its own ([`worker`]: a GPU variant, a user's submission or C-ABI library, in
//!   the [`sandbox`]);
//! - a **campaign** ([`certify::certify_variant`]): cases drawn from a seed and run against
//!   the model, the first failure shrunk and diagnosed;
//! - a **certificate** ([`certify::Certificate`]): what a campaign and the checks after it
//!   found, signed, written as JSON and Markdown; [`certify::certify_kernel`] is the whole
//!   sequence from starting a kernel to writing its certificate.
//!
//! ```
//! use nvfp4_harness::certify::{certify_variant, CampaignLimits};
//! use nvfp4_harness::kernels::cpu::{Bug, CpuKernel};
//!
//! // A short campaign (20 random cases, no production-size ones), drawn from seed 7.
//! let limits = CampaignLimits { cases: 20, quick: true, ..CampaignLimits::defaults(false, 7) };
//! // The CPU kernel passes every case ...
//! let correct = certify_variant(&CpuKernel::correct(), limits.clone(), &[], |_, _| {});
//! assert!(correct.failure.is_none());
//! // ... and a planted bug (only the first GEMM computed) is caught, its case shrunk.
//! let mutant = CpuKernel::mutant(Bug::GemmOnly);
//! let failed = certify_variant(&mutant, limits, &[], |_, _| {});
//! let failure = failed.failure.expect("the planted bug is caught");
//! assert!(failure.minimal.spec.shape.m <= failure.first.shape.m);
//! ```
//!
//! The `gpu` feature (on by default) brings [`gpu`]'s backend, [`worker`]'s processes,
//! `sandbox` and `preflight`; without it the crate is the kernel contract, the campaign and
//! its certificates, for kernels that run in the caller's process (what the Python package
//! builds on, with neither CUDA's bindings nor seccomp).
//!
//! Map of the crate, every public module, from the top down (a module uses those below it;
//! docs/architecture.md follows one certify run and one bench run through them, and maps the
//! repository):
//! - [`preflight`]: what a kernel's compiled code shows before any GPU runs it (a CuTe DSL
//!   submission compiled for sm_100a in the sandbox; the census of its PTX: MMA kind and scale
//!   block, CTA pair, warp roles, TMA, cluster, variant).
//! - [`certify`]: campaigns of cases against the model, shrinking of the first failure,
//!   compute-sanitizer and determinism checks, signed certificates, shards and their merge, the
//!   gate against a baseline; rooms `campaign/`, `shrink/`, `checks/` and `certificate/`
//!   behind one face.
//! - [`bench`]: timing a certified kernel so that the kernel cannot move the clock: batches
//!   timed by the parent against a baseline worker, every timed output judged, the per-call
//!   latency trusted only where it agrees; the roofline and the bench report.
//! - [`worker`]: the process boundary: the worker protocol, the parent's side (starting
//!   workers, the watchdog, worker-backed kernels, the registry of every kernel), the serving
//!   sides (`gpu-worker` in Rust, `submission_worker.py` in Python).
//! - [`gpu`]: device discovery, NVRTC compilation with a cache, the variant registry (its CUDA
//!   sources in this crate's `kernels/`), the fenced buffers every launch uses, the hardened
//!   launch, C-ABI libraries, the GPU reference; CUDA is loaded at run time.
//! - [`kernels`]: the interface every kernel under test meets, the CPU kernels and planted-bug
//!   mutants that run in process, and the manifest that describes an external kernel.
//! - [`sandbox`]: the operating-system boundary around a worker process (namespaces, a
//!   read-only file system, its own `/dev`, no capabilities, a seccomp filter).
//! - [`secrets`]: what no kernel may know: the folder of the signing key, unpredictable seeds.
//! - `private_tmp`: this run's private temporary folder, removed however the run ends.
//! - `trace`: where a long run's time goes, on stderr, with `NVFP4_ORACLE_TRACE` set
//!   ([`trace_step`] for the tool's own steps).
//! - [`cores`]: the campaign's share of the host's cores (one GPU of several: its share).
//! - [`error`]: the harness's error type (the model's, a GPU that failed, bad usage).

pub mod bench;
pub mod certify;
pub mod cores;
pub mod error;
pub mod gpu;
pub mod kernels;
#[cfg(feature = "gpu")]
pub mod preflight;
#[cfg(unix)]
pub mod private_tmp;
#[cfg(feature = "gpu")]
pub mod sandbox;
pub mod secrets;
mod trace;
pub mod worker;

pub use error::{Error, Result};
pub use trace::trace_step;
