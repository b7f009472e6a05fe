//! The GPU kernel variants: each is CUDA source (one file, or the baseline plus a test kernel's
//! file), an entry point, the architecture it needs, its declared shape support, and its launch
//! configuration. One argument list for every dual-GEMM variant:
//! `(a, b1, b2, sfa_permuted, sfb1_permuted, sfb2_permuted, c, M, N, K, L)`.

use crate::certify::ShapeSupport;
use crate::problem::Shape;
use sha2::{Digest, Sha256};

/// A kernel source file, embedded so that the binary alone can run on a GPU machine.
#[derive(Debug, Clone, Copy)]
pub struct SourceFile {
    pub path: &'static str,
    pub text: &'static str,
}

const BASELINE: SourceFile = SourceFile {
    path: "kernels/hopper/baseline.cu",
    text: include_str!("../../kernels/hopper/baseline.cu"),
};
const TEST_OOB_WRITE: SourceFile = SourceFile {
    path: "kernels/test/oob_write.cu",
    text: include_str!("../../kernels/test/oob_write.cu"),
};
const TEST_MISSING_TILE: SourceFile = SourceFile {
    path: "kernels/test/missing_tile.cu",
    text: include_str!("../../kernels/test/missing_tile.cu"),
};
const TEST_SPIN: SourceFile = SourceFile {
    path: "kernels/test/spin.cu",
    text: include_str!("../../kernels/test/spin.cu"),
};

/// The compute capability a variant needs, exactly (the `a` targets are not forward compatible).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    pub major: i32,
    pub minor: i32,
    /// The NVRTC target, e.g. "sm_90a".
    pub target: &'static str,
}

pub const SM90A: Arch = Arch {
    major: 9,
    minor: 0,
    target: "sm_90a",
};

#[derive(Debug, Clone)]
pub struct GpuVariant {
    pub name: &'static str,
    pub description: &'static str,
    pub sources: Vec<SourceFile>,
    pub entry: &'static str,
    pub arch: Arch,
    pub support: ShapeSupport,
    /// Output tile (rows, columns) per CTA and threads per CTA: grid = (ceil(N/BN), ceil(M/BM), L).
    pub tile: (usize, usize),
    pub threads: u32,
    /// A deliberately broken kernel that exists to test the harness.
    pub test_kernel: bool,
}

impl GpuVariant {
    /// The sources concatenated, each introduced by a `#line` directive so that NVRTC's messages
    /// name the real file and line.
    pub fn source(&self) -> String {
        self.sources
            .iter()
            .map(|file| format!("#line 1 \"{}\"\n{}\n", file.path, file.text))
            .collect()
    }

    /// SHA-256 of the source and entry: certificates and the compile cache are keyed by it.
    pub fn source_hash(&self) -> String {
        format!(
            "{:x}",
            Sha256::digest(format!(
                "{}\n{}\n{}",
                self.entry,
                self.arch.target,
                self.source()
            ))
        )
    }

    /// (grid, block) for a shape.
    pub fn launch_dims(&self, shape: Shape) -> ((u32, u32, u32), (u32, u32, u32)) {
        let grid = (
            shape.n.div_ceil(self.tile.1) as u32,
            shape.m.div_ceil(self.tile.0) as u32,
            shape.l as u32,
        );
        (grid, (self.threads, 1, 1))
    }
}

const HOPPER_SUPPORT: ShapeSupport = ShapeSupport {
    m_multiple: 1,
    n_multiple: 1,
    k_multiple: 64,
    max_l: usize::MAX,
};

fn baseline_like(
    name: &'static str,
    description: &'static str,
    extra: Option<SourceFile>,
    entry: &'static str,
) -> GpuVariant {
    GpuVariant {
        name,
        description,
        sources: std::iter::once(BASELINE).chain(extra).collect(),
        entry,
        arch: SM90A,
        support: HOPPER_SUPPORT,
        tile: (128, 128),
        threads: 256,
        test_kernel: extra.is_some(),
    }
}

pub fn gpu_variants() -> Vec<GpuVariant> {
    vec![
        baseline_like(
            "hopper-baseline",
            "one CTA per 128x128 tile, one stage, mma.sync f16 with f32 accumulators, fused silu*mul",
            None,
            "nvfp4_dual_gemm",
        ),
        baseline_like("hopper-test-oob-write", "TEST: baseline that writes one element past the end of C", Some(TEST_OOB_WRITE), "nvfp4_dual_gemm_oob_write"),
        baseline_like("hopper-test-missing-tile", "TEST: baseline that never writes the last tile", Some(TEST_MISSING_TILE), "nvfp4_dual_gemm_missing_tile"),
        baseline_like("hopper-test-spin", "TEST: baseline that spins forever", Some(TEST_SPIN), "nvfp4_dual_gemm_spin"),
    ]
}
