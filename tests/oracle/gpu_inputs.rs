//! The GPU's case generator (crates/harness/kernels/harness/input_generator_kernel.cu, loaded by
//! `nvfp4_harness::gpu::input_generator`) against the CPU generator, which stays the definition.
//! Its host pieces and its compilation need no GPU, nor do its kernels' arithmetic, run on the
//! host as C++ with one thread (input_generator_on_the_host.cpp beside this file) where a C++
//! compiler is found; the comparison on the GPU is `#[ignore]`d and run on the GPU machine:
//!
//!     cargo test --release --test oracle gpu_inputs:: -- --include-ignored --nocapture
//!
//! (results/gpu-inputs/ keeps a run's log).

use crate::common;
use nvfp4_harness::gpu::compile::nvrtc_present;
use nvfp4_harness::gpu::fenced::FencedBuffer;
use nvfp4_harness::gpu::input_generator::{
    abi_input_lens, compile_uncached, k_block_words, operand_draws, unit_scale_thresholds,
    DeviceBytes, InputGenerator, OperandDraw, OperandRole,
};
use nvfp4_harness::kernels::KernelCase;
use nvfp4_model::formats::{E4m3, E4m3Overflow};
use nvfp4_model::problem::generate::{dual_gemm_draws, generate_dual_gemm};
use nvfp4_model::problem::{Distribution, Shape};
use std::time::Instant;

/// The shapes compared: tiny, unaligned, batched, K = 16 with many batches.
const SHAPES: [(usize, usize, usize, usize); 6] = [
    (1, 1, 16, 1),
    (129, 200, 272, 1),
    (200, 130, 96, 2),
    (3, 300, 1024, 4),
    (37, 45, 16, 600),
    (128, 256, 7168, 1),
];
/// The large shape, compared and timed.
const LARGE: (usize, usize, usize, usize) = (2048, 4096, 7168, 1);
/// u64::MAX: the sign-bit rows of adversarial-nan wrap `row + seed`.
const SEEDS: [u64; 3] = [1111, 7, u64::MAX];

fn shape((m, n, k, l): (usize, usize, usize, usize)) -> Shape {
    Shape::new(m, n, k, l).unwrap()
}

#[test]
fn the_input_generator_compiles_for_sm_90() {
    if !nvrtc_present() {
        common::skip("NVRTC (libnvrtc.so) cannot be loaded here; .ci/run installs it from PyPI");
        return;
    }
    let ptx = compile_uncached("sm_90")
        .unwrap_or_else(|err| panic!("{err}"))
        .to_src();
    for entry in [
        "nvfp4_oracle_generate_rows",
        "nvfp4_oracle_generate_row_tails",
    ] {
        assert!(ptx.contains(entry), "{entry} missing");
    }
}

/// The gpumode scale's thresholds give the model's rounding for every one of the 2^24 draws.
#[test]
fn unit_scale_thresholds_round_every_draw_as_the_model() {
    let thresholds = unit_scale_thresholds();
    assert!(thresholds.windows(2).all(|w| w[0] <= w[1]));
    for draw in 0..1u32 << 24 {
        let unit = draw as f32 * (1.0 / 16_777_216.0);
        let model = E4m3::from_f32_rne(unit, E4m3Overflow::Saturate).to_bits();
        let code = thresholds.partition_point(|&t| t <= draw);
        assert_eq!(code, usize::from(model), "draw {draw}");
    }
}

/// What the kernels take from the host, against the CPU generator's own draws: each row's
/// length is its K-blocks' words (k_block_words) plus a tail the kernels can walk, and the
/// tensors' lengths are the CPU case's.
#[test]
fn host_pieces_agree_with_the_cpu_generators_draws() {
    for dist in Distribution::ALL {
        for &(m, n, k, l) in &SHAPES[..5] {
            let shape = shape((m, n, k, l));
            for seed in SEEDS {
                let draws = dual_gemm_draws(shape, dist, seed).unwrap();
                let (row_bytes, blocks) = ((k / 2) as u128, (k / 16) as u128);
                for (operand, starts) in draws.row_starts.iter().enumerate() {
                    let role = if operand == 0 {
                        OperandRole::A
                    } else {
                        OperandRole::B
                    };
                    let rows = if operand == 0 { m } else { n };
                    assert_eq!(starts.len(), rows * l + 1);
                    let (block_words, plan_words) = k_block_words(&draws.k_blocks, role);
                    assert_eq!(block_words.len(), k / 16);
                    let plan_words = u128::from(plan_words);
                    for pair in starts.windows(2) {
                        let length = pair[1] - pair[0];
                        let fits = match dist {
                            Distribution::Gpumode => length == row_bytes + blocks,
                            Distribution::Full => {
                                length == row_bytes + 1 + blocks
                                    || length == row_bytes + 1 + 2 * blocks
                            }
                            _ => {
                                // A: a maximal block (1 or 2 + 8 words) and a kept block (1 or
                                // 2); adversarial-nan: a NaN scale (1 or 2).
                                let tail = length - plan_words;
                                let a_tails = [2, 3, 11, 12];
                                match (role, dist) {
                                    (OperandRole::A, Distribution::Adversarial) => {
                                        a_tails.contains(&tail)
                                    }
                                    (OperandRole::A, _) => {
                                        a_tails.iter().any(|&a| tail == a + 1 || tail == a + 2)
                                    }
                                    (OperandRole::B, Distribution::Adversarial) => tail == 0,
                                    (OperandRole::B, _) => tail == 1 || tail == 2,
                                }
                            }
                        };
                        assert!(
                            fits,
                            "{} {shape} seed {seed}: a row of {length} words",
                            dist.name()
                        );
                    }
                }
                if seed == SEEDS[0] {
                    let case = KernelCase::new(
                        generate_dual_gemm(shape, dist, seed),
                        dist.blocked_padding_fill(),
                    );
                    let lens = case
                        .dual()
                        .unwrap()
                        .abi_inputs()
                        .map(|(_, bytes)| bytes.len());
                    assert_eq!(abi_input_lens(shape), lens, "{shape}");
                }
            }
        }
    }
    assert_eq!(
        dual_gemm_draws(shape(SHAPES[1]), Distribution::Stagnation, 1),
        None
    );
}

const KERNEL_SOURCE: &str =
    include_str!("../../crates/harness/kernels/harness/input_generator_kernel.cu");
const HOST_DRIVER_SOURCE: &str = include_str!("input_generator_on_the_host.cpp");

/// The shapes the kernels run on the host for: each under a second single-threaded.
const HOST_SHAPES: [(usize, usize, usize, usize); 5] = [
    (1, 1, 16, 1),
    (129, 200, 272, 1),
    (200, 130, 96, 2),
    (3, 300, 1024, 4),
    (37, 45, 16, 60),
];

/// The kernels' own code, compiled as C++ and run on the host with one thread
/// (input_generator_on_the_host.cpp), given what the loader gives them ([`operand_draws`]),
/// makes the CPU case's nine tensors byte for byte: every distribution drawn row by row, at
/// tiny, unaligned, batched and K = 16 shapes, seeds whose sign-bit rows do and do not wrap.
/// What it cannot see is the GPU itself: the launch, its arguments and the CUDA compiler.
#[test]
fn the_kernels_run_on_the_host_make_the_cpus_bytes() {
    let dir = std::env::temp_dir().join(format!("nvfp4-input-generator-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The sources this binary was built from, so that a carried test binary checks its own.
    let driver_source = dir.join("input_generator_on_the_host.cpp");
    std::fs::write(&driver_source, HOST_DRIVER_SOURCE).unwrap();
    std::fs::write(dir.join("input_generator_kernel.cu"), KERNEL_SOURCE).unwrap();
    let driver = dir.join("input_generator_on_the_host");
    let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".to_string());
    let built = std::process::Command::new(&compiler)
        .args(["-O2", "-std=c++17", "-o"])
        .arg(&driver)
        .arg("-I")
        .arg(&dir)
        .arg(&driver_source)
        .output();
    match built {
        Err(err) => {
            common::skip(&format!("no C++ compiler ({compiler}): {err}"));
            return;
        }
        Ok(out) => assert!(
            out.status.success(),
            "the kernels do not compile as C++:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
    for dist in Distribution::ALL {
        for &dims in &HOST_SHAPES {
            for seed in [SEEDS[0], SEEDS[2]] {
                let shape = shape(dims);
                let case = KernelCase::new(
                    generate_dual_gemm(shape, dist, seed),
                    dist.blocked_padding_fill(),
                );
                let cpu = case.dual().unwrap().abi_inputs();
                let draws = operand_draws(shape, dist, seed).unwrap();
                for (operand, draw) in draws.iter().enumerate() {
                    let made = run_on_the_host(&driver, &dir, draw);
                    assert_eq!(
                        made.mismatch,
                        0,
                        "{} {shape} seed {seed}: a row tail broke the chain",
                        dist.name()
                    );
                    for ((name, cpu), host) in [
                        (cpu[operand], &made.data),
                        (cpu[3 + operand], &made.blocked),
                        (cpu[6 + operand], &made.plain),
                    ] {
                        assert_eq!(host.len(), cpu.len(), "{name}: length");
                        if let Some(at) = (0..cpu.len()).find(|&i| host[i] != cpu[i]) {
                            panic!(
                                "{} {shape} seed {seed}: {name}[{at}]: kernels {:#04x}, cpu {:#04x}",
                                dist.name(),
                                host[at],
                                cpu[at]
                            );
                        }
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// One operand's tensors made by the kernels on the host.
struct MadeOnTheHost {
    data: Vec<u8>,
    plain: Vec<u8>,
    blocked: Vec<u8>,
    mismatch: u8,
}

fn run_on_the_host(
    driver: &std::path::Path,
    dir: &std::path::Path,
    draw: &OperandDraw,
) -> MadeOnTheHost {
    let params = format!(
        "{} {} {} {} {} {} {} {} {} {}\n",
        draw.seed,
        draw.stream_id,
        draw.distribution,
        draw.role,
        draw.rows,
        draw.batches,
        draw.blocks,
        draw.segment_blocks,
        draw.plan_words,
        draw.padding_fill
    );
    std::fs::write(dir.join("params"), params).unwrap();
    let le = |words: &[u64], bytes: usize| -> Vec<u8> {
        words
            .iter()
            .flat_map(|w| w.to_le_bytes()[..bytes].to_vec())
            .collect()
    };
    std::fs::write(dir.join("starts"), le(&draw.starts, 8)).unwrap();
    std::fs::write(dir.join("modes"), &draw.modes).unwrap();
    let block_words: Vec<u64> = draw.block_words.iter().map(|&w| u64::from(w)).collect();
    std::fs::write(dir.join("block_words"), le(&block_words, 4)).unwrap();
    let thresholds: Vec<u64> = unit_scale_thresholds()
        .iter()
        .map(|&t| u64::from(t))
        .collect();
    std::fs::write(dir.join("thresholds"), le(&thresholds, 4)).unwrap();
    let out = std::process::Command::new(driver)
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    MadeOnTheHost {
        data: read("data"),
        plain: read("plain"),
        blocked: read("blocked"),
        mismatch: read("mismatch")[0],
    }
}

/// The GPU's nine tensors equal the CPU case's byte for byte, for every distribution drawn row
/// by row, at every shape of [`SHAPES`], [`LARGE`] and each seed; written into fenced buffers,
/// whose canaries must stay intact. Times the generation on both for the large shape and the
/// K = 16 shape of many batches (whose host row starts are the GPU path's longest serial part).
#[test]
#[ignore = "needs a GPU"]
fn gpu_inputs_equal_the_cpus_byte_for_byte() {
    let Some((ctx, info)) = common::or_skip(nvfp4_harness::gpu::device::open_device(), "no GPU")
    else {
        return;
    };
    println!("device: {}", info.describe());
    let generator = InputGenerator::new(&ctx).unwrap_or_else(|err| panic!("{err}"));
    let stream = ctx.new_stream().unwrap();
    let mut failures = Vec::new();
    for dist in Distribution::ALL {
        for (index, &dims) in SHAPES.iter().chain([&LARGE]).enumerate() {
            let shape = shape(dims);
            let large = index == SHAPES.len();
            // The large shape with one seed.
            let seeds = if large { &SEEDS[..1] } else { &SEEDS[..] };
            for &seed in seeds {
                let buffers: Vec<FencedBuffer> = abi_input_lens(shape)
                    .iter()
                    .map(|&len| FencedBuffer::canaries(&stream, len, false).unwrap())
                    .collect();
                let outputs: [DeviceBytes; 9] = std::array::from_fn(|i| DeviceBytes {
                    ptr: buffers[i].body_ptr(),
                    len: buffers[i].body_len(),
                });
                let started = Instant::now();
                // SAFETY: nine distinct fenced buffers of the stream's context, of their bodies'
                // lengths, used by nothing else.
                unsafe { generator.generate_dual_gemm(&stream, shape, dist, seed, outputs) }
                    .unwrap_or_else(|err| panic!("{} {shape} seed {seed}: {err}", dist.name()));
                let gpu_seconds = started.elapsed().as_secs_f64();
                let started = Instant::now();
                let case = KernelCase::new(
                    generate_dual_gemm(shape, dist, seed),
                    dist.blocked_padding_fill(),
                );
                let cpu_seconds = started.elapsed().as_secs_f64();
                let dual = case.dual().unwrap();
                let mut differs = Vec::new();
                for ((name, cpu), buffer) in dual.abi_inputs().iter().zip(&buffers) {
                    let gpu = buffer.download_body(&stream).unwrap();
                    if let Some(at) = (0..cpu.len()).find(|&i| gpu[i] != cpu[i]) {
                        differs.push(format!(
                            "{name}[{at}]: gpu {:#04x}, cpu {:#04x}",
                            gpu[at], cpu[at]
                        ));
                    }
                    if let Some(where_) = buffer.canaries_overwritten(&stream).unwrap() {
                        differs.push(format!("{name}: canaries overwritten {where_}"));
                    }
                }
                let line = format!("{} {shape} seed {seed}", dist.name());
                if differs.is_empty() {
                    println!("same bytes: {line}");
                } else {
                    println!("DIFFERENT: {line}: {}", differs.join("; "));
                    failures.push(line.clone());
                }
                if (large || dims == SHAPES[4]) && seed == SEEDS[0] {
                    println!(
                        "time {line}: gpu {:.1} ms (host row starts included), cpu {:.1} ms \
                         (generate_dual_gemm + KernelCase::new, {} threads)",
                        gpu_seconds * 1e3,
                        cpu_seconds * 1e3,
                        rayon::current_num_threads()
                    );
                    // Again, the module and the GPU warm; then the host's part alone.
                    let started = Instant::now();
                    // SAFETY: as above.
                    unsafe { generator.generate_dual_gemm(&stream, shape, dist, seed, outputs) }
                        .unwrap();
                    let again = started.elapsed().as_secs_f64();
                    let started = Instant::now();
                    let _ = operand_draws(shape, dist, seed);
                    println!(
                        "time {line}: gpu again {:.1} ms, of which the host's row starts about {:.1} ms",
                        again * 1e3,
                        started.elapsed().as_secs_f64() * 1e3
                    );
                }
            }
        }
    }
    let outputs: [DeviceBytes; 9] = [DeviceBytes { ptr: 0, len: 0 }; 9];
    // SAFETY: refused before any buffer is touched.
    let refused = unsafe {
        generator.generate_dual_gemm(
            &stream,
            shape(SHAPES[1]),
            Distribution::Stagnation,
            1,
            outputs,
        )
    };
    let message = refused.expect_err("stagnation is refused").0;
    assert!(message.starts_with("not on the GPU"), "{message}");
    assert!(failures.is_empty(), "different bytes: {failures:?}");
}
