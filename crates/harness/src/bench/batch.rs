//! A timed batch on the GPU: the parent's side ([`super::batch_clock`] holds its rules; the
//! workers' sides are `PrepareBatch` and `TimedBatch` in `submission_worker.py` and
//! `worker/library_timing.rs`).
//!
//! Per shape, the parent makes one exportable fenced buffer per tensor of the data tuple, each
//! holding R slots ([`crate::worker::protocol::slot_stride`] apart), and shares them with the
//! kernel's worker and with the baseline worker, which map them once and build every slot's
//! data tuple once. Per batch, the parent writes R fresh input sets (drawn from seeds no call
//! has used, generated on every core) and R poisoned outputs into the slots, resets and
//! flushes L2 in its own context, and times one request in which the kernel runs on every slot
//! in order; then the same request without the kernel in the baseline worker. Every slot's
//! output is then read by the parent and judged. Then lone-call batches the same way, on fresh
//! inputs: the same slots, each call alone (the worker flushes L2 and synchronizes the device
//! around each), timed by the parent against the baseline's same request: the cold call's
//! time as the parent sees it.

use super::batch_clock::BatchClock;
use crate::gpu::fenced::{check, FencedBuffer};
use crate::gpu::l2::CacheReset;
use crate::gpu::GpuError;
use crate::kernels::{KernelCase, KernelFailure};
use crate::worker::parent::Worker;
use crate::worker::protocol::{slot_stride, CaseFiles, Reply, Request, SharedTensor, TimedCalls};
use crate::worker::shared_inputs::{device_tensors, fenced_tensors, send_fds};
use cudarc::driver::{sys, CudaStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The memory a batch's calls read and write, shared with both workers: R slots of every
/// tensor of the data tuple. [`BatchMemory`] on a GPU; tests without one share files.
pub trait BatchSlots {
    /// Calls a batch holds.
    fn slots(&self) -> usize;
    /// One entry per tensor (one slot's length), in the order of the descriptors
    /// [`BatchSlots::send_to`] sends.
    fn layout(&self) -> Vec<SharedTensor>;
    /// Sends a descriptor of every tensor's memory on `socket`, in layout order.
    fn send_to(&self, socket: &UnixStream) -> Result<(), GpuError>;
    /// Writes `cases` (one per slot, in order) and their poisoned outputs into the slots, and
    /// returns once they are there.
    fn write(&self, cases: &[KernelCase]) -> Result<(), GpuError>;
    /// Slot `slot`'s output as the worker left it (GPU MODE's (L, M, N) fp16 storage).
    fn output(&self, slot: usize) -> Result<Vec<u8>, GpuError>;
}

/// A batch's device memory in the parent's context: one fenced, exportable buffer per tensor
/// of the data tuple (the output `c` last), each holding every slot.
pub struct BatchMemory {
    stream: Arc<CudaStream>,
    buffers: Vec<FencedBuffer>,
    layout: Vec<SharedTensor>,
    slots: usize,
}

/// The bytes one call's tensors take in a batch (each rounded up to its slot stride) and its
/// inputs alone (without the output); None for the grouped GEMM (host tensors).
pub fn slot_bytes(case: &KernelCase) -> Option<(usize, usize)> {
    let tensors = device_tensors(case)?;
    let all = tensors.iter().map(|(_, b)| slot_stride(b.len())).sum();
    let inputs = tensors
        .iter()
        .filter(|(key, _)| key != "c")
        .map(|(_, b)| b.len())
        .sum();
    Some((all, inputs))
}

/// The device memory free now, in the parent's context (0 where the driver does not say).
pub fn free_memory() -> usize {
    crate::gpu::device::open_device()
        .ok()
        .and_then(|(ctx, _)| ctx.bind_to_thread().ok())
        .and_then(|()| cudarc::driver::result::mem_get_info().ok())
        .map_or(0, |(free, _)| free)
}

impl BatchMemory {
    /// Buffers for `slots` calls shaped like `case`, canaries written.
    pub fn new(case: &KernelCase, slots: usize) -> Result<Self, GpuError> {
        let tensors = device_tensors(case).ok_or(
            "the grouped GEMM's data tuple holds host tensors: it has no batch in shared memory",
        )?;
        let (stream, buffers, layout) =
            fenced_tensors(&tensors, |len| slot_stride(len) * (slots - 1) + len)?;
        Ok(BatchMemory {
            stream,
            buffers,
            layout,
            slots,
        })
    }
}

impl BatchSlots for BatchMemory {
    fn slots(&self) -> usize {
        self.slots
    }

    fn layout(&self) -> Vec<SharedTensor> {
        self.layout.clone()
    }

    fn send_to(&self, socket: &UnixStream) -> Result<(), GpuError> {
        let fds: Vec<OwnedFd> = self
            .buffers
            .iter()
            .map(FencedBuffer::export_fd)
            .collect::<Result<_, _>>()?;
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        send_fds(socket, &raw).map_err(|err| GpuError(format!("sending the batch's memory: {err}")))
    }

    fn write(&self, cases: &[KernelCase]) -> Result<(), GpuError> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| e.to_string())?;
        for (slot, case) in cases.iter().enumerate() {
            let tensors = device_tensors(case).ok_or("a grouped GEMM case")?;
            for ((key, bytes), (buffer, t)) in
                tensors.iter().zip(self.buffers.iter().zip(&self.layout))
            {
                if *key != t.key || bytes.len() != t.len {
                    return Err("a batch's case is not shaped like the first".into());
                }
                let at = buffer.body_ptr() + (slot * slot_stride(t.len)) as u64;
                // SAFETY: slot `slot` of this tensor lies inside the body (slots - 1 strides
                // and one length); the host bytes outlive the copy (synchronized below).
                check("cuMemcpyHtoDAsync", unsafe {
                    sys::cuMemcpyHtoDAsync_v2(
                        at,
                        bytes.as_ptr().cast(),
                        bytes.len(),
                        self.stream.cu_stream(),
                    )
                })?;
            }
            // The host bytes of this case are dropped at the end of the iteration.
            self.stream.synchronize().map_err(GpuError::from)?;
        }
        Ok(())
    }

    fn output(&self, slot: usize) -> Result<Vec<u8>, GpuError> {
        let (buffer, t) = match (self.buffers.last(), self.layout.last()) {
            (Some(b), Some(t)) if t.key == "c" => (b, t),
            _ => return Err("the batch's tensors end with no output".into()),
        };
        let mut bytes = vec![0u8; t.len];
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| e.to_string())?;
        let at = buffer.body_ptr() + (slot * slot_stride(t.len)) as u64;
        // SAFETY: the slot lies inside the body; `bytes` holds its length.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(bytes.as_mut_ptr().cast(), at, bytes.len())
        })?;
        Ok(bytes)
    }
}

/// What one shape's batches produced.
#[derive(Debug, Clone)]
pub struct BatchRun {
    pub clock: BatchClock,
    /// What the kernel's worker said of each batch (CUDA events over the whole batch, the
    /// after-end time, the threads alive): its word, for diagnosis and the threads finding.
    pub worker: TimedCalls,
    /// The CUDA events around each call of the lone-call batches (its word, for diagnosis).
    pub lone_samples_us: Vec<f64>,
}

fn crashed(what: impl std::fmt::Display) -> KernelFailure {
    KernelFailure::Crashed(what.to_string())
}

fn expect_timed(reply: Reply) -> Result<TimedCalls, KernelFailure> {
    match reply {
        Reply::Timed(result) => result.map_err(crate::worker::parent::quoted_failure),
        _ => Err(crashed("the worker answered out of turn")),
    }
}

/// What one shape's batches are timed on.
pub struct BatchPlan<'a> {
    /// The slots, shared with both workers.
    pub memory: &'a dyn BatchSlots,
    /// The calls' shape (its directory is empty).
    pub described: &'a CaseFiles,
    /// How many batches in a stream, then how many lone-call batches
    /// ([`Request::TimedBatch`]'s `lone`), each on fresh inputs.
    pub batches: usize,
    pub lone_batches: usize,
    /// Bounds each request.
    pub timeout: Duration,
}

/// Times `plan.batches` batches of `memory.slots()` calls of the kernel served by `kernel`
/// against the same requests without it served by `baseline` (both have served a per-call
/// timing before: their warm-up is done). Batch b's slot i gets `make_case(b, i)`; after each
/// batch `judge(b, i, case, output bytes)` sees every slot's output.
pub fn time_batches(
    kernel: &mut Worker,
    baseline: &mut Worker,
    l2: &mut dyn CacheReset,
    plan: &BatchPlan<'_>,
    make_case: impl Fn(usize, usize) -> KernelCase + Sync,
    mut judge: impl FnMut(usize, usize, &KernelCase, Vec<u8>),
) -> Result<BatchRun, KernelFailure> {
    use rayon::prelude::*;
    let BatchPlan {
        memory,
        described,
        batches,
        lone_batches,
        timeout,
    } = *plan;
    for worker in [&mut *kernel, &mut *baseline] {
        memory.send_to(&worker.input_socket).map_err(crashed)?;
        worker.send(&Request::PrepareBatch {
            set: described.clone(),
            slots: memory.slots(),
            shared: memory.layout(),
        })?;
        match worker.receive(timeout)? {
            Reply::Done(result) => result.map_err(crate::worker::parent::quoted_failure)?,
            _ => return Err(crashed("the worker answered out of turn")),
        }
    }
    let spin = super::per_call::spinning_pays();
    kernel.spin_while_waiting(spin);
    baseline.spin_while_waiting(spin);
    let slots = memory.slots();
    let timed = |worker: &mut Worker, l2: &mut dyn CacheReset, null: bool, lone: bool| {
        l2.reset()
            .map_err(|why| crashed(format!("the parent's L2 reset: {why}")))?;
        let started = Instant::now();
        worker.send(&Request::TimedBatch { null, lone })?;
        let reply = expect_timed(worker.receive(timeout)?)?;
        let took = started.elapsed().as_secs_f64() * 1e6;
        // A batch in a stream has one sample (events around the whole), a lone-call batch one
        // per call.
        let samples = if lone { slots } else { 1 };
        if reply.samples_us.len() != samples || reply.after_end_us.len() != 1 {
            return Err(crashed(format!(
                "the worker answered a batch with {} samples and {} after-end times",
                reply.samples_us.len(),
                reply.after_end_us.len()
            )));
        }
        Ok((reply, took))
    };
    let mut clock = BatchClock {
        slots,
        kernel_batch_us: Vec::new(),
        baseline_batch_us: Vec::new(),
        lone_kernel_batch_us: Vec::new(),
        lone_baseline_batch_us: Vec::new(),
    };
    let mut worker = TimedCalls {
        samples_us: Vec::new(),
        wall_us: 0.0,
        after_end_us: Vec::new(),
        other_threads: Vec::new(),
    };
    let mut lone_samples_us = Vec::new();
    for b in 0..batches + lone_batches {
        let lone = b >= batches;
        let cases: Vec<KernelCase> = (0..slots)
            .into_par_iter()
            .map(|i| make_case(b, i))
            .collect();
        memory.write(&cases).map_err(crashed)?;
        let (reply, took) = timed(kernel, l2, false, lone)?;
        if lone {
            clock.lone_kernel_batch_us.push(took);
            lone_samples_us.extend(reply.samples_us);
        } else {
            clock.kernel_batch_us.push(took);
            worker.samples_us.extend(reply.samples_us);
            worker.after_end_us.extend(reply.after_end_us);
        }
        worker.other_threads.extend(reply.other_threads);
        worker.wall_us += reply.wall_us;
        // Between the two requests, so that their order does not favour either.
        let (_, took) = timed(baseline, l2, true, lone)?;
        if lone {
            clock.lone_baseline_batch_us.push(took);
        } else {
            clock.baseline_batch_us.push(took);
        }
        for (i, case) in cases.iter().enumerate() {
            let output = memory
                .output(i)
                .map_err(|why| crashed(format!("reading batch {b} call {i}'s output: {why}")))?;
            judge(b, i, case, output);
        }
    }
    kernel.spin_while_waiting(false);
    baseline.spin_while_waiting(false);
    Ok(BatchRun {
        clock,
        worker,
        lone_samples_us,
    })
}
