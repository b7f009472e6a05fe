//! The host side of a production-size case, phase by phase (no GPU): generating its inputs,
//! writing them as a worker's files and reading them back, the model on sampled rows, filling
//! the full-size reference around them, judging a passing output. Ignored in the default run;
//! results/production-shapes/README.md gives the command and the H100's figures.
//!
//!     SHAPE=8192,8192,16384,4 cargo test --release -p nvfp4-harness --test harness host_profile:: -- --ignored --nocapture

use half::f16;
use nvfp4_harness::certify::{sample_for, sampled_reference, RowSample, FULL_REFERENCE_PRODUCTS};
use nvfp4_harness::kernels::KernelCase;
use nvfp4_harness::worker::protocol::CaseFiles;
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::problem_reference;
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::time::Instant;

/// `work`'s result, printing the seconds it took under `label`.
fn timed<T>(label: &str, work: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = work();
    eprintln!("{label}: {:.2} s", started.elapsed().as_secs_f64());
    result
}

#[test]
#[ignore = "a measurement, not a check: run it by name (module comment)"]
fn host_phases_of_a_large_case() {
    let dims: Vec<usize> = std::env::var("SHAPE")
        .unwrap_or_else(|_| "4096,4096,8192,2".into())
        .split(',')
        .map(|d| d.trim().parse().expect("SHAPE is M,N,K,L"))
        .collect();
    let shape = Shape::new(dims[0], dims[1], dims[2], dims[3]).expect("a valid shape");
    let inputs = timed("generate", || {
        generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 1)
    });
    let case = timed("blocked scales", || KernelCase::new(inputs, 0));
    let dir = std::env::temp_dir().join(format!("nvfp4-host-profile-{}", std::process::id()));
    let files = timed("write files", || CaseFiles::write(&case, &dir).unwrap());
    drop(timed("read files", || files.read().unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
    let Some(sample) = sample_for(&case.inputs, FULL_REFERENCE_PRODUCTS, 3) else {
        eprintln!("{shape} is judged whole: nothing sampled");
        return;
    };
    eprintln!("{} sampled rows of {}", sample.rows.len(), sample.of);
    let reference = timed("sampled reference", || {
        sampled_reference(&case.inputs, KOrder::Contiguous, &sample)
    });
    // One row: the model's share is negligible, what is left is filling the full-size arrays.
    let one_row = RowSample {
        rows: vec![0],
        of: sample.of,
    };
    drop(timed("sampled reference of one row", || {
        sampled_reference(&case.inputs, KOrder::Contiguous, &one_row)
    }));
    // A passing output: the expected value where computed, NaN where required, 0 elsewhere.
    let output: Vec<f16> = (0..reference.len())
        .map(|i| match (reference.expected[i], reference.lo[i]) {
            (e, _) if !e.is_nan() => e,
            (_, lo) if lo.is_nan() => lo,
            _ => f16::ZERO,
        })
        .collect();
    let (m, n, l) = case.inputs.output_dims();
    let verdict = timed("judge a passing output", || {
        judge(
            OutputShape { m, n, l },
            &output,
            &reference.expected,
            &reference.lo,
            &reference.hi,
        )
    });
    assert!(verdict.pass, "the constructed output passes");
}

#[test]
#[ignore = "a measurement, not a check: run it by name (module comment)"]
fn model_of_the_largest_whole_production_shape() {
    let shape = Shape::new(7168, 2304, 2048, 1).unwrap();
    let inputs = generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 1);
    timed("whole reference 7168x2304x2048", || {
        problem_reference(&inputs, KOrder::Contiguous)
    });
}
