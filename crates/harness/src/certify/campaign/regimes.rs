//! The deployment regimes: the kinds of shapes kernels run at in inference engines, each a
//! predicate on the shape, and in every GPU campaign cases drawn inside each.
//!
//! The random cases stay small and the production shapes are a handful of fixed ones; a kernel
//! can be right on all of them and wrong only where deployments go: a decode step (a few rows of
//! M against a wide, deep weight), an N past 8192 (a tile table that wraps), L past 4 (a batch
//! table of four), an output past 2^30 elements (a 32-bit output offset), more than 16,384
//! output tiles. Held-out kernels wrong in exactly one of these went through default campaigns,
//! because no campaign drew there. So every GPU campaign draws cases in every regime
//! (`regime_draw.rs`: one at each regime's wide end, modest ones inside them).
//!
//! The certificate counts, per regime, every case of the campaign whose shape lies in it and
//! how it was judged (whole or on sampled rows); bench refuses to time a shape in a regime the
//! certificate has no case of ([`uncovered_regime`]).

use nvfp4_model::problem::Shape;

/// Output tiles of 128 x 128 past which a persistent kernel's tile counter must be wider than
/// 14 bits, or its grid wraps.
pub const MANY_TILES: usize = 16_384;
/// Output elements past which a 32-bit signed element offset into C (times 2 bytes) overflows.
pub const HUGE_OUTPUT: usize = 1 << 30;

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
}

/// Every regime `shape` lies in.
pub fn regimes_of(shape: Shape) -> Vec<Regime> {
    Regime::ALL
        .into_iter()
        .filter(|r| r.contains(shape))
        .collect()
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
