//! The GPU kernel variants: each is CUDA source (one file, or the baseline plus a test kernel's
//! file), an entry point, the architecture it needs, its declared shape support, and its launch
//! configuration. One argument list for every dual-GEMM variant:
//! `(a, b1, b2, sfa_permuted, sfb1_permuted, sfb2_permuted, c, M, N, K, L)`, followed by three
//! TMA tensor maps (A, B1, B2) for the variants that declare `tensor_maps`.

use crate::kernels::ShapeSupport;
use nvfp4_model::model::mma::schedule::{
    Schedule, HOPPER_F16_INCREASING_K, HOPPER_F16_SPLIT_HALVES,
};
use nvfp4_model::problem::Shape;
use sha2::{Digest, Sha256};

/// A kernel source file, embedded so that the binary alone can run on a GPU machine. The path is
/// the file's place in this crate's folder (`crates/harness/kernels/...` in the repository); it
/// is part of each variant's source hash, through the `#line` directives.
#[derive(Debug, Clone, Copy)]
pub struct SourceFile {
    pub path: &'static str,
    pub text: &'static str,
}

macro_rules! kernel_file {
    ($path:literal) => {
        SourceFile {
            path: $path,
            text: include_str!(concat!("../../", $path)),
        }
    };
}

const COMMON: SourceFile = kernel_file!("kernels/hopper/common.cuh");
const HOPPER_ASYNC: SourceFile = kernel_file!("kernels/hopper/hopper_async.cuh");
const BASELINE: SourceFile = kernel_file!("kernels/hopper/baseline.cu");
const PERSISTENT: SourceFile = kernel_file!("kernels/hopper/persistent.cu");
const WARP_SPECIALIZED: SourceFile = kernel_file!("kernels/hopper/warp_specialized.cu");
const CLUSTER_PAIR: SourceFile = kernel_file!("kernels/hopper/cluster_pair.cu");
const SPLITK_PAIR: SourceFile = kernel_file!("kernels/hopper/splitk_pair.cu");
const TEST_OOB_WRITE: SourceFile = kernel_file!("kernels/test/oob_write.cu");
const TEST_MISSING_TILE: SourceFile = kernel_file!("kernels/test/missing_tile.cu");
const TEST_SPIN: SourceFile = kernel_file!("kernels/test/spin.cu");
const TEST_REVERSED_K: SourceFile = kernel_file!("kernels/test/reversed_k.cu");
const TEST_RACE: SourceFile = kernel_file!("kernels/test/race_missing_barrier.cu");
const TEST_UNINIT_SHARED: SourceFile = kernel_file!("kernels/test/uninit_shared.cu");
const TEST_OOB_READ: SourceFile = kernel_file!("kernels/test/oob_read_unused.cu");

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

/// How many CTAs a launch has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grid {
    /// One CTA per output tile of (rows, columns): grid = (ceil(N/cols), ceil(M/rows), L), with
    /// grid.x rounded up to a multiple of `x_multiple` (the cluster size).
    OutputTiles {
        tile: (usize, usize),
        x_multiple: usize,
    },
    /// `splits` CTAs (one cluster) per output tile of (rows, columns): grid =
    /// (splits * ceil(N/cols), ceil(M/rows), L).
    SplitTiles { tile: (usize, usize), splits: usize },
    /// One CTA per SM; the kernel schedules the tiles itself.
    OneCtaPerSm,
    /// A fixed number of CTAs that schedule the tiles themselves (to test a persistent kernel's
    /// loop on shapes small enough to fuzz).
    FixedCtas(u32),
}

/// TMA tensor maps the launcher makes for A, B1 and B2 and appends to the argument list: each a
/// 3-D u8 map over (K/2 bytes, rows, L) with a box of (k_bytes, rows) and zero fill out of bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorMapBoxes {
    pub k_bytes: u32,
    pub a_rows: u32,
    pub b_rows: u32,
}

#[derive(Debug, Clone)]
pub struct GpuVariant {
    pub name: &'static str,
    pub description: &'static str,
    pub sources: Vec<SourceFile>,
    pub entry: &'static str,
    pub arch: Arch,
    pub support: ShapeSupport,
    pub grid: Grid,
    pub threads: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub dynamic_smem: u32,
    pub tensor_maps: Option<TensorMapBoxes>,
    /// The accumulation schedule it declares (`certify --exact` replays it).
    pub schedule: Option<Schedule>,
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

    /// (grid, block) for a shape on a GPU with `sm_count` SMs.
    pub fn launch_dims(&self, shape: Shape, sm_count: u32) -> ((u32, u32, u32), (u32, u32, u32)) {
        let grid = match self.grid {
            Grid::OutputTiles { tile, x_multiple } => (
                shape.n.div_ceil(tile.1).next_multiple_of(x_multiple) as u32,
                shape.m.div_ceil(tile.0) as u32,
                shape.l as u32,
            ),
            Grid::SplitTiles { tile, splits } => (
                (shape.n.div_ceil(tile.1) * splits) as u32,
                shape.m.div_ceil(tile.0) as u32,
                shape.l as u32,
            ),
            Grid::OneCtaPerSm => (sm_count.max(1), 1, 1),
            Grid::FixedCtas(ctas) => (ctas, 1, 1),
        };
        (grid, (self.threads, 1, 1))
    }
}

const HOPPER_SUPPORT: ShapeSupport = ShapeSupport {
    m_multiple: 1,
    n_multiple: 1,
    k_multiple: 64,
    max_l: usize::MAX,
};
/// The wgmma kernels load 128 k per stage.
const HOPPER_WGMMA_SUPPORT: ShapeSupport = ShapeSupport {
    k_multiple: 128,
    ..HOPPER_SUPPORT
};

/// The baseline's launch: 128x128 tiles, 256 threads, static shared memory.
fn baseline_like(
    name: &'static str,
    description: &'static str,
    extra: Option<SourceFile>,
    entry: &'static str,
) -> GpuVariant {
    GpuVariant {
        name,
        description,
        sources: [COMMON, BASELINE].into_iter().chain(extra).collect(),
        entry,
        arch: SM90A,
        support: HOPPER_SUPPORT,
        grid: Grid::OutputTiles {
            tile: (128, 128),
            x_multiple: 1,
        },
        threads: 256,
        dynamic_smem: 0,
        tensor_maps: None,
        schedule: Some(HOPPER_F16_INCREASING_K),
        test_kernel: extra.is_some(),
    }
}

/// Shared memory of the wgmma kernels (`WsShared` in warp_specialized.cu): 4 stages of
/// 3 x 8 KiB FP4 rows + 3 x 1 KiB scales, 2 decoded 32 KiB activation tiles, 8 mbarriers
/// (padded to 1 KiB by the struct's alignment), plus 1 KiB so the kernel can align the block.
const WS_SHARED_BYTES: u32 = 4 * (3 * 8192 + 3 * 1024) + 2 * 32768 + 1024 + 1024;

/// A kernel built on warp_specialized.cu (`extra`: its own file compiled after it), launched
/// on 128x128 output tiles with grid.x a multiple of `cluster`.
fn wgmma_kernel(
    name: &'static str,
    description: &'static str,
    extra: Option<SourceFile>,
    entry: &'static str,
    cluster: usize,
) -> GpuVariant {
    GpuVariant {
        name,
        description,
        sources: [COMMON, HOPPER_ASYNC, WARP_SPECIALIZED]
            .into_iter()
            .chain(extra)
            .collect(),
        entry,
        arch: SM90A,
        support: HOPPER_WGMMA_SUPPORT,
        grid: Grid::OutputTiles {
            tile: (128, 128),
            x_multiple: cluster,
        },
        threads: 384,
        dynamic_smem: WS_SHARED_BYTES,
        tensor_maps: Some(TensorMapBoxes {
            k_bytes: 64,
            a_rows: (128 / cluster) as u32,
            b_rows: 128,
        }),
        schedule: Some(HOPPER_F16_INCREASING_K),
        test_kernel: false,
    }
}

/// The warp-specialized kernel with K split over a 2-CTA cluster (one output tile per cluster).
fn splitk_pair() -> GpuVariant {
    let mut variant = wgmma_kernel(
        "hopper-splitk-pair",
        "two CTAs (a cluster) per tile, each the warp-specialized pipeline on one K half, reduced through DSMEM in a fixed order",
        Some(SPLITK_PAIR),
        "nvfp4_dual_gemm_splitk_pair",
        2,
    );
    variant.grid = Grid::SplitTiles {
        tile: (128, 128),
        splits: 2,
    };
    variant.support.k_multiple = 256;
    variant.tensor_maps = Some(TensorMapBoxes {
        k_bytes: 64,
        a_rows: 128,
        b_rows: 128,
    });
    variant.schedule = Some(HOPPER_F16_SPLIT_HALVES);
    variant
}

pub fn gpu_variants() -> Vec<GpuVariant> {
    let mut persistent = baseline_like(
        "hopper-persistent",
        "one CTA per SM looping over 128x128 tiles (round-robin, M tile fastest), the baseline's tile code",
        Some(PERSISTENT),
        "nvfp4_dual_gemm_persistent",
    );
    persistent.grid = Grid::OneCtaPerSm;
    persistent.test_kernel = false;
    // The persistent kernel on 7 CTAs: fuzzed shapes (up to 27 tiles) then give each CTA several
    // tiles and uneven remainders, which 132 CTAs never would.
    let mut persistent_7 = persistent.clone();
    persistent_7.name = "hopper-test-persistent-7-ctas";
    persistent_7.description =
        "TEST: the persistent kernel launched with 7 CTAs, so its tile loop runs on small shapes";
    persistent_7.grid = Grid::FixedCtas(7);
    persistent_7.test_kernel = true;
    let mut reversed_k = baseline_like(
        "hopper-test-reversed-k",
        "TEST: baseline with its K loop reversed (correct, but not the declared schedule)",
        Some(TEST_REVERSED_K),
        "nvfp4_dual_gemm_reversed_k",
    );
    reversed_k.test_kernel = true;
    vec![
        baseline_like(
            "hopper-baseline",
            "one CTA per 128x128 tile, one stage, mma.sync f16 with f32 accumulators, fused silu*mul",
            None,
            "nvfp4_dual_gemm",
        ),
        persistent,
        wgmma_kernel(
            "hopper-warp-specialized",
            "TMA producer warpgroup + 2 wgmma consumer warpgroups, 4-stage mbarrier ring, setmaxnreg, FP4 decoded in registers",
            None,
            "nvfp4_dual_gemm_warp_specialized",
            1,
        ),
        wgmma_kernel(
            "hopper-cluster-pair",
            "warp-specialized kernel in 2-CTA clusters sharing the activation tile by TMA multicast",
            Some(CLUSTER_PAIR),
            "nvfp4_dual_gemm_cluster_pair",
            2,
        ),
        splitk_pair(),
        baseline_like("hopper-test-oob-write", "TEST: baseline that writes one element past the end of C", Some(TEST_OOB_WRITE), "nvfp4_dual_gemm_oob_write"),
        baseline_like("hopper-test-missing-tile", "TEST: baseline that never writes the last tile", Some(TEST_MISSING_TILE), "nvfp4_dual_gemm_missing_tile"),
        baseline_like("hopper-test-spin", "TEST: baseline that spins forever", Some(TEST_SPIN), "nvfp4_dual_gemm_spin"),
        reversed_k,
        persistent_7,
        // Bugs outputs may not show: found by compute-sanitizer and by running cases
        // again with shared memory poisoned.
        baseline_like("hopper-test-race", "TEST: baseline without the barrier before a shared-memory slot is refilled (a race)", Some(TEST_RACE), "nvfp4_dual_gemm_race_missing_barrier"),
        baseline_like("hopper-test-uninit-shared", "TEST: baseline whose epilogue reads a shared-memory value it never initialized", Some(TEST_UNINIT_SHARED), "nvfp4_dual_gemm_uninit_shared"),
        baseline_like("hopper-test-oob-read", "TEST: baseline that reads 4 bytes past the end of A and never uses them", Some(TEST_OOB_READ), "nvfp4_dual_gemm_oob_read_unused"),
    ]
}
