//! The exact reference's speed next to numpy's float32 dual GEMM of the same shapes, from one run
//! on one machine (results and discussion: docs/research/reference-speed.md). For each benchmark shape:
//! the median of `REPS` runs of the expected output alone (`dual_gemm_expected`) and of the full
//! reference with intervals (`dual_gemm_reference`), and the median of numpy's
//! `silu(A @ B1.T) * (A @ B2.T)` on float32 arrays (inputs made beforehand, not timed; numpy's
//! BLAS uses every core, as the reference does).
//!
//!     pip install numpy
//!     cargo run --release --example reference_speed [-- SHAPE ...]
//!
//! Without numpy the numpy column says so. Also prints which compiled copy of the dot grid ran.
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::exact_grid::Simd;
use nvfp4_model::model::reference::{dual_gemm_expected, dual_gemm_reference};
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};
use std::process::Command;
use std::time::Instant;

const REPS: usize = 5;
const SHAPES: [&str; 4] = [
    "256x4096x7168",
    "512x4096x7168",
    "256x3072x4096",
    "512x3072x7168",
];

const NUMPY: &str = r#"
import sys, time
import numpy as np
m, n, k = map(int, sys.argv[1].split("x"))
reps = int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.standard_normal((m, k), dtype=np.float32)
b1 = rng.standard_normal((n, k), dtype=np.float32)
b2 = rng.standard_normal((n, k), dtype=np.float32)
times = []
for _ in range(reps + 1):
    t = time.perf_counter()
    x1 = a @ b1.T
    x2 = a @ b2.T
    c = (x1 / (1 + np.exp(-x1)) * x2).astype(np.float16)
    times.append(time.perf_counter() - t)
print(sorted(times[1:])[reps // 2], np.__version__)
"#;

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn time<T>(f: impl Fn() -> T) -> f64 {
    median(
        (0..REPS)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

fn numpy(shape: &str) -> Result<(f64, String), String> {
    let out = Command::new("python3")
        .args(["-c", NUMPY, shape, &REPS.to_string()])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("failed").to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let seconds = words.next().and_then(|w| w.parse().ok()).ok_or("no time")?;
    Ok((seconds, words.next().unwrap_or("?").to_string()))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let shapes: Vec<&str> = if args.is_empty() {
        SHAPES.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    println!(
        "dot grid: {:?}, {} threads, median of {REPS} runs",
        Simd::detect(),
        rayon::current_num_threads()
    );
    println!("| shape | expected only (s) | with intervals (s) | numpy f32 (s) | ratio expected / numpy | ratio with intervals / numpy |");
    println!("|---|---|---|---|---|---|");
    let mut version = String::new();
    for shape in shapes {
        let parsed: Shape = shape.parse().expect("shape MxNxK");
        let inputs = generate_dual_gemm(parsed, Distribution::Gpumode, 1111);
        let expected = time(|| dual_gemm_expected(&inputs));
        let full = time(|| dual_gemm_reference(&inputs, KOrder::Contiguous));
        let (numpy_s, ratios) = match numpy(shape) {
            Ok((s, v)) => {
                version = v;
                (
                    format!("{s:.3}"),
                    format!("{:.2} | {:.2}", expected / s, full / s),
                )
            }
            Err(e) => (format!("unavailable ({e})"), "- | -".into()),
        };
        println!("| {shape} | {expected:.3} | {full:.3} | {numpy_s} | {ratios} |");
    }
    if !version.is_empty() {
        println!("numpy {version}");
    }
}
