//! Campaigns and timing through a worker: every problem through the campaign with its failures
//! shrunk and written, the parent's clock over what a worker reports, batches timed and every
//! output judged, no timing without a baseline.

use super::{fake_kernel, python, small_case};
use crate::common;
use half::f16;
use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};
use nvfp4_harness::worker::protocol::CaseFiles;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::path::Path;
use std::time::Duration;

/// A kernel of any problem computed from the model itself, optionally with a planted bug: it
/// exercises the campaign's plumbing (generation, judging, coverage, shrinking, repro files) for
/// the problems other than the dual GEMM, which no CPU kernel solves.
struct ModelKernel {
    name: &'static str,
    problem: ProblemKind,
    /// Drops the last element of every output (an "incomplete output" bug).
    drops_last: bool,
}

impl KernelUnderTest for ModelKernel {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> String {
        "the model's own answer".into()
    }
    fn is_deliberately_broken(&self) -> bool {
        self.drops_last
    }
    fn problem(&self) -> ProblemKind {
        self.problem
    }
    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
        use nvfp4_model::model::{bounds::KOrder, problem_reference};
        let reference = problem_reference(&case.inputs, KOrder::Contiguous);
        assert_eq!(output.len(), reference.expected.len());
        let keep = output.len() - usize::from(self.drops_last);
        output[..keep].copy_from_slice(&reference.expected[..keep]);
        Ok(())
    }
}

#[test]
fn every_problem_goes_through_the_campaign_and_its_failures_are_shrunk_and_written() {
    use nvfp4_harness::certify::{certify_variant, CampaignLimits};
    use nvfp4_harness::certify::{Certificate, Status};
    let limits = CampaignLimits {
        cases: 12,
        seed: 3,
        ..CampaignLimits::default()
    };
    let dir = std::env::temp_dir().join(format!("nvfp4-door-problems-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for problem in [ProblemKind::Gemm, ProblemKind::Gemv, ProblemKind::GroupGemm] {
        let good = ModelKernel {
            name: "model-good",
            problem,
            drops_last: false,
        };
        let result = certify_variant(&good, limits.clone(), &[], |_, _| {});
        assert!(result.failure.is_none(), "{problem:?}");
        assert_eq!(result.coverage.fp4_codes_seen.len(), 16, "{problem:?}");
        let broken = ModelKernel {
            name: "model-broken",
            problem,
            drops_last: true,
        };
        let result = certify_variant(&broken, limits.clone(), &[], |_, _| {});
        let failure = result
            .failure
            .as_ref()
            .expect("the dropped element is caught");
        let minimal = failure.minimal.spec.shape;
        assert_eq!(
            (minimal.m, minimal.n),
            (1, 1),
            "{problem:?} shrinks to one output"
        );
        let certificate = Certificate::from_campaign(&broken, &limits, result, &dir).unwrap();
        assert_eq!(certificate.status, Status::Failed);
        let repro = certificate.failure.unwrap();
        assert!(repro.repro_case.exists(), "{problem:?}: repro written");
        // The repro replays with `check`, exit 1.
        let out = common::oracle_command()
            .args(["check", "--case"])
            .arg(&repro.repro_case)
            .arg("--output")
            .arg(&repro.repro_output)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{problem:?}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_parents_clock_bounds_the_times_a_worker_reports() {
    need_python!();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-timing-{}", std::process::id()));
    let warmup: Vec<CaseFiles> = (0..3)
        .map(|i| {
            let (case, _) = small_case();
            CaseFiles::write(&case, &dir.join(format!("set{i}"))).unwrap()
        })
        .collect();
    // Counts the parent's cache resets: one before every request that calls, timed or not.
    struct CountingReset(usize);
    impl nvfp4_harness::gpu::l2::CacheReset for CountingReset {
        fn reset(&mut self) -> Result<(), nvfp4_harness::gpu::GpuError> {
            self.0 += 1;
            Ok(())
        }
    }
    for (mode, lies) in [("time-honest", false), ("time-liar", true)] {
        let baseline = fake_kernel("time-baseline", &["time-baseline"], Duration::from_secs(5));
        let kernel = fake_kernel(mode, &[mode], Duration::from_secs(5))
            .with_timing_baseline(baseline, false);
        let mut resets = CountingReset(0);
        let run = kernel
            .time(
                &mut resets,
                &warmup,
                20,
                |_| small_case().0,
                |n| vec![0, n - 1],
                Duration::from_secs(1),
            )
            .unwrap();
        assert_eq!(run.calls.samples_us.len(), 20);
        assert_eq!(
            run.null_loop.samples_us.len(),
            20,
            "as many calls without the kernel"
        );
        assert_eq!(resets.0, 40, "the cache reset before every call");
        assert_eq!(run.outputs.len(), 2, "the two picked outputs came back");
        assert!(run.outputs.iter().all(|(_, o)| o.len() == 3 * 5 * 2));
        // The fake hides 3 ms a call when it lies, nothing when honest. The slack itself is
        // measured on the GPU (results/parent-owned/); a busy CI machine's jitter is not
        // what this test is about, so the honest side is held to a millisecond.
        let unaccounted = run.unaccounted_us().unwrap();
        let finding = run.wall_clock_finding();
        if lies {
            assert!(unaccounted > 1500.0, "{mode}: {unaccounted} us");
            let text = finding.expect("the liar is caught");
            assert!(text.contains("outside its timed call"), "{text}");
        } else {
            assert!(unaccounted < 1000.0, "{mode}: {unaccounted} us");
        }
        // Each timed call's inputs existed during its call (the fake worker checks) and not after.
        assert!(!kernel.input_dir().join("timed-call").exists());
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A timed batch's slots in files (no GPU): one file per tensor of the data tuple, slot i at i
/// strides, shared with the workers as descriptors, as the GPU's batch memory is.
struct FileSlots {
    tensors: Vec<(nvfp4_harness::worker::protocol::SharedTensor, std::fs::File)>,
    slots: usize,
}

impl FileSlots {
    fn new(case: &KernelCase, slots: usize, dir: &Path) -> FileSlots {
        use nvfp4_harness::worker::protocol::{slot_stride, SharedTensor};
        std::fs::create_dir_all(dir).unwrap();
        let tensors = nvfp4_harness::worker::shared_inputs::device_tensors(case)
            .unwrap()
            .into_iter()
            .map(|(key, bytes)| {
                let len = slot_stride(bytes.len()) * (slots - 1) + bytes.len();
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(dir.join(&key))
                    .unwrap();
                file.set_len(len as u64).unwrap();
                let tensor = SharedTensor {
                    key,
                    len: bytes.len(),
                    mapped: len,
                    start: 0,
                };
                (tensor, file)
            })
            .collect();
        FileSlots { tensors, slots }
    }
}

impl nvfp4_harness::bench::batch_memory::BatchSlots for FileSlots {
    fn slots(&self) -> usize {
        self.slots
    }

    fn layout(&self) -> Vec<nvfp4_harness::worker::protocol::SharedTensor> {
        self.tensors.iter().map(|(t, _)| t.clone()).collect()
    }

    fn send_to(
        &self,
        socket: &std::os::unix::net::UnixStream,
    ) -> Result<(), nvfp4_harness::gpu::GpuError> {
        use std::os::fd::AsRawFd;
        let fds: Vec<_> = self.tensors.iter().map(|(_, f)| f.as_raw_fd()).collect();
        nvfp4_harness::worker::shared_inputs::send_fds(socket, &fds)
            .map_err(|e| nvfp4_harness::gpu::GpuError(e.to_string()))
    }

    fn write(&self, cases: &[KernelCase]) -> Result<(), nvfp4_harness::gpu::GpuError> {
        use nvfp4_harness::worker::protocol::slot_stride;
        use std::os::unix::fs::FileExt;
        for (slot, case) in cases.iter().enumerate() {
            let tensors = nvfp4_harness::worker::shared_inputs::device_tensors(case).unwrap();
            for ((_, bytes), (t, file)) in tensors.iter().zip(&self.tensors) {
                file.write_all_at(bytes, (slot * slot_stride(t.len)) as u64)
                    .unwrap();
            }
        }
        Ok(())
    }

    fn output(&self, slot: usize) -> Result<Vec<u8>, nvfp4_harness::gpu::GpuError> {
        use nvfp4_harness::worker::protocol::slot_stride;
        use std::os::unix::fs::FileExt;
        let (t, file) = self.tensors.last().unwrap();
        let mut bytes = vec![0u8; t.len];
        file.read_exact_at(&mut bytes, (slot * slot_stride(t.len)) as u64)
            .unwrap();
        Ok(bytes)
    }
}

/// The fake's batch inputs: batch b's slot i gets `fresh(100 + b * slots + i)`, and each
/// output is recorded in `judged` with whether it is its own call's `a` (what the fake writes);
/// a wrong one counts one element.
fn recorded_inputs<'a>(
    memory: &'a FileSlots,
    fresh: &'a (impl Fn(u64) -> KernelCase + Sync),
    slots: usize,
    judged: &'a mut Vec<(usize, usize, bool)>,
) -> nvfp4_harness::bench::batch_inputs::HostInputs<
    'a,
    impl Fn(usize, usize) -> KernelCase + Sync + 'a,
    impl FnMut(usize, usize, &KernelCase, Vec<u8>) -> usize + 'a,
> {
    nvfp4_harness::bench::batch_inputs::HostInputs::new(
        memory,
        move |b, i| fresh(100 + (b * slots + i) as u64),
        move |b, i, case: &KernelCase, output: Vec<u8>| {
            let a = case.inputs.operands()[0].1.data().to_vec();
            let right = output == a[..output.len()];
            judged.push((b, i, right));
            usize::from(!right)
        },
    )
}

#[test]
fn a_batch_is_timed_by_the_parents_clock_and_every_output_is_judged() {
    use nvfp4_harness::bench::batch_clock::{latency_finding, lone_finding, median};
    need_python!();
    let dir = std::env::temp_dir().join(format!("nvfp4-door-batch-{}", std::process::id()));
    let warmup = vec![CaseFiles::write(&small_case().0, &dir.join("set0")).unwrap()];
    struct CountingReset(usize);
    impl nvfp4_harness::gpu::l2::CacheReset for CountingReset {
        fn reset(&mut self) -> Result<(), nvfp4_harness::gpu::GpuError> {
            self.0 += 1;
            Ok(())
        }
    }
    // Sixteen calls a batch: the parent's clock over a batch, less the baseline's request, over
    // the calls, holds the fake's sleeps to within a sixteenth of the requests' jitter on a busy
    // machine (eight let it drift 0.14 ms a call below the sleep under the whole test suite).
    const SLOTS: usize = 16;
    let shape = Shape::new(3, 5, 32, 2).unwrap();
    let fresh =
        |seed: u64| KernelCase::new(generate_dual_gemm(shape, Distribution::Full, seed), 0x7F);
    for mode in ["time-honest", "time-liar", "time-shaver", "time-lazy-batch"] {
        let baseline = fake_kernel("time-baseline", &["time-baseline"], Duration::from_secs(5));
        let kernel = fake_kernel(mode, &[mode], Duration::from_secs(5))
            .with_timing_baseline(baseline, false);
        let run = kernel
            .time(
                &mut CountingReset(0),
                &warmup,
                5,
                |_| small_case().0,
                |n| (0..n).collect(),
                Duration::from_secs(1),
            )
            .unwrap();
        let latency = median(&run.calls.samples_us).unwrap();
        let slots = FileSlots::new(&fresh(0), SLOTS, &dir.join(mode));
        let described = CaseFiles::describe(&fresh(0), Path::new(""));
        let mut resets = CountingReset(0);
        // Every output of every call, and whether it was made from its own call's inputs (the
        // fake writes the first bytes of `a` as its output).
        let mut judged = Vec::new();
        let batch = kernel
            .time_batches(
                &mut resets,
                &nvfp4_harness::bench::batch::BatchPlan {
                    memory: &slots,
                    described: &described,
                    batches: 3,
                    lone_batches: 2,
                    first_batch: 0,
                    timeout: Duration::from_secs(10),
                },
                &mut recorded_inputs(&slots, &fresh, SLOTS, &mut judged),
            )
            .unwrap();
        assert_eq!(
            judged.len(),
            5 * SLOTS,
            "{mode}: 3 batches of {SLOTS} calls and 2 lone-call batches, every output"
        );
        let wrong: Vec<_> = judged.iter().filter(|(_, _, right)| !right).collect();
        assert_eq!(
            batch.judged,
            5 * SLOTS,
            "{mode}: the run counts every judged output"
        );
        assert_eq!(
            batch
                .wrong
                .iter()
                .map(|call| (call.batch, call.slot, call.elements))
                .collect::<Vec<_>>(),
            wrong
                .iter()
                .map(|(b, i, _)| (*b, *i, 1))
                .collect::<Vec<_>>(),
            "{mode}: the run names each wrong call as the judge found it"
        );
        if mode == "time-lazy-batch" {
            // One call a batch left its poison: each batch's middle call, found every time.
            let middle = SLOTS / 2;
            assert_eq!(
                wrong.iter().map(|(b, i, _)| (*b, *i)).collect::<Vec<_>>(),
                (0..5).map(|b| (b, middle)).collect::<Vec<_>>()
            );
        } else {
            assert!(wrong.is_empty(), "{mode}: {wrong:?}");
        }
        assert_eq!(
            resets.0, 10,
            "the cache reset before each batch, the kernel's and the baseline's"
        );
        assert_eq!(batch.clock.kernel_batch_us.len(), 3);
        assert_eq!(batch.clock.baseline_batch_us.len(), 3);
        assert_eq!(batch.clock.lone_kernel_batch_us.len(), 2);
        assert_eq!(batch.clock.lone_baseline_batch_us.len(), 2);
        assert_eq!(
            batch.lone_samples_us.len(),
            2 * SLOTS,
            "a sample per lone call"
        );
        // The parent's clock holds the 1 ms each call of a batch in a stream sleeps and the
        // 2 ms of a lone call, whatever the worker reports; the fake's calls one at a time
        // sleep 3 ms. (The fake's lone calls are shorter than its calls one at a time so that
        // the test is about the rules' direction, not a busy CI machine's jitter, which is
        // larger than the allowance the GPU's honest runs set.)
        let per_call = batch.clock.median_per_call_us().unwrap();
        assert!(
            per_call > 900.0 && per_call < 20_000.0,
            "{mode}: {per_call} us a call"
        );
        let lone = batch.clock.lone_us().unwrap();
        assert!(lone > 1_900.0 && lone < 20_000.0, "{mode}: {lone} us alone");
        let finding = latency_finding(latency, per_call);
        let lone_found = lone_finding(latency, lone);
        match mode {
            "time-liar" => {
                let text = finding.expect("the liar's 10 us latency is not trusted");
                assert!(text.contains("10.0 us"), "{text}");
                assert!(lone_found.is_some(), "and it is below the lone calls");
            }
            "time-shaver" => {
                // 1.5 ms shaved off 3 ms: above the time per call in a stream (1 ms), so the
                // stream's rule does not see it; below the parent's lone call (2 ms).
                assert_eq!(finding, None, "{mode}: latency {latency} us");
                let text = lone_found.expect("the shaved latency is not trusted");
                assert!(text.contains("a call alone"), "{text}");
            }
            _ => {
                assert_eq!(
                    finding, None,
                    "{mode}: latency {latency} us, batch {per_call} us"
                );
                assert_eq!(
                    lone_found, None,
                    "{mode}: latency {latency} us, alone {lone} us"
                );
            }
        }
        if mode == "time-shaver" {
            // The recheck bench makes before a lone finding stands: one more round of lone
            // batches on the same workers, numbered past the first round's batches (fresh
            // inputs), added to the run. The shaver stays below every lone batch.
            let mut batch = batch;
            judged.clear();
            let again = kernel
                .time_batches(
                    &mut resets,
                    &nvfp4_harness::bench::batch::BatchPlan {
                        memory: &slots,
                        described: &described,
                        batches: 0,
                        lone_batches: 1,
                        first_batch: 5,
                        timeout: Duration::from_secs(10),
                    },
                    &mut recorded_inputs(&slots, &fresh, SLOTS, &mut judged),
                )
                .unwrap();
            assert_eq!(
                judged,
                (0..SLOTS).map(|i| (5, i, true)).collect::<Vec<_>>(),
                "the recheck's calls are batch 5's, every output judged"
            );
            assert!(again.clock.kernel_batch_us.is_empty());
            batch.add_lone_round(again);
            assert_eq!(batch.clock.lone_kernel_batch_us.len(), 3);
            assert_eq!(batch.clock.lone_baseline_batch_us.len(), 3);
            assert_eq!(batch.lone_samples_us.len(), 3 * SLOTS);
            assert_eq!(batch.judged, 6 * SLOTS);
            let lone = batch.clock.lone_us().unwrap();
            assert!(
                lone_finding(latency, lone).is_some(),
                "the shaver is below the fastest of three lone batches ({lone} us)"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_kernel_without_a_timing_baseline_is_not_timed() {
    need_python!();
    struct NoReset;
    impl nvfp4_harness::gpu::l2::CacheReset for NoReset {
        fn reset(&mut self) -> Result<(), nvfp4_harness::gpu::GpuError> {
            Ok(())
        }
    }
    let dir = std::env::temp_dir().join(format!("nvfp4-door-no-baseline-{}", std::process::id()));
    let warmup = vec![CaseFiles::write(&small_case().0, &dir.join("set0")).unwrap()];
    let kernel = fake_kernel("time-honest", &["time-honest"], Duration::from_secs(5));
    let failure = kernel
        .time(
            &mut NoReset,
            &warmup,
            3,
            |_| small_case().0,
            |_| vec![],
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert!(
        failure.to_string().contains("no timing baseline"),
        "{failure}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
