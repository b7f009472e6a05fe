//! The deployment regimes: the kinds of shapes kernels run at in inference engines, each a
//! predicate on the shape, and in every GPU campaign cases drawn inside each.
//!
//! The random cases stay small and the production shapes are a handful of fixed ones; a kernel
//! can be right on all of them and wrong only where deployments go: a decode step (a few rows of
//! M against a wide, deep weight), an N past 8192 (a tile table that wraps), L past 4 (a batch
//! table of four), an output past 2^30 elements (a 32-bit output offset), more than 16,384
//! output tiles. Held-out kernels wrong in exactly one of these went through default campaigns,
//! because no campaign drew there. So every regime is drawn in every campaign (stratified, not
//! uniform; shapes random within the regime, inputs from the campaign's seed):
//!
//! - one case at the regime's wide end ([`Regime::draw_wide`]): as far out as one GPU holds;
//! - then, up to the campaign's count of regime cases ([`DEFAULT_GPU_REGIME_CASES`] where the
//!   reference is computed on the GPU), modest cases taken in turn from the regimes that have
//!   a modest end ([`Regime::draw_modest`]): still inside the regime, each operand at most
//!   [`MODEST_OPERAND`] elements and the output at most [`MODEST_OUTPUT`], so that a hundred
//!   cost a Hopper variant's campaign seconds, not minutes. An output past 2^30 elements or past
//!   16,384 tiles has no modest end: those regimes get their wide case alone.
//!
//! The certificate counts, per regime, every case of the campaign whose shape lies in it and
//! how it was judged (whole or on sampled rows); bench refuses to time a shape in a regime the
//! certificate has no case of ([`uncovered_regime`]).
//!
//! A CPU kernel computes every output itself on a machine of a few cores: it keeps the thin
//! production shapes (`production.rs`) and draws no regime case.

use super::cases::{round_up, CaseSpec};
use crate::kernels::ShapeSupport;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Output tiles of 128 x 128 past which a persistent kernel's tile counter must be wider than
/// 14 bits, or its grid wraps.
pub const MANY_TILES: usize = 16_384;
/// Output elements past which a 32-bit signed element offset into C (times 2 bytes) overflows.
pub const HUGE_OUTPUT: usize = 1 << 30;
/// A modest regime case's largest operand (A, B1 or B2: rows x K x L elements, 32 MiB packed)
/// and output (32 MiB of fp16): about what the benchmark shapes move, a few hundredths of a
/// second each on the H100.
pub const MODEST_OPERAND: usize = 1 << 26;
pub const MODEST_OUTPUT: usize = 1 << 24;
/// Regime cases of a campaign whose reference is computed on the GPU (`certify
/// --regime-cases`): one at each regime's wide end, the rest modest.
pub const DEFAULT_GPU_REGIME_CASES: usize = 100;
/// Regime cases of a campaign whose reference is the CPU model: one per regime.
pub const DEFAULT_CPU_REGIME_CASES: usize = Regime::ALL.len();

/// `(N, K, what)`: the GEMMs of public models' feed-forward layers, from each model's published
/// `config.json` (`hidden_size`, `intermediate_size`, `moe_intermediate_size`): the gate and up
/// projections (N the feed-forward width, K the hidden size, the dual GEMM's B1 and B2) and the
/// down projection (N the hidden size, K the feed-forward width). The configs, on Hugging Face:
/// `meta-llama/Llama-3.1-8B`, `-70B`, `-405B`; `mistralai/Mistral-7B-v0.1`,
/// `mistralai/Mixtral-8x7B-v0.1`; `deepseek-ai/DeepSeek-V3`; `Qwen/Qwen2.5-7B`, `Qwen/Qwen2.5-72B`
/// (each `https://huggingface.co/<model>/blob/main/config.json`).
pub const PUBLIC_MODEL_SHAPES: [(usize, usize, &str); 14] = [
    (
        14336,
        4096,
        "Llama-3.1-8B, Mistral-7B, Mixtral-8x7B: gate/up (hidden 4096, FFN 14336)",
    ),
    (4096, 14336, "Llama-3.1-8B, Mistral-7B, Mixtral-8x7B: down"),
    (
        28672,
        8192,
        "Llama-3.1-70B: gate/up (hidden 8192, FFN 28672)",
    ),
    (8192, 28672, "Llama-3.1-70B: down"),
    (
        53248,
        16384,
        "Llama-3.1-405B: gate/up (hidden 16384, FFN 53248)",
    ),
    (16384, 53248, "Llama-3.1-405B: down"),
    (
        18432,
        7168,
        "DeepSeek-V3 dense layers: gate/up (hidden 7168, FFN 18432)",
    ),
    (7168, 18432, "DeepSeek-V3 dense layers: down"),
    (
        2048,
        7168,
        "DeepSeek-V3 routed experts: gate/up (moe_intermediate 2048)",
    ),
    (7168, 2048, "DeepSeek-V3 routed experts: down"),
    (29568, 8192, "Qwen2.5-72B: gate/up (hidden 8192, FFN 29568)"),
    (8192, 29568, "Qwen2.5-72B: down"),
    (18944, 3584, "Qwen2.5-7B: gate/up (hidden 3584, FFN 18944)"),
    (3584, 18944, "Qwen2.5-7B: down"),
];

/// A deployment regime: a set of shapes, defined by [`Regime::contains`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Regime {
    /// A decode step: M from 1 to 64 rows (tokens) against N >= 2048 and K >= 4096.
    Decode,
    /// A few rows against a wide weight: M <= 128, N >= 4096.
    NarrowWide,
    /// N past 8192.
    WideN,
    /// M past 8192.
    TallM,
    /// L of 5 or more.
    ManyBatches,
    /// K of 16384 or more at N >= 4096.
    DeepKWide,
    /// More than 2^30 output elements.
    HugeOutput,
    /// More than 16,384 output tiles of 128 x 128.
    ManyTiles,
    /// N and K of a public model's feed-forward GEMM ([`PUBLIC_MODEL_SHAPES`]), any M.
    PublicModel,
}

impl Regime {
    pub const ALL: [Regime; 9] = [
        Regime::Decode,
        Regime::NarrowWide,
        Regime::WideN,
        Regime::TallM,
        Regime::ManyBatches,
        Regime::DeepKWide,
        Regime::HugeOutput,
        Regime::ManyTiles,
        Regime::PublicModel,
    ];

    /// Its name in certificates and messages.
    pub fn name(self) -> &'static str {
        match self {
            Regime::Decode => "decode",
            Regime::NarrowWide => "narrow-wide",
            Regime::WideN => "wide-n",
            Regime::TallM => "tall-m",
            Regime::ManyBatches => "many-batches",
            Regime::DeepKWide => "deep-k-wide",
            Regime::HugeOutput => "huge-output",
            Regime::ManyTiles => "many-tiles",
            Regime::PublicModel => "public-model",
        }
    }

    /// What its shapes are, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Regime::Decode => "M 1-64, N >= 2048, K >= 4096 (an LLM decode step)",
            Regime::NarrowWide => "M <= 128, N >= 4096",
            Regime::WideN => "N > 8192",
            Regime::TallM => "M > 8192",
            Regime::ManyBatches => "L >= 5",
            Regime::DeepKWide => "K >= 16384 at N >= 4096",
            Regime::HugeOutput => "more than 2^30 output elements",
            Regime::ManyTiles => "more than 16,384 output tiles of 128 x 128",
            Regime::PublicModel => "N and K of a public model's feed-forward GEMM",
        }
    }

    /// Whether `shape` lies in the regime.
    pub fn contains(self, shape: Shape) -> bool {
        let Shape { m, n, k, l } = shape;
        match self {
            Regime::Decode => (1..=64).contains(&m) && n >= 2048 && k >= 4096,
            Regime::NarrowWide => m <= 128 && n >= 4096,
            Regime::WideN => n > 8192,
            Regime::TallM => m > 8192,
            Regime::ManyBatches => l >= 5,
            Regime::DeepKWide => k >= 16384 && n >= 4096,
            Regime::HugeOutput => m * n * l > HUGE_OUTPUT,
            Regime::ManyTiles => m.div_ceil(128) * n.div_ceil(128) * l > MANY_TILES,
            Regime::PublicModel => PUBLIC_MODEL_SHAPES
                .iter()
                .any(|&(pn, pk, _)| (pn, pk) == (n, k)),
        }
    }

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

/// Every regime `shape` lies in.
pub fn regimes_of(shape: Shape) -> Vec<Regime> {
    Regime::ALL
        .into_iter()
        .filter(|r| r.contains(shape))
        .collect()
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

/// Cases of one regime in a campaign, and how they were judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegimeCount {
    pub cases: usize,
    /// Of those, judged on sampled rows (too large to judge whole).
    pub sampled: usize,
}

/// Why bench must not time `shape` on the strength of a certificate whose coverage (its JSON)
/// is `coverage`: a regime the shape lies in in which the campaign ran no case.
pub fn uncovered_regime(coverage: &serde_json::Value, shape: Shape) -> Option<String> {
    regimes_of(shape).into_iter().find_map(|regime| {
        let ran = coverage["by_regime"][regime.name()]["cases"]
            .as_u64()
            .unwrap_or(0);
        (ran == 0).then(|| {
            format!(
                "{shape} is a {} shape ({}), and its certificate ran no case there; certify it \
                 again{}",
                regime.name(),
                regime.describe(),
                if coverage.get("by_regime").is_none() {
                    " (it predates deployment regimes)"
                } else {
                    " with a manifest that declares the shape among its production shapes"
                }
            )
        })
    })
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
                    // The 91 modest cases in turn over the 7 others.
                    _ => assert_eq!(of_regime, 13, "{regime:?}"),
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

    #[test]
    fn the_regimes_are_the_ones_deployments_run() {
        let shape = |m, n, k, l| Shape::new(m, n, k, l).unwrap();
        // A decode step of Llama-3.1-70B's gate/up projection.
        assert_eq!(
            regimes_of(shape(8, 28672, 8192, 1)),
            [
                Regime::Decode,
                Regime::NarrowWide,
                Regime::WideN,
                Regime::PublicModel
            ]
        );
        assert_eq!(regimes_of(shape(16384, 1024, 512, 1)), [Regime::TallM]);
        assert_eq!(regimes_of(shape(256, 256, 256, 5)), [Regime::ManyBatches]);
        assert!(regimes_of(shape(32768, 32769, 16, 1)).contains(&Regime::HugeOutput));
        assert!(regimes_of(shape(16384, 16512, 16, 1)).contains(&Regime::ManyTiles));
        // The benchmark shapes are in none: a certificate from before the regimes still times
        // them.
        for (m, n, k) in nvfp4_model::golden::set::DUAL_GEMM_BENCHMARKS {
            assert_eq!(regimes_of(shape(m, n, k, 1)), [], "{m}x{n}x{k}");
        }
        for (n, k, _) in PUBLIC_MODEL_SHAPES {
            assert_eq!(k % 16, 0);
            assert!(Regime::PublicModel.contains(shape(1, n, k, 1)));
        }
    }

    #[test]
    fn bench_refuses_a_shape_in_a_regime_the_certificate_did_not_reach() {
        let decode = Shape::new(16, 14336, 4096, 1).unwrap();
        let covered = serde_json::json!({"by_regime": {
            "decode": {"cases": 1, "sampled": 0}, "narrow-wide": {"cases": 2, "sampled": 0},
            "wide-n": {"cases": 1, "sampled": 1}, "public-model": {"cases": 1, "sampled": 0},
        }});
        assert_eq!(uncovered_regime(&covered, decode), None);
        let no_decode = serde_json::json!({"by_regime": {
            "narrow-wide": {"cases": 2, "sampled": 0}, "wide-n": {"cases": 1, "sampled": 1},
            "public-model": {"cases": 1, "sampled": 0},
        }});
        let why = uncovered_regime(&no_decode, decode).unwrap();
        assert!(
            why.contains("decode shape") && why.contains("ran no case"),
            "{why}"
        );
        let older = serde_json::json!({"by_shape_class": {}});
        assert!(uncovered_regime(&older, decode)
            .unwrap()
            .contains("predates deployment regimes"));
        // A shape in no regime needs none.
        assert_eq!(
            uncovered_regime(&older, Shape::new(256, 4096, 7168, 1).unwrap()),
            None
        );
    }
}
