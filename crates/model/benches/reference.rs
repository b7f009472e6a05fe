//! Speed of the exact model. `cargo bench -p nvfp4-model --bench reference` times the largest competition
//! benchmark shape (512x4096x7168 dual GEMM, both GEMMs, intervals included) and a small one.

use criterion::{criterion_group, criterion_main, Criterion};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::dual_gemm_reference;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{Distribution, Shape};
use std::time::Duration;

fn dual_gemm(c: &mut Criterion) {
    let mut group = c.benchmark_group("dual_gemm_reference");
    group.sample_size(10).warm_up_time(Duration::from_secs(1));
    for shape in ["256x512x256", "512x4096x7168"] {
        let inputs =
            generate_dual_gemm(shape.parse::<Shape>().unwrap(), Distribution::Gpumode, 1111);
        group.measurement_time(Duration::from_secs(if shape.starts_with("512x4096") {
            120
        } else {
            5
        }));
        group.bench_function(shape, |b| {
            b.iter(|| dual_gemm_reference(&inputs, KOrder::Contiguous))
        });
    }
    group.finish();
}

criterion_group!(benches, dual_gemm);
criterion_main!(benches);
