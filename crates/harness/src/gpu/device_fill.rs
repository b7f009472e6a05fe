//! Device memory filled with a repeated 16-bit value by copies from page-locked host memory
//! that holds the value (the copy engines), instead of `cuMemset*` (a kernel on the SMs).
//!
//! Why: the parent fills a shared run's canaries and its output's poison while the same case's
//! GPU reference runs beside it, and that kernel fills every SM. A memset queued behind it, and
//! every copy after it on the stream with it: a shared run's "inputs uploaded" step followed the
//! reference's time (correlation 0.95 on hopper-baseline's range class on the H200,
//! results/shared-inputs/README.md) rather than its bytes. Copies from pinned memory need no
//! SM. Where the pinned pattern cannot be allocated, the memset is used.

use super::check;
use super::GpuError;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaStream, PinnedHostSlice};
use std::sync::{Arc, Mutex};

/// Bytes of each pinned pattern: one copy fills up to this much.
const PATTERN_BYTES: usize = 8 << 20;

/// The pinned patterns made so far, by value (the canary byte twice, the output's poison), in
/// the one context the parent uses.
static PATTERNS: Mutex<Vec<(u16, PinnedHostSlice<u8>)>> = Mutex::new(Vec::new());

/// Enqueues on `stream` the fill of `len` bytes at `at` with `value` repeated (its low byte
/// first). `at` must be even unless both bytes of `value` are equal, so that every byte gets
/// the half of `value` its address calls for.
pub fn fill_u16(
    stream: &Arc<CudaStream>,
    at: CUdeviceptr,
    len: usize,
    value: u16,
) -> Result<(), GpuError> {
    if len == 0 {
        return Ok(());
    }
    let [low, high] = value.to_le_bytes();
    if at % 2 != 0 && low != high {
        return Err(GpuError(format!(
            "a fill of 0x{value:04X} from an odd address"
        )));
    }
    let mut patterns = PATTERNS.lock().unwrap_or_else(|p| p.into_inner());
    let index = match patterns.iter().position(|(v, _)| *v == value) {
        Some(index) => Some(index),
        None => pattern(stream, value).map(|made| {
            patterns.push((value, made));
            patterns.len() - 1
        }),
    };
    let Some(index) = index else {
        return memset(stream, at, len, value);
    };
    let host = patterns[index]
        .1
        .as_ptr()
        .map_err(|err| GpuError(format!("pinned memory: {err}")))?;
    for from in (0..len).step_by(PATTERN_BYTES) {
        let part = PATTERN_BYTES.min(len - from);
        // SAFETY: the device range is the caller's; the pattern holds PATTERN_BYTES bytes, is
        // never written after it was made and lives for the process.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(at + from as u64, host.cast(), part, stream.cu_stream())
        })?;
    }
    Ok(())
}

/// A pinned pattern of `value`, or None where page-locked memory cannot be had.
fn pattern(stream: &Arc<CudaStream>, value: u16) -> Option<PinnedHostSlice<u8>> {
    // SAFETY: every byte is written below before a copy reads it.
    let mut pinned = unsafe {
        stream
            .context()
            .alloc_pinned_with_flags::<u8>(PATTERN_BYTES, 0)
    }
    .ok()?;
    let bytes = pinned.as_mut_slice().ok()?;
    for pair in bytes.chunks_exact_mut(2) {
        pair.copy_from_slice(&value.to_le_bytes());
    }
    Some(pinned)
}

/// The fill by the driver's memset (a kernel), where there is no pinned pattern.
fn memset(
    stream: &Arc<CudaStream>,
    at: CUdeviceptr,
    len: usize,
    value: u16,
) -> Result<(), GpuError> {
    let [low, high] = value.to_le_bytes();
    // SAFETY: the device range is the caller's.
    unsafe {
        if low == high {
            check(
                "cuMemsetD8Async",
                sys::cuMemsetD8Async(at, low, len, stream.cu_stream()),
            )
        } else {
            check(
                "cuMemsetD16Async",
                sys::cuMemsetD16Async(at, value, len / 2, stream.cu_stream()),
            )
        }
    }
}
