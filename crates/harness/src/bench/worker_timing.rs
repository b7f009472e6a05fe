//! Timing a kernel in its worker ([`IsolatedKernel::time`], [`IsolatedKernel::time_batches`]):
//! the kernel's worker and its timing baseline's, started, lent to the per-call procedure
//! ([`super::per_call`]) and to the batch clock ([`super::batch`]), and both started afresh
//! when a timing fails (either may be mid-request). The worker knows nothing of timing: these
//! methods of its kernel are bench's.

use super::batch::{time_batches, BatchPlan, BatchRun};
use super::batch_inputs::BatchInputs;
use super::per_call::{time_against_baseline, TimedRun, TimingPlan};
use crate::kernels::{KernelCase, KernelFailure};
use crate::worker::parent::OUTPUTS;
use crate::worker::protocol::CaseFiles;
use crate::worker::IsolatedKernel;
use std::time::Duration;

impl IsolatedKernel {
    /// Times the kernel in its worker against its baseline's requests without a kernel (see
    /// [`super::per_call`]): warm-up calls on `warmup_sets`, then `timed` calls, call i on the
    /// case `make_case(i)`, delivered just before its call (in shared device memory, or as
    /// files in the input directory); `pick` chooses, after the timed loop, which timed calls'
    /// outputs are judged. `per_call` is the watchdog of one call; `l2` the parent's reset.
    pub fn time(
        &self,
        l2: &mut dyn crate::gpu::l2::CacheReset,
        warmup_sets: &[CaseFiles],
        timed: usize,
        make_case: impl Fn(usize) -> KernelCase + Sync,
        pick: impl FnOnce(usize) -> Vec<usize>,
        per_call: Duration,
    ) -> Result<TimedRun, KernelFailure> {
        let Some(baseline) = &self.baseline else {
            return Err(KernelFailure::Crashed(
                "this kernel has no timing baseline: it is not timed in a worker".into(),
            ));
        };
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        let mut baseline_slot = baseline.worker.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_started(&mut slot)
            .map_err(|err| KernelFailure::Crashed(format!("starting the worker: {err}")))?;
        baseline.ensure_started(&mut baseline_slot).map_err(|err| {
            KernelFailure::Crashed(format!("starting the timing baseline's worker: {err}"))
        })?;
        // The baseline reads its warm-up sets from its own input directory, the only one its
        // sandbox shows it.
        let baseline_sets = warmup_sets
            .iter()
            .enumerate()
            .map(|(i, set)| {
                let why = |err: &dyn std::fmt::Display| {
                    KernelFailure::Crashed(format!("writing the baseline's warm-up sets: {err}"))
                };
                let case = set.read().map_err(|err| why(&err))?;
                CaseFiles::write(&case, &baseline.input_dir().join(format!("warm-up-{i}")))
                    .map_err(|err| why(&err))
            })
            .collect::<Result<Vec<_>, KernelFailure>>()?;
        let plan = TimingPlan {
            warmup_sets,
            baseline_sets: &baseline_sets,
            timed,
            shared: self.shared_timing,
            timed_dir: &self.input_dir().join("timed-call"),
            output_file: &self.scratch.join(OUTPUTS).join("timed-output.bin"),
            timeout: self.case_timeout_base + per_call * (warmup_sets.len() + 1) as u32,
        };
        let result = time_against_baseline(
            slot.as_mut().expect("started above"),
            baseline_slot.as_mut().expect("started above"),
            l2,
            &plan,
            make_case,
            pick,
        );
        if result.is_err() {
            // Either worker may be mid-request: both start afresh.
            *slot = None;
            *baseline_slot = None;
        }
        result
    }

    /// Times batches of calls in the workers a [`Self::time`] left running (see
    /// [`super::batch`]): the kernel's and its baseline's.
    pub fn time_batches(
        &self,
        l2: &mut dyn crate::gpu::l2::CacheReset,
        plan: &BatchPlan<'_>,
        inputs: &mut dyn BatchInputs,
    ) -> Result<BatchRun, KernelFailure> {
        let Some(baseline) = &self.baseline else {
            return Err(KernelFailure::Crashed(
                "this kernel has no timing baseline: it is not timed in a worker".into(),
            ));
        };
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        let mut baseline_slot = baseline.worker.lock().unwrap_or_else(|p| p.into_inner());
        let (Some(kernel), Some(null)) = (slot.as_mut(), baseline_slot.as_mut()) else {
            return Err(KernelFailure::Crashed(
                "a batch needs the workers of a per-call timing".into(),
            ));
        };
        let result = time_batches(kernel, null, l2, plan, inputs);
        if result.is_err() {
            *slot = None;
            *baseline_slot = None;
        }
        result
    }
}
