//! The GPU reference (crates/harness/kernels/harness/exact_reference_kernel.cu) against the CPU model, which stays the
//! definition. Compiling it needs only NVRTC (CI installs it); comparing and timing it need a
//! GPU, so those tests are `#[ignore]`d and run on the GPU machine:
//!
//!     cargo test --release --test oracle gpu_reference:: -- --include-ignored --nocapture
//!
//! (results/gpu-reference/run.sh runs them there and keeps the logs).

use crate::common;
use nvfp4_harness::certify::{
    cross_check, cross_check_rows, cross_check_sample, CROSS_CHECK_BATCHES, CROSS_CHECK_COLUMNS,
};
use nvfp4_harness::gpu::compile::nvrtc_present;
use nvfp4_harness::gpu::exact_reference::{compile, GpuReference};
use nvfp4_model::golden::set::DUAL_GEMM_BENCHMARKS;
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::{problem_reference, Reference};
use nvfp4_model::problem::generate::generate_problem;
use nvfp4_model::problem::{
    BlockScaledMatrix, Distribution, DualGemmInputs, ProblemInputs, ProblemKind, Shape,
};
use std::time::Instant;

#[test]
fn the_gpu_reference_compiles_without_fused_multiply_adds() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    let ptx = compile().unwrap_or_else(|err| panic!("{err}")).to_src();
    assert!(
        ptx.contains("nvfp4_oracle_exact_reference"),
        "entry missing"
    );
    assert!(ptx.contains("dp4a"), "the block sums are dp4a");
    // A fused f64 multiply-add would round once where the CPU model rounds twice.
    assert!(
        !ptx.contains("fma.rn.f64"),
        "the interval arithmetic must not be fused"
    );
    assert!(
        ptx.contains("cvt.rn.f16.f64"),
        "one correctly rounded f64 -> fp16 conversion"
    );
}

/// The cross-check finds a changed bit (what makes a GPU difference a harness error): no GPU
/// needed, the "GPU" reference here is the CPU model's with one bit changed.
#[test]
fn the_cross_check_finds_one_changed_bit_on_its_rows() {
    let inputs = generate_problem(
        ProblemKind::DualGemm,
        Shape::new(40, 48, 128, 2).unwrap(),
        Distribution::Full,
        3,
    );
    let model = problem_reference(&inputs, KOrder::Contiguous);
    assert_eq!(
        cross_check(&inputs, KOrder::Contiguous, &model, 9),
        Ok(3 * 48 * 2),
        "two drawn rows and the last, whole"
    );
    let rows = cross_check_rows(Shape::new(40, 48, 128, 2).unwrap(), 9).rows;
    assert_eq!(rows.len(), 3);
    assert_eq!(rows.last(), Some(&39));
    let mut changed = model.clone();
    let at = rows[0] * 48 * 2 + 17;
    changed.hi[at] = half::f16::from_bits(changed.hi[at].to_bits() ^ 1);
    let message = cross_check(&inputs, KOrder::Contiguous, &changed, 9).unwrap_err();
    assert!(
        message.contains(&format!("row {}", rows[0])) && message.contains("hi is"),
        "{message}"
    );
    // On the last checked row too, at the column and batch changed.
    let mut changed = model.clone();
    let at = 39 * 48 * 2 + 2 * 5 + 1;
    changed.lo[at] = half::f16::from_bits(changed.lo[at].to_bits() ^ 1);
    let message = cross_check(&inputs, KOrder::Contiguous, &changed, 9).unwrap_err();
    assert!(
        message.contains("row 39, column 5, batch 1") && message.contains("lo is"),
        "{message}"
    );
    // A row that is not checked is not looked at.
    let unchecked = (0..39).find(|r| !rows.contains(r)).unwrap();
    let mut changed = model.clone();
    changed.expected[unchecked * 48 * 2] = half::f16::from_bits(0x7C00);
    assert_eq!(
        cross_check(&inputs, KOrder::Contiguous, &changed, 9),
        Ok(3 * 48 * 2)
    );
}

/// Past [`CROSS_CHECK_COLUMNS`] columns the cross-check computes a sample of them, in every
/// problem: the model's bits there are the whole model's (an element depends on its row and
/// column alone), a changed bit in a checked column is found, an unchecked column is not looked
/// at, and the columns either side of the first 128-column edges are always checked.
#[test]
fn the_cross_check_computes_sampled_columns_with_the_whole_models_bits() {
    let shape = Shape::new(9, 300, 64, 2).unwrap();
    let sample = cross_check_sample(shape, 5);
    assert_eq!(sample.cols.len(), CROSS_CHECK_COLUMNS);
    for edge in [0, 127, 128, 255, 256, 299] {
        assert!(
            sample.cols.contains(&edge),
            "column {edge} is always checked"
        );
    }
    assert_ne!(
        cross_check_sample(shape, 6).cols,
        sample.cols,
        "the drawn columns come from the seed"
    );
    for kind in [ProblemKind::DualGemm, ProblemKind::Gemm] {
        let inputs = generate_problem(kind, shape, Distribution::AdversarialNan, 12);
        let model = problem_reference(&inputs, KOrder::Contiguous);
        let checked = (CROSS_CHECK_COLUMNS * 3 * 2) as u64;
        assert_eq!(
            cross_check(&inputs, KOrder::Contiguous, &model, 5),
            Ok(checked)
        );
        let (row, col) = (sample.rows[1], sample.cols[40]);
        let mut changed = model.clone();
        let at = (row * 300 + col) * 2 + 1;
        changed.expected[at] = half::f16::from_bits(changed.expected[at].to_bits() ^ 1);
        let message = cross_check(&inputs, KOrder::Contiguous, &changed, 5).unwrap_err();
        assert!(
            message.contains(&format!("row {row}, column {col}, batch 1"))
                && message.contains("expected is"),
            "{message}"
        );
        let unchecked = (0..300).find(|c| !sample.cols.contains(c)).unwrap();
        // (Two batches: every batch checked.)
        assert_eq!(sample.batches, vec![0, 1]);
        let mut changed = model.clone();
        changed.hi[(row * 300 + unchecked) * 2] = half::f16::from_bits(0x7C00);
        assert_eq!(
            cross_check(&inputs, KOrder::Contiguous, &changed, 5),
            Ok(checked)
        );
    }
}

/// Past [`CROSS_CHECK_BATCHES`] batches the cross-check computes the first, the last and drawn
/// ones, with the whole model's bits: a changed bit in a checked batch is found, one in an
/// unchecked batch is not looked at.
#[test]
fn the_cross_check_computes_sampled_batches_with_the_whole_models_bits() {
    let shape = Shape::new(5, 3, 32, 9).unwrap();
    let sample = cross_check_sample(shape, 21);
    assert_eq!(sample.batches.len(), CROSS_CHECK_BATCHES);
    assert_eq!((sample.batches[0], sample.batches[3]), (0, 8));
    let inputs = generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 4);
    let model = problem_reference(&inputs, KOrder::Contiguous);
    let checked = (3 * 3 * CROSS_CHECK_BATCHES) as u64;
    assert_eq!(
        cross_check(&inputs, KOrder::Contiguous, &model, 21),
        Ok(checked)
    );
    let (row, batch) = (sample.rows[0], sample.batches[1]);
    let mut changed = model.clone();
    let at = (row * 3 + 2) * 9 + batch;
    changed.lo[at] = half::f16::from_bits(changed.lo[at].to_bits() ^ 1);
    let message = cross_check(&inputs, KOrder::Contiguous, &changed, 21).unwrap_err();
    assert!(
        message.contains(&format!("row {row}, column 2, batch {batch}")),
        "{message}"
    );
    let unchecked = (0..9).find(|b| !sample.batches.contains(b)).unwrap();
    let mut changed = model.clone();
    changed.lo[(row * 3 + 2) * 9 + unchecked] = half::f16::from_bits(0x7C00);
    assert_eq!(
        cross_check(&inputs, KOrder::Contiguous, &changed, 21),
        Ok(checked)
    );
}

pub(crate) fn gpu_or_panic() -> GpuReference {
    GpuReference::new().unwrap_or_else(|err| panic!("this test needs a GPU: {err}"))
}

/// The GPU reference with its tensor-core kernels first (whether or not they are the default).
pub(crate) fn tensor_cores_or_panic() -> GpuReference {
    gpu_or_panic()
        .with_tensor_cores()
        .unwrap_or_else(|err| panic!("loading the tensor-core kernels: {err}"))
}

pub(crate) fn bits(reference: &Reference) -> [Vec<u16>; 3] {
    [&reference.expected, &reference.lo, &reference.hi]
        .map(|values| values.iter().map(|x| x.to_bits()).collect())
}

/// Every element of every edge shape, in every distribution, problem and K order: the GPU's
/// expected, lo and hi are the CPU model's, bit for bit, from the tensor-core kernels (where the
/// GPU has them: compute capability 8.0 on, fast f64), from the f64 kernels and from the
/// integer kernel alone. The shapes cover K = 16, batches, and M and N past, short of and inside
/// every kernel's tile (the tensor-core kernels': 64 x 32 for a GEMM, 32 x 32 for a dual GEMM).
#[test]
#[ignore = "needs a GPU: cargo test --release --test oracle gpu_reference:: -- --include-ignored"]
fn the_gpu_reference_is_the_cpu_model_bit_for_bit() {
    let shapes = [
        (1, 1, 16, 1),
        (1, 2048, 4096, 1),
        (7, 33, 48, 3),
        (32, 32, 128, 1),
        (33, 31, 144, 2),
        (64, 96, 256, 1),
        (65, 33, 16, 2),
        (129, 70, 1040, 1),
        (256, 200, 4096, 1),
        (40, 64, 16384, 1),
    ];
    let references = [
        tensor_cores_or_panic(),
        gpu_or_panic().f64_only(),
        gpu_or_panic().integer_only(),
    ];
    assert_eq!(
        references.each_ref().map(|gpu| gpu.arithmetic()),
        ["tensor-core", "f64", "integer"],
        "a GPU for NVFP4 work has the tensor-core kernels (sm_80 on, fast f64)"
    );
    let mut elements = 0u64;
    for kind in ProblemKind::ALL {
        for dist in Distribution::NAMED {
            for (i, &(m, n, k, l)) in shapes.iter().enumerate() {
                let shape = Shape::new(m, n, k, l).unwrap();
                let inputs = generate_problem(kind, shape, dist, 1000 + i as u64);
                for order in KOrder::ALL {
                    let model = problem_reference(&inputs, order);
                    for gpu in &references {
                        let what = format!(
                            "{} kernel, {} {} {shape} {order:?}",
                            gpu.arithmetic(),
                            kind.name(),
                            dist.name()
                        );
                        assert_bits_of(gpu, &inputs, order, &model, &what);
                    }
                    elements += model.len() as u64;
                }
            }
        }
    }
    for gpu in &references {
        println!(
            "GPU reference on {}, {} kernel: {elements} elements compared with the CPU model \
             (expected, lo, hi each), 0 differences; {} launches redone by the integer kernel",
            gpu.device(),
            gpu.arithmetic(),
            gpu.integer_reruns()
        );
    }
}

/// `gpu`'s reference of `inputs` is the CPU model's, bit for bit; the elements compared.
fn assert_model_bits(gpu: &GpuReference, inputs: &ProblemInputs, order: KOrder, what: &str) -> u64 {
    let model = problem_reference(inputs, order);
    assert_bits_of(gpu, inputs, order, &model, what);
    model.len() as u64
}

/// `gpu`'s reference of `inputs` is `model`, bit for bit.
pub(crate) fn assert_bits_of(
    gpu: &GpuReference,
    inputs: &ProblemInputs,
    order: KOrder,
    model: &Reference,
    what: &str,
) {
    let on_gpu = gpu
        .reference(inputs, order)
        .unwrap_or_else(|err| panic!("{what}: {err}"));
    let (model_bits, gpu_bits) = (bits(model), bits(&on_gpu));
    for (array, (a, b)) in ["expected", "lo", "hi"]
        .iter()
        .zip(model_bits.iter().zip(&gpu_bits))
    {
        let first = a.iter().zip(b).position(|(x, y)| x != y);
        assert!(
            a.len() == b.len() && first.is_none(),
            "{what}: {array} differs at {first:?}: model {:04X?} gpu {:04X?}",
            first.map(|f| a[f]),
            first.map(|f| b[f]),
        );
    }
}

/// Where the f64 statistics (of the tensor-core and of the f64 kernels) could pass 2^53 (every
/// scale e4m3's largest, every value 6, K deep) they do not answer: the integer kernel redoes
/// the case, and the answer is the CPU model's. Where they cannot, their answer stands.
#[test]
#[ignore = "needs a GPU: cargo test --release --test oracle gpu_reference:: -- --include-ignored"]
fn the_f64_kernel_hands_what_it_cannot_prove_exact_to_the_integer_kernel() {
    for gpu in [tensor_cores_or_panic(), gpu_or_panic().f64_only()] {
        assert_hands_over(&gpu);
    }
}

fn assert_hands_over(gpu: &GpuReference) {
    let arithmetic = gpu.arithmetic();
    assert_ne!(arithmetic, "integer", "a GPU for NVFP4 work has fast f64");
    let largest = |rows: usize, k: usize| {
        // 0x77: two e2m1 6s; 0x7E: e4m3's 448.
        BlockScaledMatrix::new(
            "x",
            rows,
            k,
            1,
            vec![0x77; rows * k / 2],
            vec![0x7E; rows * k / 16],
        )
        .unwrap()
    };
    // 16 x 144 x 229376^2 per block (2^46.8): 2^53 is passed after 80 blocks.
    for (k, redone) in [(1024, false), (16384, true)] {
        let shape = Shape::new(8, 40, k, 1).unwrap();
        let inputs = ProblemInputs::DualGemm(
            DualGemmInputs::new(shape, largest(8, k), largest(40, k), largest(40, k)).unwrap(),
        );
        for order in KOrder::ALL {
            let before = gpu.integer_reruns();
            assert_model_bits(
                gpu,
                &inputs,
                order,
                &format!("{arithmetic}: largest values {shape} {order:?}"),
            );
            assert_eq!(
                gpu.integer_reruns() - before,
                usize::from(redone),
                "{arithmetic}: {shape} {order:?}: redone by the integer kernel"
            );
        }
    }
    // A campaign's usual case: the first kernel's answer.
    let inputs = generate_problem(
        ProblemKind::DualGemm,
        Shape::new(256, 512, 7168, 1).unwrap(),
        Distribution::Gpumode,
        3,
    );
    let before = gpu.integer_reruns();
    assert_model_bits(
        gpu,
        &inputs,
        KOrder::Contiguous,
        &format!("{arithmetic}: gpumode 256 x 512 x 7168"),
    );
    assert_eq!(
        gpu.integer_reruns(),
        before,
        "{arithmetic}: gpumode data is exact in f64"
    );
}

fn median(mut seconds: Vec<f64>) -> f64 {
    seconds.sort_by(f64::total_cmp);
    seconds[seconds.len() / 2]
}

/// The speed table: the CPU model and the GPU reference at the four benchmark shapes, the
/// issue's 512 x 4096 x 7168, and large shapes judged whole on the GPU (sampled rows on the CPU
/// before); every GPU result cross-checked on rows, the benchmark shapes compared whole.
#[test]
#[ignore = "needs a GPU: cargo test --release --test oracle gpu_reference:: -- --include-ignored"]
fn gpu_reference_speed_table() {
    let gpu = gpu_or_panic();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "GPU reference on {}; CPU model on {cores} cores",
        gpu.device()
    );
    let integer = gpu_or_panic().integer_only();
    println!(
        "| shape (M x N x K x L) | CPU model (s) | GPU reference, {} kernel (ms) | integer kernel (ms) | ratio | compared |",
        gpu.arithmetic()
    );
    println!("|---|---|---|---|---|---|");
    let mut shapes: Vec<(usize, usize, usize, usize)> = DUAL_GEMM_BENCHMARKS
        .iter()
        .map(|&(m, n, k)| (m, n, k, 1))
        .collect();
    shapes.push((512, 4096, 7168, 1));
    let large = [
        (4096, 14336, 4096, 1),
        (8192, 8192, 16384, 1),
        (16384, 28672, 8192, 1),
    ];
    for &(m, n, k, l) in shapes.iter().chain(&large) {
        let shape = Shape::new(m, n, k, l).unwrap();
        let inputs: ProblemInputs =
            generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 7);
        // Warm (module load, first allocation) once, then the median of three.
        let first = gpu.reference(&inputs, KOrder::Contiguous).unwrap();
        let seconds = |gpu: &GpuReference| {
            median(
                (0..3)
                    .map(|_| {
                        let started = Instant::now();
                        gpu.reference(&inputs, KOrder::Contiguous).unwrap();
                        started.elapsed().as_secs_f64()
                    })
                    .collect(),
            )
        };
        let gpu_seconds = seconds(&gpu);
        assert_eq!(
            bits(&integer.reference(&inputs, KOrder::Contiguous).unwrap()),
            bits(&first),
            "{shape}: the integer kernel differs from the f64 kernel"
        );
        let integer_seconds = seconds(&integer);
        let is_large = large.contains(&(m, n, k, l));
        let (cpu_cell, compared) = if is_large {
            // The whole CPU model would take minutes: rows only.
            let compared = cross_check(&inputs, KOrder::Contiguous, &first, 5)
                .unwrap_or_else(|difference| panic!("{difference}"));
            (
                "(rows only)".to_string(),
                format!("{compared} elements on 3 rows x 64 columns x 4 batches"),
            )
        } else {
            let started = Instant::now();
            let model = problem_reference(&inputs, KOrder::Contiguous);
            let cpu_seconds = started.elapsed().as_secs_f64();
            assert_eq!(
                bits(&model),
                bits(&first),
                "{shape}: the GPU reference differs"
            );
            (
                format!("{cpu_seconds:.3}"),
                format!("all {} elements", model.len()),
            )
        };
        let ratio = cpu_cell
            .parse::<f64>()
            .map_or("-".to_string(), |cpu| format!("{:.0}x", cpu / gpu_seconds));
        println!(
            "| {m} x {n} x {k} x {l} | {cpu_cell} | {:.2} | {:.2} | {ratio} | {compared} |",
            gpu_seconds * 1e3,
            integer_seconds * 1e3
        );
    }
}

/// The worst distance on tight intervals by its definition (the coverage's figure): over the
/// elements whose interval is at most 2 ulps wide, output and expected value numbers, the
/// largest distance between them in fp16 positions.
fn worst_tight_by_definition(output: &[half::f16], reference: &Reference) -> u32 {
    use nvfp4_model::model::bounds::{fp16_ordinal, width_ulps};
    (0..output.len())
        .filter_map(|i| {
            let width = width_ulps(reference.lo[i], reference.hi[i])?;
            let (got, expected) = (
                fp16_ordinal(output[i])?,
                fp16_ordinal(reference.expected[i])?,
            );
            (width <= 2).then_some(got.abs_diff(expected))
        })
        .max()
        .unwrap_or(0)
}

/// An output judged on the GPU against a reference kept there is judged as the host's judge
/// does: the same failing elements, the same first failure, and for a passing output the same
/// worst distance on tight intervals; the reference brought back and the gathered elements
/// are the reference computed and brought back at once.
#[test]
#[ignore = "needs a GPU: cargo test --release --test oracle gpu_reference:: -- --include-ignored"]
fn an_output_judged_on_the_gpu_is_judged_as_on_the_host() {
    use half::f16;
    use nvfp4_model::compare::{judge, OutputShape};
    let gpu = gpu_or_panic();
    let mut judged = 0;
    for (kind, dist, (m, n, k, l)) in [
        (
            ProblemKind::DualGemm,
            Distribution::Full,
            (200, 130, 256, 2),
        ),
        (
            ProblemKind::DualGemm,
            Distribution::AdversarialNan,
            (129, 64, 512, 1),
        ),
        (
            ProblemKind::Gemm,
            Distribution::Adversarial,
            (64, 300, 1024, 3),
        ),
    ] {
        let inputs = generate_problem(kind, Shape::new(m, n, k, l).unwrap(), dist, 77);
        let order = KOrder::Contiguous;
        let on_device = gpu
            .reference_on_device(&inputs, order)
            .unwrap()
            .expect("not a grouped GEMM");
        let reference = gpu.download(&on_device).unwrap();
        assert_eq!(
            bits(&reference),
            bits(&gpu.reference(&inputs, order).unwrap())
        );
        let indices: Vec<u64> = [0, 1, 17, reference.len() as u64 - 1].to_vec();
        let gathered = gpu.gather(&on_device, &indices).unwrap();
        for (j, &i) in indices.iter().enumerate() {
            let i = i as usize;
            assert_eq!(
                [gathered.expected[j], gathered.lo[j], gathered.hi[j]].map(f16::to_bits),
                [reference.expected[i], reference.lo[i], reference.hi[i]].map(f16::to_bits)
            );
        }
        // Outputs: the expected values; one pushed to each bound and past it; a NaN where a
        // number is expected; every element one step up (fp16 bits + 1, wrapping signs).
        let mut outputs = vec![reference.expected.clone()];
        let at = reference.len() / 3;
        for bound in [reference.lo[at], reference.hi[at]] {
            let mut pushed = reference.expected.clone();
            pushed[at] = bound;
            outputs.push(pushed.clone());
            pushed[at] = f16::from_bits(bound.to_bits().wrapping_add(1));
            outputs.push(pushed);
        }
        let mut nan = reference.expected.clone();
        nan[reference.len() - 1] = f16::NAN;
        outputs.push(nan);
        outputs.push(
            reference
                .expected
                .iter()
                .map(|x| f16::from_bits(x.to_bits().wrapping_add(1)))
                .collect(),
        );
        let mut failing = 0;
        for output in &outputs {
            let host = judge(
                OutputShape { m, n, l },
                output,
                &reference.expected,
                &reference.lo,
                &reference.hi,
            );
            let device = gpu.judge_host_output(&on_device, output).unwrap();
            assert_eq!(device.failed, host.failed as u64, "{m}x{n}x{k}x{l}");
            let first = host
                .first_failures
                .first()
                .map(|f| ((f.m * n + f.n) * l + f.l) as u64);
            assert_eq!(device.first, first, "{m}x{n}x{k}x{l}");
            if host.pass {
                assert_eq!(
                    device.worst_tight_ulps,
                    worst_tight_by_definition(output, &reference),
                    "{m}x{n}x{k}x{l}"
                );
            } else {
                failing += 1;
            }
            judged += 1;
        }
        assert!(failing >= 2, "the outputs past a bound fail");
    }
    println!("{judged} outputs judged on {} as on the host", gpu.device());
}
