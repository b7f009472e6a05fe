//! How a campaign draws its cases in the deployment regimes (crates/harness/src/certify/campaign/regimes.rs):
//! stratified, not uniform, every regime in every GPU campaign, shapes random inside the regime
//! and inputs from the campaign's seed:
//!
//! - one case at the regime's wide end ([`Regime::draw_wide`]): as far out as one GPU holds;
//! - then, up to the campaign's count of regime cases ([`DEFAULT_GPU_REGIME_CASES`] where the
//!   reference is computed on the GPU), modest cases taken in turn from the regimes that have
//!   a modest end ([`Regime::draw_modest`]): still inside the regime, each operand at most
//!   [`MODEST_OPERAND`] elements and the output at most [`MODEST_OUTPUT`], so that a hundred
//!   cost a Hopper variant's campaign seconds, not minutes. An output past 2^30 elements or past
//!   16,384 tiles has no modest end: those regimes get their wide case alone.
//!
//! A CPU kernel computes every output itself on a machine of a few cores: it keeps the thin
//! production shapes (`production.rs`) and draws no regime case.

use super::cases::CaseSpec;
use super::fixed_cases::round_up;
use super::regimes::{Regime, HUGE_OUTPUT, MANY_TILES, PUBLIC_MODEL_SHAPES};
use crate::kernels::ShapeSupport;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// A modest regime case's largest operand (A, B1 or B2: rows x K x L elements, 32 MiB packed)
/// and output (32 MiB of fp16): about what the benchmark shapes move, a few hundredths of a
/// second each on the H100.
pub const MODEST_OPERAND: usize = 1 << 26;
pub const MODEST_OUTPUT: usize = 1 << 24;
/// Regime cases of a campaign whose reference is computed on the GPU (`certify
/// --regime-cases`): one at each regime's wide end, the rest modest. A hundred before the range
/// cases (range_draw.rs) carried the coverage; the regimes stay as named strata, four or five
/// modest cases each.
pub const DEFAULT_GPU_REGIME_CASES: usize = 36;
/// Regime cases of a campaign whose reference is the CPU model: one per regime.
pub const DEFAULT_CPU_REGIME_CASES: usize = Regime::ALL.len();

impl Regime {
    /// A random shape (M, N, K, L) at the regime's wide end, before rounding to a kernel's
    /// support: wide where the regime is, as small elsewhere as lets the CPU model judge it in
    /// about a second on a GPU machine's cores.
    fn draw_wide(self, rng: &mut ChaCha8Rng) -> (usize, usize, usize, usize) {
        let mut between =
            |lo: usize, hi: usize| lo + (rng.next_u64() % (hi - lo + 1) as u64) as usize;
        match self {
            Regime::Decode => (
                between(1, 64),
                between(2048, 32768),
                between(4096, 16384),
                1,
            ),
            Regime::NarrowWide => (
                between(65, 128),
                between(4096, 32768),
                between(512, 4096),
                1,
            ),
            Regime::WideN => (
                between(128, 1024),
                between(8193, 32768),
                between(256, 2048),
                1,
            ),
            Regime::TallM => (
                between(8193, 32768),
                between(256, 2048),
                between(256, 2048),
                1,
            ),
            Regime::ManyBatches => (
                between(128, 1024),
                between(128, 1024),
                between(256, 1024),
                between(5, 8),
            ),
            Regime::DeepKWide => (
                between(16, 256),
                between(4096, 16384),
                between(16384, 24576),
                1,
            ),
            // Judged on sampled rows: a deeper K means fewer rows (and interval statistics) for
            // the same products; a shallow one cost the model a minute on 2 cores.
            Regime::HugeOutput => {
                let n = between(16384, 32768);
                (
                    HUGE_OUTPUT / n + between(1, 2048),
                    n,
                    between(2048, 4096),
                    1,
                )
            }
            Regime::ManyTiles => {
                let n = between(16384, 32768);
                let tiles_m = MANY_TILES / n.div_ceil(128) + 1;
                (tiles_m * 128 + between(0, 4096), n, between(2048, 4096), 1)
            }
            Regime::PublicModel => {
                let (n, k, _) = PUBLIC_MODEL_SHAPES[between(0, PUBLIC_MODEL_SHAPES.len() - 1)];
                // A decode step or a prefill, in turn by the draw.
                let m = if between(0, 1) == 0 {
                    between(1, 64)
                } else {
                    between(128, 4096)
                };
                (m, n, k, 1)
            }
        }
    }

    /// The most elements a modest case of the regime gives one operand: [`MODEST_OPERAND`],
    /// twice that where the regime's smallest shape already needs it (a B of 4096 x 16384 is
    /// deep-k-wide's least; some public models' weights are 2^27).
    fn modest_operand(self) -> usize {
        match self {
            Regime::DeepKWide | Regime::PublicModel => 2 * MODEST_OPERAND,
            _ => MODEST_OPERAND,
        }
    }

    /// A random shape at the regime's modest end, before rounding: each dimension the regime
    /// constrains inside it, drawn log-uniformly (a decode step of 3 rows as likely as one of
    /// 48), every operand within [`Regime::modest_operand`] and the output within
    /// [`MODEST_OUTPUT`] (draws past them are drawn again). None for the regimes that are large
    /// by definition (an output past 2^30 elements or 16,384 tiles).
    fn draw_modest(self, rng: &mut ChaCha8Rng) -> Option<(usize, usize, usize, usize)> {
        (0..64)
            .find_map(|_| {
                let mut log_between = |lo: usize, hi: usize| log_uniform(rng, lo, hi);
                let (m, n, k, l) = match self {
                    Regime::Decode => (
                        log_between(1, 64),
                        log_between(2048, 32768),
                        log_between(4096, 16384),
                        1,
                    ),
                    Regime::NarrowWide => (
                        log_between(1, 128),
                        log_between(4096, 32768),
                        log_between(256, 4096),
                        1,
                    ),
                    Regime::WideN => (
                        log_between(1, 512),
                        log_between(8193, 32768),
                        log_between(64, 2048),
                        1,
                    ),
                    Regime::TallM => (
                        log_between(8193, 32768),
                        log_between(16, 512),
                        log_between(64, 1024),
                        1,
                    ),
                    Regime::ManyBatches => (
                        log_between(1, 512),
                        log_between(16, 512),
                        log_between(64, 1024),
                        log_between(5, 8),
                    ),
                    Regime::DeepKWide => (
                        log_between(1, 128),
                        log_between(4096, 8192),
                        log_between(16384, 32768),
                        1,
                    ),
                    Regime::PublicModel => {
                        let pick = rng.next_u64() as usize % PUBLIC_MODEL_SHAPES.len();
                        let (n, k, _) = PUBLIC_MODEL_SHAPES[pick];
                        (log_uniform(rng, 1, 1024), n, k, 1)
                    }
                    Regime::HugeOutput | Regime::ManyTiles => return Some(None),
                };
                let operand = self.modest_operand();
                (m * k * l <= operand && n * k * l <= operand && m * n * l <= MODEST_OUTPUT)
                    .then_some(Some((m, n, k, l)))
            })
            .flatten()
    }
}

/// A draw from `lo..=hi`, uniform in its logarithm.
fn log_uniform(rng: &mut ChaCha8Rng, lo: usize, hi: usize) -> usize {
    let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let value = (lo as f64 * (hi as f64 / lo as f64).powf(unit)).round() as usize;
    value.clamp(lo, hi)
}
/// The regime cases of a campaign of `seed`, `count` of them if the support allows: first one
/// modest case per regime that has a modest end, in turn, until `count` less one per regime is
/// drawn, then one at each regime's wide end (a bug that shows on a modest shape is caught,
/// and shrunk, there); each shape random inside its regime and within `support`, the
/// distributions in turn. Also, where some regime has none, why (for the certificate). None for
/// a CPU kernel, the grouped GEMM (its campaign draws its groups from one shape) and the GEMV
/// (N = 1).
pub fn regime_cases(
    problem: ProblemKind,
    support: ShapeSupport,
    on_gpu: bool,
    dists: &[Distribution],
    seed: u64,
    count: usize,
) -> (Vec<(Regime, CaseSpec)>, Option<String>) {
    if !on_gpu {
        return (
            Vec::new(),
            Some(
                "a CPU kernel draws no deployment-regime case: it computes every output itself \
                 (its production shapes are thin instead)"
                    .to_string(),
            ),
        );
    }
    if !matches!(problem, ProblemKind::DualGemm | ProblemKind::Gemm) || dists.is_empty() {
        return (Vec::new(), None);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x7e61_3e5e_ed00_0000);
    // A few draws: rounding to the kernel's multiples may leave the regime (an M multiple of
    // 128 has no decode step).
    let fitted = |regime: Regime, (m, n, k, l): (usize, usize, usize, usize)| {
        let shape = Shape::new(
            round_up(m, support.m_multiple),
            round_up(n, support.n_multiple),
            round_up(k, support.k_multiple.max(16)),
            l.min(support.max_l),
        )
        .ok()?;
        (regime.contains(shape) && support.supports(shape)).then_some(shape)
    };
    let mut wide = Vec::new();
    let mut outside = Vec::new();
    for regime in Regime::ALL {
        match (0..8).find_map(|_| fitted(regime, regime.draw_wide(&mut rng))) {
            Some(shape) => wide.push((regime, shape)),
            None => outside.push(regime.name()),
        }
    }
    // The regimes with a modest end that the support reaches, in turn.
    let mut modest = Vec::new();
    let mut turn = wide
        .iter()
        .map(|&(regime, _)| regime)
        .filter(|regime| !matches!(regime, Regime::HugeOutput | Regime::ManyTiles))
        .collect::<Vec<_>>()
        .into_iter()
        .cycle();
    let modest_count = count.saturating_sub(wide.len());
    let mut misses = 0;
    while modest.len() < modest_count && misses < 8 * modest_count {
        let Some(regime) = turn.next() else { break };
        match (0..8).find_map(|_| regime.draw_modest(&mut rng).and_then(|d| fitted(regime, d))) {
            Some(shape) => modest.push((regime, shape)),
            None => misses += 1,
        }
    }
    let cases = modest
        .into_iter()
        .chain(wide.into_iter().take(count))
        .enumerate()
        .map(|(i, (regime, shape))| {
            (
                regime,
                CaseSpec {
                    shape: problem.normalize(shape),
                    dist: dists[i % dists.len()],
                    seed: rng.next_u64(),
                },
            )
        })
        .collect();
    let why = (!outside.is_empty()).then(|| {
        format!(
            "no case in {}: outside the declared shape support",
            outside.join(", ")
        )
    });
    (cases, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The regime cases of a dual-GEMM campaign of `seed` on a GPU, any shape supported, every
    /// distribution: `count` of them, and why a regime has none.
    fn drawn(seed: u64, count: usize) -> (Vec<(Regime, CaseSpec)>, Option<String>) {
        regime_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            seed,
            count,
        )
    }

    #[test]
    fn every_regime_is_drawn_inside_itself_and_within_the_support() {
        for seed in 0..50 {
            let (cases, why) = drawn(seed, DEFAULT_CPU_REGIME_CASES);
            assert_eq!(why, None);
            let drawn: Vec<Regime> = cases.iter().map(|(r, _)| *r).collect();
            assert_eq!(drawn, Regime::ALL, "one per regime, each at its wide end");
            for (regime, case) in &cases {
                assert!(regime.contains(case.shape), "{regime:?} {:?}", case.shape);
                // Within what one GPU holds and the model judges: A, B1 and B2 packed at most
                // a gigabyte each, the output at most 4 GiB.
                let s = case.shape;
                assert!(
                    s.m * s.k * s.l / 2 <= 1 << 30 && s.n * s.k * s.l / 2 <= 1 << 30,
                    "{s:?}"
                );
                assert!(s.m * s.n * s.l * 2 <= 4 << 30, "{s:?}");
            }
            // Every distribution among them.
            for dist in Distribution::ALL {
                assert!(cases.iter().any(|(_, c)| c.dist == dist));
            }
        }
        // The seed draws the shapes: another run, other shapes; the same seed, the same.
        let draw = |seed| drawn(seed, DEFAULT_GPU_REGIME_CASES).0;
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }

    /// A GPU campaign's default: a hundred regime cases, every regime in it, the modest ones
    /// inside their regime and within the modest budget, the wide ones last.
    #[test]
    fn a_hundred_cases_are_spread_over_every_regime_and_the_modest_ones_stay_modest() {
        for seed in 0..20 {
            let (cases, why) = drawn(seed, DEFAULT_GPU_REGIME_CASES);
            assert_eq!(why, None);
            assert_eq!(cases.len(), DEFAULT_GPU_REGIME_CASES);
            let (modest, wide) = cases.split_at(cases.len() - Regime::ALL.len());
            assert_eq!(
                wide.iter().map(|(r, _)| *r).collect::<Vec<_>>(),
                Regime::ALL,
                "the wide cases last, one per regime"
            );
            for regime in Regime::ALL {
                let of_regime = modest.iter().filter(|(r, _)| *r == regime).count();
                match regime {
                    // Large by definition: their wide case alone.
                    Regime::HugeOutput | Regime::ManyTiles => assert_eq!(of_regime, 0),
                    // The modest cases in turn over the 7 others.
                    _ => assert!(
                        of_regime.abs_diff((DEFAULT_GPU_REGIME_CASES - 9) / 7) <= 1,
                        "{regime:?}"
                    ),
                }
            }
            for (regime, case) in modest {
                let s = case.shape;
                assert!(regime.contains(s), "{regime:?} {s:?}");
                let operand = regime.modest_operand();
                assert!(
                    s.m * s.k * s.l <= operand
                        && s.n * s.k * s.l <= operand
                        && s.m * s.n * s.l <= MODEST_OUTPUT,
                    "{regime:?} {s:?}"
                );
            }
            for dist in Distribution::ALL {
                assert!(modest.iter().any(|(_, c)| c.dist == dist));
            }
        }
        // Log-uniform draws reach both ends of a regime: decode steps of a single row and of
        // tens of rows.
        let decode_rows: Vec<usize> = (0..20)
            .flat_map(|seed| drawn(seed, DEFAULT_GPU_REGIME_CASES).0)
            .filter(|(r, _)| *r == Regime::Decode)
            .map(|(_, c)| c.shape.m)
            .collect();
        assert!(decode_rows.iter().any(|&m| m <= 4), "{decode_rows:?}");
        assert!(decode_rows.iter().any(|&m| m >= 32), "{decode_rows:?}");
        // Fewer asked than there are regimes: wide cases only, that many.
        let (few, _) = drawn(1, 4);
        assert_eq!(few.len(), 4);
    }

    #[test]
    fn a_support_that_excludes_a_regime_is_said_so_and_the_rest_are_drawn() {
        let support = ShapeSupport {
            m_multiple: 128,
            max_l: 1,
            ..ShapeSupport::ANY
        };
        let (cases, why) = regime_cases(
            ProblemKind::DualGemm,
            support,
            true,
            &Distribution::ALL,
            1,
            DEFAULT_GPU_REGIME_CASES,
        );
        let why = why.expect("the excluded regimes are named");
        assert!(
            why.contains("decode") && why.contains("many-batches"),
            "{why}"
        );
        assert!(!cases
            .iter()
            .any(|(r, _)| *r == Regime::Decode || *r == Regime::ManyBatches));
        // The budget goes to the regimes the support reaches.
        assert_eq!(cases.len(), DEFAULT_GPU_REGIME_CASES);
        assert!(cases.iter().all(|(_, c)| support.supports(c.shape)));
    }

    #[test]
    fn a_cpu_kernel_draws_none_and_is_told_why() {
        let (cases, why) = regime_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            false,
            &Distribution::ALL,
            1,
            DEFAULT_GPU_REGIME_CASES,
        );
        assert!(cases.is_empty());
        assert!(why.unwrap().contains("CPU kernel"));
        let (gemv, _) = regime_cases(
            ProblemKind::Gemv,
            ShapeSupport::ANY,
            true,
            &Distribution::ALL,
            1,
            DEFAULT_GPU_REGIME_CASES,
        );
        assert!(gemv.is_empty());
    }
}
