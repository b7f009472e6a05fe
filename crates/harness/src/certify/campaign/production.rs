//! The shapes kernels really run at, in every campaign: the problem's benchmark shapes and the
//! competition's test shapes. The random cases stay small (hundreds of rows and columns, K up
//! to 768) so that a campaign of thousands of cases is quick; a kernel's deep-K, wide-N and
//! many-tile paths (a K loop past 4096, an epilogue past N = 2048, a persistent loop wrapping
//! past the SM count) only run here.
//!
//! A GPU kernel gets every shape in every distribution. A CPU kernel computes every output
//! element itself on a machine of a few cores, so it gets each shape once, at
//! [`CPU_ROWS`] rows of M (N, K and L as in the shape: the depth and width that reach those
//! paths), the distributions taken in turn; the certificate says so.
//!
//! Beside them, random large shapes drawn from the campaign's seed ([`large_cases`]): M and N
//! past 2048 (more than 2 x 132 output tiles), K past 4096, L up to 4, up to 8192 x 8192 x 16384
//! x 4, and on a GPU one case past 32-bit element offsets ([`INDEX_SHAPE`]); the model judges
//! the largest of them on sampled rows (crates/harness/src/certify/campaign/sampling.rs). A CPU kernel gets fewer of
//! them, thin as above and within [`CPU_LARGE_NKL`].

use super::cases::CaseSpec;
use super::coverage::Coverage;
use super::fixed_cases::{fitted, round_up};
use super::limits::CampaignLimits;
use super::models::model_cases;
use super::range_draw::range_cases;
use super::regime_draw::regime_cases;
use super::shape_ranges::Cell;
use crate::kernels::{KernelUnderTest, ShapeSupport};
use nvfp4_model::golden::set::{DUAL_GEMM_BENCHMARKS, DUAL_GEMM_TESTS};
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Rows of M a CPU kernel's production cases keep.
pub const CPU_ROWS: usize = 2;

/// The largest random shape: M, N, K, L.
pub const LARGE_MAX: (usize, usize, usize, usize) = (8192, 8192, 16384, 4);
/// The shape whose A has more elements than a signed 32-bit index reaches (4096 x 524,544 >
/// 2^31, over 1 GiB packed), run once by every GPU campaign among its large cases: a kernel that
/// computes element offsets in 32-bit integers wraps around here. N is kept to two 128-column
/// tiles (the random large cases are the wide ones) so that B1 and B2 stay small: the case's
/// cost is moving and generating A's gigabyte. With N = 2304 it took ~33 s of an H100 campaign.
pub const INDEX_SHAPE: (usize, usize, usize, usize) = (4096, 256, 524_544, 1);
/// Random large cases of a GPU kernel, per distribution, and of a CPU kernel in all.
pub const GPU_LARGE_PER_DISTRIBUTION: usize = 2;
pub const CPU_LARGE_CASES: usize = 2;
/// A CPU kernel's large cases keep N K L at most this (at [`CPU_ROWS`] rows, a fraction of a
/// second each on 2 cores): L is lowered, then K (not to 4096), then N (not to 2048), until it
/// fits.
pub const CPU_LARGE_NKL: usize = 1 << 24;

/// GEMM and GEMV shapes (M, N, K, L) the problem's benchmarks time (docs/reference/problem.md); their test
/// shapes are not recorded.
const GEMM_BENCHMARKS: [(usize, usize, usize, usize); 3] = [
    (128, 7168, 16384, 1),
    (128, 4096, 7168, 1),
    (128, 7168, 2048, 1),
];
const GEMV_BENCHMARKS: [(usize, usize, usize, usize); 3] =
    [(7168, 1, 16384, 1), (4096, 1, 7168, 8), (7168, 1, 2048, 4)];

/// The production shapes of `problem` (none for the grouped GEMM, whose campaign draws its
/// groups from one shape: its benchmark groups are in the golden set).
pub fn production_shapes(problem: ProblemKind) -> Vec<Shape> {
    let dims: Vec<(usize, usize, usize, usize)> = match problem {
        ProblemKind::DualGemm => DUAL_GEMM_BENCHMARKS
            .iter()
            .chain(DUAL_GEMM_TESTS.iter())
            .map(|&(m, n, k)| (m, n, k, 1))
            .collect(),
        ProblemKind::Gemm => GEMM_BENCHMARKS.to_vec(),
        ProblemKind::Gemv => GEMV_BENCHMARKS.to_vec(),
        ProblemKind::GroupGemm => Vec::new(),
    };
    dims.into_iter()
        .filter_map(|(m, n, k, l)| Shape::new(m, n, k, l).ok())
        .collect()
}

/// The production cases of a campaign (the problem's shapes, then those the kernel `declared`
/// it will run at), their inputs drawn from the campaign's `seed`, and, when they are fewer or
/// thinner than a GPU kernel's, why (for the certificate).
pub fn production_cases(
    problem: ProblemKind,
    support: ShapeSupport,
    on_gpu: bool,
    dists: &[Distribution],
    declared: &[Shape],
    seed: u64,
) -> (Vec<CaseSpec>, Option<String>) {
    let mut shapes: Vec<Shape> = production_shapes(problem)
        .into_iter()
        .filter(|&shape| support.supports(shape))
        .collect();
    for &shape in declared {
        let shape = problem.normalize(shape);
        if support.supports(shape) && !shapes.contains(&shape) {
            shapes.push(shape);
        }
    }
    // The inputs come from the campaign's seed, which is drawn per run: with fixed seeds the
    // production inputs were the same in every campaign, and a kernel could carry their
    // fingerprints and be right on those inputs alone (tests/exploits/fixed_public_inputs.py).
    // Each case's seed depends on the campaign seed and the case's place alone, so every shard
    // of a campaign (one seed) draws the same cases.
    let seed = |i: usize, j: usize| production_seed(seed, i * 16 + j);
    if on_gpu {
        let cases = shapes
            .iter()
            .enumerate()
            .flat_map(|(i, &shape)| {
                dists.iter().enumerate().map(move |(j, &dist)| CaseSpec {
                    shape,
                    dist,
                    seed: seed(i, j),
                })
            })
            .collect();
        return (cases, None);
    }
    let thin = |shape: Shape| {
        let rows = CPU_ROWS.div_ceil(support.m_multiple) * support.m_multiple;
        Shape::new(rows.min(shape.m), shape.n, shape.k, shape.l).expect("a smaller M is valid")
    };
    let cases: Vec<CaseSpec> = shapes
        .iter()
        .enumerate()
        .filter(|_| !dists.is_empty())
        .map(|(i, &shape)| CaseSpec {
            shape: thin(shape),
            dist: dists[i % dists.len()],
            seed: seed(i, 0),
        })
        .collect();
    let why = (!cases.is_empty()).then(|| {
        format!(
            "a CPU kernel runs each of the {} production shapes once, at {CPU_ROWS} rows of M \
             (N, K and L as in the shape), one distribution per shape in turn: it computes \
             every output itself, and the full shapes in every distribution would take it many \
             minutes",
            cases.len()
        )
    });
    (cases, why)
}

/// A campaign's production-size cases: the production shapes, a model's shapes (`certify
/// --model`), the range cases (crates/harness/src/certify/campaign/range_draw.rs), the random large
/// shapes and the cases drawn in the deployment regimes (crates/harness/src/certify/campaign/regimes.rs),
/// all drawn from the campaign's seed.
pub struct ProductionSize {
    production: Vec<CaseSpec>,
    models: Vec<CaseSpec>,
    ranges: Vec<(Cell, CaseSpec)>,
    large: Vec<CaseSpec>,
    regimes: Vec<CaseSpec>,
}

impl ProductionSize {
    /// The cases `kernel`'s campaign under `limits` runs in `dists`; `coverage` gets their
    /// counts and, where a class is thinner or missing, why.
    pub fn plan(
        kernel: &dyn KernelUnderTest,
        dists: &[Distribution],
        limits: &CampaignLimits,
        coverage: &mut Coverage,
    ) -> Self {
        let (problem, support, on_gpu) = (kernel.problem(), kernel.support(), kernel.runs_on_gpu());
        let seed = limits.seed;
        let declared = kernel.declared_production_shapes();
        let (production, production_note) =
            production_cases(problem, support, on_gpu, dists, &declared, seed);
        let (large, large_note) = large_cases(problem, support, on_gpu, dists, seed);
        let (regimes, regime_note) =
            regime_cases(problem, support, on_gpu, dists, seed, limits.regime_cases);
        // A CPU kernel computes every output itself: no range case, the space's totals alone.
        let range_budget = if on_gpu { limits.range_cases } else { 0 };
        let ranges = range_cases(problem, support, dists, seed, range_budget);
        let (models, model_coverage) = model_cases(
            problem,
            support,
            on_gpu,
            CPU_ROWS,
            dists,
            &limits.models,
            seed,
        );
        coverage.planned_production_cases = production.len();
        coverage.production_note = production_note;
        coverage.planned_large_cases = large.len();
        coverage.large_note = large_note;
        coverage.planned_regime_cases = Some(regimes.len());
        coverage.regime_note = regime_note;
        coverage.ranges = Some(ranges.coverage);
        coverage.models = model_coverage;
        ProductionSize {
            production,
            models,
            ranges: ranges.cases,
            large,
            regimes: regimes.into_iter().map(|(_, spec)| spec).collect(),
        }
    }

    /// Every case, in the order they run: production shapes, model shapes, range cases
    /// (cheapest first), large shapes, regimes.
    pub fn cases(&self) -> impl Iterator<Item = CaseSpec> + '_ {
        self.production
            .iter()
            .chain(&self.models)
            .chain(self.ranges.iter().map(|(_, spec)| spec))
            .chain(&self.large)
            .chain(&self.regimes)
            .copied()
    }

    /// The shape class a certificate counts `spec` under, if it is one of these cases.
    pub fn class_of(&self, spec: &CaseSpec) -> Option<&'static str> {
        if self.range_cell_of(spec).is_some() {
            return Some("range");
        }
        [
            (&self.production, "production"),
            (&self.models, "model"),
            (&self.large, "large"),
            (&self.regimes, "regime"),
        ]
        .into_iter()
        .find_map(|(cases, class)| cases.contains(spec).then_some(class))
    }

    /// The cell a range case was drawn for.
    pub fn range_cell_of(&self, spec: &CaseSpec) -> Option<Cell> {
        self.ranges
            .iter()
            .find_map(|(cell, case)| (case == spec).then_some(*cell))
    }
}

/// The seed of the production case at `index` of a campaign of seed `campaign`: SplitMix64's
/// finalizer over both, so that neighbouring campaign seeds draw unrelated inputs.
fn production_seed(campaign: u64, index: usize) -> u64 {
    let mut z = (campaign ^ 0x9d0c_5eed_0000_0000)
        .wrapping_add((index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Random large cases drawn from `seed`, within `support`, and, for a CPU kernel, why they are
/// fewer and thinner (for the certificate). None for the grouped GEMM (its campaign draws its
/// groups from one shape).
pub fn large_cases(
    problem: ProblemKind,
    support: ShapeSupport,
    on_gpu: bool,
    dists: &[Distribution],
    seed: u64,
) -> (Vec<CaseSpec>, Option<String>) {
    if problem == ProblemKind::GroupGemm || dists.is_empty() {
        return (Vec::new(), None);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1a59_e5ca_5e5e_ed00);
    // Uniform in (limit / 4, limit]: past 2048 rows and columns, past K = 4096.
    let draw = |rng: &mut ChaCha8Rng, limit: usize| {
        limit / 4 + 1 + (rng.next_u64() % (limit - limit / 4) as u64) as usize
    };
    let (max_m, max_n, max_k, max_l) = LARGE_MAX;
    let count = if on_gpu {
        GPU_LARGE_PER_DISTRIBUTION * dists.len()
    } else {
        CPU_LARGE_CASES
    };
    let mut cases = Vec::new();
    for i in 0..count {
        let m = if on_gpu {
            draw(&mut rng, max_m)
        } else {
            CPU_ROWS
        };
        let n = draw(&mut rng, max_n);
        let k = draw(&mut rng, max_k);
        let mut l = 1 + (rng.next_u64() % max_l as u64) as usize;
        let k_multiple = support.k_multiple.max(16);
        let (mut n, mut k) = (n, round_up(k, k_multiple));
        if !on_gpu {
            l = l.min((CPU_LARGE_NKL / (n * k)).max(1));
            k = k.min(round_up(
                (CPU_LARGE_NKL / (n * l)).max(max_k / 4 + 1),
                k_multiple,
            ));
            n = n.min((CPU_LARGE_NKL / (k * l)).max(max_n / 4 + 1));
        }
        let n = round_up(n, support.n_multiple);
        let shape = Shape::new(round_up(m, support.m_multiple), n, k, l.min(support.max_l))
            .expect("large shapes are valid");
        cases.push(CaseSpec {
            shape: problem.normalize(shape),
            dist: dists[i % dists.len()],
            seed: rng.next_u64(),
        });
    }
    if on_gpu {
        cases.push(CaseSpec {
            shape: problem.normalize(fitted(support, INDEX_SHAPE)),
            dist: Distribution::Full,
            seed: rng.next_u64(),
        });
    }
    let why = (!on_gpu).then(|| {
        format!(
            "a CPU kernel runs {CPU_LARGE_CASES} random large shapes, not \
             {GPU_LARGE_PER_DISTRIBUTION} per distribution, at {CPU_ROWS} rows of M, L, K and N \
             lowered toward N K L = 2^24 (K staying past 4096, N past 2048), for the same \
             reason"
        )
    });
    (cases, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_cases_pass_the_deep_k_wide_n_and_many_tile_limits() {
        let (all, why) = large_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            3,
        );
        assert_eq!(all.len(), GPU_LARGE_PER_DISTRIBUTION * 4 + 1);
        assert_eq!(why, None);
        let (index, cases) = all.split_last().unwrap();
        // Past what a signed 32-bit element offset into A reaches.
        assert!(index.shape.m * index.shape.k * index.shape.l > i32::MAX as usize);
        for case in cases {
            let s = case.shape;
            assert!(
                s.m > 2048 && s.m <= 8192 && s.n > 2048 && s.n <= 8192,
                "{s:?}"
            );
            assert!(s.k > 4096 && s.k <= 16384 && s.k % 16 == 0 && (1..=4).contains(&s.l));
            assert!(s.m.div_ceil(128) * s.n.div_ceil(128) > 2 * 132);
        }
        // The same seed draws the same cases, another seed others.
        let again = large_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            3,
        );
        assert_eq!(again.0, all);
        let other = large_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            4,
        );
        assert_ne!(other.0, all);
    }

    #[test]
    fn a_cpu_kernel_gets_few_thin_large_cases() {
        for seed in 0..20 {
            let (cases, why) = large_cases(
                ProblemKind::DualGemm,
                ShapeSupport::ANY,
                false,
                &Distribution::ALL,
                seed,
            );
            assert_eq!(cases.len(), CPU_LARGE_CASES);
            assert!(why
                .expect("a CPU kernel is told why")
                .contains("2 rows of M"));
            for case in &cases {
                let s = case.shape;
                assert_eq!(s.m, CPU_ROWS);
                assert!(s.n > 2048 && s.k > 4096 && s.n * s.k * s.l <= CPU_LARGE_NKL);
            }
        }
        let support = ShapeSupport {
            m_multiple: 128,
            k_multiple: 256,
            max_l: 1,
            ..ShapeSupport::ANY
        };
        let (cases, _) = large_cases(ProblemKind::Gemv, support, true, &[Distribution::Full], 1);
        assert!(cases
            .iter()
            .all(|c| support.supports(c.shape) && c.shape.n == 1));
        assert!(large_cases(
            ProblemKind::GroupGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            1
        )
        .0
        .is_empty());
    }

    #[test]
    fn a_gpu_kernel_gets_every_shape_in_every_distribution() {
        let (cases, why) = production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            &[],
            1,
        );
        assert_eq!(cases.len(), 13 * Distribution::ALL.len());
        assert_eq!(why, None);
        assert!(cases.iter().any(|c| c.shape.k > 4096 && c.shape.n > 2048));
        assert!(cases.iter().any(|c| c.shape.m == 7168));
    }

    #[test]
    fn production_inputs_follow_the_campaign_seed_and_nothing_else() {
        let draw = |seed: u64| {
            production_cases(
                ProblemKind::DualGemm,
                ShapeSupport::ANY,
                true,
                &Distribution::ALL,
                &[],
                seed,
            )
            .0
        };
        let (first, again, other) = (draw(7), draw(7), draw(8));
        // The same seed repeats a campaign exactly (and every shard of it draws the same cases).
        assert_eq!(first, again);
        // Another seed keeps the shapes and distributions and draws other inputs for every case.
        assert_eq!(first.len(), other.len());
        for (a, b) in first.iter().zip(&other) {
            assert_eq!((a.shape, a.dist), (b.shape, b.dist));
            assert_ne!(a.seed, b.seed, "{a:?}");
        }
        // No two cases of a campaign share inputs, and none is one of the fixed seeds of old.
        let seeds: std::collections::BTreeSet<u64> = first.iter().map(|c| c.seed).collect();
        assert_eq!(seeds.len(), first.len());
        assert!(first
            .iter()
            .all(|c| !(5000..5000 + 16 * 16).contains(&c.seed)));
    }

    #[test]
    fn a_cpu_kernel_gets_thin_cases_that_keep_depth_and_width() {
        let (cases, why) = production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            false,
            &Distribution::ALL,
            &[],
            1,
        );
        assert_eq!(cases.len(), 13);
        assert!(cases.iter().all(|c| c.shape.m == CPU_ROWS));
        assert!(cases.iter().any(|c| c.shape.k > 4096));
        assert!(cases.iter().any(|c| c.shape.n > 2048));
        for dist in Distribution::ALL {
            assert!(cases.iter().any(|c| c.dist == dist), "{dist:?}");
        }
        assert!(why
            .expect("a CPU kernel is told why")
            .contains("2 rows of M"));
    }

    #[test]
    fn declared_shapes_join_the_problem_s_once_each() {
        let declared = [
            Shape::new(1000, 3000, 5120, 2).unwrap(),
            // Already a competition test shape.
            Shape::new(7168, 2304, 2048, 1).unwrap(),
        ];
        let (cases, _) = production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &[Distribution::Full],
            &declared,
            1,
        );
        assert_eq!(cases.len(), 14);
        assert_eq!(cases[13].shape, declared[0]);
        let (thin, _) = production_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            false,
            &Distribution::ALL,
            &declared,
            1,
        );
        assert_eq!(thin[13].shape, Shape::new(CPU_ROWS, 3000, 5120, 2).unwrap());
    }

    #[test]
    fn shapes_outside_the_support_are_left_out() {
        let support = ShapeSupport {
            k_multiple: 4096,
            ..ShapeSupport::ANY
        };
        let (cases, _) = production_cases(
            ProblemKind::DualGemm,
            support,
            true,
            &[Distribution::Gpumode],
            &[],
            1,
        );
        assert!(!cases.is_empty());
        assert!(cases.iter().all(|c| c.shape.k % 4096 == 0));
    }
}
