//! Timing an external kernel so that the kernel cannot falsify it (the threat model is in
//! docs/threat-model.md). The kernel runs in its worker; the parent drives four steps
//! ([`super::protocol::Request`]): load every input set, warm up, run the timed loop (and the same
//! loop without the calls), fetch the outputs of a sample of the timed calls. What the parent
//! can trust, it measures or checks itself:
//! - every timed call gets inputs no call has seen, so an answer computed once cannot be replayed;
//! - every timed call's output is copied aside right after it, and the parent chooses which to
//!   judge only after the loop has ended, so a kernel cannot be right only when checked;
//! - the parent's own clock around the device-synchronized loop bounds what the worker reports:
//!   work left running after a call returns (a side stream), or CUDA-event times forged inside
//!   the worker, show up as parent time the reported samples do not account for;
//! - after each call's end event the worker synchronizes the whole device and reports how long
//!   that took: work still running then (a side stream) is measured call by call, even where it
//!   is too short to stand out in the loop's total.

use super::parent::Worker;
use super::protocol::{CaseFiles, Reply, Request, TimedCalls};
use crate::kernels::KernelFailure;
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

/// The timed loop's watchdog, from what the warm-up calls took: 20 times as long a call (at
/// least 1 ms) for every timed call, plus 10 s. A kernel that is slow only while timed (a
/// sleep once it sees the timing loop) is stopped after seconds, not after the case watchdog
/// of every call; without warm-up calls the caller's `timeout` alone bounds the loop.
fn loop_watchdog(warmup_took: Duration, warmup: usize, timed: usize) -> Duration {
    if warmup == 0 {
        return Duration::MAX;
    }
    let per_call = (warmup_took / warmup as u32).max(Duration::from_millis(1));
    Duration::from_secs(10) + per_call * 20 * timed as u32
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
        let warming = Instant::now();
        self.send(&Request::Warmup)?;
        expect_done(self.receive(timeout)?)?;
        let loop_timeout = loop_watchdog(warming.elapsed(), warmup, timed).min(timeout);
        let mut timed_loop = |null: bool| -> Result<(TimedCalls, f64), KernelFailure> {
            let started = Instant::now();
            self.send(&Request::Loop { null })?;
            let calls = expect_timed(self.receive(loop_timeout)?)?;
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
            .map(|i| {
                scratch
                    .join(super::parent::OUTPUTS)
                    .join(format!("timed-output-{i}.bin"))
            })
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
                let bytes = super::parent::read_output(path)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(samples: f64, after: f64, idle_after: f64) -> TimedRun {
        let calls = |sample: f64, after: f64| TimedCalls {
            samples_us: vec![sample; 9],
            wall_us: 0.0,
            after_end_us: vec![after; 9],
        };
        TimedRun {
            calls: calls(samples, after),
            null_loop: calls(2.0, idle_after),
            parent_wall_us: 9.0 * (samples + after),
            null_parent_wall_us: 9.0 * (2.0 + idle_after),
            outputs: vec![],
        }
    }

    #[test]
    fn the_loop_watchdog_follows_the_warm_up() {
        let ms = Duration::from_millis;
        assert_eq!(loop_watchdog(ms(30), 3, 30), ms(10_000 + 20 * 10 * 30));
        assert_eq!(loop_watchdog(ms(0), 3, 30), ms(10_000 + 20 * 30));
        assert_eq!(loop_watchdog(ms(30), 0, 30), Duration::MAX);
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
