//! The fast step functions (`model::mma::fast`) against the model definitions they replace, bit
//! for bit: 10^5 random steps per property, infinities, NaNs, signed zeros, subnormals and
//! exact cancellations included (Blackwell: in its UE4M3 and both UE8M0 scale forms); and the
//! fast Hopper step against the committed H100 vectors.

use crate::common;
use half::f16;
use nvfp4_model::formats::{E2m1, E4m3};
use nvfp4_model::model::mma::fast::{
    blackwell_block_scaled_step_fast, blackwell_mxf4nvf4_step_fast, blackwell_nvfp4_step,
    hopper_hmma_step_fast, hopper_nvfp4_step, NvBlock,
};
use nvfp4_model::model::mma::probe::parse_records;
use nvfp4_model::model::mma::{
    blackwell_block_scaled_step, blackwell_mxf4nvf4_step, hopper_hmma_step, BlackwellScales,
};
use proptest::prelude::*;

const STEPS: u32 = 100_000;

/// Any fp16, weighted: mostly finite in a narrow exponent band (cancellations, carries), the
/// whole finite range, subnormals, signed zeros, and now and then inf or NaN.
fn fp16() -> impl Strategy<Value = f16> {
    let bits = |sign: bool, field: u16, fraction: u16| {
        f16::from_bits(u16::from(sign) << 15 | field << 10 | (fraction & 0x3FF))
    };
    prop_oneof![
        40 => (any::<bool>(), 12u16..19, any::<u16>()).prop_map(move |(s, e, f)| bits(s, e, f)),
        20 => (any::<bool>(), 0u16..31, any::<u16>()).prop_map(move |(s, e, f)| bits(s, e, f)),
        4 => (any::<bool>(), any::<u16>()).prop_map(move |(s, f)| bits(s, 0, f)),
        4 => any::<bool>().prop_map(|s| if s { f16::NEG_ZERO } else { f16::ZERO }),
        1 => prop_oneof![Just(f16::INFINITY), Just(f16::NEG_INFINITY), Just(f16::NAN)],
    ]
}

/// An f32 accumulator: every magnitude, subnormals, signed zeros, rarely inf or NaN.
fn accumulator(exponents: std::ops::Range<i32>) -> impl Strategy<Value = f32> {
    prop_oneof![
        30 => (any::<bool>(), exponents, 0u32..1 << 23).prop_map(|(s, e, f)| {
            f32::from_bits(u32::from(s) << 31 | ((e + 127) as u32) << 23 | f)
        }),
        6 => any::<u32>().prop_map(|b| f32::from_bits(b & !(0xFF << 23) | (b % 254 + 1) << 23)),
        3 => (any::<bool>(), 1u32..1 << 23).prop_map(|(s, f)| f32::from_bits(u32::from(s) << 31 | f)),
        4 => prop_oneof![Just(0.0f32), Just(-0.0f32)],
        1 => prop_oneof![Just(f32::INFINITY), Just(f32::NEG_INFINITY), Just(f32::NAN)],
    ]
}

fn codes<const N: usize>() -> impl Strategy<Value = [E2m1; N]> {
    proptest::collection::vec(0u8..16, N)
        .prop_map(|v| std::array::from_fn(|k| E2m1::from_bits(v[k])))
}

/// Scale bytes: any code (NaN 0x7F / 0xFF and sign bits included), or a narrow band of normal
/// scales so that blocks are comparable and C competes with them.
fn scale() -> impl Strategy<Value = E4m3> {
    prop_oneof![
        3 => any::<u8>(),
        2 => 0x30u8..0x48,
    ]
    .prop_map(E4m3::from_bits)
}

/// The fp16 operand a Hopper kernel builds: e2m1 times the scale's magnitude, exact.
fn operand(values: &[E2m1; 16], scale: E4m3) -> [f16; 16] {
    std::array::from_fn(|k| f16::from_f32(values[k].to_f32() * scale.to_f32_as_unsigned_scale()))
}

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: STEPS, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn hopper_fast_step_equals_the_model_on_any_fp16(
        c in accumulator(-40..40),
        a in proptest::array::uniform16(fp16()),
        b in proptest::array::uniform16(fp16()),
        cancel in 0usize..4,
    ) {
        // Half the time the second half of the products cancels the first exactly (or nearly).
        let (mut a, mut b) = (a, b);
        if cancel > 1 {
            for k in 0..8 {
                a[k + 8] = a[k];
                b[k + 8] = -b[k];
            }
            if cancel == 3 {
                b[15] = f16::from_bits(b[15].to_bits() ^ 1);
            }
        }
        let (fast, model) = (hopper_hmma_step_fast(c, &a, &b), hopper_hmma_step(c, &a, &b));
        prop_assert!(same(fast, model), "C = {c:e} ({:#x}): fast {fast:e} ({:#x}), model {model:e} ({:#x})", c.to_bits(), fast.to_bits(), model.to_bits());
    }

    #[test]
    fn hopper_nvfp4_step_equals_the_model_on_its_fp16_operands(
        c in accumulator(-30..30),
        a in codes::<16>(), sa in scale(),
        b in codes::<16>(), sb in scale(),
        cancel in any::<bool>(),
    ) {
        let (x, y) = (NvBlock::new(&a, sa), NvBlock::new(&b, sb));
        let (a16, b16) = (operand(&a, sa), operand(&b, sb));
        prop_assert_eq!(x.to_f16().map(f16::to_bits), a16.map(f16::to_bits));
        // C = minus the exact sum, rounded: the result is a small residue or zero.
        let c = if cancel {
            -(a16.iter().zip(&b16).map(|(p, q)| p.to_f64() * q.to_f64()).sum::<f64>() as f32)
        } else {
            c
        };
        let model = hopper_hmma_step(c, &a16, &b16);
        let fast = hopper_nvfp4_step(c, &x, &y);
        prop_assert!(same(fast, model), "C = {c:e}: fast {fast:e} ({:#x}), model {model:e} ({:#x})", fast.to_bits(), model.to_bits());
        prop_assert!(same(hopper_hmma_step_fast(c, &a16, &b16), model));
    }

    #[test]
    fn blackwell_fast_step_equals_the_model_padded_or_not(
        c in accumulator(-30..40),
        a in codes::<64>(), sfa in proptest::array::uniform4(scale()),
        b in codes::<64>(), sfb in proptest::array::uniform4(scale()),
        blocks in 1usize..=4,
        cancel in any::<bool>(),
    ) {
        // The last step of a K % 64 != 0 problem: blocks past `blocks` padded with zero e2m1
        // values and scale 0, which the fast step never sees.
        let zero = E2m1::from_bits(0);
        let (mut a, mut b, mut sfa, mut sfb) = (a, b, sfa, sfb);
        for k in blocks * 16..64 {
            a[k] = zero;
            b[k] = zero;
        }
        for j in blocks..4 {
            sfa[j] = E4m3::from_bits(0);
            sfb[j] = E4m3::from_bits(0);
        }
        let c = if cancel {
            -((0..64).map(|k| f64::from(a[k].to_f32() * sfa[k / 16].to_f32_as_unsigned_scale()) * f64::from(b[k].to_f32() * sfb[k / 16].to_f32_as_unsigned_scale())).sum::<f64>() as f32)
        } else {
            c
        };
        let model = blackwell_mxf4nvf4_step(c, &a, sfa, &b, sfb);
        let x: Vec<NvBlock> = (0..blocks).map(|j| NvBlock::new(a[j * 16..j * 16 + 16].try_into().unwrap(), sfa[j])).collect();
        let y: Vec<NvBlock> = (0..blocks).map(|j| NvBlock::new(b[j * 16..j * 16 + 16].try_into().unwrap(), sfb[j])).collect();
        let fast = blackwell_nvfp4_step(c, &x, &y);
        prop_assert!(same(fast, model) || (fast.is_nan() && model.is_nan()), "C = {c:e}: fast {fast:e} ({:#x}), model {model:e} ({:#x})", fast.to_bits(), model.to_bits());
        prop_assert!(same(fast, model), "NaN bits: fast {:#x}, model {:#x}", fast.to_bits(), model.to_bits());
        prop_assert!(same(blackwell_mxf4nvf4_step_fast(c, &a, sfa, &b, sfb), model));
    }

    #[test]
    fn blackwell_fast_step_equals_the_model_in_every_scale_form(
        form in 0usize..3,
        c in accumulator(-150..128),
        a in codes::<64>(), sfa in proptest::array::uniform4(prop_oneof![3 => any::<u8>(), 2 => 110u8..145]),
        b in codes::<64>(), sfb in proptest::array::uniform4(prop_oneof![3 => any::<u8>(), 2 => 110u8..145]),
    ) {
        // UE8M0 scales reach 2^-254 and 2^254 per product: results below the f32 subnormals
        // (+0) and past 2^128 (infinity), and C in the maximum at -126 when zero.
        let scales = BlackwellScales::ALL[form];
        let model = blackwell_block_scaled_step(scales, c, &a, sfa, &b, sfb);
        let fast = blackwell_block_scaled_step_fast(scales, c, &a, sfa, &b, sfb);
        prop_assert!(same(fast, model), "{scales:?} C = {c:e}: fast {fast:e} ({:#x}), model {model:e} ({:#x})", fast.to_bits(), model.to_bits());
    }
}

#[test]
fn fast_hopper_step_matches_the_h100_bit_for_bit() {
    let path = common::repo_path("golden/conformance/hopper_mma_f16_f32.bin");
    let records = parse_records(&std::fs::read(&path).expect("committed vectors")).unwrap();
    for (i, r) in records.iter().enumerate() {
        let fast = hopper_hmma_step_fast(r.c, &r.a, &r.b).to_bits();
        assert_eq!(
            fast, r.d,
            "record {i}: fast {fast:#010x}, H100 {:#010x}",
            r.d
        );
    }
}
