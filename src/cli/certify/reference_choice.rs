//! `certify --reference`: where the model's answers are computed (the GPU reference, checked
//! against the CPU model, or the CPU model alone), and what the GPU reference did in the run.

use nvfp4_harness::kernels::KernelUnderTest;

/// `certify --reference`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReferenceChoice {
    Auto,
    Gpu,
    Cpu,
}

/// Switches the GPU reference on as `choice` asks, and says whether it is on: `Err` (exit 4)
/// only for `gpu` where no GPU can be used.
pub(super) fn choose_reference(
    choice: ReferenceChoice,
    kernels: &[Box<dyn KernelUnderTest>],
) -> Result<bool, String> {
    use nvfp4_harness::certify::use_gpu_reference;
    let wanted = match choice {
        ReferenceChoice::Cpu => false,
        ReferenceChoice::Gpu => true,
        ReferenceChoice::Auto => kernels.iter().any(|k| !k.name().starts_with("cpu-")),
    };
    if !wanted {
        return Ok(false);
    }
    match use_gpu_reference() {
        Ok(device) => {
            eprintln!(
                "reference: computed on {device}, whole, and checked against the CPU model on \
                 3 rows x 64 columns x 4 batches of every case"
            );
            Ok(true)
        }
        Err(why) if choice == ReferenceChoice::Gpu => Err(format!("--reference gpu: {why}")),
        Err(why) => {
            eprintln!("reference: the CPU model (the GPU reference cannot be used: {why})");
            Ok(false)
        }
    }
}

/// What the GPU reference did in this run, on stderr, each difference from the CPU model an
/// error; returns how many differences (harness errors) there were.
pub(super) fn say_what_the_reference_did() -> usize {
    let engine = nvfp4_harness::certify::reference_engine_report();
    if engine.device.is_some() {
        eprintln!(
            "reference: {} case(s) computed whole on the GPU in {:.1} s ({} elements), {} \
             element(s) recomputed by the CPU model in {:.1} s, {} difference(s){}",
            engine.cases,
            engine.gpu_seconds,
            engine.elements,
            engine.elements_cross_checked,
            engine.cross_check_seconds,
            engine.mismatches.len(),
            match engine.declined {
                0 => String::new(),
                n => format!("; {n} case(s) too large for it, computed by the CPU model"),
            }
        );
    }
    for mismatch in &engine.mismatches {
        eprintln!("error: harness error: {mismatch}");
    }
    engine.mismatches.len()
}
