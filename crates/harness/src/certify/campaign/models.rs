//! A model's own shapes, certified densely (`certify --model NAME|config.json`): where the user
//! knows what they serve, the campaign runs exactly those shapes rather than a sample of the
//! space.
//!
//! From a Hugging Face `config.json` (`hidden_size`, `intermediate_size`,
//! `moe_intermediate_size`, `n_routed_experts` / `num_local_experts` / `num_experts`,
//! `num_experts_per_tok`) come the model's dual GEMMs, the first half of each gated feed-forward
//! layer, `silu(x Wgate^T) * (x Wup^T)`: N the feed-forward width, K the hidden size, B1 and B2
//! the gate and up weights. A dense layer has L = 1; a mixture-of-experts layer runs its experts
//! as L, each receiving M tokens. The tokens: M = 1..=16 (decode steps), then every power of two
//! and one either side of it up to `--max-tokens` (a full prefill). The expert counts: every
//! power of two up to the model's experts, and the count itself. Shapes past the per-case
//! bound (what one GPU holds beside a kernel) are listed, not run.
//!
//! The built-in configs (no network: `--model deepseek-v3` works offline) carry the fields above
//! from each model's published `config.json` on Hugging Face.

use super::cases::CaseSpec;
use crate::kernels::ShapeSupport;
use nvfp4_model::problem::{Distribution, ProblemKind, Shape};
use std::path::Path;

/// What a model's feed-forward layers need: the fields of its `config.json` that set the dual
/// GEMMs' shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    pub name: String,
    pub hidden: usize,
    /// The dense layers' feed-forward width (`intermediate_size`), if it has dense layers.
    pub dense_ffn: Option<usize>,
    /// The experts' feed-forward width and count, if it has experts.
    pub expert_ffn: Option<usize>,
    pub experts: Option<usize>,
}

/// `(name, hidden, dense FFN, expert FFN, experts)`, from each model's `config.json`
/// (`huggingface.co/<repo>/blob/main/config.json`: meta-llama/Meta-Llama-3-8B, -70B,
/// meta-llama/Llama-3.1-405B, mistralai/Mistral-7B-v0.1, mistralai/Mixtral-8x7B-v0.1,
/// deepseek-ai/DeepSeek-V3, Qwen/Qwen2.5-7B, Qwen/Qwen2.5-72B, Qwen/Qwen3-235B-A22B).
#[allow(clippy::type_complexity)]
const BUILT_IN: [(&str, usize, Option<usize>, Option<usize>, Option<usize>); 9] = [
    ("llama-3-8b", 4096, Some(14336), None, None),
    ("llama-3-70b", 8192, Some(28672), None, None),
    ("llama-3.1-405b", 16384, Some(53248), None, None),
    ("mistral-7b", 4096, Some(14336), None, None),
    // Mixtral's experts are full feed-forward layers (`intermediate_size`, 8 local experts).
    ("mixtral-8x7b", 4096, None, Some(14336), Some(8)),
    // Its first three layers dense (`intermediate_size` 18432), the rest 256 routed experts.
    ("deepseek-v3", 7168, Some(18432), Some(2048), Some(256)),
    ("qwen2.5-7b", 3584, Some(18944), None, None),
    ("qwen2.5-72b", 8192, Some(29568), None, None),
    ("qwen3-235b-a22b", 4096, None, Some(1536), Some(128)),
];

/// The names `--model` knows without a file.
pub fn built_in_names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|m| m.0).collect()
}

/// The largest `config.json` read (a real one is a few kilobytes).
const CONFIG_BYTES: u64 = 1 << 20;

/// The model `given` names: a built-in name, or the path of a `config.json`.
pub fn load_model(given: &str) -> Result<ModelConfig, String> {
    if let Some(&(name, hidden, dense, expert, experts)) =
        BUILT_IN.iter().find(|m| m.0.eq_ignore_ascii_case(given))
    {
        return Ok(ModelConfig {
            name: name.to_string(),
            hidden,
            dense_ffn: dense,
            expert_ffn: expert,
            experts,
        });
    }
    let path = Path::new(given);
    if !path.exists() {
        return Err(format!(
            "--model {given}: neither a built-in model ({}) nor a config.json file",
            built_in_names().join(", ")
        ));
    }
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(CONFIG_BYTES + 1).read_to_string(&mut text))
        .map_err(|err| format!("--model {given}: cannot read: {err}"))?;
    if text.len() as u64 > CONFIG_BYTES {
        return Err(format!(
            "--model {given}: larger than {CONFIG_BYTES} bytes; a config.json is a few kilobytes"
        ));
    }
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|err| format!("--model {given}: not JSON: {err}"))?;
    // Multimodal configs keep the language model's fields under `text_config`.
    let fields = if json.get("hidden_size").is_none() && json.get("text_config").is_some() {
        &json["text_config"]
    } else {
        &json
    };
    let field = |name: &str| -> Result<Option<usize>, String> {
        match fields.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(value) => match value.as_u64() {
                Some(v) if v > 0 && v <= 1 << 24 => Ok(Some(v as usize)),
                _ => Err(format!(
                    "--model {given}: `{name}` is {value}, not a positive whole number of at most \
                     2^24"
                )),
            },
        }
    };
    let hidden = field("hidden_size")?
        .ok_or_else(|| format!("--model {given}: no `hidden_size`: not a transformer's config"))?;
    let experts = match field("n_routed_experts")? {
        Some(n) => Some(n),
        None => match field("num_local_experts")? {
            Some(n) => Some(n),
            None => field("num_experts")?,
        },
    };
    let intermediate = field("intermediate_size")?;
    let moe_intermediate = field("moe_intermediate_size")?;
    let (dense_ffn, expert_ffn) = match (experts, moe_intermediate) {
        (Some(_), Some(moe)) => (intermediate, Some(moe)),
        (Some(_), None) => (None, intermediate),
        (None, _) => (intermediate, None),
    };
    if dense_ffn.is_none() && expert_ffn.is_none() {
        return Err(format!(
            "--model {given}: no `intermediate_size` or `moe_intermediate_size`: no feed-forward \
             layer to take shapes from"
        ));
    }
    if hidden % 16 != 0 {
        return Err(format!(
            "--model {given}: hidden_size {hidden} is not a multiple of 16, so K cannot carry \
             NVFP4's 16-element scale blocks"
        ));
    }
    let name = path
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_else(|| given.to_string());
    Ok(ModelConfig {
        name,
        hidden,
        dense_ffn,
        expert_ffn,
        experts: experts.filter(|_| expert_ffn.is_some()),
    })
}

/// The most elements of one operand or of the output of a model's case: 1 GiB of packed FP4,
/// 4 GiB of fp16 output, what one 80 GB GPU holds beside the kernel's own buffers.
pub const MODEL_ELEMENTS_BOUND: usize = 1 << 31;
/// Whether a shape's operands and output are each within [`MODEL_ELEMENTS_BOUND`] elements: the
/// bound `--model` lists shapes past as left out, and a manifest's production shapes must keep.
pub fn within_case_bound(shape: Shape) -> bool {
    let (m, n, k, l) = (shape.m as u128, shape.n as u128, shape.k as u128, shape.l as u128);
    [m * k * l, n * k * l, m * n * l]
        .iter()
        .all(|&e| e <= MODEL_ELEMENTS_BOUND as u128)
}

/// Tokens of the longest prefill a model's campaign runs unless told (`--max-tokens`).
pub const DEFAULT_MAX_TOKENS: usize = 8192;

/// A model's dual-GEMM shapes, and those past the per-case bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelShapes {
    pub model: String,
    pub shapes: Vec<Shape>,
    pub beyond_bound: Vec<Shape>,
}

/// Token counts from one decode step to `max_tokens`: 1..=16, then each power of two and one
/// either side of it.
pub fn token_counts(max_tokens: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = (1..=16.min(max_tokens)).collect();
    let mut p = 32;
    while p - 1 <= max_tokens {
        counts.extend([p - 1, p, p + 1].into_iter().filter(|&m| m <= max_tokens));
        p *= 2;
    }
    counts.push(max_tokens);
    counts.sort_unstable();
    counts.dedup();
    counts
}

impl ModelConfig {
    /// Its dual GEMMs with up to `max_tokens` tokens (per expert, for experts).
    pub fn shapes(&self, max_tokens: usize) -> ModelShapes {
        let tokens = token_counts(max_tokens.max(1));
        let mut all = Vec::new();
        if let Some(ffn) = self.dense_ffn {
            all.extend(tokens.iter().map(|&m| (m, ffn, self.hidden, 1)));
        }
        if let (Some(ffn), Some(experts)) = (self.expert_ffn, self.experts) {
            let mut counts: Vec<usize> = (0..)
                .map(|i| 1usize << i)
                .take_while(|&c| c < experts)
                .collect();
            counts.push(experts);
            for l in counts {
                all.extend(tokens.iter().map(|&m| (m, ffn, self.hidden, l)));
            }
        }
        let fits = |(m, n, k, l): (usize, usize, usize, usize)| {
            [m * k * l, n * k * l, m * n * l]
                .iter()
                .all(|&e| e <= MODEL_ELEMENTS_BOUND)
        };
        let mut shapes = Vec::new();
        let mut beyond_bound = Vec::new();
        for dims in all {
            let Ok(shape) = Shape::new(dims.0, dims.1, dims.2, dims.3) else {
                continue;
            };
            if fits(dims) {
                shapes.push(shape);
            } else {
                beyond_bound.push(shape);
            }
        }
        ModelShapes {
            model: self.name.clone(),
            shapes,
            beyond_bound,
        }
    }
}

/// What a certificate says of a model's shapes.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelCoverage {
    pub model: String,
    /// Shapes planned (after the kernel's support and, for a CPU kernel, thinning).
    pub planned: usize,
    /// Shapes of the model left out, with why.
    pub left_out: Vec<(String, String)>,
}

/// A CPU kernel's model cases keep N K L at most this.
const CPU_MODEL_NKL: usize = 1 << 28;

/// The cases of `models`' shapes: each shape once, the distributions in turn, inputs from the
/// campaign's `seed`. A CPU kernel (`on_gpu` false) runs each (N, K, L) once at `cpu_rows` rows,
/// L lowered to what its cores can compute.
pub fn model_cases(
    problem: ProblemKind,
    support: ShapeSupport,
    on_gpu: bool,
    cpu_rows: usize,
    dists: &[Distribution],
    models: &[ModelShapes],
    seed: u64,
) -> (Vec<CaseSpec>, Vec<ModelCoverage>) {
    let mut cases: Vec<CaseSpec> = Vec::new();
    let mut coverage = Vec::new();
    if dists.is_empty() || !matches!(problem, ProblemKind::DualGemm | ProblemKind::Gemm) {
        return (cases, coverage);
    }
    let mut seeds = seed ^ 0x3d0d_e15e_ed00_0000;
    let mut next_seed = || {
        // SplitMix64: every case's inputs from the campaign's seed.
        seeds = seeds.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seeds;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for model in models {
        let mut entry = ModelCoverage {
            model: model.model.clone(),
            ..ModelCoverage::default()
        };
        for shape in &model.beyond_bound {
            entry.left_out.push((
                shape.to_string(),
                "past the per-case bound (an operand or the output past 2^31 elements)".into(),
            ));
        }
        for &shape in &model.shapes {
            let fitted = if on_gpu {
                Some(shape)
            } else {
                let rows = cpu_rows.div_ceil(support.m_multiple) * support.m_multiple;
                let l = shape.l.min((CPU_MODEL_NKL / (shape.n * shape.k)).max(1));
                Shape::new(rows.min(shape.m), shape.n, shape.k, l).ok()
            };
            let Some(fitted) = fitted.map(|s| problem.normalize(s)) else {
                continue;
            };
            if !support.supports(fitted) {
                entry.left_out.push((
                    shape.to_string(),
                    format!("outside the kernel's support ({})", support.describe()),
                ));
                continue;
            }
            if cases.iter().any(|c| c.shape == fitted) {
                continue;
            }
            cases.push(CaseSpec {
                shape: fitted,
                dist: dists[cases.len() % dists.len()],
                seed: next_seed(),
            });
            entry.planned += 1;
        }
        if !on_gpu {
            entry.left_out.push((
                "every shape".into(),
                format!(
                    "a CPU kernel runs each (N, K, L) once at {} rows of M, L lowered to N K L <= \
                     2^28: it computes every output itself",
                    cpu_rows
                ),
            ));
        }
        coverage.push(entry);
    }
    (cases, coverage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_in_model_gives_its_dense_and_expert_gemms() {
        let deepseek = load_model("deepseek-v3").unwrap();
        let shapes = deepseek.shapes(DEFAULT_MAX_TOKENS);
        let tokens = token_counts(8192);
        assert_eq!(
            &tokens[..17],
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31]
        );
        assert!(tokens.contains(&4097) && tokens.ends_with(&[8191, 8192]));
        let all: Vec<Shape> = shapes
            .shapes
            .iter()
            .chain(&shapes.beyond_bound)
            .copied()
            .collect();
        // Dense: N 18432, K 7168; experts: N 2048, K 7168, L up to 256.
        assert!(all.contains(&Shape::new(1, 18432, 7168, 1).unwrap()));
        assert!(all.contains(&Shape::new(3, 2048, 7168, 256).unwrap()));
        assert!(all.iter().any(|s| s.l == 128));
        // 8192 tokens on each of 256 experts is past one GPU: listed, not run.
        assert!(shapes
            .beyond_bound
            .contains(&Shape::new(8192, 2048, 7168, 256).unwrap()));
        assert!(shapes
            .shapes
            .iter()
            .all(|s| s.m * s.k * s.l <= MODEL_ELEMENTS_BOUND));
    }

    #[test]
    fn a_config_file_is_read_and_a_bad_one_refused() {
        let dir = std::env::temp_dir().join(format!("models-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_string_lossy().into_owned()
        };
        let moe = write(
            "tiny-moe.json",
            r#"{"hidden_size": 256, "intermediate_size": 1024, "moe_intermediate_size": 96,
                "n_routed_experts": 6, "num_experts_per_tok": 2}"#,
        );
        let config = load_model(&moe).unwrap();
        assert_eq!(config.name, "tiny-moe");
        assert_eq!(
            (config.dense_ffn, config.expert_ffn, config.experts),
            (Some(1024), Some(96), Some(6))
        );
        let ls: std::collections::BTreeSet<usize> =
            config.shapes(64).shapes.iter().map(|s| s.l).collect();
        assert_eq!(ls.into_iter().collect::<Vec<_>>(), [1, 2, 4, 6]);
        let mixtral = write(
            "mixtral.json",
            r#"{"hidden_size": 4096, "intermediate_size": 14336, "num_local_experts": 8}"#,
        );
        let config = load_model(&mixtral).unwrap();
        assert_eq!(
            (config.dense_ffn, config.expert_ffn, config.experts),
            (None, Some(14336), Some(8))
        );
        for (text, says) in [
            ("{}", "no `hidden_size`"),
            (
                r#"{"hidden_size": 100, "intermediate_size": 64}"#,
                "multiple of 16",
            ),
            (r#"{"hidden_size": -4}"#, "positive whole number"),
            ("not json", "not JSON"),
            (r#"{"hidden_size": 256}"#, "no `intermediate_size`"),
        ] {
            let path = write("bad.json", text);
            let why = load_model(&path).unwrap_err();
            assert!(why.contains(says), "{text}: {why}");
        }
        assert!(load_model("no-such-model")
            .unwrap_err()
            .contains("deepseek-v3"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_cpu_kernel_runs_each_weight_once_thin() {
        let qwen = load_model("qwen2.5-7b").unwrap().shapes(DEFAULT_MAX_TOKENS);
        let (cases, coverage) = model_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            false,
            2,
            &Distribution::ALL,
            &[qwen.clone()],
            1,
        );
        // A decode step of one row and the thin rows of every other token count.
        let shapes: Vec<Shape> = cases.iter().map(|c| c.shape).collect();
        assert_eq!(
            shapes,
            [
                Shape::new(1, 18944, 3584, 1).unwrap(),
                Shape::new(2, 18944, 3584, 1).unwrap()
            ]
        );
        assert_eq!(coverage[0].planned, 2);
        let (gpu, coverage) = model_cases(
            ProblemKind::DualGemm,
            ShapeSupport::ANY,
            true,
            2,
            &Distribution::ALL,
            &[qwen.clone()],
            1,
        );
        assert_eq!(gpu.len(), qwen.shapes.len());
        assert!(coverage[0].left_out.is_empty());
        for dist in Distribution::ALL {
            assert!(gpu.iter().any(|c| c.dist == dist));
        }
    }
}
