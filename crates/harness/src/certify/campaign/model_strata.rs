//! The public models' own points in three and four dimensions, in every GPU campaign: each
//! model's feed-forward weights (N the width, K the hidden size, L its experts) at decode, mid
//! and long prefill token counts, fitted to the per-case bound.
//!
//! The covering array (`range_draw.rs`) reaches every band triple of M, N, K and L, but a band
//! is two octaves wide and a model's point is one value in each: many experts *and* a real
//! weight *and* a few tokens is a conjunction a band triple holds without any case lying on it.
//! Kernels pick their paths at such points (a grouped schedule for 256 experts of width 2048, a
//! decode split-K for a 28672-wide weight), so every GPU campaign runs them, as strata beside
//! the drawn cases.
//!
//! A point too large for one case (DeepSeek-V3's 256 experts of 2048 x 7168 move 3.8 x 10^9
//! elements of B) is fitted three ways, each keeping something real: its weights with fewer
//! experts, its experts with smaller weights, or all three lowered in turn. Each is halved
//! (rounded to the kernel's multiples) until the case keeps to the per-case bound. M is drawn
//! from the campaign's seed: a decode step, a short prefill, a prefill chunk and a long
//! prefill, past 128 rows at a tile multiple or one either side of it.

use crate::kernels::ShapeSupport;
use nvfp4_model::problem::{ProblemKind, Shape};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// `(N, K, L, what)`: the public models' feed-forward points (gate and up: N the width, K the
/// hidden size; down: the two swapped) and their vocabulary projections, from each model's
/// published `config.json` (`hidden_size`, `intermediate_size`, `moe_intermediate_size`, the
/// expert count, `vocab_size`), the same models as `models.rs` and `regimes.rs` name.
pub const MODEL_POINTS: [(usize, usize, usize, &str); 15] = [
    (14336, 4096, 1, "Llama-3-8B / Mistral-7B gate/up"),
    (4096, 14336, 1, "Llama-3-8B / Mistral-7B down"),
    (28672, 8192, 1, "Llama-3-70B gate/up"),
    (8192, 28672, 1, "Llama-3-70B down"),
    (53248, 16384, 1, "Llama-3.1-405B gate/up"),
    (18432, 7168, 1, "DeepSeek-V3 dense gate/up"),
    (18944, 3584, 1, "Qwen2.5-7B gate/up"),
    (29568, 8192, 1, "Qwen2.5-72B gate/up"),
    (14336, 4096, 8, "Mixtral-8x7B experts' gate/up"),
    (4096, 14336, 8, "Mixtral-8x7B experts' down"),
    (2048, 7168, 256, "DeepSeek-V3 routed experts' gate/up"),
    (7168, 2048, 256, "DeepSeek-V3 routed experts' down"),
    (1536, 4096, 128, "Qwen3-235B-A22B experts' gate/up"),
    (128256, 4096, 1, "Llama-3 vocabulary projection"),
    (151936, 4096, 1, "Qwen3 vocabulary projection"),
];

/// How a point too large for one case is made to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fit {
    /// Fewer experts, the weight kept (for a dense layer: a narrower N).
    KeepWeights,
    /// Smaller weights (N and K in turn), the experts kept (for a dense layer: a shallower K).
    KeepExperts,
    /// L, K and N lowered in turn.
    Balanced,
}

/// The token counts a stratum runs at: (least, most) rows of M: decode steps of small and
/// large batches, short prefills, a chunk of a chunked prefill (engines' default chunks are 2048
/// tokens and more), a long prefill. Experts get fewer tokens each (a batch's tokens spread over them).
fn token_ranges(experts: usize) -> &'static [(usize, usize)] {
    if experts > 1 {
        &[(1, 4), (5, 16), (17, 128), (129, 512), (513, 2048)]
    } else {
        &[(1, 8), (9, 64), (65, 256), (257, 1024), (1025, 2048), (2049, 8192)]
    }
}

/// Whether a case of these dimensions keeps to the per-case bound `within`.
type Bound = fn([usize; 4]) -> bool;

/// The weight of a point (N, K, L) halved by `fit` until `fits` holds of it at one row.
fn fitted_weight(
    (n, k, l): (usize, usize, usize),
    fit: Fit,
    support: ShapeSupport,
    within: Bound,
) -> Option<(usize, usize, usize)> {
    let k_multiple = support.k_multiple.max(16);
    let round = |v: usize, multiple: usize| v.div_ceil(multiple) * multiple;
    let (mut n, mut k, mut l) = (round(n, support.n_multiple), round(k, k_multiple), l);
    let mut turn = 0usize;
    while !within([support.m_multiple, n, k, l]) {
        let order: &[usize] = match (fit, l > 1) {
            (Fit::KeepWeights, true) => &[2],
            (Fit::KeepWeights, false) => &[0],
            (Fit::KeepExperts, true) => &[1, 0],
            (Fit::KeepExperts, false) => &[1],
            (Fit::Balanced, _) => &[2, 1, 0],
        };
        let lowered = order.iter().cycle().skip(turn).take(order.len()).find(|&&d| match d {
            0 => n > support.n_multiple,
            1 => k > k_multiple,
            _ => l > 1,
        })?;
        match lowered {
            0 => n = round(n / 2, support.n_multiple),
            1 => k = round(k / 2, k_multiple),
            _ => l /= 2,
        }
        turn += 1;
    }
    (l <= support.max_l).then_some((n, k, l))
}

/// A row count in `range` at a multiple of 128 or one either side of it (a last row tile of
/// one row, or one short), its tiles halved until the case fits; None if it then leaves the
/// range.
fn tokens(
    rng: &mut ChaCha8Rng,
    (lo, hi): (usize, usize),
    (n, k, l): (usize, usize, usize),
    support: ShapeSupport,
    within: Bound,
) -> Option<usize> {
    let unit = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let drawn = ((lo as f64) * ((hi as f64 + 1.0) / lo as f64).powf(unit)) as usize;
    let round = |m: usize| m.div_ceil(support.m_multiple) * support.m_multiple;
    if hi <= 128 {
        let m = round(drawn.clamp(lo, hi));
        return within([m, n, k, l]).then_some(m);
    }
    let side = (rng.next_u64() % 3) as usize;
    let mut tiles = drawn.div_ceil(128).max(1);
    loop {
        let m = round((tiles * 128 + side).saturating_sub(1).clamp(lo, hi));
        if m < lo || m > hi {
            return None;
        }
        if within([m, n, k, l]) {
            return Some(m);
        }
        if tiles == 1 {
            return None;
        }
        tiles /= 2;
    }
}

/// The strata of a campaign of `seed`: every point of [`MODEL_POINTS`], each fit that differs,
/// at each token range; within `support` and the per-case bound `within`.
pub fn model_strata(
    problem: ProblemKind,
    support: ShapeSupport,
    seed: u64,
    within: Bound,
) -> Vec<(&'static str, Shape)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5742_a7a0_0000_5eed);
    let mut strata: Vec<(&'static str, Shape)> = Vec::new();
    for (n, k, l, what) in MODEL_POINTS {
        let mut weights = Vec::new();
        for fit in [Fit::KeepWeights, Fit::KeepExperts, Fit::Balanced] {
            if let Some(weight) = fitted_weight((n, k, l), fit, support, within) {
                if !weights.contains(&weight) {
                    weights.push(weight);
                }
            }
        }
        for weight in weights {
            for &range in token_ranges(l) {
                let Some(m) = tokens(&mut rng, range, weight, support, within) else {
                    continue;
                };
                let (n, k, l) = weight;
                let Ok(shape) = Shape::new(m, n, k, l) else {
                    continue;
                };
                let shape = problem.normalize(shape);
                if support.supports(shape) && !strata.iter().any(|(_, s)| *s == shape) {
                    strata.push((what, shape));
                }
            }
        }
    }
    strata
}

#[cfg(test)]
mod tests {
    use super::*;

    fn within_2_28([m, n, k, l]: [usize; 4]) -> bool {
        [m * k * l, n * k * l, m * n * l].iter().all(|&e| e <= 1 << 28) && m * n * k * l <= 1 << 39
    }

    #[test]
    fn a_point_too_large_is_fitted_three_ways_each_keeping_something_real() {
        let deepseek = (2048, 7168, 256);
        let support = ShapeSupport::ANY;
        let keep_weights = fitted_weight(deepseek, Fit::KeepWeights, support, within_2_28);
        assert_eq!(keep_weights, Some((2048, 7168, 16)));
        let keep_experts = fitted_weight(deepseek, Fit::KeepExperts, support, within_2_28);
        assert_eq!(keep_experts, Some((512, 1792, 256)));
        let balanced = fitted_weight(deepseek, Fit::Balanced, support, within_2_28);
        assert_eq!(balanced, Some((1024, 3584, 64)));
        // A point that fits is kept as it is.
        let qwen_72b = (29568, 8192, 1);
        assert_eq!(
            fitted_weight(qwen_72b, Fit::KeepWeights, support, within_2_28),
            Some(qwen_72b)
        );
    }

    #[test]
    fn strata_keep_to_the_bound_and_the_support_and_follow_the_seed() {
        let support = ShapeSupport {
            m_multiple: 1,
            n_multiple: 64,
            k_multiple: 128,
            max_l: 512,
        };
        let strata = model_strata(ProblemKind::DualGemm, support, 7, within_2_28);
        assert!(strata.len() >= 4 * MODEL_POINTS.len(), "{}", strata.len());
        for (what, s) in &strata {
            assert!(within_2_28([s.m, s.n, s.k, s.l]), "{what}: {s:?}");
            assert!(support.supports(*s), "{what}: {s:?}");
        }
        // Every token range of a dense point: a decode step to a long prefill.
        let llama_70b: Vec<&Shape> = strata
            .iter()
            .filter(|(what, _)| what.starts_with("Llama-3-70B gate"))
            .map(|(_, s)| s)
            .collect();
        assert!(llama_70b.iter().any(|s| s.m <= 64));
        assert!(llama_70b.iter().any(|s| s.m > 2048));
        let shapes = |seed| -> Vec<Shape> {
            model_strata(ProblemKind::DualGemm, support, seed, within_2_28)
                .into_iter()
                .map(|(_, s)| s)
                .collect()
        };
        assert_eq!(shapes(3), shapes(3));
        assert_ne!(shapes(3), shapes(4));
        // A kernel of one batch gets no expert point past it.
        let one_batch = ShapeSupport {
            max_l: 1,
            ..ShapeSupport::ANY
        };
        assert!(model_strata(ProblemKind::DualGemm, one_batch, 7, within_2_28)
            .iter()
            .all(|(_, s)| s.l == 1));
    }
}
