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
use super::batch_inputs::{BatchInputs, WrongCall};
use crate::gpu::fenced::{check, FencedBuffer};
use crate::gpu::input_generator::DeviceBytes;
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

    /// The stream its buffers were filled on (the parent's context's default stream).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Where slot `slot` of tensor `tensor` (layout order) lies: one call's bytes.
    pub fn slot(&self, tensor: usize, slot: usize) -> DeviceBytes {
        let len = self.layout[tensor].len;
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        DeviceBytes {
            ptr: self.buffers[tensor].body_ptr() + (slot * slot_stride(len)) as u64,
            len,
        }
    }

    fn bind(&self) -> Result<(), GpuError> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| GpuError(e.to_string()))
    }

    /// Slot `slot` of tensor `tensor`, read back.
    pub fn read_slot(&self, tensor: usize, slot: usize) -> Result<Vec<u8>, GpuError> {
        self.bind()?;
        let at = self.slot(tensor, slot);
        let mut bytes = vec![0u8; at.len];
        // SAFETY: the slot lies inside the body; `bytes` holds its length.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(bytes.as_mut_ptr().cast(), at.ptr, bytes.len())
        })?;
        Ok(bytes)
    }

    /// Writes `bytes` (one call's length) into slot `slot` of tensor `tensor` and waits.
    pub fn write_slot(&self, tensor: usize, slot: usize, bytes: &[u8]) -> Result<(), GpuError> {
        self.bind()?;
        let at = self.slot(tensor, slot);
        if bytes.len() != at.len {
            return Err("a batch's case is not shaped like the first".into());
        }
        // SAFETY: the slot lies inside the body and holds `bytes.len()`; the host bytes outlive
        // the copy (synchronized below).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                at.ptr,
                bytes.as_ptr().cast(),
                bytes.len(),
                self.stream.cu_stream(),
            )
        })?;
        self.stream.synchronize().map_err(GpuError::from)
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
        for (slot, case) in cases.iter().enumerate() {
            let tensors = device_tensors(case).ok_or("a grouped GEMM case")?;
            for (tensor, ((key, bytes), t)) in tensors.iter().zip(&self.layout).enumerate() {
                if *key != t.key {
                    return Err("a batch's case is not shaped like the first".into());
                }
                self.write_slot(tensor, slot, bytes)?;
            }
        }
        Ok(())
    }

    fn output(&self, slot: usize) -> Result<Vec<u8>, GpuError> {
        match self.layout.last() {
            Some(t) if t.key == "c" => self.read_slot(self.layout.len() - 1, slot),
            _ => Err("the batch's tensors end with no output".into()),
        }
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
    /// Every call's output was judged: those that were wrong, and how many were judged.
    pub wrong: Vec<WrongCall>,
    pub judged: usize,
}

impl BatchRun {
    /// Adds a later round of lone-call batches (on the same slots and workers) to this run:
    /// its batches, samples and judged outputs.
    pub fn add_lone_round(&mut self, round: BatchRun) {
        let clock = &mut self.clock;
        clock
            .lone_kernel_batch_us
            .extend(round.clock.lone_kernel_batch_us);
        clock
            .lone_baseline_batch_us
            .extend(round.clock.lone_baseline_batch_us);
        self.lone_samples_us.extend(round.lone_samples_us);
        self.worker.other_threads.extend(round.worker.other_threads);
        self.worker.wall_us += round.worker.wall_us;
        self.wrong.extend(round.wrong);
        self.judged += round.judged;
    }
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
    /// The number the first of these batches has: batch b's inputs are [`BatchInputs::fill`]'s
    /// of b, so a later round on the same inputs starts past the earlier rounds' numbers and
    /// no call sees inputs an earlier call saw.
    pub first_batch: usize,
    /// Bounds each request.
    pub timeout: Duration,
}

/// Times `plan.batches` batches of `memory.slots()` calls of the kernel served by `kernel`
/// against the same requests without it served by `baseline` (both have served a per-call
/// timing before: their warm-up is done). `inputs` fills every slot before each batch and
/// judges every slot's output after it.
pub fn time_batches(
    kernel: &mut Worker,
    baseline: &mut Worker,
    l2: &mut dyn CacheReset,
    plan: &BatchPlan<'_>,
    inputs: &mut dyn BatchInputs,
) -> Result<BatchRun, KernelFailure> {
    let BatchPlan {
        memory,
        described,
        batches,
        lone_batches,
        first_batch,
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
    let mut wrong = Vec::new();
    for round in 0..batches + lone_batches {
        let lone = round >= batches;
        let b = first_batch + round;
        let filled = Instant::now();
        inputs
            .fill(b)
            .map_err(|why| crashed(format!("filling batch {b}: {why}")))?;
        let filled = filled.elapsed().as_secs_f64();
        let (reply, kernel_took) = timed(kernel, l2, false, lone)?;
        if lone {
            clock.lone_kernel_batch_us.push(kernel_took);
            lone_samples_us.extend(reply.samples_us);
        } else {
            clock.kernel_batch_us.push(kernel_took);
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
        let judged = Instant::now();
        wrong.extend(
            inputs
                .judge(b)
                .map_err(|why| crashed(format!("judging batch {b}: {why}")))?,
        );
        crate::trace::trace(format_args!(
            "batch {b}{} of {slots} calls: {filled:.3} s filling, {:.3} s the kernel's request, \
             {:.3} s judging",
            if lone { " (lone calls)" } else { "" },
            kernel_took / 1e6,
            judged.elapsed().as_secs_f64(),
        ));
    }
    kernel.spin_while_waiting(false);
    baseline.spin_while_waiting(false);
    Ok(BatchRun {
        clock,
        worker,
        lone_samples_us,
        wrong,
        judged: (batches + lone_batches) * slots,
    })
}
