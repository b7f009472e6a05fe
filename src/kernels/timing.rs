//! Timing an external kernel so that the kernel cannot falsify it (issue #13's threat model,
//! docs/threat-model.md). The kernel runs in its worker; the parent drives four steps
//! ([`super::process::Request`]): load every input set, warm up, run the timed loop (and the same
//! loop without the calls), fetch the outputs of a sample of the timed calls. What the parent
//! can trust, it measures or checks itself:
//! - every timed call gets inputs no call has seen, so an answer computed once cannot be replayed;
//! - every timed call's output is copied aside right after it, and the parent chooses which to
//!   judge only after the loop has ended, so a kernel cannot be right only when checked;
//! - the parent's own clock around the device-synchronized loop bounds what the worker reports:
//!   work left running after a call returns (a side stream), or CUDA-event times forged inside
//!   the worker, show up as parent time the reported samples do not account for.

use super::interface::KernelFailure;
use super::process::{CaseFiles, Reply, Request, TimedCalls, Worker};
use half::f16;
use std::path::Path;
use std::time::{Duration, Instant};

/// What one timing produced.
#[derive(Debug, Clone)]
pub struct TimedRun {
    /// The worker's CUDA-event samples, one per timed call.
    pub calls: TimedCalls,
    /// The same loop without the calls.
    pub null_loop: TimedCalls,
    /// The parent's wall clock around the timed loop and around the null loop (request sent to
    /// reply received; each loop ends with a device-wide synchronize).
    pub parent_wall_us: f64,
    pub null_parent_wall_us: f64,
    /// (timed call index, its output) for the calls the parent chose to check.
    pub outputs: Vec<(usize, Vec<f16>)>,
}

/// The slack, beyond the null loop's cost, that the parent's clock allows over the reported
/// samples before the timing is not trusted: a quarter of the samples' sum plus 100 us a call
/// (host-side jitter of an honest loop stays well inside it: docs/results/exploits/).
pub const WALL_SLACK_RATIO: f64 = 0.25;
pub const WALL_SLACK_PER_CALL_US: f64 = 100.0;

impl TimedRun {
    /// Why the parent's clock disagrees with the reported samples, if it does.
    pub fn wall_clock_finding(&self) -> Option<String> {
        let calls = self.calls.samples_us.len().max(1) as f64;
        let reported: f64 = self.calls.samples_us.iter().sum();
        let overhead =
            (self.null_parent_wall_us - self.null_loop.samples_us.iter().sum::<f64>()).max(0.0);
        let allowed =
            reported * (1.0 + WALL_SLACK_RATIO) + overhead + WALL_SLACK_PER_CALL_US * calls;
        (self.parent_wall_us > allowed).then(|| {
            format!(
                "timing not trusted: the kernel's work continued after it returned, or its \
                 timings were falsified: the parent measured {:.1} us per call around the \
                 synchronized loop, the kernel's CUDA events {:.1} us, the loop itself {:.1} us",
                self.parent_wall_us / calls,
                reported / calls,
                overhead / calls
            )
        })
    }
}

fn expect_done(reply: Reply) -> Result<(), KernelFailure> {
    match reply {
        Reply::Done(result) => result,
        _ => Err(KernelFailure::Crashed(
            "the worker answered out of turn".into(),
        )),
    }
}

fn expect_timed(reply: Reply) -> Result<TimedCalls, KernelFailure> {
    match reply {
        Reply::Timed(result) => result,
        _ => Err(KernelFailure::Crashed(
            "the worker answered out of turn".into(),
        )),
    }
}

impl Worker {
    /// Times the kernel on `sets` (the first `warmup` for warm-up calls, one per timed call
    /// after), then fetches the outputs of the timed calls `pick(number of timed calls)` chooses
    /// after the loop. `timeout` bounds each step; outputs are written under `scratch`.
    pub fn time(
        &mut self,
        sets: &[CaseFiles],
        warmup: usize,
        pick: impl FnOnce(usize) -> Vec<usize>,
        scratch: &Path,
        timeout: Duration,
    ) -> Result<TimedRun, KernelFailure> {
        let timed = sets.len().saturating_sub(warmup);
        self.send(&Request::Prepare {
            sets: sets.to_vec(),
            warmup,
        })?;
        expect_done(self.receive(timeout)?)?;
        self.send(&Request::Warmup)?;
        expect_done(self.receive(timeout)?)?;
        let mut timed_loop = |null: bool| -> Result<(TimedCalls, f64), KernelFailure> {
            let started = Instant::now();
            self.send(&Request::Loop { null })?;
            let calls = expect_timed(self.receive(timeout)?)?;
            Ok((calls, started.elapsed().as_secs_f64() * 1e6))
        };
        let (null_loop, null_parent_wall_us) = timed_loop(true)?;
        let (calls, parent_wall_us) = timed_loop(false)?;
        if calls.samples_us.len() != timed {
            return Err(KernelFailure::Crashed(format!(
                "the worker reported {} timed calls, not {timed}",
                calls.samples_us.len()
            )));
        }
        let indices: Vec<usize> = pick(timed).into_iter().filter(|&i| i < timed).collect();
        let paths: Vec<_> = indices
            .iter()
            .map(|i| scratch.join(format!("timed-output-{i}.bin")))
            .collect();
        for path in &paths {
            let _ = std::fs::remove_file(path);
        }
        self.send(&Request::Outputs {
            indices: indices.clone(),
            paths: paths.clone(),
        })?;
        expect_done(self.receive(timeout)?)?;
        let outputs = indices
            .into_iter()
            .zip(&paths)
            .map(|(i, path)| {
                let bytes = std::fs::read(path)
                    .map_err(|err| KernelFailure::Crashed(format!("{}: {err}", path.display())))?;
                let _ = std::fs::remove_file(path);
                Ok((
                    i,
                    bytes
                        .chunks_exact(2)
                        .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
                        .collect(),
                ))
            })
            .collect::<Result<_, KernelFailure>>()?;
        Ok(TimedRun {
            calls,
            null_loop,
            parent_wall_us,
            null_parent_wall_us,
            outputs,
        })
    }
}
