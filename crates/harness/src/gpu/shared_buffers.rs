//! A shared run's device memory (`crate::worker::shared_run`): one fenced buffer per input
//! tensor, filled, the output's fenced buffer, poisoned, and the inputs' copies kept by the
//! parent alone ([`Pristine`]). Made at the run, or before it on a thread that makes a
//! campaign's inputs ahead, and then held in the case ([`ReadyBuffers`]) until the run takes it.
//!
//! Why ahead: making them is a case's uploads through pinned memory (the host's copies run at
//! 1 to 2 GB/s beside a campaign's other work) and its output's poison, about 10 ms of each
//! mid-sized case of a Python submission's campaign on the H200, on the kernel's side of the
//! case and so on the campaign's path (results/wide-outputs). Made ahead they overlap the
//! kernel's run of the case before. The inputs' copies also serve the case's GPU reference,
//! which then uploads nothing of its own.
//!
//! Why fresh for every run, and taken once: a worker maps the fenced buffers of its run, and a
//! mapping it keeps must reach nothing of a later run, including a second run of the same case.

use super::exact_reference::DeviceOperand;
use super::fenced::FencedBuffer;
use super::pristine::Pristine;
use super::staging::Staging;
use cudarc::driver::CudaStream;
use nvfp4_model::problem::POISON;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The device bytes (buffers and copies) that buffers made ahead may hold at once, over every
/// case made ahead: beside the kernel's own allocations, a few cases' worth; a case past it is
/// made at its run, as without a campaign ahead.
pub const AHEAD_BYTES: usize = 2 << 30;

/// Device bytes held by buffers made ahead ([`AHEAD_BYTES`]).
static HELD_AHEAD: AtomicUsize = AtomicUsize::new(0);

/// The buffers of one shared run, filled: the nine inputs uploaded in the C ABI's order, the
/// output poisoned (the last buffer); the inputs' copies where there was room for them.
pub struct SharedBuffers {
    pub buffers: Vec<FencedBuffer>,
    /// Shared with the case's GPU reference, which may read them after the run has ended.
    pub pristine: Option<Arc<Vec<Pristine>>>,
    /// The seconds of each step, in words, for the trace.
    pub steps: String,
    /// Seconds making them took.
    pub seconds: f64,
    /// Device bytes counted in [`HELD_AHEAD`] (0 for buffers made at the run).
    held_ahead: usize,
}

impl SharedBuffers {
    /// Allocates the buffers on `stream` and fills them (through `staging` where there is one,
    /// each input uploaded to its buffer and its copy at once; else the driver's copies and
    /// copies made on the device); returns when the device has done it.
    ///
    /// Why the copies are made by the upload where it goes through pinned memory (a second copy
    /// engine transfer of the same pinned chunk) rather than copied on the device afterwards: a
    /// device-to-device copy, like a memset, waited behind the same case's GPU reference, which
    /// fills every SM (results/device-judge/README.md).
    pub fn fill(
        stream: &Arc<CudaStream>,
        staging: Option<&Mutex<Staging>>,
        bodies: &[&[u8]; 9],
        output_elements: usize,
    ) -> Result<SharedBuffers, String> {
        let started = Instant::now();
        let mut buffers = Vec::with_capacity(bodies.len() + 1);
        for body in bodies {
            buffers.push(FencedBuffer::canaries_around(stream, body.len(), true).map_err(|e| e.0)?);
        }
        let fenced = started.elapsed().as_secs_f64();
        let mut copies = room_for_copies(bodies).then(Vec::new);
        let mut staged_seconds = (0.0, 0.0);
        match staging {
            Some(staging) => {
                let mut staging = staging.lock().unwrap_or_else(|p| p.into_inner());
                staging.take_seconds();
                for (buffer, body) in buffers.iter().zip(bodies) {
                    if let Some(made) = copies.as_mut() {
                        match Pristine::uploaded(stream, &mut staging, buffer, body) {
                            Ok(copy) => {
                                made.push(copy);
                                continue;
                            }
                            // No memory for this copy: the inputs are compared with the host's
                            // bytes instead.
                            Err(_) => copies = None,
                        }
                    }
                    staging
                        .upload(stream, buffer.body_ptr(), body)
                        .map_err(|e| e.0)?;
                }
                staged_seconds = staging.take_seconds();
            }
            None => {
                for (buffer, body) in buffers.iter().zip(bodies) {
                    buffer.write_body(stream, body).map_err(|e| e.0)?;
                }
            }
        }
        let uploaded = started.elapsed().as_secs_f64() - fenced;
        if staging.is_none() {
            copies = copies.and_then(|_| device_copies(stream, &buffers));
        }
        let copied = started.elapsed().as_secs_f64() - fenced - uploaded;
        let c =
            FencedBuffer::canaries_around(stream, 2 * output_elements, true).map_err(|e| e.0)?;
        c.fill_body_u16(stream, POISON.to_bits()).map_err(|e| e.0)?;
        buffers.push(c);
        stream.synchronize().map_err(|e| e.to_string())?;
        let seconds = started.elapsed().as_secs_f64();
        let steps = format!(
            "{fenced:.3} s fenced buffers, {uploaded:.3} s inputs uploaded{}, {copied:.3} s \
             device copies, {:.3} s the output poisoned",
            match (staging.is_some(), copies.is_some()) {
                (true, true) => format!(
                    " through pinned memory with their device copies ({:.3} s on the host, \
                     {:.3} s waiting for the device)",
                    staged_seconds.0, staged_seconds.1
                ),
                (true, false) => format!(
                    " through pinned memory ({:.3} s on the host, {:.3} s waiting for the \
                     device)",
                    staged_seconds.0, staged_seconds.1
                ),
                _ => String::new(),
            },
            seconds - fenced - uploaded - copied,
        );
        Ok(SharedBuffers {
            buffers,
            pristine: copies.map(Arc::new),
            steps,
            seconds,
            held_ahead: 0,
        })
    }

    /// [`SharedBuffers::fill`] for a run still to come: None where the buffers would take the
    /// held bytes past [`AHEAD_BYTES`] or cannot be made now (the run then makes its own).
    pub fn fill_ahead(
        stream: &Arc<CudaStream>,
        staging: Option<&Mutex<Staging>>,
        bodies: &[&[u8]; 9],
        output_elements: usize,
    ) -> Option<SharedBuffers> {
        let inputs: usize = bodies.iter().map(|body| body.len()).sum();
        let bytes = 2 * inputs + 2 * output_elements;
        let held = HELD_AHEAD.fetch_add(bytes, Ordering::SeqCst);
        let mut made = None;
        if held + bytes <= AHEAD_BYTES {
            made = Self::fill(stream, staging, bodies, output_elements).ok();
        }
        match made {
            Some(mut made) => {
                made.held_ahead = bytes;
                Some(made)
            }
            None => {
                HELD_AHEAD.fetch_sub(bytes, Ordering::SeqCst);
                None
            }
        }
    }
}

impl SharedBuffers {
    /// Whether they were made before the run ([`SharedBuffers::fill_ahead`]).
    pub fn made_ahead(&self) -> bool {
        self.held_ahead > 0
    }
}

impl Drop for SharedBuffers {
    fn drop(&mut self) {
        HELD_AHEAD.fetch_sub(self.held_ahead, Ordering::SeqCst);
    }
}

/// The three operands of a dual GEMM (a, b1, b2: packed data and plain scales) among `copies`
/// of its nine input tensors in the C ABI's order (a, b1, b2, the blocked scales, the plain
/// scales), for the GPU reference ([`super::exact_reference::GpuReference::dual_gemm_on_device`]).
pub fn abi_operands(copies: &[Pristine]) -> [DeviceOperand; 3] {
    let operand = |data: usize, scales: usize| DeviceOperand {
        data: copies[data].device_ptr(),
        scales: copies[scales].device_ptr(),
    };
    [operand(0, 6), operand(1, 7), operand(2, 8)]
}

/// Whether the inputs' device copies may be made: at most a sixteenth of the free device
/// memory (the kernel's own allocations come first). Without them the inputs are compared with
/// the host's bytes.
fn room_for_copies(bodies: &[&[u8]; 9]) -> bool {
    let bytes: usize = bodies.iter().map(|body| body.len()).sum();
    cudarc::driver::result::mem_get_info().is_ok_and(|(free, _)| bytes <= free / 16)
}

/// Device copies of the uploaded inputs, made on the device (where they were not made by the
/// upload); None where they cannot be made.
fn device_copies(stream: &Arc<CudaStream>, inputs: &[FencedBuffer]) -> Option<Vec<Pristine>> {
    let copies = inputs
        .iter()
        .map(|input| Pristine::of(stream, input))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    stream.synchronize().ok()?;
    Some(copies)
}

/// A case's shared-run buffers made before its run, taken once by the run
/// (`crate::kernels::KernelCase::ready`), and their inputs' copies, kept for the case's GPU
/// reference for as long as the case lives (whether its run or its reference comes first).
#[derive(Default)]
pub struct ReadyBuffers {
    buffers: Mutex<Option<SharedBuffers>>,
    pristine: Mutex<Option<Arc<Vec<Pristine>>>>,
}

impl ReadyBuffers {
    /// Holds `buffers` for the case's run (replacing any held).
    pub fn put(&self, buffers: SharedBuffers) {
        *self.pristine.lock().unwrap_or_else(|p| p.into_inner()) = buffers.pristine.clone();
        *self.buffers.lock().unwrap_or_else(|p| p.into_inner()) = Some(buffers);
    }

    /// The buffers held, once.
    pub fn take(&self) -> Option<SharedBuffers> {
        self.buffers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// The inputs' copies of the buffers made ahead, for the case's GPU reference.
    pub fn pristine(&self) -> Option<Arc<Vec<Pristine>>> {
        self.pristine
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
