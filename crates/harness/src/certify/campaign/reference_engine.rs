//! Where a campaign's references come from: the CPU model, or, once a command has switched it on
//! ([`use_gpu_reference`]), the GPU reference (crates/harness/src/gpu/exact_reference.rs)
//! checked against the CPU model on rows of every case.
//!
//! Why a process-wide switch and not a campaign's parameter: the engine belongs to the machine
//! (one GPU context in the parent, compiled once), as rayon's thread pool does, and every path
//! that judges a case whole (the pipeline, the random cases, the shrinker's repeats) must use
//! the same one.
//!
//! The CPU model is the definition. Every case the GPU computes is compared, bit for bit, with
//! the CPU model on sampled elements of it (`super::cross_check`). A difference is a harness
//! error, never a verdict on the kernel: the GPU reference is switched off for the rest of the
//! process, the case is judged with the CPU model, the difference is printed and kept
//! ([`EngineReport::mismatches`]), and `certify` exits with its harness-error code.

#[cfg(feature = "gpu")]
use super::cross_check::{model_sample, sampled_from};
#[cfg(feature = "gpu")]
use crate::gpu::shared_buffers::abi_operands;
use crate::kernels::{KeptOutput, KernelCase};
#[cfg(feature = "gpu")]
use crate::secrets::unpredictable_seed;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::{problem_reference, Reference};
use nvfp4_model::problem::ProblemInputs;
use std::sync::Mutex;

/// What the GPU reference has done in this process: for the certificate and the time table.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EngineReport {
    /// The GPU, in words; `None` when the CPU model computed every reference.
    pub device: Option<String>,
    /// Cases whose whole reference the GPU computed.
    pub cases: usize,
    /// Output elements the GPU computed, and how many of them the CPU model computed too and
    /// found bit-identical.
    pub elements: u64,
    pub elements_cross_checked: u64,
    /// Seconds on the GPU reference (uploads, kernel, downloads, and judging the outputs whose
    /// reference stayed on the GPU) and on the CPU cross-check.
    pub gpu_seconds: f64,
    pub cross_check_seconds: f64,
    /// Cases the GPU reference declined (K too deep for 64-bit sums, or too large for its
    /// share of GPU memory), computed by the CPU model instead.
    pub declined: usize,
    /// Differences from the CPU model: harness errors.
    pub mismatches: Vec<String>,
}

impl EngineReport {
    /// What happened after `before` was taken (the same process): one campaign's share.
    pub fn since(&self, before: &EngineReport) -> EngineReport {
        EngineReport {
            device: self.device.clone(),
            cases: self.cases - before.cases,
            elements: self.elements - before.elements,
            elements_cross_checked: self.elements_cross_checked - before.elements_cross_checked,
            gpu_seconds: self.gpu_seconds - before.gpu_seconds,
            cross_check_seconds: self.cross_check_seconds - before.cross_check_seconds,
            declined: self.declined - before.declined,
            mismatches: self.mismatches[before.mismatches.len().min(self.mismatches.len())..]
                .to_vec(),
        }
    }

    /// Two shards' reports as one campaign's.
    pub fn add(&mut self, other: &EngineReport) {
        self.device = self.device.take().or_else(|| other.device.clone());
        self.cases += other.cases;
        self.elements += other.elements;
        self.elements_cross_checked += other.elements_cross_checked;
        self.gpu_seconds += other.gpu_seconds;
        self.cross_check_seconds += other.cross_check_seconds;
        self.declined += other.declined;
        self.mismatches.extend(other.mismatches.iter().cloned());
    }

    /// The certificate's row, in words.
    pub fn in_words(&self) -> String {
        let device = self.device.as_deref().unwrap_or("no GPU");
        let mut words = format!(
            "{} case(s) computed whole on the GPU ({device}), {} elements; the CPU model \
             recomputed {} of them: {}",
            self.cases,
            self.elements,
            self.elements_cross_checked,
            match self.mismatches.len() {
                0 => "identical".to_string(),
                n => format!(
                    "HARNESS ERROR, {n} difference(s): {}",
                    self.mismatches.join("; ")
                ),
            }
        );
        if self.declined > 0 {
            words.push_str(&format!(
                "; {} case(s) too large for it, computed by the CPU model",
                self.declined
            ));
        }
        words
    }
}

/// The GPU side, when there is one.
#[cfg(feature = "gpu")]
mod gpu_side {
    use crate::gpu::exact_reference::GpuReference;
    use std::sync::{Arc, Mutex, OnceLock};

    pub struct Engine {
        /// The reference, None once switched off. Held only to take a handle: judging one
        /// case's output (on the reference's judge stream) must not wait for the next case's
        /// reference, computed meanwhile.
        pub reference: Mutex<Option<Arc<GpuReference>>>,
        /// Held while a reference is computed: one at a time, so that the memory each case's
        /// reference was allowed (`GpuReference::declines`, `fits_beside_a_kernel`) is there.
        pub computing: Mutex<()>,
    }

    impl Engine {
        /// A handle on the reference, None once it is switched off.
        pub fn handle(&self) -> Option<Arc<GpuReference>> {
            self.reference
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        }
    }

    pub static ENGINE: OnceLock<Engine> = OnceLock::new();
}

static REPORT: Mutex<Option<EngineReport>> = Mutex::new(None);

fn with_report<T>(change: impl FnOnce(&mut EngineReport) -> T) -> T {
    let mut guard = REPORT
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    change(guard.get_or_insert_with(EngineReport::default))
}

/// Switches the GPU reference on for this process: returns the GPU's description, or why it
/// cannot be used (then the CPU model goes on computing every reference).
pub fn use_gpu_reference() -> Result<String, String> {
    #[cfg(feature = "gpu")]
    {
        use crate::gpu::exact_reference::GpuReference;
        if let Some(engine) = gpu_side::ENGINE.get() {
            return engine
                .handle()
                .map(|r| described(&r))
                .ok_or_else(|| "the GPU reference was switched off".to_string());
        }
        let reference = GpuReference::new().map_err(|err| err.0)?;
        let device = described(&reference);
        with_report(|report| report.device = Some(device.clone()));
        let _ = gpu_side::ENGINE.set(gpu_side::Engine {
            reference: Mutex::new(Some(std::sync::Arc::new(reference))),
            computing: Mutex::new(()),
        });
        Ok(device)
    }
    #[cfg(not(feature = "gpu"))]
    Err("this build has no GPU backend".into())
}

/// The GPU reference in words: its GPU, and which kernel computes a case first ("tensor-core"
/// or "f64", the integer kernel where their f64 sums are not proven exact; "integer" on a GPU
/// with slow f64).
#[cfg(feature = "gpu")]
fn described(reference: &crate::gpu::exact_reference::GpuReference) -> String {
    format!("{}, {} kernel", reference.device(), reference.arithmetic())
}

/// What the engine did so far in this process.
pub fn report() -> EngineReport {
    with_report(|report| report.clone())
}

/// Whether the GPU reference would compute `inputs` whole.
pub fn gpu_takes(inputs: &ProblemInputs) -> bool {
    #[cfg(feature = "gpu")]
    if let Some(engine) = gpu_side::ENGINE.get() {
        let Some(gpu) = engine.handle() else {
            return false;
        };
        if matches!(inputs, ProblemInputs::GroupGemm(_)) {
            return false;
        }
        // Counted here, where the case is sent to the CPU model instead.
        let declined = gpu.declines(inputs).is_some();
        if declined {
            with_report(|report| report.declined += 1);
        }
        return !declined;
    }
    let _ = inputs;
    false
}

/// Whether the reference of `inputs` may be computed while the kernel runs: always for the CPU
/// model (it takes no GPU memory), for the GPU reference only where its memory is a small share
/// of the GPU's, so that the harness never takes memory the kernel's run needs.
pub fn fits_beside_a_kernel(inputs: &ProblemInputs) -> bool {
    #[cfg(feature = "gpu")]
    if let Some(engine) = gpu_side::ENGINE.get() {
        return engine
            .handle()
            .is_none_or(|gpu| gpu.fits_beside_a_kernel(inputs));
    }
    let _ = inputs;
    true
}

/// The whole reference of `inputs`: on the GPU where it is switched on and takes the case
/// (checked against the CPU model on sampled rows), else the CPU model's.
pub fn whole_reference(inputs: &ProblemInputs, order: KOrder) -> Reference {
    gpu_whole_reference(inputs, order).unwrap_or_else(|| problem_reference(inputs, order))
}

/// Outputs of at least this many elements whose reference the GPU computes are judged on the
/// GPU, their reference kept there ([`WholeReference::Device`]); a smaller one's reference
/// comes back and is judged on the host, where a few arrays of kilobytes cost less than the
/// judge's launches.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub const DEVICE_JUDGED_ELEMENTS: usize = 1 << 20;

/// A case's whole reference: on the host, or kept in the GPU reference's memory for the output
/// to be judged there ([`judge_where_it_lies`]).
pub enum WholeReference {
    Host(Reference),
    #[cfg(feature = "gpu")]
    Device(crate::gpu::exact_reference::DeviceReference),
}

impl WholeReference {
    /// Kept in the GPU reference's memory.
    pub fn is_on_device(&self) -> bool {
        match self {
            WholeReference::Host(_) => false,
            #[cfg(feature = "gpu")]
            WholeReference::Device(_) => true,
        }
    }
}

/// An output to judge: on the host, or left on the GPU by its run.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub enum OutputToJudge<'a> {
    Host(&'a [half::f16]),
    Device(&'a KeptOutput),
}

/// Whether the reference of `inputs` is to be kept on the GPU, its output judged there (the
/// run may then leave the output there too: [`crate::kernels::KernelUnderTest::run_keeping_output`]).
/// The GPU reference may still decline the case when it comes to it: the output then comes
/// back to the host.
pub fn judges_on_device(inputs: &ProblemInputs) -> bool {
    #[cfg(feature = "gpu")]
    if let Some(engine) = gpu_side::ENGINE.get() {
        return inputs.output_len() >= DEVICE_JUDGED_ELEMENTS
            && !matches!(inputs, ProblemInputs::GroupGemm(_))
            && engine.handle().is_some();
    }
    let _ = inputs;
    false
}

/// What judging an output where its reference lies gave.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
pub enum WhereJudged {
    /// Judged on the GPU and passed: the reference never came back. The worst distance on
    /// tight intervals is the coverage's figure (`values_seen.rs`' `worst_tight`).
    PassedOnDevice { worst_tight_ulps: u32 },
    /// The reference on the host, for the host's judgement: it was there, or it was brought
    /// back because the output failed on the GPU (so that the verdict lists and maps the
    /// failures as the host's judge does) or the kernel gave no output.
    OnHost(Reference),
}

/// The reference of a case judged whole: [`whole_reference`] where the CPU model may compute
/// it (`within_cpu_budget`); past that budget only the GPU's, which may decline the case now or
/// fail (None: the case is then judged on sampled rows, never by the CPU model whole). An
/// output of at least [`DEVICE_JUDGED_ELEMENTS`] keeps its GPU reference on the GPU. The GPU
/// reads the inputs from the copies a shared run's buffers made ahead hold, where the case has
/// them ([`KernelCase::ready`]), and uploads them itself otherwise.
pub fn case_whole_reference(
    case: &KernelCase,
    order: KOrder,
    within_cpu_budget: bool,
) -> Option<WholeReference> {
    let inputs = &case.inputs;
    #[cfg(feature = "gpu")]
    let kept = inputs.output_len() >= DEVICE_JUDGED_ELEMENTS;
    #[cfg(feature = "gpu")]
    if let Some(reference) = gpu_reference(inputs, order, kept, case.ready.pristine()) {
        return Some(reference);
    }
    within_cpu_budget.then(|| WholeReference::Host(problem_reference(inputs, order)))
}

/// Judges `output` (None: the kernel gave none) against `reference` where the reference lies:
/// on the GPU for a kept one, whose arrays come back only for a failing output; None where the
/// GPU failed at it (the GPU reference is then switched off as after a difference, and the
/// caller judges the case as one without a whole reference).
pub fn judge_where_it_lies(
    reference: WholeReference,
    output: Option<OutputToJudge>,
) -> Option<WhereJudged> {
    #[cfg(not(feature = "gpu"))]
    let _ = output;
    match reference {
        WholeReference::Host(reference) => Some(WhereJudged::OnHost(reference)),
        #[cfg(feature = "gpu")]
        WholeReference::Device(on_device) => {
            let engine = gpu_side::ENGINE.get()?;
            let judged = {
                let gpu = engine.handle()?;
                let started = std::time::Instant::now();
                let judged_there = |output: OutputToJudge| match output {
                    OutputToJudge::Host(output) => gpu.judge_host_output(&on_device, output),
                    OutputToJudge::Device(kept) => {
                        let (output, lmn) = kept.device_ptr();
                        if kept.len() != on_device.len() {
                            return Err(crate::gpu::GpuError(format!(
                                "an output of {} elements for a reference of {}",
                                kept.len(),
                                on_device.len()
                            )));
                        }
                        // SAFETY: the kept output holds the reference's element count of fp16
                        // values (checked above) in this process's context (both are device
                        // 0's primary context), written by work that has ended.
                        unsafe { gpu.judge_on_device(&on_device, output, lmn) }
                    }
                };
                let judged = match output {
                    Some(output) => judged_there(output).and_then(|j| {
                        if j.failed == 0 {
                            Ok(WhereJudged::PassedOnDevice {
                                worst_tight_ulps: j.worst_tight_ulps,
                            })
                        } else {
                            gpu.download(&on_device).map(WhereJudged::OnHost)
                        }
                    }),
                    None => gpu.download(&on_device).map(WhereJudged::OnHost),
                };
                let seconds = started.elapsed().as_secs_f64();
                with_report(|report| report.gpu_seconds += seconds);
                judged
            };
            match judged {
                Ok(judged) => Some(judged),
                Err(err) => {
                    switch_off(
                        engine,
                        format!("judging an output on the GPU failed: {}", err.0),
                    );
                    None
                }
            }
        }
    }
}

/// The whole reference of `inputs` on the GPU, or None where there is no GPU reference or it
/// declines the case now or fails: for cases past the CPU model's budget, which are then
/// judged on sampled rows rather than by the CPU model for hours.
pub fn gpu_whole_reference(inputs: &ProblemInputs, order: KOrder) -> Option<Reference> {
    #[cfg(feature = "gpu")]
    return match gpu_reference(inputs, order, false, None)? {
        WholeReference::Host(reference) => Some(reference),
        WholeReference::Device(_) => None,
    };
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (inputs, order);
        None
    }
}

/// The GPU's reference of `inputs`, brought back or `kept` on the device, checked against the
/// CPU model on sampled elements (gathered on the device for a kept one); computed from
/// `copies` where given (a dual GEMM's nine input tensors on the device, in the C ABI's order:
/// a shared run's, which nothing writes once made).
#[cfg(feature = "gpu")]
fn gpu_reference(
    inputs: &ProblemInputs,
    order: KOrder,
    kept: bool,
    copies: Option<std::sync::Arc<Vec<crate::gpu::pristine::Pristine>>>,
) -> Option<WholeReference> {
    let engine = gpu_side::ENGINE.get()?;
    if matches!(inputs, ProblemInputs::GroupGemm(_)) {
        return None;
    }
    let from_copies = copies.is_some() && matches!(inputs, ProblemInputs::DualGemm(_));
    let seed = unpredictable_seed();
    let gpu = engine.handle()?;
    let one_at_a_time = engine.computing.lock().unwrap_or_else(|p| p.into_inner());
    if gpu.declines(inputs).is_some() {
        with_report(|report| report.declined += 1);
        return None;
    }
    // The CPU model's share of the cross-check is computed on a thread of its own while the GPU
    // computes the whole (on rayon's threads where it is parallel; no lock is held there): one
    // after the other, they added up on a mid-sized case's path (results/ahead-buffers).
    // Work ahead of need (references made while the kernel starts) keeps its lower priority.
    let ahead = crate::cores::ahead_pool().current_thread_index().is_some();
    let ((computed, gpu_seconds), (modelled, model_seconds)) = std::thread::scope(|scope| {
        let modelled = scope.spawn(move || {
            let started = std::time::Instant::now();
            let sample = || model_sample(inputs, order, seed);
            let sample = match ahead {
                true => crate::cores::ahead_pool().install(sample),
                false => sample(),
            };
            (sample, started.elapsed().as_secs_f64())
        });
        let started = std::time::Instant::now();
        let on_device = match (inputs, &copies) {
            (ProblemInputs::DualGemm(dual), Some(copies)) => {
                let operands = abi_operands(copies);
                // SAFETY: the copies hold the case's packed data and plain scales (uploaded
                // from `abi_inputs`, whose work has ended), are alive until this returns (held
                // here) and are never written.
                unsafe { gpu.dual_gemm_on_device(dual.shape, operands, order) }
            }
            _ => gpu
                .reference_on_device(inputs, order)
                .map(|on_device| on_device.expect("every problem but a grouped GEMM")),
        };
        let computed = match kept {
            true => on_device.map(WholeReference::Device),
            false => on_device
                .and_then(|on_device| gpu.download(&on_device))
                .map(WholeReference::Host),
        };
        let gpu_seconds = started.elapsed().as_secs_f64();
        let modelled = modelled
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        ((computed, gpu_seconds), modelled)
    });
    drop(one_at_a_time);
    drop(gpu);
    let reference = match computed {
        Ok(reference) => reference,
        Err(err) => {
            switch_off(engine, format!("the GPU reference failed: {}", err.0));
            return None;
        }
    };
    let started = std::time::Instant::now();
    let (checked, elements) = match &reference {
        WholeReference::Host(host) => {
            let checked =
                modelled.and_then(|sample| sample.compare(host.len(), sampled_from(host)));
            (checked, host.len())
        }
        WholeReference::Device(on_device) => {
            // The sampled elements are gathered on the judge's stream.
            let gather = |indices: &[u64]| {
                let gpu = engine
                    .handle()
                    .ok_or("the GPU reference was switched off")?;
                gpu.gather(on_device, indices).map_err(|err| {
                    format!("gathering the GPU reference's sampled elements: {}", err.0)
                })
            };
            let checked = modelled.and_then(|sample| sample.compare(on_device.len(), gather));
            (checked, on_device.len())
        }
    };
    let cross_check_seconds = model_seconds + started.elapsed().as_secs_f64();
    crate::trace::trace(format_args!(
        "GPU reference of {:?} outputs: {gpu_seconds:.3} s ({}, {}), {cross_check_seconds:.3} \
         s its cross-check (beside it)",
        inputs.output_dims(),
        if from_copies {
            "inputs read from the shared run's copies"
        } else {
            "inputs uploaded"
        },
        if kept {
            "kept on the device"
        } else {
            "brought back"
        },
    ));
    match checked {
        Ok(compared) => {
            with_report(|report| {
                report.cases += 1;
                report.elements += elements as u64;
                report.elements_cross_checked += compared;
                report.gpu_seconds += gpu_seconds;
                report.cross_check_seconds += cross_check_seconds;
            });
            Some(reference)
        }
        Err(difference) => {
            switch_off(engine, difference);
            None
        }
    }
}

#[cfg(feature = "gpu")]
fn switch_off(engine: &gpu_side::Engine, why: String) {
    eprintln!(
        "HARNESS ERROR: {why}. The GPU reference is switched off for the rest of this run; \
         every case is judged by the CPU model. Please report this with the command line."
    );
    *engine.reference.lock().unwrap_or_else(|p| p.into_inner()) = None;
    with_report(|report| report.mismatches.push(why));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(cases: usize, mismatches: &[&str]) -> EngineReport {
        EngineReport {
            device: Some("a GPU".into()),
            cases,
            elements: 10 * cases as u64,
            elements_cross_checked: cases as u64,
            gpu_seconds: cases as f64,
            cross_check_seconds: 0.5 * cases as f64,
            declined: 0,
            mismatches: mismatches.iter().map(|m| m.to_string()).collect(),
        }
    }

    /// A campaign's share is what happened after it started; shards add up; a difference is
    /// written as a harness error in the certificate's row.
    #[test]
    fn a_campaigns_share_of_the_engine_and_its_words() {
        let before = report(3, &[]);
        let after = report(8, &["row 2 differs"]);
        let share = after.since(&before);
        assert_eq!((share.cases, share.elements), (5, 50));
        assert_eq!(share.mismatches, vec!["row 2 differs".to_string()]);
        assert!(share
            .in_words()
            .contains("HARNESS ERROR, 1 difference(s): row 2 differs"));
        let mut merged = EngineReport::default();
        merged.add(&report(2, &[]));
        merged.add(&report(4, &[]));
        assert_eq!((merged.cases, merged.elements_cross_checked), (6, 6));
        assert_eq!(merged.device.as_deref(), Some("a GPU"));
        assert!(
            merged.in_words().ends_with("identical"),
            "{}",
            merged.in_words()
        );
    }
}
