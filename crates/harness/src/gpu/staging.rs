//! Copies between host memory the harness owns (a `Vec`) and the device, through two halves of
//! page-locked ("pinned") host memory kept for the process: the bytes are copied into a half on
//! the host while the other half's copy runs on the device.
//!
//! Why not the driver's own copy from pageable memory: on the H200 it ran at 6.5 GB/s alone and
//! far slower beside a campaign's other work, against 51 GB/s from pinned memory; and it holds
//! up other threads' small copies in the same context (a small upload waited up to 26.5 ms
//! beside another thread's pageable uploads, 0.5 ms beside pinned ones:
//! `results/shared-inputs/pageable_contention.py`). A campaign's GPU reference moves every
//! case's operands up and three output-sized arrays down, and a shared run its inputs up and its
//! output down, beside each other.
//!
//! Why not register each `Vec` as pinned memory instead (`cuMemHostRegister`): every case's
//! arrays are new, so each would be page-locked and released again, a driver call that walks
//! every page (not measured here); two halves allocated once serve every size.

use super::GpuError;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, PinnedHostSlice};
use std::sync::Arc;
use std::time::Instant;

/// Bytes in each half: large enough that a copy's fixed cost is small beside its bytes, small
/// enough that the two halves cost the host 64 MiB of page-locked memory.
pub const HALF_BYTES: usize = 32 << 20;

/// Two halves of pinned host memory, each with the event of its last copy on the device.
///
/// Uploads fill a half from where the last one ended, so that the many small tensors of a case
/// (nine for a dual GEMM's operands and scales) share one half and wait for nothing: a half is
/// waited for (its last copy on the device has passed) only when it is entered, when the half
/// in use is full or another stream asks. Each upload waited for the one before it when every
/// upload started a half of its own: a case of 4 to 10 MB took 6 ms to upload on the H200,
/// most of it those waits (results/wide-outputs).
pub struct Staging {
    halves: [(PinnedHostSlice<u8>, CudaEvent); 2],
    /// The half uploads are filling, the first free byte in it and the stream of its copies
    /// since it was entered; None when no half is (the next upload enters one).
    filling: Option<Filling>,
    /// Seconds spent so far copying on the host and waiting for the device's copies: what a
    /// trace reads ([`Staging::take_seconds`]) to tell a slow host from a busy copy engine.
    host_seconds: f64,
    waiting_seconds: f64,
}

/// Where uploads go on in a half.
#[derive(Debug, Clone, Copy)]
struct Filling {
    half: usize,
    offset: usize,
    /// Every copy of the half since it was entered is on this stream (its handle, only
    /// compared), so that its event, recorded there after the last, covers them all.
    stream: usize,
}

/// Each upload starts at a multiple of this many bytes in its half.
const UPLOAD_ALIGN: usize = 256;

impl Staging {
    /// The halves, allocated in `ctx` (page-locked, not write-combined: the host reads them
    /// back too).
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self, GpuError> {
        let half = || -> Result<(PinnedHostSlice<u8>, CudaEvent), GpuError> {
            // SAFETY: the memory is written by the host or a copy before it is read.
            let pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(HALF_BYTES, 0) }
                .map_err(|err| GpuError(format!("allocating pinned host memory: {err}")))?;
            let event = ctx
                // Waited on by blocking, not spinning: a campaign's cores are busy.
                .new_event(Some(sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC))
                .map_err(|err| GpuError(format!("making an event: {err}")))?;
            Ok((pinned, event))
        };
        Ok(Staging {
            halves: [half()?, half()?],
            filling: None,
            host_seconds: 0.0,
            waiting_seconds: 0.0,
        })
    }

    /// Enqueues on `stream` the copy of `bytes` to the device memory at `target` (at least
    /// `bytes.len()` bytes in `stream`'s context). Returns once every byte is in pinned memory
    /// (`bytes` may then be dropped): work enqueued later on `stream` sees them on the device.
    pub fn upload(
        &mut self,
        stream: &CudaStream,
        target: CUdeviceptr,
        bytes: &[u8],
    ) -> Result<(), GpuError> {
        self.upload_to_each(stream, &[target], bytes)
    }

    /// [`Staging::upload`] to each of `targets`: the host copies every chunk into pinned memory
    /// once, the copy engines copy it to each target (a second copy of inputs made without a
    /// kernel: `super::pristine::Pristine::uploaded`).
    pub fn upload_to_each(
        &mut self,
        stream: &CudaStream,
        targets: &[CUdeviceptr],
        bytes: &[u8],
    ) -> Result<(), GpuError> {
        let mut done = 0;
        while done < bytes.len() {
            let (half, offset) = self.room(stream)?;
            let len = (bytes.len() - done).min(HALF_BYTES - offset);
            let (pinned, event) = &mut self.halves[half];
            // SAFETY: the half holds HALF_BYTES >= offset + len bytes; this range has not been
            // written since the half was entered, when its last copies had passed.
            let host = unsafe {
                pinned
                    .as_mut_ptr()
                    .map_err(gpu("pinned memory"))?
                    .add(offset)
            };
            let part = unsafe { std::slice::from_raw_parts_mut(host, len) };
            let copying = Instant::now();
            copy_on_threads(&bytes[done..done + len], part);
            self.host_seconds += copying.elapsed().as_secs_f64();
            for &target in targets {
                // SAFETY: the caller's device range holds the bytes; the pinned range is not
                // written again before the half's event, recorded after these copies, passed.
                super::check("cuMemcpyHtoDAsync", unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        target + done as u64,
                        host.cast(),
                        len,
                        stream.cu_stream(),
                    )
                })?;
            }
            event
                .record(stream)
                .map_err(gpu("recording a staged copy"))?;
            self.filling = Some(Filling {
                half,
                offset: (offset + len).next_multiple_of(UPLOAD_ALIGN),
                stream: stream.cu_stream() as usize,
            });
            done += len;
        }
        Ok(())
    }

    /// Copies the device memory at `source` (at least `bytes.len()` bytes in `stream`'s
    /// context), after the work enqueued on `stream` so far, into `bytes`; returns when they are
    /// there. Each half's copy on the device runs while the host copies the other half out.
    pub fn download(
        &mut self,
        stream: &CudaStream,
        source: CUdeviceptr,
        bytes: &mut [u8],
    ) -> Result<(), GpuError> {
        let total = bytes.len();
        let chunks = total.div_ceil(HALF_BYTES);
        // Chunk i goes into half (first + i) % 2, entered for it: the half's last copies, an
        // upload's on any stream included, have passed before it is written.
        let first = self.filling.take().map_or(0, |f| 1 - f.half);
        let enqueue = |staging: &mut Staging, i: usize| {
            let half = (first + i) % 2;
            staging.wait_for(half)?;
            let len = HALF_BYTES.min(total - i * HALF_BYTES);
            let (pinned, event) = &mut staging.halves[half];
            let host = pinned.as_mut_ptr().map_err(gpu("pinned memory"))?;
            // SAFETY: the half holds len bytes and its last copies have passed; the device
            // range is the caller's.
            super::check("cuMemcpyDtoHAsync", unsafe {
                sys::cuMemcpyDtoHAsync_v2(
                    host.cast(),
                    source + (i * HALF_BYTES) as u64,
                    len,
                    stream.cu_stream(),
                )
            })?;
            event
                .record(stream)
                .map_err(gpu("recording a staged copy"))?;
            Ok::<_, GpuError>(())
        };
        if chunks > 0 {
            enqueue(self, 0)?;
        }
        for i in 0..chunks {
            if i + 1 < chunks {
                enqueue(self, i + 1)?;
            }
            let half = (first + i) % 2;
            self.wait_for(half)?;
            let host = self.halves[half]
                .0
                .as_mut_ptr()
                .map_err(gpu("pinned memory"))?;
            let copying = Instant::now();
            let out = &mut bytes[i * HALF_BYTES..][..HALF_BYTES.min(total - i * HALF_BYTES)];
            // SAFETY: the copy into the half has ended (its event passed); it holds out.len()
            // bytes, which nothing writes until the half is entered again.
            let half = unsafe { std::slice::from_raw_parts(host.cast_const(), out.len()) };
            copy_on_threads(half, out);
            self.host_seconds += copying.elapsed().as_secs_f64();
        }
        Ok(())
    }
}

impl Staging {
    /// The half and offset where an upload on `stream` goes on: the half being filled, where
    /// it has room and its copies are on `stream`; else the other half (or the first), entered.
    fn room(&mut self, stream: &CudaStream) -> Result<(usize, usize), GpuError> {
        let half = match self.filling {
            Some(f) if f.stream == stream.cu_stream() as usize && f.offset < HALF_BYTES => {
                return Ok((f.half, f.offset))
            }
            Some(f) => 1 - f.half,
            None => 0,
        };
        self.wait_for(half)?;
        Ok((half, 0))
    }

    /// Waits until the last device copy of `half` has passed (counted as waiting).
    fn wait_for(&mut self, half: usize) -> Result<(), GpuError> {
        let started = Instant::now();
        self.halves[half]
            .1
            .synchronize()
            .map_err(gpu("waiting for a staged copy"))?;
        self.waiting_seconds += started.elapsed().as_secs_f64();
        Ok(())
    }

    /// The seconds spent copying on the host and waiting for the device's copies since the
    /// last call, and the counts reset.
    pub fn take_seconds(&mut self) -> (f64, f64) {
        let seconds = (self.host_seconds, self.waiting_seconds);
        (self.host_seconds, self.waiting_seconds) = (0.0, 0.0);
        seconds
    }
}

/// Threads a chunk's host copy is split over, and the least bytes each is given.
const COPY_THREADS: usize = 4;
const COPY_PART_BYTES: usize = 4 << 20;

/// `from` copied into `to` (as long), split over up to [`COPY_THREADS`] threads of its own.
///
/// Why: one thread copied at 4.7 GB/s (a traced H200 campaign's 30 GB of shared-run inputs
/// took 6.3 s on the host), a tenth of the link's speed from pinned memory. Threads of their own
/// rather than rayon's pool: the copy is on the path of the case in hand, and rayon takes work
/// from outside its pool only once its threads have nothing of their own (`crate::cores::beside`).
fn copy_on_threads(from: &[u8], to: &mut [u8]) {
    let part = from.len().div_ceil(COPY_THREADS).max(COPY_PART_BYTES);
    if from.len() <= part {
        to.copy_from_slice(from);
        return;
    }
    std::thread::scope(|scope| {
        let mut parts = from.chunks(part).zip(to.chunks_mut(part));
        let first = parts.next();
        for (from, to) in parts {
            scope.spawn(move || to.copy_from_slice(from));
        }
        if let Some((from, to)) = first {
            to.copy_from_slice(from);
        }
    });
}

fn gpu(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> GpuError {
    move |err| GpuError(format!("{what}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::copy_on_threads;

    #[test]
    fn a_copy_on_threads_copies_every_byte() {
        for len in [0, 1, 4 << 20, (4 << 20) + 1, (17 << 20) + 3, 32 << 20] {
            let from: Vec<u8> = (0..len).map(|i| (i * 31 + i / 4099) as u8).collect();
            let mut to = vec![0u8; len];
            copy_on_threads(&from, &mut to);
            assert!(from == to, "{len} bytes");
        }
    }
}
