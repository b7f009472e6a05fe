//! Prints acceptance-interval width statistics (fp16 ulps) per distribution and shape, for
//! docs/reference/numerics.md. Run: `cargo run --release --example interval_widths`.

use nvfp4_model::model::bounds::{width_ulps, KOrder};
use nvfp4_model::model::dual_gemm_reference;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};

fn main() {
    println!("| K order | distribution | shape | elements | median | p90 | p99 | max | NaN required | inf expected |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let shapes = ["256x512x256", "128x512x1536", "128x256x7168"];
    for order in KOrder::ALL {
        for dist in Distribution::ALL {
            for shape in shapes {
                let shape: Shape = shape.parse().expect("valid shape");
                let reference = dual_gemm_reference(&generate_dual_gemm(shape, dist, 1), order);
                let mut widths: Vec<u32> = reference
                    .lo
                    .iter()
                    .zip(&reference.hi)
                    .filter_map(|(&lo, &hi)| width_ulps(lo, hi))
                    .collect();
                let nan = reference.len() - widths.len();
                widths.sort_unstable();
                let at = |q: f64| {
                    widths
                        .get(((widths.len() as f64 - 1.0) * q) as usize)
                        .copied()
                        .unwrap_or(0)
                };
                println!(
                    "| {} | {} | {shape} | {} | {} | {} | {} | {} | {nan} | {} |",
                    order.name(),
                    dist.name(),
                    reference.len(),
                    at(0.5),
                    at(0.9),
                    at(0.99),
                    widths.last().copied().unwrap_or(0),
                    reference
                        .expected
                        .iter()
                        .filter(|x| x.is_infinite())
                        .count()
                );
            }
        }
    }
}
