//! One case of a campaign: what regenerates it ([`CaseSpec`]), and how it runs and is judged
//! (whole, or on sampled rows past [`FULL_REFERENCE_PRODUCTS`] products:
//! crates/harness/src/certify/campaign/sampling.rs). The fixed cases every campaign runs are
//! in `fixed_cases.rs`.

use super::reference_engine::{self, OutputToJudge, WhereJudged, WholeReference};
use super::sampling::FULL_REFERENCE_PRODUCTS;
use super::sampling::{products, sample_for, sampled_reference, RowSample};
use super::values_seen::{inputs_seen, values_seen, ValuesSeen};
use crate::kernels::{poisoned_output, KeptOutput, KernelCase, KernelFailure, KernelUnderTest};
use crate::secrets::unpredictable_seed;
use half::f16;
use nvfp4_model::compare::{judge, OutputShape, Verdict};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::mma::schedule::Schedule;
use nvfp4_model::model::replay::{replay_dual_gemm, ExactComparison};
use nvfp4_model::model::{problem_reference, Reference};
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// One generated case: everything needed to regenerate its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CaseSpec {
    pub shape: Shape,
    pub dist: Distribution,
    pub seed: u64,
}

/// The dual-GEMM cases stored whole, as campaign cases (certification runs them first).
pub fn golden_campaign_cases(manifest: &nvfp4_model::golden::Manifest) -> Vec<CaseSpec> {
    manifest
        .cases
        .iter()
        .filter(|case| case.problem == ProblemKind::DualGemm && case.file.is_some())
        .map(|case| CaseSpec {
            shape: case.shapes[0],
            dist: case.distribution,
            seed: case.seed,
        })
        .collect()
}

/// The same cases from the golden set built into the binary (the definitions a manifest is
/// written from), so that a campaign runs them wherever it is started.
pub fn builtin_golden_campaign_cases() -> Vec<CaseSpec> {
    nvfp4_model::golden::set::golden_set()
        .into_iter()
        .filter(|case| case.problem == ProblemKind::DualGemm && case.stored_whole)
        .map(|case| CaseSpec {
            shape: case.shapes[0],
            dist: case.dist,
            seed: case.seed,
        })
        .collect()
}

/// What one case's run produced.
pub struct CaseOutcome {
    pub spec: CaseSpec,
    pub case: KernelCase,
    /// Empty for a passing case judged on the GPU: its reference stayed there.
    pub reference: Reference,
    pub output: Vec<f16>,
    pub result: Result<Verdict, KernelFailure>,
    /// The output against the replay of the declared schedule (exact mode, outputs that pass
    /// the interval check only, cases judged whole only).
    pub exact: Option<ExactComparison>,
    /// The rows judged against the model when the case was too large to judge whole (every
    /// other element had the whole-output checks alone: crates/harness/src/certify/campaign/sampling.rs).
    pub sample: Option<RowSample>,
    /// What its inputs and output showed, for the coverage tallies.
    pub seen: ValuesSeen,
    pub phases: CasePhases,
}

/// Seconds one case spent in each phase: making its inputs; the kernel's run (for a worker
/// process that includes writing the inputs' files, the worker reading and copying them to the
/// GPU and the output's way back); the model; the judgement (and exact mode's replay). On a case
/// judged whole the model runs beside the kernel, and a campaign's fixed cases overlap their
/// inputs and judgement with their neighbours' kernel runs (crates/harness/src/certify/campaign/pipeline.rs): the phases
/// add up to more than the campaign's time.
#[derive(Debug, Clone, Copy, Default)]
pub struct CasePhases {
    pub inputs: f64,
    pub kernel: f64,
    pub model: f64,
    pub judge: f64,
}

impl CaseOutcome {
    pub fn failed(&self) -> bool {
        !matches!(&self.result, Ok(verdict) if verdict.pass)
    }

    /// Inside the intervals, but not what the declared schedule gives.
    pub fn exact_mismatch(&self) -> bool {
        self.exact.is_some_and(|e| e.mismatches > 0)
    }
}

/// Runs one case: fresh inputs, a poisoned output, the kernel, the verdict, and with a
/// `schedule` the comparison of a passing output with its replay. A case past
/// [`FULL_REFERENCE_PRODUCTS`] is judged on sampled rows, drawn after the kernel has returned.
pub fn run_case(
    kernel: &dyn KernelUnderTest,
    spec: CaseSpec,
    order: KOrder,
    schedule: Option<Schedule>,
) -> CaseOutcome {
    run_case_within(kernel, spec, order, schedule, FULL_REFERENCE_PRODUCTS)
}

/// [`run_case`] with the number of products past which rows are sampled.
pub fn run_case_within(
    kernel: &dyn KernelUnderTest,
    spec: CaseSpec,
    order: KOrder,
    schedule: Option<Schedule>,
    full_reference_products: u64,
) -> CaseOutcome {
    let prepared = PreparedCase::new(kernel.problem(), spec);
    run_prepared(kernel, prepared, order, schedule, full_reference_products)
}

/// A case's inputs, made before its run (a campaign makes the next case's while the kernel
/// runs this one: crates/harness/src/certify/run_campaign.rs).
pub struct PreparedCase {
    pub(super) spec: CaseSpec,
    pub(super) case: KernelCase,
    seconds: f64,
}

impl PreparedCase {
    /// The inputs of `spec` (its shape normalized for `problem`).
    pub fn new(problem: ProblemKind, spec: CaseSpec) -> PreparedCase {
        let spec = CaseSpec {
            shape: problem.normalize(spec.shape),
            ..spec
        };
        let started = Instant::now();
        let inputs = generate_problem(problem, spec.shape, spec.dist, spec.seed);
        let case = KernelCase::new(inputs, spec.dist.blocked_padding_fill());
        PreparedCase {
            spec,
            case,
            seconds: seconds_since(started),
        }
    }
}

/// Runs and judges a prepared case (as [`run_case_within`]).
pub fn run_prepared(
    kernel: &dyn KernelUnderTest,
    prepared: PreparedCase,
    order: KOrder,
    schedule: Option<Schedule>,
    full_reference_products: u64,
) -> CaseOutcome {
    run_kernel(kernel, prepared, order, full_reference_products).judged(order, schedule)
}

/// A case the kernel has run and that is not judged yet: a campaign judges it while the kernel
/// runs the next one (crates/harness/src/certify/campaign/pipeline.rs).
pub struct RanCase {
    spec: CaseSpec,
    case: KernelCase,
    /// Empty where the output was left on the GPU (`kept`).
    output: Vec<f16>,
    kept: Option<KeptOutput>,
    run: Result<(), KernelFailure>,
    /// The model of a case judged whole, computed while the kernel ran (a large output's kept
    /// on the GPU, to be judged there).
    whole_reference: Option<WholeReference>,
    full_reference_products: u64,
    phases: CasePhases,
}

/// Runs the kernel on a prepared case: its output starts as poison. A case judged whole has its
/// model computed on this machine's cores while the kernel runs (what keeps a GPU campaign at
/// the GPU's pace); a sampled case's rows are drawn only after the kernel has returned.
pub fn run_kernel(
    kernel: &dyn KernelUnderTest,
    prepared: PreparedCase,
    order: KOrder,
    full_reference_products: u64,
) -> RanCase {
    let PreparedCase {
        spec,
        case,
        seconds,
    } = prepared;
    let mut phases = CasePhases {
        inputs: seconds,
        ..CasePhases::default()
    };
    let within_cpu_budget = products(&case.inputs) <= full_reference_products;
    let judged_whole = within_cpu_budget || reference_engine::gpu_takes(&case.inputs);
    // Where the output will be judged on the GPU, the run may leave it there.
    let keep_output = judged_whole && reference_engine::judges_on_device(&case.inputs);
    let mut output = match keep_output {
        true => Vec::new(),
        false => poisoned_output(case.inputs.output_len()),
    };
    let timed_run = |output: &mut Vec<f16>| {
        let started = Instant::now();
        let run = match keep_output {
            true => kernel.run_keeping_output(&case, output),
            false => kernel.run(&case, output).map(|()| None),
        };
        (run, seconds_since(started))
    };
    let ((run, kernel_seconds), whole_reference) = if judged_whole {
        // Past the CPU model's budget only the GPU computes a whole reference. It is asked
        // again when the case runs, and with less free memory by then it may decline, or it
        // may fail: the case is then judged on sampled rows, never by the CPU model whole.
        let reference = || timed_whole_reference(&case, order, within_cpu_budget);
        let (run, (reference, model_seconds)) =
            if reference_engine::fits_beside_a_kernel(&case.inputs) {
                crate::cores::beside(|| timed_run(&mut output), reference)
            } else {
                let run = timed_run(&mut output);
                (run, reference())
            };
        phases.model = model_seconds;
        (run, reference)
    } else {
        (timed_run(&mut output), None)
    };
    phases.kernel = kernel_seconds;
    let (run, kept) = match run {
        Ok(kept) => (Ok(()), kept),
        Err(failure) => (Err(failure), None),
    };
    if kept.is_none() && output.is_empty() {
        // A failed run that was to leave its output on the GPU: the poison it started as.
        output = poisoned_output(case.inputs.output_len());
    }
    RanCase {
        spec,
        case,
        output,
        kept,
        run,
        whole_reference,
        full_reference_products,
        phases,
    }
}

/// A kept output (if any) read back into `output`; where it cannot be, the case fails: a check
/// that cannot run never passes.
fn read_back(kept: Option<KeptOutput>, output: &mut Vec<f16>, run: &mut Result<(), KernelFailure>) {
    let Some(kept) = kept else { return };
    match kept.download() {
        Ok(read) => *output = read,
        Err(err) => {
            *output = poisoned_output(kept.len());
            *run = Err(KernelFailure::Crashed(format!(
                "the harness could not read the output back from the GPU: {err}"
            )));
        }
    }
}

/// A case's whole reference ([`reference_engine::case_whole_reference`]) and the seconds it took.
fn timed_whole_reference(
    case: &KernelCase,
    order: KOrder,
    within_cpu_budget: bool,
) -> (Option<WholeReference>, f64) {
    let started = Instant::now();
    let reference = reference_engine::case_whole_reference(case, order, within_cpu_budget);
    (reference, seconds_since(started))
}

/// A case's whole reference made before its case ran, and the seconds it took.
pub type MadeReference = (Option<WholeReference>, f64);

/// References made before their cases ran (`references_ahead.rs` makes the small random cases'
/// while the kernel starts), each taken once by the batch that runs its case.
#[derive(Default)]
pub struct MadeAhead {
    references: Mutex<HashMap<CaseSpec, MadeReference>>,
}

impl MadeAhead {
    pub fn new(references: HashMap<CaseSpec, MadeReference>) -> MadeAhead {
        MadeAhead {
            references: Mutex::new(references),
        }
    }

    /// The reference made for `spec` (normalized, as a prepared case's), once.
    pub fn take(&self, spec: &CaseSpec) -> Option<MadeReference> {
        self.references
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(spec)
    }

    /// How many are left untaken.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.references
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// `reference` made for `spec`, in place of any other.
    #[cfg(test)]
    pub fn put(&self, spec: CaseSpec, reference: MadeReference) {
        self.references
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(spec, reference);
    }
}

/// Small cases the kernel runs one after another in one batch ([`KernelUnderTest::run_batch`]:
/// one request to a worker), each case's model made ahead (`ahead`) or computed beside the
/// batch on this machine's cores: what a case costs a Python submission is mostly its request's
/// round trip. Each case is given an equal share of the batch's time as its kernel phase. Cases
/// past the CPU model's budget are not batched (the caller runs them one by one:
/// [`run_kernel`]).
pub fn run_kernel_batch(
    kernel: &dyn KernelUnderTest,
    prepared: Vec<PreparedCase>,
    order: KOrder,
    ahead: &MadeAhead,
) -> Vec<RanCase> {
    debug_assert!(prepared
        .iter()
        .all(|p| products(&p.case.inputs) <= FULL_REFERENCE_PRODUCTS));
    let mut outputs: Vec<Vec<f16>> = prepared
        .iter()
        .map(|p| {
            let (m, n, l) = p.case.inputs.output_dims();
            poisoned_output(m * n * l)
        })
        .collect();
    let cases: Vec<&KernelCase> = prepared.iter().map(|p| &p.case).collect();
    let made: Vec<_> = prepared.iter().map(|p| ahead.take(&p.spec)).collect();
    // On rayon's pool, not `beside`: nothing else waits there during the random cases, and each
    // small case's model (its parallel parts, the GPU reference's cross-check) runs a few
    // short parallel loops that cost a thread outside the pool a wake-up of the pool's threads
    // each: beside, a torch campaign's 2,000 small cases took 16 s of models where they took
    // 6.5 s here (an H200, results/case-overlap).
    let ((runs, kernel_seconds), references) = rayon::join(
        || {
            let started = Instant::now();
            let runs = kernel.run_batch(&cases, &mut outputs);
            (runs, seconds_since(started))
        },
        // One case after another, each parallel inside: the GPU reference holds its engine's
        // lock while it works on rayon's threads, so a task of this batch's waiting on that
        // lock from inside such a thread would never be let in (a campaign on the H100 stopped
        // there). A case whose reference was made ahead has nothing left to compute.
        || {
            prepared
                .iter()
                .zip(made)
                .map(|(p, made)| {
                    made.unwrap_or_else(|| timed_whole_reference(&p.case, order, true))
                })
                .collect::<Vec<_>>()
        },
    );
    let share = kernel_seconds / prepared.len().max(1) as f64;
    crate::trace::trace(format_args!(
        "kernel batch: {kernel_seconds:.4} s the kernel's run, {:.4} s the models beside it",
        references.iter().map(|(_, seconds)| seconds).sum::<f64>()
    ));
    prepared
        .into_iter()
        .zip(outputs)
        .zip(runs)
        .zip(references)
        .map(|(((p, output), run), (reference, model_seconds))| RanCase {
            spec: p.spec,
            case: p.case,
            output,
            kept: None,
            run,
            whole_reference: reference,
            full_reference_products: FULL_REFERENCE_PRODUCTS,
            phases: CasePhases {
                inputs: p.seconds,
                kernel: share,
                model: model_seconds,
                judge: 0.0,
            },
        })
        .collect()
}

/// Runs and judges `specs` in order, small ones in batches of [`RANDOM_BATCH`]
/// ([`run_kernel_batch`]), each outcome with the seconds the campaign spent on it.
pub fn run_cases(
    kernel: &dyn KernelUnderTest,
    specs: &[CaseSpec],
    order: KOrder,
    schedule: Option<Schedule>,
    ahead: &MadeAhead,
) -> Vec<(CaseOutcome, f64)> {
    use rayon::prelude::*;
    let started = Instant::now();
    let problem = kernel.problem();
    let prepared: Vec<PreparedCase> = specs
        .par_iter()
        .map(|&spec| PreparedCase::new(problem, spec))
        .collect();
    let small = |p: &PreparedCase| products(&p.case.inputs) <= FULL_REFERENCE_PRODUCTS;
    if prepared.len() < 2 || !prepared.iter().all(small) {
        let inputs = started.elapsed().as_secs_f64() / prepared.len().max(1) as f64;
        return prepared
            .into_iter()
            .map(|p| {
                let case_started = Instant::now();
                let outcome = run_prepared(kernel, p, order, schedule, FULL_REFERENCE_PRODUCTS);
                (outcome, inputs + case_started.elapsed().as_secs_f64())
            })
            .collect();
    }
    let made = started.elapsed().as_secs_f64();
    let ran = run_kernel_batch(kernel, prepared, order, ahead);
    let batch_seconds = started.elapsed().as_secs_f64();
    let share = batch_seconds / ran.len() as f64;
    let outcomes: Vec<(CaseOutcome, f64)> = ran
        .into_iter()
        .map(|ran| {
            let judged = Instant::now();
            let outcome = ran.judged(order, schedule);
            (outcome, share + judged.elapsed().as_secs_f64())
        })
        .collect();
    crate::trace::trace(format_args!(
        "random batch of {}: {made:.4} s inputs, {:.4} s kernel and models, {:.4} s judged",
        outcomes.len(),
        batch_seconds - made,
        started.elapsed().as_secs_f64() - batch_seconds
    ));
    outcomes
}

/// How many random cases a campaign runs in one batch: enough that a worker's round trip is
/// shared, few enough that the cases run past a failure (dropped) cost little.
pub const RANDOM_BATCH: usize = 16;

impl RanCase {
    /// The kernel did not produce an output to judge (it crashed, hung or refused the case).
    pub fn kernel_failed(&self) -> bool {
        self.run.is_err()
    }

    /// The verdict, and with a `schedule` the comparison of a passing output with its replay.
    pub fn judged(self, order: KOrder, schedule: Option<Schedule>) -> CaseOutcome {
        let RanCase {
            spec,
            case,
            mut output,
            kept,
            mut run,
            whole_reference,
            full_reference_products,
            mut phases,
        } = self;
        let (m, n, l) = case.inputs.output_dims();
        let shape = OutputShape { m, n, l };
        let started = Instant::now();
        // An output left on the GPU is judged there against a reference kept there; against
        // any other it comes back first.
        let on_device = whole_reference
            .as_ref()
            .is_some_and(WholeReference::is_on_device);
        let mut kept = kept;
        if !on_device {
            read_back(kept.take(), &mut output, &mut run);
        }
        // A reference kept on the GPU judges the output there first: a passing output's
        // reference never comes back, nor a kept output.
        let to_judge = match (&kept, &run) {
            (_, Err(_)) => None,
            (Some(kept), Ok(())) => Some(OutputToJudge::Device(kept)),
            (None, Ok(())) => Some(OutputToJudge::Host(&output)),
        };
        let where_judged = whole_reference
            .and_then(|reference| reference_engine::judge_where_it_lies(reference, to_judge));
        if !matches!(where_judged, Some(WhereJudged::PassedOnDevice { .. })) {
            // Failed on the GPU (the host's judge lists and maps the failures), or the GPU
            // could not judge it.
            read_back(kept.take(), &mut output, &mut run);
        }
        drop(kept);
        let (whole_reference, passed_on_device) = match where_judged {
            Some(WhereJudged::OnHost(reference)) => (Some(reference), None),
            Some(WhereJudged::PassedOnDevice { worst_tight_ulps }) => {
                (None, Some(worst_tight_ulps))
            }
            None => (None, None),
        };
        let judged_on_device = seconds_since(started);
        // Rows drawn from a seed no kernel can know, after it returned: a kernel cannot compute
        // the judged rows alone (the case seeds of the fixed cases are public).
        // A case whose whole reference was computed (on the GPU past the CPU's budget) is
        // judged whole: no sample.
        let sample = if whole_reference.is_some() || passed_on_device.is_some() {
            None
        } else {
            sample_for(&case.inputs, full_reference_products, unpredictable_seed())
        };
        let started = Instant::now();
        let reference = match (whole_reference, &sample) {
            // Judged on the GPU: nothing here needs it (the outcome of a passing case).
            _ if passed_on_device.is_some() => Reference {
                expected: vec![],
                lo: vec![],
                hi: vec![],
            },
            (Some(reference), _) => reference,
            (None, Some(sample)) => sampled_reference(&case.inputs, order, sample),
            (None, None) => problem_reference(&case.inputs, order),
        };
        phases.model += seconds_since(started);
        let started = Instant::now();
        let result = run.map(|()| match passed_on_device {
            Some(_) => Verdict::passing(shape),
            None => judge(
                shape,
                &output,
                &reference.expected,
                &reference.lo,
                &reference.hi,
            ),
        });
        // Replay costs more than the CPU model: only cases the CPU model would judge whole
        // are replayed (not those judged whole because the GPU computed their reference).
        let replayable = products(&case.inputs) <= full_reference_products;
        let exact = match (&result, schedule, case.dual()) {
            (Ok(verdict), Some(schedule), Some(dual)) if verdict.pass && replayable => {
                Some(replay_dual_gemm(dual.inputs, schedule).compare(&output))
            }
            _ => None,
        };
        let passed = matches!(&result, Ok(verdict) if verdict.pass);
        let seen = match passed_on_device {
            Some(worst_tight_ulps) => ValuesSeen {
                worst_tight_ulps,
                ..inputs_seen(&case.inputs)
            },
            None => values_seen(&case.inputs, &output, &reference, passed),
        };
        phases.judge = judged_on_device + seconds_since(started);
        CaseOutcome {
            spec,
            case,
            reference,
            output,
            result,
            exact,
            sample,
            seen,
            phases,
        }
    }
}

/// Seconds since `started`: a case's phases.
fn seconds_since(started: Instant) -> f64 {
    started.elapsed().as_secs_f64()
}
