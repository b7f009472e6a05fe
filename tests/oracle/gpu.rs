//! GPU checks. NVRTC compilation of every kernel runs wherever libnvrtc can be loaded (CI installs
//! it from PyPI: see .ci/run), and records why it was skipped otherwise; the GPU certification
//! smoke test needs a Hopper GPU, so it is `#[ignore]`d (the summary counts it) and run with
//! `-- --include-ignored` on one. The full GPU run is documented in README.

use crate::common;

use nvfp4_harness::certify::{certify_variant, CampaignLimits};
use nvfp4_harness::gpu::compile::{compile_variant, compile_variant_in, nvrtc_present};
use nvfp4_harness::gpu::variants::gpu_variants;
use nvfp4_harness::worker::nvrtc::nvrtc_kernels;

#[test]
fn every_kernel_compiles_for_its_declared_arch() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    // A fresh cache, so this really compiles: this test's own, passed in rather than set in the
    // environment, which the other tests of this process read.
    let cache =
        std::env::temp_dir().join(format!("nvfp4-oracle-nvrtc-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    for variant in gpu_variants() {
        let ptx = compile_variant_in(&variant, &cache).unwrap_or_else(|err| panic!("{err}"));
        assert!(
            ptx.to_src().contains(variant.entry),
            "{}: entry {} missing from the PTX",
            variant.name,
            variant.entry
        );
        eprintln!("compiled {} for {}", variant.name, variant.arch.target);
    }
    let _ = std::fs::remove_dir_all(cache);
}

/// The kernels whose exact campaigns run on a Hopper GPU, one test each (below): every variant
/// that is not a test kernel, the persistent kernel on 7 CTAs (several tiles per CTA), and the
/// reversed-K test kernel, which must be caught by the replay alone.
const EXACT_ON_HOPPER: [&str; 7] = [
    "hopper-baseline",
    "hopper-persistent",
    "hopper-warp-specialized",
    "hopper-cluster-pair",
    "hopper-splitk-pair",
    "hopper-test-persistent-7-ctas",
    "hopper-test-reversed-k",
];

/// On a Hopper GPU: `name` passes a short campaign with zero tolerance (its declared schedule
/// replayed bit for bit), or, for the reversed-K test kernel, passes the intervals but is caught
/// by the replay. One test per kernel, so that each fits a device call (all seven ran past
/// 470 s). Full runs: results/hopper-variants/device_run.sh.
fn certifies_exactly_on_a_hopper_gpu(name: &str) {
    let kernels = nvrtc_kernels();
    let kernel = kernels
        .iter()
        .find(|k| k.name() == name)
        .unwrap_or_else(|| panic!("{name} is not registered"));
    if let Err(reason) = kernel.availability() {
        panic!("this test needs a Hopper GPU: {reason}");
    }
    // The worker processes must be the real binary, not this test harness: the one under test,
    // unless NVFP4_ORACLE_WORKER already names one (on a GPU machine without Rust).
    common::oracle_as_worker();
    let limits = CampaignLimits {
        cases: 50,
        seed: 11,
        exact: true,
        ..CampaignLimits::default()
    };
    let result = certify_variant(kernel.as_ref(), limits, &[], |_, _| {});
    assert!(
        result.failure.is_none(),
        "{name} failed on {:?}",
        result.failure.map(|f| f.minimal.spec)
    );
    let exact = result.exact.expect("exact mode reports");
    assert!(exact.schedule.is_some(), "{name} declares a schedule");
    assert_eq!(
        exact.mismatch.is_some(),
        name == "hopper-test-reversed-k",
        "{name}: replay mismatch {:?}",
        exact.mismatch.map(|m| m.minimal)
    );
}

/// One `#[test]` per kernel of [`EXACT_ON_HOPPER`].
macro_rules! exact_on_hopper {
    ($($test:ident: $name:literal,)*) => {$(
        #[test]
        #[ignore = "needs a Hopper GPU: cargo test --release --test oracle gpu:: -- --include-ignored"]
        fn $test() {
            certifies_exactly_on_a_hopper_gpu($name);
        }
    )*};
}

exact_on_hopper! {
    hopper_baseline_certifies_exactly_on_a_hopper_gpu: "hopper-baseline",
    hopper_persistent_certifies_exactly_on_a_hopper_gpu: "hopper-persistent",
    hopper_warp_specialized_certifies_exactly_on_a_hopper_gpu: "hopper-warp-specialized",
    hopper_cluster_pair_certifies_exactly_on_a_hopper_gpu: "hopper-cluster-pair",
    hopper_splitk_pair_certifies_exactly_on_a_hopper_gpu: "hopper-splitk-pair",
    hopper_persistent_on_7_ctas_certifies_exactly_on_a_hopper_gpu: "hopper-test-persistent-7-ctas",
    hopper_reversed_k_is_caught_by_the_replay_on_a_hopper_gpu: "hopper-test-reversed-k",
}

/// The exact campaigns above cover every variant that is not a test kernel: a variant added to
/// the registry and not to [`EXACT_ON_HOPPER`] fails here, with no GPU.
#[test]
fn every_real_variant_has_an_exact_campaign_on_hopper() {
    let real: Vec<&str> = gpu_variants()
        .iter()
        .filter(|v| !v.test_kernel)
        .map(|v| v.name)
        .collect();
    for name in &real {
        assert!(EXACT_ON_HOPPER.contains(name), "{name} has no exact test");
    }
    let registered: Vec<&str> = gpu_variants().iter().map(|v| v.name).collect();
    for name in EXACT_ON_HOPPER {
        assert!(registered.contains(&name), "{name} is not registered");
    }
}

#[test]
fn compile_errors_name_the_kernel_file_and_line() {
    use nvfp4_harness::gpu::variants::{GpuVariant, SourceFile, SM90A};
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here");
        return;
    }
    let mut broken: GpuVariant = gpu_variants().remove(0);
    broken.name = "broken-for-test";
    broken.arch = SM90A;
    broken.sources = vec![SourceFile {
        path: "kernels/test/not_cuda.cu",
        text: "// fine\nthis is not CUDA;\n",
    }];
    let message = compile_variant(&broken).unwrap_err().to_string();
    assert!(message.contains("kernels/test/not_cuda.cu(2)"), "{message}");
}

#[test]
fn the_byte_comparison_compiles() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    let ptx = nvfp4_harness::gpu::pristine::compile().unwrap_or_else(|err| panic!("{err}"));
    assert!(
        ptx.to_src().contains("nvfp4_oracle_bytes_differ"),
        "entry missing"
    );
}

/// On a GPU: bytes copied up and back through the pinned halves are the bytes, for lengths on
/// either side of a half and past two, at an offset into device memory; a download waits for
/// the work enqueued before it; many uploads sharing the halves, on two streams, land whole.
#[test]
#[ignore = "needs a CUDA GPU: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn staged_copies_keep_every_byte() {
    use nvfp4_harness::gpu::fenced::FencedBuffer;
    use nvfp4_harness::gpu::staging::{Staging, HALF_BYTES};
    let Some((ctx, _)) = common::or_skip(nvfp4_harness::gpu::device::open_device(), "no GPU")
    else {
        return;
    };
    let stream = ctx.new_stream().unwrap();
    let mut staging = Staging::new(&ctx).unwrap();
    let longest = 2 * HALF_BYTES + 5;
    let device = FencedBuffer::canaries(&stream, longest + 3, false).unwrap();
    let base = device.body_ptr();
    for len in [
        0,
        1,
        4097,
        HALF_BYTES - 1,
        HALF_BYTES,
        HALF_BYTES + 1,
        longest,
    ] {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        staging.upload(&stream, base + 3, &bytes).unwrap();
        let mut back = vec![0u8; len];
        staging.download(&stream, base + 3, &mut back).unwrap();
        assert!(back == bytes, "length {len}: the bytes came back changed");
    }

    // Many uploads of assorted lengths filling the halves one after another, on two streams in
    // turn (each stream's own half), their sources overwritten as soon as each returns; a
    // download on one stream while the other's uploads may still be running.
    let other = ctx.new_stream().unwrap();
    let mut expected = vec![0u8; longest];
    let mut at = 0usize;
    let mut piece = 0usize;
    while at < longest {
        let len = match piece % 7 {
            0 => 1,
            3 => 5 << 20,
            5 => 300_001,
            _ => 4096 * (piece % 13) + 17,
        }
        .min(longest - at);
        let mut bytes: Vec<u8> = (0..len).map(|i| (i * 13 + piece * 101) as u8).collect();
        expected[at..at + len].copy_from_slice(&bytes);
        let on = if piece % 2 == 0 { &stream } else { &other };
        staging.upload(on, base + at as u64, &bytes).unwrap();
        bytes.fill(0xEE);
        if piece == 46 {
            // This piece back at once, while the other stream's last upload (5 MB) may still be
            // reading their half: the download writes a half only after its copies have passed
            // (the final check finds theirs whole).
            let mut back = vec![0u8; len];
            staging
                .download(&stream, base + at as u64, &mut back)
                .unwrap();
            assert!(back == expected[at..at + len], "piece 46 came back changed");
        }
        at += len;
        piece += 1;
    }
    other.synchronize().unwrap();
    let mut back = vec![0u8; longest];
    staging.download(&stream, base, &mut back).unwrap();
    let first_wrong = back.iter().zip(&expected).position(|(a, b)| a != b);
    assert!(
        first_wrong.is_none(),
        "{piece} uploads on two streams: byte {first_wrong:?} came back changed"
    );
}

/// On a GPU: the fills made by copies from pinned patterns (`gpu/device_fill.rs`) leave every
/// byte of a fenced buffer's checked window as the buffer promises: canary bytes only; canaries
/// around an uploaded body; canaries around a body of poison longer than one pattern's copy,
/// and around one of an odd length (its last byte the canary's, as before the fill).
#[test]
#[ignore = "needs a CUDA GPU: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn fenced_fills_write_every_byte_they_promise() {
    use nvfp4_harness::gpu::fenced::{FencedBuffer, CANARY_BYTE};
    let Some((ctx, _)) = common::or_skip(nvfp4_harness::gpu::device::open_device(), "no GPU")
    else {
        return;
    };
    let stream = ctx.new_stream().unwrap();
    for len in [1usize, 255, 4096, (9 << 20) + 3] {
        let canaries = FencedBuffer::canaries(&stream, len, false).unwrap();
        stream.synchronize().unwrap();
        let window = canaries.download_window(&stream).unwrap();
        assert!(
            window.iter().all(|&b| b == CANARY_BYTE),
            "{len}: canary bytes only"
        );
        let body: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
        let uploaded = FencedBuffer::upload(&stream, &body).unwrap();
        assert!(
            uploaded.download_window(&stream).unwrap() == uploaded.expected_window(&body),
            "{len}: canaries around an uploaded body"
        );
        let count = len / 2;
        let poisoned = FencedBuffer::filled_u16(&stream, count, 0x7E01).unwrap();
        let mut poison: Vec<u8> = 0x7E01u16.to_le_bytes().repeat(count);
        assert!(
            poisoned.download_window(&stream).unwrap() == poisoned.expected_window(&poison),
            "{len}: canaries around {count} poison values"
        );
        // An odd body: the fill stops at its last whole value.
        let odd = FencedBuffer::canaries(&stream, 2 * count + 1, false).unwrap();
        odd.fill_body_u16(&stream, 0x7E01).unwrap();
        stream.synchronize().unwrap();
        poison.push(CANARY_BYTE);
        assert!(
            odd.download_window(&stream).unwrap() == odd.expected_window(&poison),
            "{len}: an odd body's last byte"
        );
    }
}

/// On a GPU: a device copy of a fenced body matches it, and a change of one byte anywhere (the
/// first, one inside a 16-byte word, the last of an odd length) is seen.
#[test]
#[ignore = "needs a CUDA GPU: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn a_device_copy_sees_one_changed_byte() {
    use nvfp4_harness::gpu::fenced::FencedBuffer;
    use nvfp4_harness::gpu::pristine::Pristine;
    let (ctx, _) = nvfp4_harness::gpu::device::open_device().expect("a GPU");
    let stream = ctx.default_stream();
    for len in [1usize, 16, 1000, (3 << 20) + 7] {
        let body: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let buffer = FencedBuffer::upload(&stream, &body).unwrap();
        let copy = Pristine::of(&stream, &buffer).unwrap();
        assert!(
            copy.matches(&stream, &buffer).unwrap(),
            "{len}: unchanged body"
        );
        let mut read = vec![0u8; len];
        copy.download_into(&stream, &mut read).unwrap();
        assert_eq!(read, body, "{len}: the copy's bytes");
        for at in [0, len / 2 + 5, len - 1] {
            let at = at.min(len - 1);
            let mut changed = body.clone();
            changed[at] ^= 0x40;
            buffer.write_body(&stream, &changed).unwrap();
            stream.synchronize().unwrap();
            assert!(
                !copy.matches(&stream, &buffer).unwrap(),
                "{len}: byte {at} changed"
            );
            buffer.write_body(&stream, &body).unwrap();
            stream.synchronize().unwrap();
            assert!(copy.matches(&stream, &buffer).unwrap(), "{len}: restored");
        }
    }
    eprintln!("device copies: every changed byte seen");
}

/// On a Hopper GPU: a large case run on shared device memory gives the output the same kernel
/// gives on files, bit for bit, and a kernel that writes past its output is caught there by the
/// parent's own canary check; the same on buffers made before the run, whose inputs' copies
/// give the GPU reference the CPU model's bits. Both kinds of large case: large inputs, and a
/// short K with a wide output (its inputs a few kilobytes).
#[test]
#[ignore = "needs a Hopper GPU: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn a_large_case_on_shared_memory_is_the_case_on_files() {
    use half::f16;
    use nvfp4_harness::gpu::exact_reference::GpuReference;
    use nvfp4_harness::gpu::shared_buffers::abi_operands;
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};
    use nvfp4_harness::worker::nvrtc::nvrtc_kernel;
    use nvfp4_harness::worker::shared_run::runs_shared;
    use nvfp4_model::model::bounds::KOrder;
    use nvfp4_model::model::problem_reference;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
    common::oracle_as_worker();
    // Outputs of a length that is no multiple of 256 bytes: a write just past one lands in the
    // canaries before the unmapped granule.
    for shape in [
        Shape::new(41, 4008, 2048, 2).unwrap(),
        Shape::new(1031, 2056, 64, 1).unwrap(),
    ] {
        let case = KernelCase::new(
            generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 5),
            Distribution::Full.blocked_padding_fill(),
        );
        assert!(runs_shared(&case), "{shape}: large enough to be shared");
        let shared = nvrtc_kernel(&variant("hopper-baseline"));
        if let Err(reason) = shared.availability() {
            panic!("this test needs a Hopper GPU: {reason}");
        }
        let on_files = nvrtc_kernel(&variant("hopper-baseline")).with_shared_runs(None);
        let run = |kernel: &dyn KernelUnderTest| {
            let mut output = vec![f16::ZERO; case.inputs.output_len()];
            kernel.run(&case, &mut output).map(|()| output)
        };
        let (a, b) = (run(&shared).unwrap(), run(&on_files).unwrap());
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{shape}: shared and file outputs differ"
        );
        assert!(
            a.iter().any(|x| x.to_bits() != 0),
            "{shape}: an output was written"
        );
        // Buffers made before the run (as a campaign's input makers make them): the run takes
        // them, once, and gives the same output; their inputs' copies give the GPU reference
        // the CPU model's bits without an upload of its own.
        shared.make_ready(&case);
        let copies = case
            .ready
            .pristine()
            .expect("buffers made ahead, with copies");
        let reference = GpuReference::new().expect("the GPU reference");
        // SAFETY: the copies hold the case's inputs, alive (held here) and never written.
        let on_device = unsafe {
            reference.dual_gemm_on_device(shape, abi_operands(&copies), KOrder::Contiguous)
        }
        .unwrap();
        let from_copies = reference.download(&on_device).unwrap();
        let model = problem_reference(&case.inputs, KOrder::Contiguous);
        assert!(
            from_copies.expected == model.expected
                && from_copies.lo == model.lo
                && from_copies.hi == model.hi,
            "{shape}: the reference from the copies is the CPU model's"
        );
        let ahead = run(&shared).unwrap();
        assert!(case.ready.take().is_none(), "{shape}: the run took them");
        assert!(
            ahead
                .iter()
                .zip(&a)
                .all(|(x, y)| x.to_bits() == y.to_bits()),
            "{shape}: a run on buffers made ahead differs"
        );
        let oob = nvrtc_kernel(&variant("hopper-test-oob-write"));
        for made_ahead in [false, true] {
            if made_ahead {
                oob.make_ready(&case);
                assert!(case.ready.pristine().is_some(), "{shape}: made ahead");
            }
            match run(&oob) {
                Err(KernelFailure::OutOfBounds(why)) => assert!(why.contains("canary"), "{why}"),
                other => panic!(
                    "{shape}: expected out of bounds (made ahead: {made_ahead}), got {:?}",
                    other.map(|_| ())
                ),
            }
        }
        eprintln!(
            "{shape}: shared run = files = on buffers made ahead, the reference from their \
             copies = the CPU model, out-of-bounds write caught"
        );
    }
}

/// On a Hopper GPU: a large case's output left on the device by a shared run (the parent's
/// private copy of it) holds the bytes the same run reads back and is judged on the device as
/// the read-back output is, passing and failing (against another case's reference). Where the
/// output cannot stay
/// (a kernel on files) it is read back into the buffer given; a kernel that writes past its
/// output is caught as before. Both output orders: the built-in variant's `[M][N][L]` and the
/// C ABI library's `[L][M][N]`.
#[test]
#[ignore = "needs a Hopper GPU and nvcc: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn an_output_kept_on_the_device_is_the_output_read_back() {
    use half::f16;
    use nvfp4_harness::gpu::exact_reference::GpuReference;
    use nvfp4_harness::kernels::manifest::Manifest;
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};
    use nvfp4_harness::worker::external::external_kernel;
    use nvfp4_harness::worker::nvrtc::nvrtc_kernel;
    use nvfp4_model::model::bounds::KOrder;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
    common::oracle_as_worker();
    let gpu = GpuReference::new().expect("the GPU reference");
    build_libraries();
    let library = Manifest::read(&common::repo_path(
        "examples/submissions/library/kernel.toml",
    ))
    .unwrap_or_else(|err| panic!("{err}"));
    let kernels: Vec<(&str, Box<dyn KernelUnderTest>)> = vec![
        (
            "hopper-baseline",
            Box::new(nvrtc_kernel(&variant("hopper-baseline"))),
        ),
        (
            "library",
            Box::new(external_kernel(&library).unwrap_or_else(|err| panic!("{err}"))),
        ),
    ];
    let shape = Shape::new(41, 4096, 2048, 3).unwrap();
    let case = KernelCase::new(
        generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 5),
        Distribution::Full.blocked_padding_fill(),
    );
    let elements = case.inputs.output_len();
    let on_device = gpu
        .reference_on_device(&case.inputs, KOrder::Contiguous)
        .unwrap()
        .expect("a dual GEMM");
    let other_inputs = generate_problem(ProblemKind::DualGemm, shape, Distribution::Full, 6);
    let other = gpu
        .reference_on_device(&other_inputs, KOrder::Contiguous)
        .unwrap()
        .expect("a dual GEMM");
    for (name, kernel) in &kernels {
        if let Err(reason) = kernel.availability() {
            panic!("this test needs a Hopper GPU: {reason}");
        }
        let mut read = vec![f16::ZERO; elements];
        kernel.run(&case, &mut read).unwrap();
        let mut empty = Vec::new();
        let kept = kernel
            .run_keeping_output(&case, &mut empty)
            .unwrap()
            .unwrap_or_else(|| panic!("{name}: a shared run keeps its output"));
        assert!(empty.is_empty(), "{name}: nothing read back");
        assert_eq!(kept.len(), elements);
        let kept_bits: Vec<u16> = kept
            .download()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect();
        let read_bits: Vec<u16> = read.iter().map(|x| x.to_bits()).collect();
        assert_eq!(kept_bits, read_bits, "{name}: kept and read back differ");
        assert!(
            read_bits.iter().any(|&x| x != 0),
            "{name}: an output was written"
        );
        let (ptr, lmn) = kept.device_ptr();
        assert_eq!(lmn, *name == "library", "{name}: the output's order");
        // SAFETY: the kept output holds the reference's element count, in this context.
        let there = unsafe { gpu.judge_on_device(&on_device, ptr, lmn) }.unwrap();
        let host = gpu.judge_host_output(&on_device, &read).unwrap();
        assert_eq!(there.failed, 0, "{name}: a correct output passes");
        assert_eq!(there.worst_tight_ulps, host.worst_tight_ulps, "{name}");
        // Judged against another case's reference, the kept output fails where, and as
        // often as, the output read back does.
        // SAFETY: as above.
        let there = unsafe { gpu.judge_on_device(&other, ptr, lmn) }.unwrap();
        let host = gpu.judge_host_output(&other, &read).unwrap();
        assert!(host.failed > 0, "{name}: another case's reference fails it");
        assert_eq!(
            (there.failed, there.first),
            (host.failed, host.first),
            "{name}"
        );
    }
    let on_files = nvrtc_kernel(&variant("hopper-baseline")).with_shared_runs(None);
    let mut output = Vec::new();
    assert!(on_files
        .run_keeping_output(&case, &mut output)
        .unwrap()
        .is_none());
    assert_eq!(output.len(), elements, "read back where it cannot stay");
    // An output of a length that is no multiple of 256 bytes: a write just past it lands in
    // the canaries before the unmapped granule (past an aligned one it faults).
    let odd = KernelCase::new(
        generate_problem(
            ProblemKind::DualGemm,
            Shape::new(41, 4008, 2048, 2).unwrap(),
            Distribution::Full,
            5,
        ),
        Distribution::Full.blocked_padding_fill(),
    );
    let mut empty = Vec::new();
    match nvrtc_kernel(&variant("hopper-test-oob-write")).run_keeping_output(&odd, &mut empty) {
        Err(KernelFailure::OutOfBounds(why)) => assert!(why.contains("canary"), "{why}"),
        other => panic!("expected out of bounds, got {:?}", other.map(|_| ())),
    }
    eprintln!("kept outputs: {elements} elements, both orders, as read back");
}

/// On a Hopper GPU with nvcc: the hostile libraries of `tests/exploits/library/` on one large
/// case each (run on shared memory, checked by the parent): the one that changes an input is
/// told so, the one that computes on a side stream after its call returned never passes.
#[test]
#[ignore = "needs a Hopper GPU and nvcc: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn a_hostile_library_on_shared_memory_is_caught() {
    use half::f16;
    use nvfp4_harness::kernels::manifest::Manifest;
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};
    use nvfp4_harness::worker::external::external_kernel;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
    common::oracle_as_worker();
    build_libraries();
    let kernel = |manifest: &str| {
        let manifest =
            Manifest::read(&common::repo_path(manifest)).unwrap_or_else(|err| panic!("{err}"));
        external_kernel(&manifest).unwrap_or_else(|err| panic!("{err}"))
    };
    let shape = Shape::new(64, 4096, 4096, 1).unwrap();
    let case = KernelCase::new(
        generate_problem(ProblemKind::DualGemm, shape, Distribution::Gpumode, 3),
        Distribution::Gpumode.blocked_padding_fill(),
    );
    assert!(nvfp4_harness::worker::shared_run::runs_shared(&case));
    let run = |kernel: &dyn KernelUnderTest| {
        let mut output = vec![f16::ZERO; 64 * 4096];
        kernel.run(&case, &mut output).map(|()| output)
    };
    let honest = run(&kernel("examples/submissions/library/kernel.toml")).expect("honest runs");
    match run(&kernel("tests/exploits/library/modify_input.toml")) {
        Err(KernelFailure::ModifiedInputs(why)) => {
            assert!(why.contains("input b2: its contents changed"), "{why}")
        }
        other => panic!("expected modified inputs, got {:?}", other.map(|_| ())),
    }
    match run(&kernel("tests/exploits/library/side_stream.toml")) {
        Ok(output) => assert!(
            output
                .iter()
                .zip(&honest)
                .any(|(a, b)| a.to_bits() != b.to_bits()),
            "a side stream's late output was read as the answer"
        ),
        Err(failure) => eprintln!("side stream: {failure:?}"),
    }
}

/// On a GPU: a dual GEMM's batch made on the device holds the CPU's bytes in every slot (the
/// output poisoned), and the judge on the device counts, slot by slot, the elements the CPU
/// model's judge finds wrong: an honest output (0), one element off, the poison left, and a
/// kernel that zeroed its input `a` and answered for zeros (its inputs' reference would accept
/// that: the judge's own copy of the inputs does not).
#[test]
#[ignore = "needs a CUDA GPU: cargo test --release --test oracle gpu:: -- --include-ignored"]
fn a_batch_made_and_judged_on_the_device_is_the_hosts() {
    use half::f16;
    use nvfp4_harness::bench::batch_inputs::{BatchInputs, DeviceInputs, WrongCall};
    use nvfp4_harness::bench::batch_memory::BatchMemory;
    use nvfp4_harness::gpu::exact_reference::GpuReference;
    use nvfp4_harness::kernels::KernelCase;
    use nvfp4_harness::worker::shared_inputs::device_tensors;
    use nvfp4_model::compare::{judge, OutputShape};
    use nvfp4_model::model::bounds::KOrder;
    use nvfp4_model::model::problem_reference;
    use nvfp4_model::problem::generate::generate_dual_gemm;
    use nvfp4_model::problem::{Distribution, ProblemInputs, Shape};
    const SLOTS: usize = 4;
    let reference = GpuReference::new().expect("the GPU reference");
    // L > 1: the output's [L][M][N] storage against the reference's [M][N][L].
    for (m, n, k, l) in [(128, 256, 512, 1), (40, 72, 96, 3)] {
        let shape = Shape::new(m, n, k, l).unwrap();
        let case_of =
            |seed| KernelCase::new(generate_dual_gemm(shape, Distribution::Gpumode, seed), 0);
        let memory = BatchMemory::new(&case_of(0), SLOTS).unwrap();
        let seed = |b: usize, i: usize| 1000 + (b * SLOTS + i) as u64;
        let mut inputs = DeviceInputs::new(&memory, &reference, shape, seed).unwrap();
        let output_tensor = device_tensors(&case_of(0)).unwrap().len() - 1;
        let lmn = |mnl: &[f16]| {
            let mut out = vec![0u8; mnl.len() * 2];
            for (i, value) in mnl.iter().enumerate() {
                let (mm, nn, ll) = (i / (n * l), (i / l) % n, i % l);
                let at = (ll * m + mm) * n + nn;
                out[2 * at..2 * at + 2].copy_from_slice(&value.to_bits().to_le_bytes());
            }
            out
        };
        for b in 0..2 {
            inputs.fill(b).unwrap();
            let mut host_failed = Vec::new();
            for slot in 0..SLOTS {
                let case = case_of(seed(b, slot));
                for (tensor, (key, bytes)) in device_tensors(&case).unwrap().iter().enumerate() {
                    assert!(
                        memory.read_slot(tensor, slot).unwrap() == *bytes,
                        "{shape} batch {b} slot {slot}: {key} is not the CPU's"
                    );
                }
                let ProblemInputs::DualGemm(dual) = &case.inputs else {
                    unreachable!()
                };
                let truth = problem_reference(&case.inputs, KOrder::Contiguous);
                let mut answer = truth.expected.clone();
                match slot {
                    0 => {}
                    // NaN where no NaN scale contributed (GPU MODE's inputs have none).
                    1 => {
                        let middle = answer.len() / 2;
                        answer[middle] = f16::NAN;
                    }
                    2 => answer = vec![nvfp4_model::problem::POISON; answer.len()],
                    _ => {
                        // The kernel zeroes its `a` and answers for the zeroed inputs.
                        let mut zeroed = dual.clone();
                        let a_tensor = 0;
                        let zeros = vec![0u8; memory.read_slot(a_tensor, slot).unwrap().len()];
                        memory.write_slot(a_tensor, slot, &zeros).unwrap();
                        zeroed.a = nvfp4_model::problem::BlockScaledMatrix::new(
                            "a",
                            m,
                            k,
                            l,
                            zeros,
                            zeroed.a.scales().to_vec(),
                        )
                        .unwrap();
                        answer =
                            problem_reference(&ProblemInputs::DualGemm(zeroed), KOrder::Contiguous)
                                .expected;
                    }
                }
                if slot != 2 {
                    memory
                        .write_slot(output_tensor, slot, &lmn(&answer))
                        .unwrap();
                }
                let verdict = judge(
                    OutputShape { m, n, l },
                    &answer,
                    &truth.expected,
                    &truth.lo,
                    &truth.hi,
                );
                host_failed.push(verdict.failed);
            }
            assert_eq!(host_failed[0], 0, "{shape}: the honest answer passes");
            assert_eq!(host_failed[1], 1, "{shape}: one element off");
            assert_eq!(host_failed[2], m * n * l, "{shape}: the poison left");
            assert!(
                host_failed[3] > 0,
                "{shape}: the zeroed input's answer is wrong"
            );
            let expected: Vec<WrongCall> = (0..SLOTS)
                .filter(|&slot| host_failed[slot] > 0)
                .map(|slot| WrongCall {
                    batch: b,
                    slot,
                    elements: host_failed[slot],
                })
                .collect();
            assert_eq!(
                inputs.judge(b).unwrap(),
                expected,
                "{shape} batch {b}: the device's judge against the host's"
            );
        }
    }
}

/// The registered built-in variant `name`.
fn variant(name: &str) -> nvfp4_harness::gpu::variants::GpuVariant {
    gpu_variants()
        .into_iter()
        .find(|v| v.name == name)
        .expect("registered")
}

/// The example and hostile C ABI libraries built with nvcc (`examples/submissions/library/build.sh`).
fn build_libraries() {
    let built = std::process::Command::new("bash")
        .arg(common::repo_path("examples/submissions/library/build.sh"))
        .status()
        .expect("bash runs");
    assert!(built.success(), "building the libraries needs nvcc");
}
