//! A timed batch on the GPU: the parent's side ([`super::batch_clock`] holds its rules; the
//! workers' sides are `PrepareBatch` and `TimedBatch` in `submission_worker.py` and
//! `worker/library_timing.rs`).
//!
//! Per shape, the parent shares the batch's memory ([`super::batch_memory`]: R slots of every
//! tensor of the data tuple) with the kernel's worker and with the baseline worker, which map
//! it once and build every slot's data tuple once. Per batch, R fresh input sets (drawn from
//! seeds no call has used) and R poisoned outputs go into the slots ([`super::batch_inputs`]:
//! on the GPU for a dual GEMM), the parent resets and flushes L2 in its own context, and times
//! one request in which the kernel runs on every slot in order; then the same request without
//! the kernel in the baseline worker. Every slot's output is then judged. Then lone-call batches the same way, on fresh
//! inputs: the same slots, each call alone (the worker flushes L2 and synchronizes the device
//! around each), timed by the parent against the baseline's same request: the cold call's
//! time as the parent sees it.

use super::batch_clock::BatchClock;
use super::batch_inputs::{BatchInputs, WrongCall};
use super::batch_memory::BatchSlots;
use crate::gpu::l2::CacheReset;
use crate::kernels::KernelFailure;
use crate::worker::parent::Worker;
use crate::worker::protocol::{CaseFiles, Reply, Request, TimedCalls};
use std::time::{Duration, Instant};

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
