//! The worker protocol's parent side against a fake worker: case files, a working worker, a
//! crash, a hang, unreadable replies, failures to start, and batches (outputs in their own
//! buffers, a crash narrowed to its case).

use super::{fake_kernel, python, small_case};
use crate::common;
use half::f16;
use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest, PrepareError};
use nvfp4_harness::worker::isolated::IsolatedKernel;
use nvfp4_harness::worker::protocol::CaseFiles;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::time::Duration;

#[test]
fn case_files_round_trip() {
    let (case, _) = small_case();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-files-{}", std::process::id()));
    let files = CaseFiles::write(&case, &dir).unwrap();
    let back = files.read().unwrap();
    assert_eq!(back.inputs, case.inputs);
    assert_eq!(back.blocked, case.blocked);
    assert_eq!(back.padding_fill, case.padding_fill);
    // A truncated tensor file is an error that names it.
    std::fs::write(files.tensor_path("sfb1_permuted"), [0u8; 3]).unwrap();
    let err = files.read().err().expect("size checked").to_string();
    assert!(err.contains("sfb1_permuted"), "{err}");
    // Every problem's case survives the trip.
    for problem in ProblemKind::ALL {
        let inputs = nvfp4_model::problem::generate::generate_problem(
            problem,
            Shape::new(70, 9, 48, 3).unwrap(),
            Distribution::Adversarial,
            11,
        );
        let case = KernelCase::new(inputs, 0x7F);
        let files = CaseFiles::write(&case, &dir.join(problem.name())).unwrap();
        let back = files.read().unwrap();
        assert_eq!(back.inputs, case.inputs, "{problem:?}");
        assert_eq!(back.blocked, case.blocked, "{problem:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_working_worker_answers_and_reports_its_environment() {
    need_python!();
    let kernel = fake_kernel("zeros", &["zeros"], Duration::from_secs(5));
    kernel.prepare().unwrap();
    assert_eq!(kernel.environment().torch.as_deref(), Some("0.fake"));
    let (case, mut output) = small_case();
    kernel.run(&case, &mut output).unwrap();
    assert!(
        output.iter().all(|x| x.to_bits() == 0),
        "the worker's zeros came back"
    );
}

#[test]
fn a_crash_is_a_verdict_with_the_workers_last_words_and_the_next_case_gets_a_new_worker() {
    need_python!();
    let counter = std::env::temp_dir().join(format!("nvfp4-door-starts-{}", std::process::id()));
    let _ = std::fs::remove_file(&counter);
    let kernel = fake_kernel(
        "crash-once",
        &["crash-once", &counter.display().to_string()],
        Duration::from_secs(5),
    );
    let (case, mut output) = small_case();
    match kernel.run(&case, &mut output) {
        Err(KernelFailure::Crashed(message)) => {
            assert!(
                message.contains("Segmentation fault (pretend)"),
                "{message}"
            )
        }
        other => panic!("expected a crash, got {other:?}"),
    }
    kernel
        .run(&case, &mut output)
        .expect("a fresh worker serves the next case");
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "2");
    let _ = std::fs::remove_file(counter);
}

#[test]
fn a_hang_is_a_verdict_after_the_watchdog() {
    need_python!();
    let kernel = fake_kernel("hang", &["hang"], Duration::from_secs(1));
    let (case, mut output) = small_case();
    let started = std::time::Instant::now();
    assert!(matches!(
        kernel.run(&case, &mut output),
        Err(KernelFailure::Hung(_))
    ));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn unreadable_replies_are_crashes_and_unmarked_lines_are_never_replies() {
    need_python!();
    let (case, mut output) = small_case();
    let garbage = fake_kernel("garbage", &["garbage"], Duration::from_secs(5));
    match garbage.run(&case, &mut output) {
        Err(KernelFailure::Crashed(message)) => {
            assert!(message.contains("unreadable"), "{message}")
        }
        other => panic!("expected an unreadable reply, got {other:?}"),
    }
    let forge = fake_kernel("forge", &["forge"], Duration::from_secs(5));
    forge
        .run(&case, &mut output)
        .expect("the forged line is ignored, the real reply counts");
}

#[test]
fn start_failures_say_whether_the_machine_or_the_kernel_is_to_blame() {
    need_python!();
    let unavailable = fake_kernel("unavailable", &["unavailable"], Duration::from_secs(5));
    assert!(matches!(
        unavailable.prepare(),
        Err(PrepareError::Unavailable(reason)) if reason.contains("sm_100a")
    ));
    let unusable = fake_kernel("unusable", &["unusable"], Duration::from_secs(5));
    // The worker's report is not called the kernel's words; what the kernel printed is quoted.
    match unusable.prepare() {
        Err(PrepareError::Unusable(reason)) => assert!(
            reason.contains("custom_kernel(data) function» (the worker's report)")
                && reason.contains("its last output before it failed: «loading my kernel» (the kernel's own words)"),
            "{reason}"
        ),
        other => panic!("{:?}", other.err()),
    }
    let slow = fake_kernel("slow", &["slow-start"], Duration::from_secs(5));
    assert!(matches!(
        slow.prepare(),
        Err(PrepareError::Unusable(reason)) if reason.contains("did not start within 3 s")
    ));
}

/// Cases of M = 3, 5, 7 and 9 (the fake batch worker writes each case's M as its output).
fn batch_cases() -> Vec<KernelCase> {
    [3, 5, 7, 9]
        .iter()
        .map(|&m| {
            let shape = Shape::new(m, 4, 32, 2).unwrap();
            KernelCase::new(
                generate_dual_gemm(shape, Distribution::Full, m as u64),
                0x7F,
            )
        })
        .collect()
}

/// Runs `cases` as one batch of `kernel`'s; the results and the outputs.
fn run_batch(
    kernel: &IsolatedKernel,
    cases: &[KernelCase],
) -> (Vec<Result<(), KernelFailure>>, Vec<Vec<f16>>) {
    let refs: Vec<&KernelCase> = cases.iter().collect();
    let mut outputs: Vec<Vec<f16>> = cases
        .iter()
        .map(|case| vec![f16::NAN; case.inputs.output_len()])
        .collect();
    let results = kernel.run_batch(&refs, &mut outputs);
    (results, outputs)
}

/// Each output holds its own case's M, everywhere: it landed in its own buffer.
fn landed_in_own_buffer(case: &KernelCase, output: &[f16]) -> bool {
    let m = case.shape().m as u16;
    output.iter().all(|x| x.to_bits() == m)
}

/// A batch in one request: every case's output lands in its own buffer; a case the worker
/// raised on is that case's failure alone and the batch goes on.
#[test]
fn a_batchs_outputs_land_in_their_own_buffers_and_a_raise_is_its_cases() {
    need_python!();
    let cases = batch_cases();
    let kernel = fake_kernel("batch", &["batch"], Duration::from_secs(5));
    kernel.prepare().unwrap();
    assert!(
        kernel.environment().batches,
        "the fake says it serves batches"
    );
    let (results, outputs) = run_batch(&kernel, &cases);
    assert_eq!(results.len(), 4);
    for ((case, output), result) in cases.iter().zip(&outputs).zip(&results) {
        assert!(result.is_ok(), "{result:?}");
        assert!(landed_in_own_buffer(case, output), "M = {}", case.shape().m);
    }
    let counter = std::env::temp_dir().join(format!("nvfp4-batch-raise-{}", std::process::id()));
    let _ = std::fs::remove_file(&counter);
    let raising = fake_kernel(
        "batch-raise",
        &["batch-raise-on-7", &counter.display().to_string()],
        Duration::from_secs(5),
    );
    let (results, outputs) = run_batch(&raising, &cases);
    for (i, (result, (case, output))) in results.iter().zip(cases.iter().zip(&outputs)).enumerate()
    {
        if i == 2 {
            assert!(
                matches!(result, Err(KernelFailure::Raised(why)) if why.contains("M = 7")),
                "{result:?}"
            );
        } else {
            assert!(
                result.is_ok() && landed_in_own_buffer(case, output),
                "case {i}: {result:?}"
            );
        }
    }
    // One worker served the whole batch: a raise does not end it.
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "1");
    let _ = std::fs::remove_file(counter);
}

/// A worker that dies inside a batch: the batch's cases run again one by one in a fresh
/// worker, so that the verdict names the case that crashes, and the others' outputs land in
/// their own buffers. Where no case fails alone, the batch's failure is its first case's,
/// never a pass.
#[test]
fn a_crash_inside_a_batch_is_narrowed_to_its_case() {
    need_python!();
    let cases = batch_cases();
    let kernel = fake_kernel("batch-crash", &["batch-crash-on-7"], Duration::from_secs(5));
    let (results, outputs) = run_batch(&kernel, &cases);
    for (i, (result, (case, output))) in results.iter().zip(cases.iter().zip(&outputs)).enumerate()
    {
        if i == 2 {
            assert!(
                matches!(result, Err(KernelFailure::Crashed(why)) if why.contains("M = 7")),
                "{result:?}"
            );
        } else {
            assert!(
                result.is_ok() && landed_in_own_buffer(case, output),
                "case {i}: {result:?}"
            );
        }
    }
    let only_in_batches = fake_kernel(
        "batch-crash-in-batch",
        &["batch-crash-in-batch"],
        Duration::from_secs(5),
    );
    let (results, outputs) = run_batch(&only_in_batches, &cases);
    assert!(
        matches!(&results[0], Err(KernelFailure::Crashed(why)) if why.contains("depends on the cases run before it")),
        "{:?}",
        results[0]
    );
    for (result, (case, output)) in results.iter().zip(cases.iter().zip(&outputs)).skip(1) {
        assert!(
            result.is_ok() && landed_in_own_buffer(case, output),
            "{result:?}"
        );
    }
}
