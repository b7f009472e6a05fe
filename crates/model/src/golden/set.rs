//! The golden set: every competition test and benchmark shape of docs/reference/problem.md (dual GEMM and the
//! grouped-GEMM benchmark groups) in the gpumode and full distributions, and small cases each
//! built to expose one named bug.

use crate::compare::diagnosis::WrongProblem;
use crate::problem::{Distribution, ProblemKind, Shape};

/// Dual-GEMM test shapes (M, N, K) of the competition.
pub const DUAL_GEMM_TESTS: [(usize, usize, usize); 9] = [
    (1536, 512, 7168),
    (256, 512, 256),
    (3072, 1024, 1536),
    (7168, 1024, 256),
    (7168, 2304, 2048),
    (4608, 384, 7168),
    (7168, 384, 2304),
    (512, 768, 7168),
    (4096, 768, 512),
];

/// Dual-GEMM benchmark shapes.
pub const DUAL_GEMM_BENCHMARKS: [(usize, usize, usize); 4] = [
    (256, 4096, 7168),
    (512, 4096, 7168),
    (256, 3072, 4096),
    (512, 3072, 7168),
];

/// Grouped-GEMM benchmarks: (group M values, N, K). docs/reference/problem.md gives the M ranges; these M
/// values spread over them (multiples of 8, as the competition's).
pub const GROUP_GEMM_BENCHMARKS: [(&[usize], usize, usize); 4] = [
    (&[40, 72, 104, 136, 168, 200, 232, 248], 4096, 7168),
    (&[40, 64, 88, 112, 136, 160, 184, 196], 7168, 2048),
    (&[192, 320], 3072, 4096),
    (&[128, 384], 4096, 1536),
];

/// A bug an adversarial golden case must expose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoldenBug {
    /// A wrong problem of the diagnosis catalogue.
    Problem(WrongProblem),
    /// The last partial M tile is never written.
    MEdgeTileMissing,
    /// The last partial N tile is never written.
    NEdgeTileMissing,
    /// C written as [N, M] (square outputs).
    OutputTransposed,
}

impl GoldenBug {
    pub fn name(self) -> String {
        match self {
            GoldenBug::Problem(problem) => problem.name(),
            GoldenBug::MEdgeTileMissing => "m-edge-tile-missing".into(),
            GoldenBug::NEdgeTileMissing => "n-edge-tile-missing".into(),
            GoldenBug::OutputTransposed => "output-transposed".into(),
        }
    }
}

/// What a golden case is, before anything is computed.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseDefinition {
    pub name: String,
    pub problem: ProblemKind,
    /// One shape, or one per group (each with L = 1).
    pub shapes: Vec<Shape>,
    pub dist: Distribution,
    pub seed: u64,
    /// Stored whole (inputs and reference as safetensors) rather than as hashes and samples.
    pub stored_whole: bool,
    pub exposes: Option<GoldenBug>,
}

/// Cases up to this many output elements times K are stored whole.
const WHOLE_LIMIT: usize = 1 << 25;

fn shape(m: usize, n: usize, k: usize, l: usize) -> Shape {
    Shape::new(m, n, k, l).expect("golden shapes are valid")
}

pub fn golden_set() -> Vec<CaseDefinition> {
    let mut cases = Vec::new();
    for dist in [Distribution::Gpumode, Distribution::Full] {
        for (kind, list) in [
            ("test", &DUAL_GEMM_TESTS[..]),
            ("bench", &DUAL_GEMM_BENCHMARKS[..]),
        ] {
            for &(m, n, k) in list {
                cases.push(CaseDefinition {
                    name: format!("dual-gemm-{kind}-{m}x{n}x{k}-{}", dist.name()),
                    problem: ProblemKind::DualGemm,
                    shapes: vec![shape(m, n, k, 1)],
                    dist,
                    seed: 1111,
                    stored_whole: m * n * k <= WHOLE_LIMIT,
                    exposes: None,
                });
            }
        }
        for (g, &(ms, n, k)) in GROUP_GEMM_BENCHMARKS.iter().enumerate() {
            cases.push(CaseDefinition {
                name: format!("group-gemm-bench-{g}-g{}-{n}x{k}-{}", ms.len(), dist.name()),
                problem: ProblemKind::GroupGemm,
                shapes: ms.iter().map(|&m| shape(m, n, k, 1)).collect(),
                dist,
                seed: 1111,
                stored_whole: false,
                exposes: None,
            });
        }
    }
    for (bug, dims, dist) in adversarial_cases() {
        let (m, n, k, l) = dims;
        cases.push(CaseDefinition {
            name: format!("adversarial-{}", bug.name()),
            problem: ProblemKind::DualGemm,
            shapes: vec![shape(m, n, k, l)],
            dist,
            seed: 2024,
            stored_whole: true,
            exposes: Some(bug),
        });
    }
    cases
}

/// (M, N, K, L).
type Dims = (usize, usize, usize, usize);

/// One small case per bug, with the shape and distribution that make it show.
fn adversarial_cases() -> Vec<(GoldenBug, Dims, Distribution)> {
    use Distribution::*;
    use GoldenBug::*;
    use WrongProblem::*;
    vec![
        (Problem(GemmWithB1), (64, 48, 128, 1), Gpumode),
        (Problem(GemmWithB2), (64, 48, 128, 1), Gpumode),
        (Problem(SiluOnSecondGemm), (64, 48, 128, 1), Gpumode),
        (Problem(NoSilu), (64, 48, 128, 1), Gpumode),
        (Problem(SiluSignFlipped), (64, 48, 128, 1), Gpumode),
        (Problem(ScalesIgnored), (64, 48, 128, 1), Full),
        (Problem(ScaleAtomRowsSwapped), (128, 128, 128, 1), Gpumode),
        (Problem(ScaleAtomTransposed), (128, 128, 128, 1), Gpumode),
        (Problem(Fp16Accumulation), (64, 64, 1024, 1), Adversarial),
        (Problem(TruncatedOutput), (64, 64, 64, 1), Gpumode),
        (Problem(KTailDropped), (64, 48, 272, 1), Gpumode),
        (Problem(Fp4HighExponentBitIgnored), (64, 48, 128, 1), Full),
        (Problem(NanScalesIgnored), (64, 64, 256, 1), AdversarialNan),
        (Problem(SubnormalScalesFlushed), (64, 48, 256, 1), Full),
        (Problem(BatchIgnored), (32, 32, 128, 3), Gpumode),
        (Problem(ScalesOfAAndB1Swapped), (96, 96, 128, 1), Gpumode),
        (Problem(OverflowSaturated), (128, 64, 256, 1), Adversarial),
        (MEdgeTileMissing, (200, 64, 64, 1), Gpumode),
        (NEdgeTileMissing, (64, 200, 64, 1), Gpumode),
        (OutputTransposed, (80, 80, 128, 1), Gpumode),
    ]
}
