//! What a default GPU campaign covers, measured on its plan (no GPU needed): conjunctions of
//! shape ranges where real deployments run and where a kernel's code path plausibly changes,
//! each written against a public model's shapes, among them conjunctions of three and four
//! dimensions at deployment size. Every one must lie inside at least one case of every one of
//! 20 campaigns (20 seeds). They are not the draw's input: the draw knows only octaves of M, N,
//! K and L and where values branch (crates/harness/src/certify/campaign/range_draw.rs).

use nvfp4_harness::certify::CampaignPlan;
use nvfp4_harness::certify::Coverage;
use nvfp4_harness::certify::DEFAULT_GPU_RANGE_CASES;
use nvfp4_harness::certify::DEFAULT_GPU_REGIME_CASES;
use nvfp4_harness::certify::{CampaignLimits, DEFAULT_GPU_CASES};
use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest, ShapeSupport};
use nvfp4_model::problem::Shape;

/// A GPU kernel as a campaign plans it (it never runs here).
struct PlannedGpuKernel(ShapeSupport);

impl KernelUnderTest for PlannedGpuKernel {
    fn name(&self) -> &str {
        "planned-gpu-kernel"
    }
    fn support(&self) -> ShapeSupport {
        self.0
    }
    fn runs_on_gpu(&self) -> bool {
        true
    }
    fn run(&self, _: &KernelCase, _: &mut [half::f16]) -> Result<(), KernelFailure> {
        unreachable!("a plan runs nothing")
    }
}

/// The shapes of a default GPU campaign of `seed` (reference on the GPU).
fn planned_shapes(support: ShapeSupport, seed: u64) -> Vec<Shape> {
    let limits = CampaignLimits {
        cases: DEFAULT_GPU_CASES,
        range_cases: DEFAULT_GPU_RANGE_CASES,
        regime_cases: DEFAULT_GPU_REGIME_CASES,
        seed,
        ..CampaignLimits::default()
    };
    let plan = CampaignPlan::new(
        &PlannedGpuKernel(support),
        &limits,
        &[],
        &mut Coverage::default(),
    );
    plan.rows()
        .iter()
        .map(|r| Shape::new(r.m, r.n, r.k, r.l).unwrap())
        .collect()
}

type Predicate = (&'static str, fn(usize, usize, usize, usize) -> bool);

/// Whether `v` lies one past a multiple of `tile` (a last tile of one row or column).
fn one_past(v: usize, tile: usize) -> bool {
    v % tile == 1
}

/// Two-dimensional conjunctions and narrow values (what, inside): a deployment, a plausible
/// kernel branch, the conjunction.
const PAIRWISE: [Predicate; 17] = [
    // DeepSeek-V3: 256 routed experts at hidden 7168; an expert-offset table of 64 entries on
    // the deep-K path.
    ("L >= 65 and K >= 4096", |_, _, k, l| l >= 65 && k >= 4096),
    // Qwen3-235B-A22B: 128 experts of width 1536; a grouped schedule whose expert index is
    // 7 bits, on its narrow-N tile config.
    ("L >= 128 and N 1024-2047", |_, n, _, l| {
        l >= 128 && (1024..2048).contains(&n)
    }),
    // Llama-3.1-70B chunked prefill: 2048-8192 tokens against width 28672; a prefill tile
    // config chosen for M > 2048 that mishandles N past 16384.
    ("M 2049-8192 and N >= 16384", |m, n, _, _| {
        (2049..=8192).contains(&m) && n >= 16384
    }),
    // Qwen2.5-72B down projection (K = 29568, not a multiple of 256): a K tail on the deep path.
    ("K >= 16384 not a multiple of 256", |_, _, k, _| {
        k >= 16384 && k % 256 != 0
    }),
    // Qwen2.5-72B gate/up (N = 29568): a 256-wide N tile's tail on the wide path.
    (
        "N >= 16384 not a multiple of 256 and M >= 64",
        |m, n, _, _| n >= 16384 && n % 256 != 0 && m >= 64,
    ),
    // A 16k-token prefill at hidden 4096: an M-chunk loop entered past 16384 rows with K deep
    // enough for a second pipeline stage.
    ("M > 16384 and K >= 1024", |m, _, k, _| {
        m > 16384 && k >= 1024
    }),
    // Every expert of DeepSeek-V3 active with 16 or more tokens each.
    ("L >= 129 and M >= 16", |m, _, _, l| l >= 129 && m >= 16),
    // A persistent kernel's tile queue past 4096 tiles with a deep K loop (70B prefill).
    ("more than 4096 output tiles and K >= 4096", |m, n, k, l| {
        m.div_ceil(128) * n.div_ceil(128) * l > 4096 && k >= 4096
    }),
    // A few batches with a very deep K (long-context attention-like GEMMs).
    ("L 2-4 and K >= 16384", |_, _, k, l| {
        (2..=4).contains(&l) && k >= 16384
    }),
    // DeepSeek-V3 decode at batch 64-256: 17-64 tokens on each of 33 or more experts.
    ("M 17-64 and L >= 33", |m, _, _, l| {
        (17..=64).contains(&m) && l >= 33
    }),
    // A prefill's last row tile of one row, at scale: a 64-bit path that skips the partial
    // row tile past 2048 rows of a wide weight.
    ("M = 128j + 1 past 2048 and N >= 4096", |m, n, _, _| {
        m > 2048 && one_past(m, 128) && n >= 4096
    }),
    // A vocabulary-sized or wide weight's last column tile of one column.
    ("N = 128j + 1 past 8192 and M >= 16", |m, n, _, _| {
        n > 8192 && one_past(n, 128) && m >= 16
    }),
    // The last row tile of 64 rows short by one, on a deep K.
    ("M = 64j - 1 past 1024 and K >= 4096", |m, _, k, _| {
        m > 1024 && m % 64 == 63 && k >= 4096
    }),
    // A K loop of 64-deep stages with a 16- or 32-wide tail, deep.
    ("K >= 8192 not a multiple of 64", |_, _, k, _| {
        k >= 8192 && k % 64 != 0
    }),
    // An odd count of 128-wide column tiles past 8192 columns (a 2-CTA cluster's pair).
    (
        "N an odd count of 128-wide tiles past 8192 and M >= 128",
        |m, n, _, _| n > 8192 && n % 128 == 0 && (n / 128) % 2 == 1 && m >= 128,
    ),
    // Experts at a width one past a tile, many of them.
    ("L >= 17 and N = 128j + 1 past 1024", |_, n, _, l| {
        l >= 17 && n > 1024 && one_past(n, 128)
    }),
    // Decode rows against a deep K of 32k and more (a split-K's reduction).
    ("M 1-8 and K >= 32768", |m, _, k, _| m <= 8 && k >= 32768),
];

/// Conjunctions of three or more dimensions, each at deployment size (a thousand or more in
/// each of N and K, or their model's own sizes): (what, inside).
const AT_DEPLOYMENT_SIZE: [Predicate; 16] = [
    // Many experts with real weights: an expert table past 64 entries on real weights.
    ("L >= 64, N >= 1024 and K >= 1024", |_, n, k, l| {
        l >= 64 && n >= 1024 && k >= 1024
    }),
    // A decode step on a 70B-size layer: tens of tokens against N and K of 8192 and more.
    ("M 10-99, N >= 8192 and K >= 8192", |m, n, k, _| {
        (10..=99).contains(&m) && n >= 8192 && k >= 8192
    }),
    // Long prefill on a wide FFN (Llama-3.1-70B's 28672).
    ("M 2049-8192, N >= 16384 and K >= 4096", |m, n, k, _| {
        (2049..=8192).contains(&m) && n >= 16384 && k >= 4096
    }),
    // Mixtral-8x7B: 8 experts, hidden 4096, width 14336; a batched kernel whose per-batch
    // stride is 32-bit on its wide-N path.
    ("L 5-8, N >= 8192 and K >= 2048", |_, n, k, l| {
        (5..=8).contains(&l) && n >= 8192 && k >= 2048
    }),
    // A decode step against a vocabulary-sized weight (Llama-3 lm_head, N 128256, K 4096).
    ("M 1-8, N > 65536 and K >= 1024", |m, n, k, _| {
        m <= 8 && n > 65536 && k >= 1024
    }),
    // Llama-3.1-70B decode at batch 65-128 against its 28672-wide weight.
    ("M 65-128, N >= 16384 and K >= 4096", |m, n, k, _| {
        (65..=128).contains(&m) && n >= 16384 && k >= 4096
    }),
    // Mid M with mid N and mid K: a tile config picked for medium problems (chunked prefill
    // of an 8B model: 1024 x 14336 x 4096 with the kernel's own thresholds).
    ("M 1025-2048, N 4097-16384 and K 2049-8192", |m, n, k, _| {
        (1025..=2048).contains(&m) && (4097..=16384).contains(&n) && (2049..=8192).contains(&k)
    }),
    // DeepSeek-V3 decode: a few tokens per expert, many experts, hidden 7168: a small-M
    // expert path that packs the expert index in 3 bits.
    ("M 1-16, L >= 9 and K >= 2048", |m, _, k, l| {
        m <= 16 && l >= 9 && k >= 2048
    }),
    // Llama-3-8B down projection at decode (N 4096, K 14336): split-K chosen for small M and
    // deep K, the splits' reduction wrong when N is not a multiple of the split tile.
    ("M 1-64, N 2048-8191 and K >= 8192", |m, n, k, _| {
        m <= 64 && (2048..8192).contains(&n) && k >= 8192
    }),
    // Batched prefill of a small model: rows past 4096 in each of several batches.
    ("M > 4096, L >= 2 and N >= 256", |m, n, _, l| {
        m > 4096 && l >= 2 && n >= 256
    }),
    // Mixtral experts at prefill: 257-1024 tokens each on several experts, N 1025-4096.
    ("M 257-1024, N 1025-4096 and L >= 2", |m, n, _, l| {
        (257..=1024).contains(&m) && (1025..=4096).contains(&n) && l >= 2
    }),
    // Qwen2.5-7B gate/up (hidden 3584, not a multiple of 1024; width 18944): a K loop of
    // 1024-deep stages whose tail is mishandled on the wide path.
    (
        "K 2049-4095 not a multiple of 1024 and N >= 16384",
        |_, n, k, _| (2049..4096).contains(&k) && k % 1024 != 0 && n >= 16384,
    ),
    // DeepSeek-V3 decode on real expert weights: a few tokens on each of many experts of
    // width 2048 and more at a deep hidden size.
    ("M 1-16, L >= 16, N >= 2048 and K >= 2048", |m, n, k, l| {
        m <= 16 && l >= 16 && n >= 2048 && k >= 2048
    }),
    // Experts at prefill: hundreds of tokens on 16 or more experts of real width.
    (
        "M >= 256, L >= 16, N >= 1024 and K >= 1024",
        |m, n, k, l| m >= 256 && l >= 16 && n >= 1024 && k >= 1024,
    ),
    // A tall prefill against a mid weight with a deep K (a 2-stage M loop and a deep pipeline).
    ("M > 8192, N 1024-4095 and K >= 4096", |m, n, k, _| {
        m > 8192 && (1024..4096).contains(&n) && k >= 4096
    }),
    // Split-K on a wide weight at decode, K past 16k.
    ("M 1-64, N >= 4096 and K >= 16384", |m, n, k, _| {
        m <= 64 && n >= 4096 && k >= 16384
    }),
];

#[test]
fn every_conjunction_is_reached_by_every_gpu_campaign() {
    const SEEDS: u64 = 20;
    assert!(PAIRWISE.len() + AT_DEPLOYMENT_SIZE.len() >= 30);
    assert!(AT_DEPLOYMENT_SIZE.len() >= 12);
    let campaigns: Vec<Vec<Shape>> = (0..SEEDS)
        .map(|seed| planned_shapes(ShapeSupport::ANY, 0x5eed_0000 + seed))
        .collect();
    let cost = |s: &Shape| (s.m * s.k + 2 * s.n * s.k + s.m * s.n) * s.l;
    let products = |s: &Shape| s.m as f64 * s.n as f64 * s.k as f64 * s.l as f64;
    let first = &campaigns[0];
    println!(
        "seed 0: {} cases, {:.3e} elements moved, {:.3e} multiply-adds",
        first.len(),
        first.iter().map(cost).sum::<usize>() as f64,
        first.iter().map(products).sum::<f64>()
    );
    let mut misses = Vec::new();
    for (what, inside) in PAIRWISE.iter().chain(&AT_DEPLOYMENT_SIZE) {
        let reached = campaigns
            .iter()
            .filter(|shapes| shapes.iter().any(|s| inside(s.m, s.n, s.k, s.l)))
            .count();
        println!("{reached:>2} of {SEEDS}: {what}");
        if reached < SEEDS as usize {
            misses.push(format!("{what}: {reached} of {SEEDS}"));
        }
    }
    assert!(misses.is_empty(), "{misses:?}");
}

/// A campaign that declares a model runs its shapes (fixed, not drawn): each model's own
/// conjunction lies inside them.
#[test]
fn a_declared_model_reaches_its_own_conjunctions() {
    use nvfp4_harness::certify::{load_model, DEFAULT_MAX_TOKENS};
    let by_model: [(&str, &str); 3] = [
        ("mixtral-8x7b", "L 5-8, N >= 8192 and K >= 2048"),
        ("llama-3-70b", "M 65-128, N >= 16384 and K >= 4096"),
        ("llama-3-8b", "M 1025-2048, N 4097-16384 and K 2049-8192"),
    ];
    for (model, what) in by_model {
        let (_, inside) = AT_DEPLOYMENT_SIZE
            .iter()
            .find(|(w, _)| *w == what)
            .expect("a listed conjunction");
        let shapes = load_model(model).unwrap().shapes(DEFAULT_MAX_TOKENS);
        assert!(
            shapes.shapes.iter().any(|s| inside(s.m, s.n, s.k, s.l)),
            "--model {model} does not reach {what}"
        );
    }
}
