//! A kernel under test that runs in a worker process ([`super::parent`]): what the three
//! worker-backed sources (NVRTC variants, shared libraries, Python submissions) have in common.
//! Each source only says how to start its worker and describes its kernel.

use super::command::WorkerCommand;
use super::fresh_start::{start_worker, StartingCache, CACHE};
use super::parent::Worker;
use super::shared_run::{
    fill_ahead, run_shared, runs_shared, OutputOrder, OutputTarget, SharedRun,
};
use crate::kernels::interface::run_one_by_one;
use crate::kernels::{
    KeptOutput, KernelCase, KernelEnvironment, KernelFailure, KernelUnderTest, PrepareError,
    RunConditions, ShapeSupport, ToolWrapper, Unavailable,
};
use half::f16;
use nvfp4_model::model::mma::schedule::Schedule;
use nvfp4_model::problem::ProblemKind;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The most a tool may add to a worker's start watchdog. A start's budget already covers
/// compiling the kernel (10 minutes for a submission); multiplied by a tool's slowdown (20 for
/// compute-sanitizer) a start that hangs would be reported after hours. A torch example's four
/// starts under compute-sanitizer took, with its whole `--quick` campaign, 44 s on the H100
/// (results/sandbox/h100-filter/).
pub const TOOL_START_EXTRA: Duration = Duration::from_secs(300);

/// The start watchdog of a worker under a tool that slows it down `slowdown` times.
pub fn start_timeout_under_tool(base: Duration, slowdown: u32) -> Duration {
    (base * slowdown).min(base + TOOL_START_EXTRA)
}

/// What the harness knows about a kernel without running it.
#[derive(Debug, Clone)]
pub struct KernelInfo {
    pub name: String,
    pub description: String,
    pub problem: ProblemKind,
    pub support: ShapeSupport,
    pub schedule: Option<Schedule>,
    /// SHA-256 of what the kernel is built from (sources, or files and manifest).
    pub source_hash: String,
    pub deliberately_broken: bool,
    /// Declared (manifest) to give outputs that may differ between runs.
    pub nondeterministic: bool,
    /// Declared (manifest) accumulation other than the default contract's.
    pub accumulation: Option<nvfp4_model::model::bounds::KOrder>,
    /// Where a user's kernel came from (its manifest's or code's absolute path); `None` for a
    /// built-in one.
    pub source_path: Option<String>,
}

/// Says why the kernel cannot run on this machine, without starting anything.
pub type AvailabilityCheck = std::sync::Arc<dyn Fn() -> Result<(), Unavailable> + Send + Sync>;

pub struct IsolatedKernel {
    pub info: KernelInfo,
    command: WorkerCommand,
    availability: AvailabilityCheck,
    /// The watchdog of one case: this plus 1 s per 5 * 10^10 multiply-adds.
    pub(crate) case_timeout_base: Duration,
    pub(crate) worker: Mutex<Option<Worker>>,
    environment: Mutex<KernelEnvironment>,
    pub(crate) scratch: PathBuf,
    /// A manifest's `[shapes] production` ([`IsolatedKernel::with_production_shapes`]).
    production_shapes: Vec<nvfp4_model::problem::Shape>,
    /// The worker that serves a timing's requests without the kernel: the same program and
    /// sandbox with no kernel loaded ([`IsolatedKernel::with_timing_baseline`]).
    pub(crate) baseline: Option<Box<IsolatedKernel>>,
    /// Whether timed calls travel in shared device memory: the parent's decision, from what
    /// the kernel is, never from what its worker says.
    pub(crate) shared_timing: bool,
    /// For an untrusted kernel: what its every worker's compiler cache starts from, shared
    /// with its checks' copies.
    starting_cache: Option<std::sync::Arc<StartingCache>>,
    /// The `preflight` command that reads this kernel's compiled code on a machine that cannot
    /// run it ([`IsolatedKernel::with_preflight`]).
    preflight: Option<String>,
    /// Whether its worker runs a campaign's large cases on shared device memory, and how its
    /// kernel stores the output ([`IsolatedKernel::with_shared_runs`]).
    shared_runs: Option<OutputOrder>,
}

impl IsolatedKernel {
    pub fn new(
        info: KernelInfo,
        command: WorkerCommand,
        availability: AvailabilityCheck,
        case_timeout_base: Duration,
    ) -> Self {
        // A random tag, not the purpose or an order: the worker sees these paths, and a copy
        // started under compute-sanitizer must not be told apart from a plain one by them.
        let tag = crate::secrets::unpredictable_seed();
        // In this process's private temporary folder, removed when the command ends or is
        // interrupted; the system's temporary folder only where that one cannot be made.
        let base = crate::private_tmp::dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| std::env::temp_dir());
        let scratch = base.join(format!(
            "nvfp4-oracle-{}-{}-{tag:016x}",
            std::process::id(),
            info.name
        ));
        // Untrusted code (the oracle's own workers need no snapshot).
        let starting_cache = command.sandbox.is_some().then(|| {
            let mut root = scratch.clone().into_os_string();
            root.push("-start");
            std::sync::Arc::new(StartingCache::new(command.clone(), root.into()))
        });
        IsolatedKernel {
            starting_cache,
            info,
            command,
            availability,
            case_timeout_base,
            worker: Mutex::new(None),
            environment: Mutex::new(KernelEnvironment::default()),
            scratch,
            production_shapes: Vec::new(),
            baseline: None,
            shared_timing: false,
            preflight: None,
            shared_runs: None,
        }
    }

    /// `command` is what reads this kernel's compiled code where it cannot run (a submission
    /// for another GPU): certify names it when the kernel is unavailable here.
    pub fn with_preflight(mut self, command: String) -> Self {
        self.preflight = Some(command);
        self
    }

    /// What its workers are started with (before the sandbox wraps it).
    pub fn worker_command(&self) -> &WorkerCommand {
        &self.command
    }

    pub fn preflight(&self) -> Option<&str> {
        self.preflight.as_deref()
    }

    /// The kernel timed against `baseline`'s requests without a kernel; `shared`: its timed
    /// calls' inputs and outputs travel in device memory shared with the parent.
    pub fn with_timing_baseline(mut self, mut baseline: IsolatedKernel, shared: bool) -> Self {
        // The baseline runs no code of the user's: nothing of the kernel's to build ahead.
        baseline.starting_cache = None;
        self.baseline = Some(Box::new(baseline));
        self.shared_timing = shared;
        self
    }

    /// Large cases (`shared_run.rs`) run on device memory shared with the worker, whose kernel
    /// stores its output in `order`; `None`: every case on files. Taken only where the
    /// worker's Ready says it can map shared memory; otherwise the case goes on files.
    pub fn with_shared_runs(mut self, order: Option<OutputOrder>) -> Self {
        self.shared_runs = order;
        self
    }

    /// The shapes a manifest declares the kernel will run at: its campaigns run them.
    pub fn with_production_shapes(mut self, shapes: Vec<nvfp4_model::problem::Shape>) -> Self {
        self.production_shapes = shapes;
        self
    }

    /// Where the parent writes this kernel's inputs (bench's timed sets included): read-only
    /// to a sandboxed worker.
    pub fn input_dir(&self) -> PathBuf {
        self.scratch.join(super::parent::INPUTS)
    }

    fn case_timeout(&self, case: &KernelCase) -> Duration {
        let s = case.shape();
        self.case_timeout_base
            + Duration::from_secs((2 * s.m * s.n * s.k * s.l / 100_000_000_000) as u64)
    }

    /// A started worker in `slot`, starting one if there is none: from an emptied working
    /// directory and a compiler cache of its own, removed when it ends, holding for an
    /// untrusted kernel a copy of the snapshot its every worker starts from
    /// ([`super::fresh_start`]).
    pub(crate) fn ensure_started(&self, slot: &mut Option<Worker>) -> Result<(), PrepareError> {
        if slot.is_none() {
            let snapshot = match &self.starting_cache {
                Some(starting) => Some(starting.snapshot()?),
                None => None,
            };
            let started = std::time::Instant::now();
            let (mut worker, isolation) =
                start_worker(&self.command, &self.scratch, snapshot.as_deref())?;
            crate::trace::trace(format_args!(
                "worker ready in {:.2} s",
                started.elapsed().as_secs_f64()
            ));
            worker.remove_when_gone(self.scratch.join(CACHE));
            let mut environment = worker.environment.clone();
            // What the parent knows, never what the worker says.
            environment.isolation = isolation;
            *self.environment.lock().unwrap_or_else(|p| p.into_inner()) = environment;
            *slot = Some(worker);
        }
        Ok(())
    }
}

#[cfg(feature = "gpu")]
impl IsolatedKernel {
    /// Whether the kernel's timed calls travel in shared device memory (the parent's decision
    /// from the worker's kind): only then can it be timed in batches.
    pub fn shares_timed_inputs(&self) -> bool {
        self.shared_timing
    }
}

impl Drop for IsolatedKernel {
    fn drop(&mut self) {
        // The worker first (it may hold files open), then its scratch directory.
        self.worker.get_mut().map(Option::take).ok();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

impl IsolatedKernel {
    /// Why the kernel does not take `case` (another problem, a shape outside its support).
    fn refusal(&self, case: &KernelCase) -> Option<KernelFailure> {
        let shape = case.shape();
        if case.problem() != self.info.problem {
            return Some(KernelFailure::Refused(format!(
                "a {} case: {} solves {}",
                case.problem().name(),
                self.info.name,
                self.info.problem.name()
            )));
        }
        if !self.info.support.supports(shape) {
            return Some(KernelFailure::Refused(format!(
                "{shape}: {} supports {}",
                self.info.name,
                self.info.support.describe()
            )));
        }
        None
    }

    /// The cases of a batch in one request to the worker, or None where they go one by one
    /// (fewer than two, one refused or large enough for shared memory, a worker that serves
    /// no batches). A request that fails as a whole is narrowed: its cases are run again one by
    /// one in a fresh worker, so that the failure is one case's.
    fn run_in_one_request(
        &self,
        cases: &[&KernelCase],
        outputs: &mut [Vec<f16>],
    ) -> Option<Vec<Result<(), KernelFailure>>> {
        let one_by_one = cases.len() < 2
            || cases
                .iter()
                .any(|case| self.refusal(case).is_some() || runs_shared(case));
        if one_by_one {
            return None;
        }
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        if self.ensure_started(&mut slot).is_err() {
            // The first case's own run says why.
            return None;
        }
        let worker = slot.as_mut().expect("started above");
        if !worker.environment.batches {
            return None;
        }
        let timeout = cases.iter().map(|case| self.case_timeout(case)).sum();
        let answered = worker.run_batch(cases, outputs, &self.scratch, timeout);
        let lost = |result: &Result<(), KernelFailure>| {
            matches!(
                result,
                Err(KernelFailure::Hung(_) | KernelFailure::Crashed(_))
            )
        };
        let mut results = match answered {
            Ok(results) => {
                if results.last().is_some_and(lost) || results.len() < cases.len() {
                    *slot = None;
                }
                results
            }
            Err(whole) => {
                *slot = None;
                drop(slot);
                return Some(self.narrowed(cases, outputs, whole));
            }
        };
        drop(slot);
        // Cases after one the worker could not go on from: one by one, in a fresh worker.
        let answered = results.len();
        results.extend(run_one_by_one(
            self,
            &cases[answered..],
            &mut outputs[answered..],
        ));
        Some(results)
    }

    /// The results of `cases` run one by one after their batch's request failed as a whole
    /// (`whole`): where no case fails alone, the failure depends on the cases run before it in
    /// one process, and is the first case's, with what happened (never a pass).
    fn narrowed(
        &self,
        cases: &[&KernelCase],
        outputs: &mut [Vec<f16>],
        whole: KernelFailure,
    ) -> Vec<Result<(), KernelFailure>> {
        let mut results = run_one_by_one(self, cases, outputs);
        if results.iter().all(|result| result.is_ok()) {
            results[0] = Err(KernelFailure::Crashed(format!(
                "the worker failed during a batch of {} cases ({whole}), and each case passed \
                 when run again alone in a fresh worker: the failure depends on the cases run \
                 before it in one process",
                cases.len()
            )));
        }
        results
    }
}

impl KernelUnderTest for IsolatedKernel {
    fn name(&self) -> &str {
        &self.info.name
    }

    fn description(&self) -> String {
        self.info.description.clone()
    }

    fn is_deliberately_broken(&self) -> bool {
        self.info.deliberately_broken
    }

    fn source_hash(&self) -> Option<String> {
        Some(self.info.source_hash.clone())
    }

    fn source_path(&self) -> Option<String> {
        self.info.source_path.clone()
    }

    fn problem(&self) -> ProblemKind {
        self.info.problem
    }

    fn support(&self) -> ShapeSupport {
        self.info.support
    }

    fn schedule(&self) -> Option<Schedule> {
        self.info.schedule
    }

    fn declared_order(&self) -> Option<nvfp4_model::model::bounds::KOrder> {
        self.info.accumulation
    }

    fn declared_production_shapes(&self) -> Vec<nvfp4_model::problem::Shape> {
        self.production_shapes.clone()
    }

    fn availability(&self) -> Result<(), Unavailable> {
        (self.availability)()
    }

    fn runs_on_gpu(&self) -> bool {
        true
    }

    /// Starts the worker, which itself says whether the kernel can run here (GPU, architecture,
    /// packages) and whether it is usable (a library's symbol, a submission's imports).
    fn prepare(&self) -> Result<(), PrepareError> {
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_started(&mut slot)
    }

    fn environment(&self) -> KernelEnvironment {
        self.environment
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        self.run_under(case, RunConditions::default(), output)
    }

    fn run_batch(
        &self,
        cases: &[&KernelCase],
        outputs: &mut [Vec<f16>],
    ) -> Vec<Result<(), KernelFailure>> {
        self.run_in_one_request(cases, outputs)
            .unwrap_or_else(|| run_one_by_one(self, cases, outputs))
    }

    fn declares_nondeterminism(&self) -> bool {
        self.info.nondeterministic
    }

    fn finish(&self) {
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(worker) = slot.take() {
            worker.close(Duration::from_secs(60));
        }
    }

    /// A copy whose worker starts under `tool` (its own scratch directory and worker), with
    /// the start and case watchdogs stretched by the tool's slowdown (the start's by at most
    /// [`TOOL_START_EXTRA`]).
    fn under_tool(&self, tool: &ToolWrapper) -> Option<Box<dyn KernelUnderTest>> {
        let mut args = tool.args.clone();
        args.push(self.command.program.display().to_string());
        args.extend(self.command.args.iter().cloned());
        let command = WorkerCommand {
            program: tool.program.clone(),
            args,
            env: self.command.env.clone(),
            start_timeout: start_timeout_under_tool(self.command.start_timeout, tool.slowdown),
            // The tool runs inside the sandbox with the worker, and writes nothing there but
            // its log's FIFO, whose folder the sandbox binds in read-only like every path on
            // the command line (crates/harness/src/certify/checks/tool_log.rs).
            sandbox: self.command.sandbox.clone(),
            clean_env: false,
        };
        let mut copy = IsolatedKernel::new(
            self.info.clone(),
            command,
            self.availability.clone(),
            self.case_timeout_base * tool.slowdown,
        );
        // Its workers start from the snapshot the kernel's do (made without the tool).
        copy.starting_cache = self.starting_cache.clone();
        Some(Box::new(copy))
    }

    fn run_under(
        &self,
        case: &KernelCase,
        conditions: RunConditions,
        output: &mut [f16],
    ) -> Result<(), KernelFailure> {
        self.run_in_worker(case, conditions, OutputTarget::Host(output))
            .map(|_| ())
    }

    fn run_keeping_output(
        &self,
        case: &KernelCase,
        output: &mut Vec<f16>,
    ) -> Result<Option<KeptOutput>, KernelFailure> {
        self.run_in_worker(case, RunConditions::default(), OutputTarget::Kept(output))
    }

    /// A case that will run on shared memory has its buffers made and filled now.
    fn make_ready(&self, case: &KernelCase) {
        let shared_inputs = self
            .environment
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .shared_inputs;
        if self.shared_runs.is_some() && shared_inputs && self.refusal(case).is_none() {
            fill_ahead(case);
        }
    }
}

impl IsolatedKernel {
    /// Runs `case` in the worker (started again after a crash): on shared memory where the case
    /// and the worker take it, else on files; the output into `target`.
    fn run_in_worker(
        &self,
        case: &KernelCase,
        conditions: RunConditions,
        target: OutputTarget,
    ) -> Result<Option<KeptOutput>, KernelFailure> {
        if let Some(refusal) = self.refusal(case) {
            return Err(refusal);
        }
        let mut slot = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        // A worker that cannot start again (after a crash) is a crash of this case.
        self.ensure_started(&mut slot)
            .map_err(|err| KernelFailure::Crashed(format!("restarting the worker: {err}")))?;
        let worker = slot.as_mut().expect("started above");
        let on_shared_memory = self.shared_runs.filter(|_| {
            conditions == RunConditions::default()
                && runs_shared(case)
                && worker.environment.shared_inputs
        });
        let timeout = self.case_timeout(case);
        let mut target = target;
        let shared = on_shared_memory
            .map(|order| run_shared(worker, case, order, target.reborrow(), timeout));
        let result = match shared {
            Some(Ok(SharedRun::Kept(kept))) => Ok(Some(kept)),
            Some(Ok(SharedRun::ReadBack)) => Ok(None),
            Some(Err(failure)) => Err(failure),
            // Not such a case, or the parent could not set the shared memory up: on files.
            Some(Ok(SharedRun::NotSetUp)) | None => {
                let output = target.into_host(case.inputs.output_len());
                worker
                    .run(case, conditions, output, &self.scratch, timeout)
                    .map(|()| None)
            }
        };
        if matches!(
            result,
            Err(KernelFailure::Hung(_) | KernelFailure::Crashed(_))
        ) {
            // Killed on drop; the next case starts a fresh worker.
            *slot = None;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_stretches_a_start_by_its_slowdown_up_to_a_bound() {
        let short = Duration::from_secs(10);
        assert_eq!(
            start_timeout_under_tool(short, 20),
            Duration::from_secs(200)
        );
        let submission = Duration::from_secs(600);
        assert_eq!(
            start_timeout_under_tool(submission, 20),
            Duration::from_secs(900)
        );
        assert_eq!(start_timeout_under_tool(submission, 1), submission);
    }
}
