//! Timing an external kernel's calls one at a time (the cold-call latency; the batches that give
//! the time reported are [`super::batch`]) so that the kernel cannot falsify it (the threat model is in
//! docs/reference/threat-model.md). The kernel runs in its worker; the parent drives it
//! ([`crate::worker::protocol::Request`]): load the warm-up sets and warm up, then one request per call,
//! first without the kernel (the calls' own cost) and then timed, then fetch the outputs of a
//! sample of the timed calls. What the parent can trust, it measures or checks itself:
//! - a timed call's inputs exist in the worker only from just before its own request on, so no
//!   kernel can read them ahead (in its memory, on the GPU or on disk) and compute answers in
//!   advance: the parent copies them into device memory it shares with the worker
//!   ([`crate::worker::shared_inputs`]: until then they are in the parent's own device memory, which
//!   no other process can address), or, for the grouped GEMM (host tensors), writes them
//!   as files just before the request and removes them after;
//! - every timed call gets inputs no call has seen, from seeds drawn per run, so an answer
//!   computed once cannot be replayed;
//! - every timed call's output is copied aside right after it, and the parent chooses which to
//!   judge only after the loop has ended, so a kernel cannot be right only when checked;
//! - the untimed warm call before each timed call runs at the end of the previous request, so
//!   no code of the kernel's runs while a timed call's inputs exist except that call (and
//!   whatever the kernel left running: the parent's clock bounds it); with shared inputs only
//!   a request's round trip lies between the two calls;
//! - the parent's own clock around each call (request sent to reply received) is set against
//!   the same request without the kernel: a finding with shared inputs, a note with files (the
//!   loading of a call's inputs varies by more than a short kernel takes:
//!   results/sandbox/); the samples' mean against their median is a finding (all the
//!   work in a few calls);
//! - after each call's end event the worker synchronizes the whole device and reports how long
//!   that took: work still running then (a side stream) is measured call by call.

use crate::gpu::l2::CacheReset;
use crate::kernels::{KernelCase, KernelFailure};
use crate::worker::parent::Worker;
use crate::worker::protocol::{CaseFiles, Reply, Request, TimedCalls};
use crate::worker::shared_inputs::{KeptOutput, SharedCalls};
use half::f16;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What one timing produced.
#[derive(Debug, Clone)]
pub struct TimedRun {
    /// The worker's CUDA-event samples, one per timed call.
    pub calls: TimedCalls,
    /// The same requests without the kernel.
    pub null_loop: TimedCalls,
    /// The parent's wall clock around each timed call and each call without the kernel
    /// (request sent to reply received: the inputs' loading, the call and a device-wide
    /// synchronize).
    pub parent_call_us: Vec<f64>,
    pub null_parent_call_us: Vec<f64>,
    /// What each worker said its call took from just before the start event to its reply
    /// (the kernel's word: for diagnosis only, never for a verdict).
    pub worker_wall_us: Vec<f64>,
    pub null_worker_wall_us: Vec<f64>,
    /// (timed call index, its output) for the calls the parent chose to check.
    pub outputs: Vec<(usize, Vec<f16>)>,
    /// The timed calls' inputs came in shared device memory (not as files).
    pub shared_inputs: bool,
    /// How the timed calls' inputs reached the worker, in words.
    pub delivery: String,
}

/// [`TimedRun::delivery`] for inputs copied into device memory shared with the worker.
pub const SHARED_DELIVERY: &str =
    "shared device memory, filled by the parent just before each call";
/// [`TimedRun::delivery`] for inputs written as files just before each call (and why).
pub const FILES_DELIVERY: &str = "files written just before each call";

/// How far the parent's clock may put a timed call beyond its reported sample, past the
/// fastest request without the kernel, before the timing is not trusted: a tenth of the
/// median sample plus [`CLOCK_SLACK_US`]. Measured on the H100 with both sides waiting without
/// sleeping, honest Python examples stayed between -131 and +269 us of the fastest baseline
/// request at the benchmark shapes, over three runs and 12 rows each, roughly the same at
/// 0.8 ms and at 3 ms calls (results/parent-owned/): a constant part, for a cause not yet
/// found, and a proportional part for what scales with the call. The baseline is the minimum
/// over requests served by a worker that never loaded the kernel, so no kernel can raise it;
/// the timed side is the median, so a forgery must be in most calls to move the reported
/// median, and then it moves this one too.
pub const CLOCK_SLACK_RATIO: f64 = 0.10;
pub const CLOCK_SLACK_US: f64 = 300.0;
/// A single call may take this long beyond its sample (a page fault, a collection pause)
/// before it is weighed against the run's samples.
pub const MIN_HIDDEN_US: f64 = 5_000.0;

/// The samples' mean may exceed their median by this much before the median is said to hide
/// work.
pub const BATCH_SLACK_RATIO: f64 = 0.25;
pub const BATCH_SLACK_US: f64 = 100.0;

/// How much longer than in the loop without calls the device may stay busy after a call's end
/// event, before the timing is not trusted: 10% of the call's median sample, at least 25 us
/// (the synchronize's own jitter on an idle device is a few microseconds).
pub const AFTER_END_SLACK_RATIO: f64 = 0.10;
pub const AFTER_END_SLACK_US: f64 = 25.0;

/// The median of `values` (the upper one of an even count); None when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

impl TimedRun {
    /// Why the device was still busy after the calls had ended, if it was: the median over the
    /// timed calls, against the loop without calls.
    pub fn after_end_finding(&self) -> Option<String> {
        let calls = self.calls.samples_us.len();
        if self.calls.after_end_us.len() != calls {
            // Both workers measure every call; a reply without them was not written by either.
            return Some(format!(
                "timing not trusted: the worker reported {} after-end times for {calls} calls",
                self.calls.after_end_us.len()
            ));
        }
        let after = median(&self.calls.after_end_us)?;
        let idle = median(&self.null_loop.after_end_us).unwrap_or(0.0);
        let sample = median(&self.calls.samples_us).unwrap_or(0.0);
        let allowed = idle + AFTER_END_SLACK_US.max(AFTER_END_SLACK_RATIO * sample);
        (after > allowed).then(|| {
            format!(
                "timing not trusted: the kernel's work continued after it returned: the device \
                 stayed busy a median {after:.1} us after each call's end event (CUDA events \
                 {sample:.1} us a call; {idle:.1} us without calls)"
            )
        })
    }

    /// What a request without the kernel costs beyond its sample, at least: the minimum over
    /// the baseline worker's requests. None without any.
    pub fn baseline_overhead_us(&self) -> Option<f64> {
        self.null_parent_call_us
            .iter()
            .zip(&self.null_loop.samples_us)
            .map(|(wall, sample)| wall - sample)
            .min_by(f64::total_cmp)
    }

    /// The parent's clock per timed call beyond its sample, minus the baseline: the median
    /// time the samples do not account for.
    pub fn unaccounted_us(&self) -> Option<f64> {
        let excess: Vec<f64> = self
            .parent_call_us
            .iter()
            .zip(&self.calls.samples_us)
            .map(|(wall, sample)| wall - sample)
            .collect();
        Some(median(&excess)? - self.baseline_overhead_us()?)
    }

    /// The most the parent's clock lets a call's samples hide (see [`CLOCK_SLACK_RATIO`]).
    pub fn clock_allowance_us(&self) -> Option<f64> {
        let sample = median(&self.calls.samples_us)?;
        Some(CLOCK_SLACK_RATIO * sample + CLOCK_SLACK_US)
    }

    /// Why the parent's clock disagrees with the reported samples, if it does: call by call
    /// (the median of what each call took beyond its sample, against the fastest request
    /// without the kernel), and over the run (one call holding more than every sample).
    pub fn wall_clock_finding(&self) -> Option<String> {
        let sample = median(&self.calls.samples_us)?;
        let Some(idle) = self.baseline_overhead_us() else {
            return Some("timing not trusted: no request without the kernel was timed".into());
        };
        let unaccounted = self.unaccounted_us()?;
        let allowed = self.clock_allowance_us()?;
        if unaccounted > allowed {
            return Some(format!(
                "timing not trusted: the kernel worked outside its timed call (before it began, \
                 on inputs that had just arrived, or after it returned), or its timings were \
                 falsified: the parent measured a median {:.1} us per call that its CUDA-event \
                 sample ({sample:.1} us) does not account for, beyond the fastest request \
                 without the kernel ({idle:.1} us); {allowed:.1} us is allowed",
                unaccounted
            ));
        }
        // All the work in one call with its sample forged: that call's parent time holds more
        // than every sample together.
        let total: f64 = self.calls.samples_us.iter().sum();
        let worst = self
            .parent_call_us
            .iter()
            .zip(&self.calls.samples_us)
            .map(|(wall, sample)| wall - sample - idle)
            .fold(0.0, f64::max);
        (worst > total.max(MIN_HIDDEN_US)).then(|| {
            format!(
                "timing not trusted: the median hides work: one call took {worst:.1} us by the \
                 parent's clock beyond its sample, more than all {} reported samples together \
                 ({total:.1} us)",
                self.calls.samples_us.len()
            )
        })
    }
}

impl TimedRun {
    /// Threads of the kernel's alive beside its timed calls: they could have computed a call's
    /// answer while the worker loaded its inputs, outside the timed call.
    pub fn threads_finding(&self) -> Option<String> {
        let most = self.calls.other_threads.iter().copied().max().unwrap_or(0);
        (most > 0).then(|| {
            format!(
                "timing not trusted: the kernel keeps {most} Python thread(s) of its own alive \
                 beside its calls, which can work on a call's inputs before the call begins"
            )
        })
    }

    /// All the work in a few calls, the others served from a cache: the samples' mean then
    /// disagrees with the reported median. One slow call is left out of the mean unless it
    /// took longer than all the others together: an honest kernel's first timed call can take
    /// a few times its median (2.6x measured on the H100 with the grouped GEMM's file-fed
    /// calls), which in a run of five moves the mean past the bound, while a call that holds
    /// the other calls' work outweighs them all, and work spread over two or more calls still
    /// shows in the mean of the rest.
    pub fn batch_finding(&self) -> Option<String> {
        let samples = &self.calls.samples_us;
        let sample = median(samples)?;
        let total: f64 = samples.iter().sum();
        let slowest = samples.iter().copied().fold(0.0, f64::max);
        let mean = if samples.len() > 2 && slowest <= total - slowest {
            (total - slowest) / (samples.len() - 1) as f64
        } else {
            total / samples.len().max(1) as f64
        };
        (mean > sample * (1.0 + BATCH_SLACK_RATIO) + BATCH_SLACK_US).then(|| {
            format!(
                "timing not trusted: the median hides work: the calls' mean is {mean:.1} us, \
                 the median {sample:.1} us (work done in a few calls, the others served from a \
                 cache)"
            )
        })
    }
}

/// One call's watchdog, from what the warm-up calls took: 20 times as long a call (at least
/// 1 ms), plus 10 s. A kernel that is slow only while timed (a sleep once it sees the timing
/// loop) is stopped after seconds; without warm-up calls the caller's `timeout` alone bounds it.
fn call_watchdog(warmup_took: Duration, warmup: usize) -> Duration {
    if warmup == 0 {
        return Duration::MAX;
    }
    let per_call = (warmup_took / warmup as u32).max(Duration::from_millis(1));
    Duration::from_secs(10) + per_call * 20
}

fn expect_done(reply: Reply) -> Result<(), KernelFailure> {
    match reply {
        Reply::Done(result) => result.map_err(crate::worker::parent::quoted_failure),
        _ => Err(KernelFailure::Crashed(
            "the worker answered out of turn".into(),
        )),
    }
}

fn expect_timed(reply: Reply) -> Result<TimedCalls, KernelFailure> {
    match reply {
        Reply::Timed(result) => result.map_err(crate::worker::parent::quoted_failure),
        _ => Err(KernelFailure::Crashed(
            "the worker answered out of turn".into(),
        )),
    }
}

/// Sums one call's replies into the run's.
fn append(into: &mut TimedCalls, call: TimedCalls) {
    into.samples_us.extend(call.samples_us);
    into.after_end_us.extend(call.after_end_us);
    into.other_threads.extend(call.other_threads);
    into.wall_us += call.wall_us;
}

/// The order of a timing's requests: `timed` calls of the kernel (true) and as many requests
/// without it (false), shuffled from a seed nobody can predict, so that neither worker can
/// tell from the sequence what comes next.
pub fn request_order(timed: usize, seed: u64) -> Vec<bool> {
    use rand_chacha::rand_core::{RngCore, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<bool> = (0..2 * timed).map(|i| i < timed).collect();
    // Fisher-Yates.
    for i in (1..order.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

/// Waiting without sleeping takes a core for each of the parent's two reader threads, its main
/// thread and each worker: only on a machine with this many cores or more (a GPU host has them;
/// on a two-core CI machine the spinning starved the workers it waited for).
pub const SPIN_MIN_CORES: usize = 8;

/// Whether this machine has the cores to wait without sleeping.
pub fn spinning_pays() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= SPIN_MIN_CORES)
}

/// What a timing needs besides its two workers.
pub struct TimingPlan<'a> {
    /// Warm-up sets (their inputs are no secret): the warm-up calls and the untimed warm call
    /// before each timed call run on them, and the requests without the kernel use them.
    pub warmup_sets: &'a [CaseFiles],
    /// The same sets where the baseline worker reads them (its own input directory).
    pub baseline_sets: &'a [CaseFiles],
    /// How many timed calls.
    pub timed: usize,
    /// The parent's decision (never the worker's word): the timed calls' inputs and outputs
    /// travel in device memory shared with the worker. Otherwise as files in `timed_dir`.
    pub shared: bool,
    pub timed_dir: &'a Path,
    /// Where a worker without shared memory writes a timed call's output (its writable
    /// directory); the parent reads it right after the reply.
    pub output_file: &'a Path,
    /// Bounds each step.
    pub timeout: Duration,
}

/// The worker's side of one timed call's output, as the parent holds it.
enum Held {
    Shared(KeptOutput),
    File(Vec<u8>),
}

fn crashed(what: impl std::fmt::Display) -> KernelFailure {
    KernelFailure::Crashed(what.to_string())
}

/// Times the kernel served by `kernel` against requests without it served by `baseline` (a
/// worker of the same kind that has never loaded a kernel): the warm-up, then `plan.timed`
/// calls, call i on the inputs `make_case(i)`, each preceded by an untimed warm call, and as
/// many calls without the kernel, in an order drawn per run. Before every call the parent
/// resets L2 in its own context (`l2`); after every timed call it copies the output out before
/// anything else runs; `pick(timed)` chooses, after the loop, which outputs are judged.
pub fn time_against_baseline(
    kernel: &mut Worker,
    baseline: &mut Worker,
    l2: &mut dyn CacheReset,
    plan: &TimingPlan<'_>,
    make_case: impl Fn(usize) -> KernelCase + Sync,
    pick: impl FnOnce(usize) -> Vec<usize>,
) -> Result<TimedRun, KernelFailure> {
    let Some(first_set) = plan.warmup_sets.first() else {
        return Err(crashed("timing needs at least one warm-up set"));
    };
    let (timed, timeout) = (plan.timed, plan.timeout);
    // Shared memory, one set of buffers per worker; no way back to files on a worker's word.
    let (mut shared, baseline_shared) = if plan.shared {
        let warm = first_set.read().map_err(crashed)?;
        let calls = SharedCalls::new(&warm, timed, &make_case, plan.timed_dir).map_err(|why| {
            crashed(format!(
                "the parent could not share device memory for the timed calls: {why}"
            ))
        })?;
        let null = SharedCalls::new(&warm, 0, &make_case, plan.timed_dir).map_err(|why| {
            crashed(format!(
                "the parent could not share device memory for the baseline: {why}"
            ))
        })?;
        (Some(calls), Some(null))
    } else {
        (None, None)
    };
    let spin = spinning_pays();
    let keep_on_device = shared
        .as_ref()
        .is_some_and(|calls| calls.inputs.output_capacity() >= timed);
    for (worker, buffers, sets) in [
        (&mut *kernel, &shared, plan.warmup_sets),
        (&mut *baseline, &baseline_shared, plan.baseline_sets),
    ] {
        if sets.len() != plan.warmup_sets.len() {
            return Err(crashed("the baseline's warm-up sets are not the kernel's"));
        }
        if let Some(calls) = buffers {
            calls
                .inputs
                .send_to(&worker.input_socket)
                .map_err(crashed)?;
        }
        worker.send(&Request::Prepare {
            spin,
            sets: sets.to_vec(),
            warmup: sets.len(),
            shared: buffers
                .as_ref()
                .map(|calls| calls.inputs.layout())
                .unwrap_or_default(),
        })?;
        expect_done(worker.receive(timeout)?)?;
    }
    // From here on both workers' replies are awaited without sleeping where there are cores
    // to spare (see Worker::spin_while_waiting), until the loop ends; after a failure the
    // caller drops both.
    kernel.spin_while_waiting(spin);
    baseline.spin_while_waiting(spin);
    let warming = Instant::now();
    kernel.send(&Request::Warmup)?;
    expect_done(kernel.receive(timeout)?)?;
    let per_call = call_watchdog(warming.elapsed(), plan.warmup_sets.len()).min(timeout);
    baseline.send(&Request::Warmup)?;
    expect_done(baseline.receive(timeout)?)?;

    let call = |worker: &mut Worker,
                l2: &mut dyn CacheReset,
                set: CaseFiles,
                null: bool,
                output: Option<PathBuf>|
     -> Result<(TimedCalls, f64), KernelFailure> {
        l2.reset()
            .map_err(|why| crashed(format!("the parent's L2 reset: {why}")))?;
        let started = Instant::now();
        worker.send(&Request::Call {
            set,
            null,
            shared: plan.shared,
            output,
        })?;
        let reply = expect_timed(worker.receive(per_call)?)?;
        let took = started.elapsed().as_secs_f64() * 1e6;
        if reply.samples_us.len() != 1 || reply.after_end_us.len() != 1 {
            return Err(crashed(format!(
                "the worker answered a call with {} samples and {} after-end times",
                reply.samples_us.len(),
                reply.after_end_us.len()
            )));
        }
        Ok((reply, took))
    };
    let empty = || TimedCalls {
        samples_us: Vec::new(),
        wall_us: 0.0,
        after_end_us: Vec::new(),
        other_threads: Vec::new(),
    };
    let (mut null_loop, mut null_parent_call_us) = (empty(), Vec::new());
    let (mut calls, mut parent_call_us) = (empty(), Vec::new());
    let (mut worker_wall_us, mut null_worker_wall_us) = (Vec::new(), Vec::new());
    let mut held = Vec::with_capacity(timed);
    let order = request_order(timed, crate::secrets::unpredictable_seed());
    let (mut next_timed, mut next_null) = (0usize, 0usize);
    for is_timed in order {
        if !is_timed {
            let set = plan.baseline_sets[next_null % plan.baseline_sets.len()].clone();
            next_null += 1;
            let set = match &baseline_shared {
                Some(buffers) => {
                    buffers.deliver_warm().map_err(crashed)?;
                    buffers.described.clone()
                }
                None => set,
            };
            let (reply, took) = call(baseline, l2, set, true, None)?;
            null_worker_wall_us.push(reply.wall_us);
            append(&mut null_loop, reply);
            null_parent_call_us.push(took);
            continue;
        }
        let i = next_timed;
        next_timed += 1;
        kernel.send(&Request::Warm)?;
        expect_done(kernel.receive(per_call)?)?;
        let (reply, took) = match &mut shared {
            Some(buffers) => {
                buffers.deliver(i, &make_case).map_err(crashed)?;
                let result = call(kernel, l2, buffers.described.clone(), false, None)?;
                let kept = buffers
                    .inputs
                    .copy_output(keep_on_device)
                    .map_err(|why| crashed(format!("copying timed call {i}'s output: {why}")))?;
                held.push(Held::Shared(kept));
                result
            }
            None => {
                let _ = std::fs::remove_dir_all(plan.timed_dir);
                let set = CaseFiles::write(&make_case(i), plan.timed_dir)
                    .map_err(|err| crashed(format!("writing timed call {i}'s inputs: {err}")))?;
                let output = plan.output_file.to_path_buf();
                let _ = std::fs::remove_file(&output);
                // The output is read right after the reply; inputs and output are removed
                // whatever happened.
                let result = call(kernel, l2, set, false, Some(output.clone())).and_then(|timed| {
                    let bytes = crate::worker::parent::read_output(&output)
                        .map_err(|err| crashed(format!("timed call {i}'s output: {err}")))?;
                    Ok((timed, bytes))
                });
                let _ = std::fs::remove_dir_all(plan.timed_dir);
                let _ = std::fs::remove_file(&output);
                let (timed, bytes) = result?;
                held.push(Held::File(bytes));
                timed
            }
        };
        worker_wall_us.push(reply.wall_us);
        append(&mut calls, reply);
        parent_call_us.push(took);
    }
    kernel.spin_while_waiting(false);
    baseline.spin_while_waiting(false);
    let mut outputs = Vec::new();
    let mut held: Vec<Option<Held>> = held.into_iter().map(Some).collect();
    for i in pick(timed).into_iter().filter(|&i| i < timed) {
        let bytes = match held[i].take() {
            Some(Held::File(bytes)) => bytes,
            Some(Held::Shared(kept)) => {
                let buffers = shared.as_ref().expect("held in shared memory");
                let lmn = buffers.inputs.download(kept).map_err(crashed)?;
                // The shared output is GPU MODE's (L, M, N) storage; judged as [M, N, L].
                let d = &buffers.described;
                let shape = nvfp4_model::problem::Shape {
                    m: d.m,
                    n: d.n,
                    k: d.k,
                    l: d.l,
                };
                crate::gpu::library::lmn_to_mnl(lmn, shape)
            }
            None => continue,
        };
        outputs.push((
            i,
            bytes
                .chunks_exact(2)
                .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
        ));
    }
    Ok(TimedRun {
        calls,
        null_loop,
        parent_call_us,
        null_parent_call_us,
        worker_wall_us,
        null_worker_wall_us,
        outputs,
        shared_inputs: plan.shared,
        delivery: if plan.shared {
            SHARED_DELIVERY.to_string()
        } else {
            FILES_DELIVERY.to_string()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(samples: f64, after: f64, idle_after: f64) -> TimedRun {
        let calls = |sample: f64, after: f64| TimedCalls {
            samples_us: vec![sample; 9],
            wall_us: 0.0,
            after_end_us: vec![after; 9],
            other_threads: vec![0; 9],
        };
        TimedRun {
            calls: calls(samples, after),
            null_loop: calls(2.0, idle_after),
            parent_call_us: vec![samples + after + 900.0; 9],
            null_parent_call_us: vec![2.0 + idle_after + 900.0; 9],
            worker_wall_us: vec![],
            null_worker_wall_us: vec![],
            outputs: vec![],
            shared_inputs: true,
            delivery: SHARED_DELIVERY.into(),
        }
    }

    #[test]
    fn the_call_watchdog_follows_the_warm_up() {
        let ms = Duration::from_millis;
        assert_eq!(call_watchdog(ms(30), 3), ms(10_000 + 20 * 10));
        assert_eq!(call_watchdog(ms(0), 3), ms(10_000 + 20));
        assert_eq!(call_watchdog(ms(30), 0), Duration::MAX);
    }

    #[test]
    fn the_parents_clock_call_by_call() {
        // Honest: each call's wall time is its sample plus the same cost as without the kernel.
        assert_eq!(run(800.0, 9.0, 6.0).wall_clock_finding(), None);
        // Work before the call (on inputs that just arrived) or a forged sample: 1 ms a call
        // the samples do not show.
        let mut early = run(800.0, 9.0, 9.0);
        early.parent_call_us.iter_mut().for_each(|w| *w += 1000.0);
        let finding = early.wall_clock_finding().expect("a finding");
        assert!(finding.contains("outside its timed call"), "{finding}");
        // A slow load on one call in nine moves no median, and is less than the run's samples.
        let mut jitter = run(800.0, 9.0, 9.0);
        jitter.parent_call_us[3] += 5_000.0;
        assert_eq!(jitter.wall_clock_finding(), None);
    }

    #[test]
    fn a_sample_forged_past_the_allowance_is_a_finding() {
        // A 4 ms call reported as 0.85 of itself: 600 us hidden, inside the 640 us allowed (a
        // tenth of the reported 3.4 ms, plus 300 us). At 0.8: 800 us hidden, past the 620 us
        // allowed.
        let mut close = run(4000.0, 9.0, 9.0);
        close.calls.samples_us.iter_mut().for_each(|s| *s *= 0.85);
        assert_eq!(close.wall_clock_finding(), None);
        let mut forged = run(4000.0, 9.0, 9.0);
        forged.calls.samples_us.iter_mut().for_each(|s| *s *= 0.8);
        assert!(forged.wall_clock_finding().is_some());
        // The allowance: a tenth of the call plus CLOCK_SLACK_US.
        assert_eq!(
            run(50.0, 9.0, 9.0).clock_allowance_us(),
            Some(5.0 + CLOCK_SLACK_US)
        );
    }

    #[test]
    fn a_baseline_raised_on_most_requests_does_not_widen_the_bound() {
        // The requests without the kernel made 1 ms slower, all but one: the fastest sets the
        // baseline, so 1 ms of work hidden in every timed call still shows.
        let mut calibrated = run(800.0, 9.0, 9.0);
        calibrated
            .parent_call_us
            .iter_mut()
            .for_each(|w| *w += 1000.0);
        for w in calibrated.null_parent_call_us.iter_mut().skip(1) {
            *w += 1000.0;
        }
        let finding = calibrated.wall_clock_finding().expect("a finding");
        assert!(finding.contains("outside its timed call"), "{finding}");
        // With no request without the kernel there is no baseline: not trusted.
        let mut none = run(800.0, 9.0, 9.0);
        none.null_parent_call_us.clear();
        none.null_loop.samples_us.clear();
        let finding = none.wall_clock_finding().expect("a finding");
        assert!(
            finding.contains("no request without the kernel"),
            "{finding}"
        );
    }

    #[test]
    fn requests_with_and_without_the_kernel_interleave_in_an_order_drawn_per_run() {
        let order = request_order(50, 1);
        assert_eq!(order.len(), 100);
        assert_eq!(order.iter().filter(|&&timed| timed).count(), 50);
        assert_eq!(order, request_order(50, 1), "one seed, one order");
        assert_ne!(order, request_order(50, 2), "another seed, another order");
        // Not all of one kind first.
        assert!(order[..50].iter().any(|&t| t) && order[..50].iter().any(|&t| !t));
    }

    #[test]
    fn all_the_work_in_one_call_is_not_hidden_by_the_median() {
        // Batch-and-skip: one call does nine calls' work, the others return a cache; its
        // sample says so.
        let mut batch = run(10.0, 9.0, 9.0);
        batch.calls.samples_us[0] = 9.0 * 800.0;
        batch.parent_call_us = vec![10.0 + 9.0 + 900.0; 9];
        batch.parent_call_us[0] = 9.0 * 800.0 + 9.0 + 900.0;
        let finding = batch.batch_finding().expect("a finding");
        assert!(finding.contains("the calls' mean"), "{finding}");
        // The same with the big call's sample forged: the parent's clock holds it.
        let mut forged = batch.clone();
        forged.calls.samples_us[0] = 10.0;
        let finding = forged.wall_clock_finding().expect("a finding");
        assert!(
            finding.contains("more than all 9 reported samples"),
            "{finding}"
        );
    }

    #[test]
    fn one_slow_call_is_not_batch_and_skip() {
        // Five honest calls, the first 2.6 times the others (as the H100 measured): the mean
        // of all five is 1.3x the median, of the four others 1.0x.
        let mut slow_start = run(2694.0, 9.0, 9.0);
        slow_start.calls.samples_us = vec![6893.0, 2694.0, 2637.0, 2701.0, 2690.0];
        assert_eq!(slow_start.batch_finding(), None);
        // The work of five calls in two of them, three served from a cache: one of the two
        // left out, the other still shows.
        let mut two = slow_start.clone();
        two.calls.samples_us = vec![6700.0, 6800.0, 40.0, 41.0, 40.0];
        let finding = two.batch_finding().expect("a finding");
        assert!(finding.contains("the calls' mean"), "{finding}");
        // All of it in one call of five: longer than the four others together, so kept.
        let mut one = slow_start;
        one.calls.samples_us = vec![13_400.0, 40.0, 41.0, 40.0, 40.0];
        assert!(one.batch_finding().is_some());
    }

    #[test]
    fn a_thread_beside_the_calls_is_not_trusted() {
        let mut run = run(800.0, 9.0, 6.0);
        assert_eq!(run.threads_finding(), None);
        run.calls.other_threads[4] = 1;
        let finding = run.threads_finding().expect("a finding");
        assert!(finding.contains("1 Python thread(s)"), "{finding}");
    }

    #[test]
    fn an_idle_device_after_each_call_is_trusted() {
        assert_eq!(run(800.0, 9.0, 6.0).after_end_finding(), None);
        // 10% of the sample is allowed beyond the idle synchronize, or 25 us where that is less.
        assert_eq!(run(800.0, 6.0 + 79.0, 6.0).after_end_finding(), None);
        assert_eq!(run(50.0, 6.0 + 24.0, 6.0).after_end_finding(), None);
    }

    #[test]
    fn work_left_running_after_the_calls_is_not_trusted() {
        let finding = run(627.0, 158.0, 6.4)
            .after_end_finding()
            .expect("a finding");
        assert!(finding.contains("continued after it returned"), "{finding}");
        assert!(finding.contains("158.0 us"), "{finding}");
        assert!(run(50.0, 6.0 + 26.0, 6.0).after_end_finding().is_some());
    }

    #[test]
    fn a_reply_without_the_after_end_times_is_not_trusted() {
        let mut silent = run(800.0, 0.0, 0.0);
        silent.calls.after_end_us.clear();
        let finding = silent.after_end_finding().expect("a finding");
        assert!(
            finding.contains("0 after-end times for 9 calls"),
            "{finding}"
        );
    }
}
