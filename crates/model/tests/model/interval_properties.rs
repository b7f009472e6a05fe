//! The acceptance intervals are rigorous: simulated correct kernels (random block orders, split-K,
//! round-to-nearest and truncating f32 adds, a Hopper-like fused 16-term truncating adder, a
//! Blackwell-like exact-block adder, f32 silu with the platform's expf) always land inside
//! [lo, hi]. And they are tight: on non-cancelling cases they are at most 2 fp16 ulps wide.

use half::f16;
use nvfp4_model::model::bounds::{width_ulps, KOrder, MAX_SPLITS};
use nvfp4_model::model::exact::{exact_dot, PreparedRow};
use nvfp4_model::model::reference::dual_gemm_element;
use nvfp4_model::problem::generate::generate_dual_gemm;
use nvfp4_model::problem::{BlockScaledMatrix, Distribution, Shape, SCALE_BLOCK};
use proptest::prelude::*;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// How a simulated kernel adds one step into its accumulator.
#[derive(Debug, Clone, Copy)]
enum Adder {
    /// Block sum computed exactly, rounded to f32, added with round-to-nearest.
    BlockThenAddRne,
    /// The same with a truncating add.
    BlockThenAddRz,
    /// Accumulator and 16 products aligned to the largest exponent, each truncated toward zero
    /// (or floored) to 25 fractional bits, summed exactly, truncated to f32 (Hopper's model).
    FusedHopper { floor: bool },
    /// Accumulator and four exact scaled block sums aligned with 35 fractional bits (Blackwell).
    FusedBlackwell,
}

const ADDERS: [Adder; 5] = [
    Adder::BlockThenAddRne,
    Adder::BlockThenAddRz,
    Adder::FusedHopper { floor: false },
    Adder::FusedHopper { floor: true },
    Adder::FusedBlackwell,
];

/// f64 to f32 rounded toward zero.
fn to_f32_rz(x: f64) -> f32 {
    let r = x as f32;
    if f64::from(r).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// Exact a + b in f64 as (sum, error) (Knuth's TwoSum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

fn add_rz(a: f32, b: f32) -> f32 {
    let (s, e) = two_sum(f64::from(a), f64::from(b));
    let r = to_f32_rz(s);
    // s was rounded from s + e; if r sits exactly on s but s overshoots the exact sum, step down.
    if f64::from(r) == s && e != 0.0 && (e < 0.0) == (s > 0.0) && r != 0.0 {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    }
}

/// Truncates `values` (f64, exact) to multiples of 2^(emax - bits) and sums them exactly.
fn aligned_sum(values: &[f64], bits: i32, floor: bool) -> f64 {
    let max = values.iter().fold(0f64, |m, v| m.max(v.abs()));
    if max == 0.0 {
        return 0.0;
    }
    let emax = max.log2().floor() as i32;
    let quantum = 2f64.powi(emax - bits);
    let quanta: i128 = values
        .iter()
        .map(|v| {
            let q = v / quantum;
            (if floor { q.floor() } else { q.trunc() }) as i128
        })
        .sum();
    quanta as f64 * quantum
}

/// Fisher-Yates with the test's own portable RNG.
fn shuffle<T>(items: &mut [T], rng: &mut ChaCha8Rng) {
    for i in (1..items.len()).rev() {
        items.swap(i, (rng.next_u32() as usize) % (i + 1));
    }
}

struct Operand<'a>(&'a BlockScaledMatrix);

impl Operand<'_> {
    fn term(&self, row: usize, k: usize) -> f64 {
        f64::from(self.0.value(row, k, 0).to_f32())
            * f64::from(self.0.scale(row, k, 0).to_f32_as_unsigned_scale())
    }
}

/// One simulated f32 accumulation of row `m` of A against row `n` of B, in an order `order`
/// allows: contiguous runs (random cut points, random direction, partials combined in random
/// order) or a random permutation of steps over random accumulators.
fn simulate_dot(
    a: &BlockScaledMatrix,
    b: &BlockScaledMatrix,
    m: usize,
    n: usize,
    adder: Adder,
    order: KOrder,
    rng: &mut ChaCha8Rng,
) -> f32 {
    let (a, b) = (Operand(a), Operand(b));
    let blocks = a.0.k() / SCALE_BLOCK;
    let products = |j: usize| -> Vec<f64> {
        (j * SCALE_BLOCK..(j + 1) * SCALE_BLOCK)
            .map(|k| a.term(m, k) * b.term(n, k))
            .collect()
    };
    // Blackwell-style steps take 4 blocks; the others one.
    let group = if matches!(adder, Adder::FusedBlackwell) {
        4
    } else {
        1
    };
    let mut steps: Vec<Vec<usize>> = (0..blocks)
        .collect::<Vec<_>>()
        .chunks(group)
        .map(|c| c.to_vec())
        .collect();
    // Each run is one accumulator's steps in order; `Any` deals shuffled steps round-robin.
    let runs: Vec<Vec<Vec<usize>>> = match order {
        KOrder::Contiguous | KOrder::PerProduct => {
            let splits = 1 + (rng.next_u32() as usize) % MAX_SPLITS.min(steps.len());
            let mut cuts: Vec<usize> = (1..steps.len()).collect();
            shuffle(&mut cuts, rng);
            let mut cuts: Vec<usize> = cuts.into_iter().take(splits - 1).collect();
            cuts.sort_unstable();
            let mut bounds = vec![0];
            bounds.extend(cuts);
            bounds.push(steps.len());
            bounds
                .windows(2)
                .map(|w| {
                    let mut run = steps[w[0]..w[1]].to_vec();
                    if rng.next_u32() % 2 == 0 {
                        run.reverse();
                    }
                    run
                })
                .collect()
        }
        KOrder::Any => {
            shuffle(&mut steps, rng);
            let splits = 1 + (rng.next_u32() as usize) % 4;
            (0..splits)
                .map(|s| steps.iter().skip(s).step_by(splits).cloned().collect())
                .collect()
        }
    };
    let mut partials = vec![0f32; runs.len()];
    for (acc, run) in partials.iter_mut().zip(&runs) {
        for step in run {
            if order == KOrder::PerProduct {
                // One fused multiply-add per product, whatever the adder: fmaf, rounded to
                // nearest (each term is exact in f32).
                for j in step {
                    for k in j * SCALE_BLOCK..(j + 1) * SCALE_BLOCK {
                        *acc = (a.term(m, k) as f32).mul_add(b.term(n, k) as f32, *acc);
                    }
                }
                continue;
            }
            *acc = match adder {
                Adder::BlockThenAddRne => *acc + products(step[0]).iter().sum::<f64>() as f32,
                Adder::BlockThenAddRz => add_rz(*acc, products(step[0]).iter().sum::<f64>() as f32),
                Adder::FusedHopper { floor } => {
                    let mut operands = products(step[0]);
                    operands.push(f64::from(*acc));
                    to_f32_rz(aligned_sum(&operands, 25, floor))
                }
                Adder::FusedBlackwell => {
                    let mut operands: Vec<f64> =
                        step.iter().map(|&j| products(j).iter().sum()).collect();
                    operands.push(f64::from(*acc));
                    to_f32_rz(aligned_sum(&operands, 35, false))
                }
            };
        }
    }
    shuffle(&mut partials, rng);
    partials.iter().fold(0f32, |sum, &p| sum + p)
}

/// A kernel's f32 epilogue: the platform's expf, or (`fast`) the worst error CUDA's fast-math
/// intrinsics may make: `__expf` off by 2 + 1.16|x| ulps and `__fdividef` by 2 ulps, in the
/// direction `rng` picks.
fn epilogue(x1: f32, x2: f32, fast: bool, rng: &mut ChaCha8Rng) -> f16 {
    const ULP: f32 = 1.0 / 8_388_608.0;
    let mut sign = || {
        if rng.next_u32() % 2 == 0 {
            1.0f32
        } else {
            -1.0
        }
    };
    let (exp_error, div_error) = if fast {
        ((2.0 + 1.16 * x1.abs()) * ULP * sign(), 2.0 * ULP * sign())
    } else {
        (0.0, 0.0)
    };
    let e = (-x1).exp() * (1.0 + exp_error);
    let silu = x1 / (1.0 + e) * (1.0 + div_error);
    f16::from_f32(silu * x2)
}

fn check_case(
    shape: Shape,
    dist: Distribution,
    seed: u64,
    order: KOrder,
    positive_only: bool,
) -> Result<(), TestCaseError> {
    let mut inputs = generate_dual_gemm(shape, dist, seed);
    if positive_only {
        let clear_signs = |op: &BlockScaledMatrix| {
            let data = op.data().iter().map(|b| b & 0x77).collect();
            BlockScaledMatrix::new(
                "x",
                op.rows(),
                op.k(),
                op.batches(),
                data,
                op.scales().to_vec(),
            )
            .unwrap()
        };
        inputs.a = clear_signs(&inputs.a);
        inputs.b1 = clear_signs(&inputs.b1);
        inputs.b2 = clear_signs(&inputs.b2);
    }
    let (a, b1, b2) = (
        PreparedRow::all_rows(&inputs.a, 0),
        PreparedRow::all_rows(&inputs.b1, 0),
        PreparedRow::all_rows(&inputs.b2, 0),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5EED);
    #[allow(clippy::needless_range_loop)] // m and n index three operands and the simulation
    for m in 0..shape.m {
        for n in 0..shape.n {
            let (d1, d2) = (exact_dot(&a[m], &b1[n]), exact_dot(&a[m], &b2[n]));
            let (expected, lo, hi) = dual_gemm_element(&d1, &d2, shape.scale_cols(), order);
            if d1.nan || d2.nan {
                prop_assert!(expected.is_nan() && lo.is_nan() && hi.is_nan());
                continue;
            }
            prop_assert!(
                lo <= expected && expected <= hi,
                "expected {expected} outside [{lo}, {hi}]"
            );
            if positive_only {
                let width = width_ulps(lo, hi).unwrap();
                prop_assert!(
                    width <= 2,
                    "non-cancelling interval [{lo}, {hi}] is {width} ulps wide"
                );
            }
            for adder in ADDERS {
                let x1 = simulate_dot(&inputs.a, &inputs.b1, m, n, adder, order, &mut rng);
                let x2 = simulate_dot(&inputs.a, &inputs.b2, m, n, adder, order, &mut rng);
                for fast in [false, true] {
                    let got = epilogue(x1, x2, fast, &mut rng);
                    prop_assert!(
                        lo <= got && got <= hi,
                        "{adder:?}, {order:?}, fast epilogue {fast}, at (m={m}, n={n}): {got} outside [{lo}, {hi}] (x1 = {x1}, x2 = {x2}, model {expected})"
                    );
                }
            }
        }
    }
    Ok(())
}

fn small_shape() -> impl Strategy<Value = Shape> {
    (1usize..4, 1usize..4, 1usize..48)
        .prop_map(|(m, n, blocks)| Shape::new(m, n, blocks * SCALE_BLOCK, 1).unwrap())
}

fn any_dist() -> impl Strategy<Value = Distribution> {
    prop_oneof![
        Just(Distribution::Gpumode),
        Just(Distribution::Full),
        Just(Distribution::Adversarial),
        Just(Distribution::AdversarialNan)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn simulated_correct_kernels_land_inside_the_interval(shape in small_shape(), dist in any_dist(), seed in any::<u64>(), order in proptest::sample::select(KOrder::ALL.to_vec())) {
        check_case(shape, dist, seed, order, false)?;
    }

    #[test]
    fn non_cancelling_intervals_are_at_most_two_ulps_wide(shape in small_shape(), seed in any::<u64>()) {
        check_case(shape, Distribution::Gpumode, seed, KOrder::Contiguous, true)?;
        check_case(shape, Distribution::Gpumode, seed, KOrder::Any, true)?;
    }
}

/// Long K (the competition's 7168) on a few elements, every adder.
#[test]
fn long_k_cases_land_inside() {
    for (dist, seed) in [
        (Distribution::Gpumode, 1),
        (Distribution::Full, 2),
        (Distribution::Adversarial, 3),
    ] {
        for order in KOrder::ALL {
            check_case(Shape::new(2, 2, 7168, 1).unwrap(), dist, seed, order, false).unwrap();
        }
    }
}
