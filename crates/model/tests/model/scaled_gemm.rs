//! The block-scaled family's model: its exact reference equals an f64 definition where f64 is
//! exact, every contract-abiding accumulation (simulated here in f32) lands inside its interval
//! for every format pairing, output type and epilogue, and NaN and infinities follow IEEE.

use nvfp4_model::model::scaled_gemm::{scaled_gemm_reference, Accepted};
use nvfp4_model::problem::scaled_gemm::{
    Epilogue, OperandFormat, OutDtype, ScaledGemmInputs, ScaledOperand,
};
use nvfp4_model::problem::scaled_generate::{random_operand, ScaledDistribution};

/// One drawn case of the family.
struct Case {
    a: OperandFormat,
    b: OperandFormat,
    shape: (usize, usize, usize),
    distribution: ScaledDistribution,
    seed: u64,
    out: OutDtype,
    epilogue: Epilogue,
    alpha: f32,
    with_bias: bool,
}

impl Case {
    fn inputs(&self) -> ScaledGemmInputs {
        let (m, n, k) = self.shape;
        let a = random_operand(self.a, m, k, self.distribution, self.seed, 0);
        let b = random_operand(self.b, n, k, self.distribution, self.seed, 1);
        let bias = self.with_bias.then(|| {
            (0..n)
                .map(|j| {
                    let value = (j as f32 - 2.5) * 0.375;
                    if self.epilogue == Epilogue::F32 {
                        value
                    } else {
                        self.out.round(f64::from(value)) as f32
                    }
                })
                .collect()
        });
        ScaledGemmInputs::new(a, b, self.alpha, bias, self.out, self.epilogue).unwrap()
    }
}

fn products(inputs: &ScaledGemmInputs, row: usize, col: usize) -> Vec<f64> {
    (0..inputs.k())
        .map(|k| {
            inputs
                .a
                .value(row, k)
                .times(inputs.b.value(col, k))
                .to_f64()
        })
        .collect()
}

/// The three epilogues written out from their definitions, `acc` an f32 accumulator; for the f32
/// epilogue `fused` picks one FMA.
fn epilogue(inputs: &ScaledGemmInputs, col: usize, acc: f32, fused: bool) -> f64 {
    let out = |x: f64| inputs.out.round(x);
    let bias = inputs.bias.as_ref().map_or(0.0, |b| b[col]);
    let alpha = inputs.alpha;
    match inputs.epilogue {
        Epilogue::F32 if fused => out(f64::from(alpha.mul_add(acc, bias))),
        Epilogue::F32 => out(f64::from((f64::from(alpha) * f64::from(acc)) as f32 + bias)),
        Epilogue::BiasInOutput => out(out(f64::from(alpha * acc)) + f64::from(bias)),
        Epilogue::AfterCast => {
            out(out(out(f64::from(acc)) * out(f64::from(alpha))) + f64::from(bias))
        }
    }
}

#[test]
fn the_exact_reference_equals_an_f64_definition_where_f64_is_exact() {
    let mut compared = 0;
    for (i, a) in OperandFormat::ALL.into_iter().enumerate() {
        for (j, b) in OperandFormat::ALL.into_iter().enumerate() {
            for out in OutDtype::ALL {
                for order in Epilogue::ALL {
                    let seed = (i * 6 + j) as u64;
                    let x = Case {
                        a,
                        b,
                        shape: (3, 5, 64),
                        distribution: ScaledDistribution::Moderate,
                        seed,
                        out,
                        epilogue: order,
                        alpha: 0.75,
                        with_bias: true,
                    }
                    .inputs();
                    let reference = scaled_gemm_reference(&x);
                    for row in 0..3 {
                        for col in 0..5 {
                            let terms = products(&x, row, col);
                            // Sum in f64 and check with TwoSum that no addition rounded.
                            let mut sum = 0.0f64;
                            let mut exact = true;
                            for &t in &terms {
                                let s = sum + t;
                                let bb = s - sum;
                                exact &= (sum - (s - bb)) + (t - bb) == 0.0;
                                sum = s;
                            }
                            if !exact {
                                continue;
                            }
                            let want = epilogue(&x, col, sum as f32, false);
                            let got = reference.expected[row * 5 + col];
                            assert!(
                                got == want || (got.is_nan() && want.is_nan()),
                                "{} x {}, {}, {}: ({row}, {col}) {got} != {want}",
                                a.name(),
                                b.name(),
                                out.name(),
                                order.name()
                            );
                            compared += 1;
                        }
                    }
                }
            }
        }
    }
    // Most elements of the moderate distribution sum exactly in f64.
    assert!(compared > 36 * 9 * 15 * 3 / 4, "only {compared} compared");
}

/// The ways a correct kernel may accumulate, simulated in f32.
#[derive(Debug, Clone, Copy)]
enum Accumulation {
    /// One FMA per product, K increasing.
    PerProduct,
    /// One FMA per product, K decreasing.
    Reversed,
    /// Exact sums of `n` products (a fused adder), each added to the f32 accumulator.
    Groups(usize),
    /// `n` contiguous split-K partials of 16-groups, added at the end.
    SplitK(usize),
}

fn accumulate(terms: &[f64], how: Accumulation) -> f32 {
    let add = |acc: f32, x: f64| (f64::from(acc) + x) as f32;
    let groups = |terms: &[f64], size: usize| {
        terms
            .chunks(size)
            .fold(0f32, |acc, group| add(acc, group.iter().sum::<f64>()))
    };
    match how {
        Accumulation::PerProduct => terms.iter().fold(0f32, |acc, &t| add(acc, t)),
        Accumulation::Reversed => terms.iter().rev().fold(0f32, |acc, &t| add(acc, t)),
        Accumulation::Groups(size) => groups(terms, size),
        Accumulation::SplitK(parts) => {
            let length = terms.len().div_ceil(parts).div_ceil(16) * 16;
            terms
                .chunks(length)
                .map(|part| groups(part, 16))
                .fold(0f32, |acc, partial| acc + partial)
        }
    }
}

#[test]
fn every_simulated_accumulation_lands_inside_its_interval() {
    let ways = [
        Accumulation::PerProduct,
        Accumulation::Reversed,
        Accumulation::Groups(16),
        Accumulation::Groups(32),
        Accumulation::SplitK(3),
    ];
    // Judged and unjudged elements (the f32 accumulator could overflow) by distribution.
    let mut counts = std::collections::HashMap::<&str, (usize, usize)>::new();
    for (i, a) in OperandFormat::ALL.into_iter().enumerate() {
        for (j, b) in OperandFormat::ALL.into_iter().enumerate() {
            for distribution in ScaledDistribution::ALL {
                for (o, out) in OutDtype::ALL.into_iter().enumerate() {
                    let order = Epilogue::ALL[(i + j + o) % 3];
                    let alpha = [1.0, -0.3, 2.5e-3][(i + 2 * j) % 3];
                    let x = Case {
                        a,
                        b,
                        shape: (4, 4, 256),
                        distribution,
                        seed: 100 + (i * 6 + j) as u64,
                        out,
                        epilogue: order,
                        alpha,
                        with_bias: (i + j) % 2 == 0,
                    }
                    .inputs();
                    let reference = scaled_gemm_reference(&x);
                    for row in 0..4 {
                        for col in 0..4 {
                            let accepted = reference.accepted[row * 4 + col];
                            if accepted == Accepted::Unjudged {
                                counts.entry(distribution.name()).or_default().1 += 1;
                                continue;
                            }
                            let terms = products(&x, row, col);
                            for how in ways {
                                for fused in [false, true] {
                                    let got = epilogue(&x, col, accumulate(&terms, how), fused);
                                    assert!(
                                        accepted.accepts(got),
                                        "{} x {}, {:?}, {}, {}, {how:?}, fused {fused}: ({row}, \
                                         {col}) {got} outside {accepted:?}",
                                        a.name(),
                                        b.name(),
                                        distribution,
                                        out.name(),
                                        order.name()
                                    );
                                }
                            }
                            counts.entry(distribution.name()).or_default().0 += 1;
                        }
                    }
                }
            }
        }
    }
    // Two UE8M0 scales drawn from 2^-127..2^127 multiply past f32's range in most elements of the
    // whole-range distribution (about 63% here) and many of the edge one (0xFE is one scale byte
    // in five); moderate data never does. What is judged is still hundreds of elements.
    let count = |name: &str| counts.get(name).copied().unwrap_or_default();
    eprintln!("judged, unjudged: {counts:?}");
    assert_eq!(count("moderate").1, 0);
    assert!(
        3 * count("codes").0 > count("codes").0 + count("codes").1,
        "{counts:?}"
    );
    assert!(count("edges").0 > count("edges").1, "{counts:?}");
}

#[test]
fn intervals_are_narrow_on_moderate_data() {
    // bf16 output, K = 512: the accepted outputs are at most the two bf16 neighbours of the
    // reference for almost every element (a tolerance of 0.1 accepts hundreds).
    let x = Case {
        a: OperandFormat::Mxfp8E4m3,
        b: OperandFormat::Mxfp4,
        shape: (16, 16, 512),
        distribution: ScaledDistribution::Moderate,
        seed: 7,
        out: OutDtype::Bf16,
        epilogue: Epilogue::F32,
        alpha: 1.0,
        with_bias: false,
    }
    .inputs();
    let reference = scaled_gemm_reference(&x);
    let mut within_one_ulp = 0;
    for (accepted, &expected) in reference.accepted.iter().zip(&reference.expected) {
        let Accepted::Between { lo, hi } = *accepted else {
            panic!("{accepted:?}")
        };
        assert!(lo <= expected && expected <= hi);
        let ulp = 2f64.powi(expected.abs().log2().floor() as i32 - 7);
        if hi - lo <= 2.0 * ulp {
            within_one_ulp += 1;
        }
    }
    assert!(within_one_ulp * 100 >= 95 * 256, "{within_one_ulp} of 256");
}

fn one_by_one(a: ScaledOperand, b: ScaledOperand, out: OutDtype, alpha: f32) -> Accepted {
    let x = ScaledGemmInputs::new(a, b, alpha, None, out, Epilogue::F32).unwrap();
    scaled_gemm_reference(&x).accepted[0]
}

#[test]
fn nan_scales_nan_elements_and_infinities_follow_ieee() {
    let mx = |code: u16, scale: u8| {
        ScaledOperand::new(OperandFormat::Mxfp8E5m2, 1, 32, vec![code; 32], vec![scale]).unwrap()
    };
    let one = 0x3C; // e5m2 1.0
    let zero = 0x00;
    // UE8M0 0xFF is NaN even over zeros.
    assert_eq!(
        one_by_one(mx(zero, 0xFF), mx(one, 127), OutDtype::Bf16, 1.0),
        Accepted::NaN
    );
    // UE8M0 0x00 is 2^-127, not zero: against a scale of 2^127 each product is 1.
    let Accepted::Between { lo, hi } = one_by_one(mx(one, 0x00), mx(one, 0xFE), OutDtype::F32, 1.0)
    else {
        panic!("not an interval")
    };
    assert!(
        31.99 < lo && lo <= 32.0 && (32.0..32.01).contains(&hi),
        "[{lo}, {hi}]"
    );
    // In bf16 the f32 accumulator's error is far below half an ulp: exactly 32.
    assert_eq!(
        one_by_one(mx(one, 0x00), mx(one, 0xFE), OutDtype::Bf16, 1.0),
        Accepted::Between { lo: 32.0, hi: 32.0 }
    );
    // An infinite element: the sum is infinite; times zero it is NaN.
    let inf = 0x7C;
    assert_eq!(
        one_by_one(mx(inf, 127), mx(one, 127), OutDtype::F16, -2.0),
        Accepted::Between {
            lo: f64::NEG_INFINITY,
            hi: f64::NEG_INFINITY
        }
    );
    assert_eq!(
        one_by_one(mx(inf, 127), mx(zero, 127), OutDtype::F16, 1.0),
        Accepted::NaN
    );
    // NVFP4's NaN scale (e4m3 0x7F) and FP8's NaN element.
    let nvfp4 = |scale: u8| {
        ScaledOperand::new(OperandFormat::Nvfp4, 1, 16, vec![2; 16], vec![scale]).unwrap()
    };
    assert_eq!(
        one_by_one(nvfp4(0x7F), nvfp4(0x38), OutDtype::F16, 1.0),
        Accepted::NaN
    );
    let fp8 = |code: u16| {
        ScaledOperand::new(OperandFormat::Fp8E4m3, 1, 16, vec![code; 16], vec![]).unwrap()
    };
    assert_eq!(
        one_by_one(fp8(0x7F), fp8(0x38), OutDtype::F32, 1.0),
        Accepted::NaN
    );
}

#[test]
fn one_large_product_then_many_small_ones_stays_inside() {
    // 2^28 then 255 products of 14, each below half an f32 ulp of the accumulator (32): one FMA
    // per product loses every one of them, 3,570 in all, about 115 ulps of 2^28 relative to the
    // largest term. The bound must allow it (the worst case per 16-group is 8 such ulps).
    let bf16 = |x: f32| half::bf16::from_f32(x).to_bits();
    let mut codes = vec![bf16(14.0); 256];
    codes[0] = bf16(268_435_456.0);
    let a = ScaledOperand::new(OperandFormat::Bf16, 1, 256, codes, vec![]).unwrap();
    let b = ScaledOperand::new(OperandFormat::Bf16, 1, 256, vec![bf16(1.0); 256], vec![]).unwrap();
    let x = ScaledGemmInputs::new(a, b, 1.0, None, OutDtype::F32, Epilogue::F32).unwrap();
    let reference = scaled_gemm_reference(&x);
    assert_eq!(reference.expected[0], 268_439_040.0); // 2^28 + 3570, rounded to f32
    let terms = products(&x, 0, 0);
    for how in [
        Accumulation::PerProduct,
        Accumulation::Reversed,
        Accumulation::Groups(16),
        Accumulation::SplitK(4),
    ] {
        let got = epilogue(&x, 0, accumulate(&terms, how), false);
        assert!(reference.accepted[0].accepts(got), "{how:?}: {got}");
    }
    assert_eq!(accumulate(&terms, Accumulation::PerProduct), 268_435_456.0);
}

/// A Blackwell kernel for the MXFP8 pairings, simulated with the MMA-Sim-validated
/// `kind::mxf8f6f4` model (`model::mma::mxf8f6f4`): one instruction per 32 of K chained through
/// its f32 C, then each epilogue. Every judged element must be accepted, in every distribution
/// (a step of zero products under large scales may drop C: the intervals charge it,
/// docs/reference/numerics.md, section 10).
#[test]
fn a_simulated_blackwell_mxf8f6f4_kernel_lands_inside_its_intervals() {
    use nvfp4_model::model::mma::mxf8f6f4::{blackwell_mxf8f6f4_step, Fp8Type, MXF8F6F4_K};
    let fp8 = [
        (OperandFormat::Mxfp8E4m3, Fp8Type::E4m3),
        (OperandFormat::Mxfp8E5m2, Fp8Type::E5m2),
    ];
    let mut judged = 0;
    for (i, &(a, ta)) in fp8.iter().enumerate() {
        for (j, &(b, tb)) in fp8.iter().enumerate() {
            for distribution in ScaledDistribution::ALL {
                for (o, out) in OutDtype::ALL.into_iter().enumerate() {
                    let order = Epilogue::ALL[(i + j + o) % 3];
                    let x = Case {
                        a,
                        b,
                        shape: (4, 4, 256),
                        distribution,
                        seed: 300 + (i * 2 + j) as u64,
                        out,
                        epilogue: order,
                        alpha: [1.0, -0.3, 2.5e-3][(i + o) % 3],
                        with_bias: o % 2 == 0,
                    }
                    .inputs();
                    let reference = scaled_gemm_reference(&x);
                    let k = x.k();
                    for row in 0..4 {
                        for col in 0..4 {
                            let accepted = reference.accepted[row * 4 + col];
                            if accepted == Accepted::Unjudged {
                                continue;
                            }
                            let mut acc = 0f32;
                            for step in 0..k / MXF8F6F4_K {
                                let at = |op: &ScaledOperand, r: usize| -> [u8; MXF8F6F4_K] {
                                    std::array::from_fn(|t| {
                                        op.codes[r * k + step * MXF8F6F4_K + t] as u8
                                    })
                                };
                                let scale = |op: &ScaledOperand, r: usize| {
                                    op.scales[r * (k / MXF8F6F4_K) + step]
                                };
                                acc = blackwell_mxf8f6f4_step(
                                    acc,
                                    ta,
                                    &at(&x.a, row),
                                    scale(&x.a, row),
                                    tb,
                                    &at(&x.b, col),
                                    scale(&x.b, col),
                                );
                            }
                            for fused in [false, true] {
                                let got = epilogue(&x, col, acc, fused);
                                assert!(
                                    accepted.accepts(got),
                                    "{} x {}, {distribution:?}, {}, {}: ({row}, {col}) {got} \
                                     outside {accepted:?}",
                                    a.name(),
                                    b.name(),
                                    out.name(),
                                    order.name()
                                );
                            }
                            judged += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(judged > 300, "{judged} judged");
}

/// MMA-Sim's Blackwell adders put zero blocks in their maximum, aligned by their scales: a step of
/// zero blocks under large scales cuts the accumulator it is given. Both instructions' models do
/// it here, and the intervals accept what they give.
#[test]
fn a_zero_block_under_large_scales_may_cut_a_blackwell_accumulator() {
    use nvfp4_model::formats::E2m1;
    use nvfp4_model::model::mma::mxf8f6f4::{blackwell_mxf8f6f4_step, Fp8Type};
    use nvfp4_model::model::mma::{blackwell_block_scaled_step, BlackwellScales};
    let judge = |a: ScaledOperand, b: ScaledOperand| -> Accepted {
        scaled_gemm_reference(
            &ScaledGemmInputs::new(a, b, 1.0, None, OutDtype::F32, Epilogue::F32).unwrap(),
        )
        .accepted[0]
    };
    // NVFP4, K = 128 (two mxf4nvf4 steps): 0.5 x 0.5 under UE4M3 scales 2^-9 gives C = 2^-20;
    // then A's blocks are zero under scale 448 (B's ones under 448): aligned at 16, C is cut to
    // a multiple of 2^-19, 0.
    let a: Vec<u16> = (0..128).map(|k| u16::from(k == 0)).collect();
    let b: Vec<u16> = (0..128).map(|k| if k == 0 { 1 } else { 2 }).collect();
    let scales = vec![0x01u8, 0x01, 0x01, 0x01, 0x7E, 0x7E, 0x7E, 0x7E];
    let mut acc = 0f32;
    for step in 0..2 {
        let codes = |v: &[u16]| -> [E2m1; 64] {
            std::array::from_fn(|t| E2m1::from_bits(v[step * 64 + t] as u8))
        };
        let s: [u8; 4] = std::array::from_fn(|t| scales[step * 4 + t]);
        acc = blackwell_block_scaled_step(
            BlackwellScales::Block16Ue4m3,
            acc,
            &codes(&a),
            s,
            &codes(&b),
            s,
        );
    }
    assert_eq!(acc, 0.0, "the model cuts C = 2^-20");
    let accepted = judge(
        ScaledOperand::new(OperandFormat::Nvfp4, 1, 128, a, scales.clone()).unwrap(),
        ScaledOperand::new(OperandFormat::Nvfp4, 1, 128, b, scales).unwrap(),
    );
    assert!(
        accepted.accepts(0.0) && accepted.accepts(2f64.powi(-20)),
        "{accepted:?}"
    );
    // Still narrow: 2^-20 plus 4 x 2^(16 - 32).
    assert!(!accepted.accepts(0.5), "{accepted:?}");
    // With every product zero there is no accumulator to cut: no charge, zero stays narrow.
    let zeros = ScaledOperand::new(OperandFormat::Nvfp4, 1, 128, vec![0; 128], vec![0x7E; 8]);
    let ones = ScaledOperand::new(OperandFormat::Nvfp4, 1, 128, vec![2; 128], vec![0x7E; 8]);
    let accepted = judge(zeros.unwrap(), ones.unwrap());
    assert!(
        accepted.accepts(0.0) && !accepted.accepts(2f64.powi(-100)),
        "{accepted:?}"
    );

    // MXFP8 e4m3 x e5m2, K = 64: 1 x 1 at scale 1 (C = 1), then A zero under 2^127, B 1 under 2^127.
    let a: Vec<u16> = (0..64).map(|k| if k == 0 { 0x38 } else { 0 }).collect();
    let b: Vec<u16> = (0..64)
        .map(|k| {
            if k < 32 {
                u16::from(k == 0) * 0x3C
            } else {
                0x3C
            }
        })
        .collect();
    let scales = vec![127u8, 254];
    let mut acc = 0f32;
    for step in 0..2 {
        let codes = |v: &[u16]| -> [u8; 32] { std::array::from_fn(|t| v[step * 32 + t] as u8) };
        acc = blackwell_mxf8f6f4_step(
            acc,
            Fp8Type::E4m3,
            &codes(&a),
            scales[step],
            Fp8Type::E5m2,
            &codes(&b),
            scales[step],
        );
    }
    assert_eq!(acc, 0.0, "the model drops C = 1");
    let accepted = judge(
        ScaledOperand::new(OperandFormat::Mxfp8E4m3, 1, 64, a, scales.clone()).unwrap(),
        ScaledOperand::new(OperandFormat::Mxfp8E5m2, 1, 64, b, scales).unwrap(),
    );
    // Scales aligned at 254: 2^222 of possible error, past f32's range: not judged.
    assert_eq!(accepted, Accepted::Unjudged);
}
