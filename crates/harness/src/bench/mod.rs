//! Bench: timing a kernel that passed certification, so that the kernel cannot move the clock
//! and an honest kernel cannot trip it (the threat model: docs/reference/threat-model.md). The CLI's
//! `bench` parses its arguments, calls [`variants::bench_variant`] and [`external::bench_external`]
//! into one [`report::BenchReport`], and prints [`report::render`].
//!
//! - [`variants`] (GPU): the built-in variants timed in process (CUDA events, L2 flushed,
//!   rotating inputs); [`variants::Timing`], a row of the report.
//! - [`external`] (GPU): an external kernel timed in its worker on every benchmark shape: calls
//!   one at a time, then batches, every output judged, the findings.
//! - [`per_call`] (GPU): the calls one at a time against a baseline worker (the cold-call
//!   latency, and the evidence the worker gives against the kernel). The workers' sides of both
//!   are theirs: `crate::worker::library_timing` in the Rust worker, `submission_worker.py`;
//!   `worker_timing.rs` lends both the kernel's worker and its baseline's (as
//!   `IsolatedKernel::time` and `::time_batches`).
//! - [`batch_clock`]: the rules the reported time rests on, without a GPU: how many calls a
//!   batch holds, the time per call from the parent's clock over a batch less a baseline
//!   worker's, when the per-call CUDA-event latency is trusted beside it, and the finding for
//!   wrong outputs.
//! - [`batch`] (GPU): the requests that time a batch in the kernel's worker and in the
//!   baseline's; [`batch_memory`] (GPU): the batch's slots in device memory shared with both;
//!   [`batch_inputs`] (GPU): what fills the slots with fresh inputs and judges every output,
//!   on the host or (a dual GEMM) on the GPU.
//! - [`judge`] (GPU): every timed call's output judged, against the GPU reference where it
//!   takes the case, else the CPU model.

//! - [`roofline`]: the least time any kernel can take for a shape on a GPU, below which a time
//!   is a finding; [`timing`]: one timed shape's figures, what every way of timing produces.
//! - [`report`] (GPU): the report, its Markdown, and the certificates bench trusts;
//!   [`baseline`] (GPU): medians against a signed earlier report (`--baseline`).

#[cfg(feature = "gpu")]
pub mod baseline;
#[cfg(feature = "gpu")]
pub mod batch;
pub mod batch_clock;
#[cfg(feature = "gpu")]
pub mod batch_inputs;
#[cfg(feature = "gpu")]
pub mod batch_memory;
#[cfg(feature = "gpu")]
pub mod external;
#[cfg(feature = "gpu")]
pub mod judge;
#[cfg(feature = "gpu")]
pub mod per_call;
#[cfg(feature = "gpu")]
pub mod report;
pub mod roofline;
pub mod timing;
#[cfg(feature = "gpu")]
pub mod variants;
#[cfg(feature = "gpu")]
mod worker_timing;

#[cfg(feature = "gpu")]
pub use baseline::compare_with;
#[cfg(feature = "gpu")]
pub use external::{bench_external, ExternalOptions};
#[cfg(feature = "gpu")]
pub use report::{render, write_signed, BenchReport};
#[cfg(feature = "gpu")]
pub use variants::bench_certified;
