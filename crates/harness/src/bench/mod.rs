//! Bench: timing a kernel that passed certification, so that the kernel cannot move the clock
//! and an honest kernel cannot trip it (the threat model: docs/threat-model.md).
//!
//! - [`batch_clock`]: the rules the reported time rests on, without a GPU: how many calls a
//!   batch holds, the time per call from the parent's clock over a batch less a baseline
//!   worker's, when the per-call CUDA-event latency is trusted beside it, and the finding for
//!   wrong outputs.
//! - [`batch`] (GPU): the batch's shared device memory, filled with fresh inputs by the parent,
//!   and the requests that time it in the kernel's worker and in the baseline's.
//! - [`judge`] (GPU): every timed call's output judged, against the GPU reference where it
//!   takes the case, else the CPU model.

pub mod batch_clock;
#[cfg(feature = "gpu")]
pub mod batch;
#[cfg(feature = "gpu")]
pub mod judge;
