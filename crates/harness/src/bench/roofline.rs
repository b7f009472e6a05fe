//! The least time any kernel can take for a problem on this GPU, from the two limits no kernel
//! passes: every input byte read from DRAM once and every output byte written once, at the
//! peak bandwidth the driver reports (the timed calls start with the L2 cache flushed, so the
//! bytes come from DRAM); and every product computed once, at the tensor cores' peak rate. A
//! reported time below that floor is not a fast kernel but a forged or misread clock
//! (a patched `cudaEventElapsedTime`, work done before the timed call): bench makes it a finding
//! whatever else passed.

use crate::gpu::device::DeviceInfo;
use nvfp4_model::problem::ProblemInputs;

/// The densest multiply-add rate of one SM per clock, in floating-point operations (one
/// multiply-add is two), of the architectures whose rate is known: Hopper's FP8 (and INT8) tensor
/// cores, 1979 TFLOPS dense on an H100 SXM (132 SMs at 1830 MHz). Hopper has no faster path for
/// FP4 operands. Where the rate is not listed, only the memory floor applies.
fn peak_flops_per_sm_clock(compute_capability: (i32, i32)) -> Option<f64> {
    match compute_capability {
        (9, 0) => Some(8192.0),
        _ => None,
    }
}

/// The bytes no kernel can avoid: every operand's FP4 data and one copy of its scales read,
/// the fp16 output written.
pub fn minimum_traffic_bytes(inputs: &ProblemInputs) -> f64 {
    let operands: usize = inputs
        .operands()
        .iter()
        .map(|(_, op)| op.data().len() + op.scales().len())
        .sum();
    (operands + 2 * inputs.output_len()) as f64
}

/// Multiply-add operations times two: the products the problem's GEMMs compute.
pub fn flops(inputs: &ProblemInputs) -> f64 {
    let gemm = |m: usize, n: usize, k: usize, l: usize| 2.0 * (m * n * k * l) as f64;
    match inputs {
        ProblemInputs::DualGemm(d) => 2.0 * gemm(d.shape.m, d.shape.n, d.shape.k, d.shape.l),
        ProblemInputs::Gemm(g) | ProblemInputs::Gemv(g) => {
            gemm(g.shape.m, g.shape.n, g.shape.k, g.shape.l)
        }
        ProblemInputs::GroupGemm(groups) => groups
            .groups
            .iter()
            .map(|g| gemm(g.shape.m, g.shape.n, g.shape.k, g.shape.l))
            .sum(),
    }
}

/// The floor and what sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Floor {
    pub us: f64,
    /// "moving 12.3 MB at 3352 GB/s", or "2.1 GFLOP at 1979 TFLOPS".
    pub reason: String,
}

/// The larger of the memory and compute floors this GPU's figures allow, if any.
pub fn floor(inputs: &ProblemInputs, device: &DeviceInfo) -> Option<Floor> {
    let memory = device.memory_bandwidth.map(|bandwidth| {
        let bytes = minimum_traffic_bytes(inputs);
        Floor {
            us: bytes / bandwidth * 1e6,
            reason: format!(
                "moving its {:.1} MB at the peak DRAM bandwidth of {:.0} GB/s",
                bytes / 1e6,
                bandwidth / 1e9
            ),
        }
    });
    let compute = peak_flops_per_sm_clock(device.compute_capability)
        .zip(device.sm_clock_mhz)
        .map(|(per_clock, mhz)| {
            let peak = per_clock * device.sm_count as f64 * mhz as f64 * 1e6;
            let work = flops(inputs);
            Floor {
                us: work / peak * 1e6,
                reason: format!(
                    "computing its {:.2} GFLOP at the tensor cores' peak of {:.0} TFLOPS",
                    work / 1e9,
                    peak / 1e12
                ),
            }
        });
    [memory, compute]
        .into_iter()
        .flatten()
        .max_by(|a, b| a.us.total_cmp(&b.us))
}

/// A finding when the median reported time is below the floor.
pub fn below_floor_finding(median_us: f64, floor: &Floor) -> Option<String> {
    (median_us < floor.us).then(|| {
        format!(
            "timing not trusted: the median of {median_us:.2} us is below the {:.2} us no kernel \
             can beat on this GPU ({}): the clock was forged or the work done outside the timed call",
            floor.us, floor.reason
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::problem::generate::{generate_problem, Distribution};
    use nvfp4_model::problem::{ProblemKind, Shape};

    fn h100() -> DeviceInfo {
        DeviceInfo {
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            memory_bytes: 80 << 30,
            driver: None,
            cuda: None,
            sm_clock_mhz: Some(1980),
            l2_bytes: 50 << 20,
            memory_bandwidth: Some(2.0 * 2_619_000e3 * 5120.0 / 8.0),
        }
    }

    #[test]
    fn the_floor_is_what_the_shape_must_move_or_compute() {
        let shape = Shape {
            m: 256,
            n: 3072,
            k: 4096,
            l: 1,
        };
        let inputs = generate_problem(ProblemKind::DualGemm, shape, Distribution::Gpumode, 1);
        // A, B1, B2 at half a byte per element, their e4m3 scales one per 16, c in fp16.
        let bytes = (256 + 2 * 3072) as f64 * 4096.0 * (0.5 + 1.0 / 16.0) + 2.0 * 256.0 * 3072.0;
        assert_eq!(minimum_traffic_bytes(&inputs), bytes);
        assert_eq!(flops(&inputs), 4.0 * 256.0 * 3072.0 * 4096.0);
        let floor = floor(&inputs, &h100()).expect("the H100's figures give a floor");
        // 15.97 MB at 3352 GB/s is 4.76 us; 12.9 GFLOP at 2141 TFLOPS is 6.0 us.
        assert!((floor.us - 6.02).abs() < 0.05, "{floor:?}");
        assert!(floor.reason.contains("TFLOPS"), "{floor:?}");
        assert_eq!(below_floor_finding(6.5, &floor), None);
        let finding = below_floor_finding(1.0, &floor).expect("a finding");
        assert!(finding.contains("below the 6.02 us"), "{finding}");
    }

    #[test]
    fn an_unknown_architecture_has_the_memory_floor_only() {
        let device = DeviceInfo {
            compute_capability: (12, 0),
            ..h100()
        };
        let inputs = generate_problem(
            ProblemKind::Gemv,
            Shape {
                m: 7168,
                n: 1,
                k: 16384,
                l: 1,
            },
            Distribution::Gpumode,
            1,
        );
        let floor = floor(&inputs, &device).expect("a memory floor");
        assert!(floor.reason.contains("DRAM"), "{floor:?}");
        let no_figures = DeviceInfo {
            memory_bandwidth: None,
            ..device
        };
        assert_eq!(super::floor(&inputs, &no_figures), None);
    }
}
