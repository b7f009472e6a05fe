//! Generators are deterministic across machines (pinned hashes), and the scale layouts are
//! bijections on their unpadded region.

use nvfp4_model::layout::{blocked_to_plain, plain_to_blocked, BlockedScaleLayout, ScaleDims};
use nvfp4_model::problem::generate::{generate_dual_gemm, generate_group_gemm};
use nvfp4_model::problem::{Distribution, Shape};
use proptest::prelude::*;
use sha2::{Digest, Sha256};
use std::collections::HashSet;

fn dual_gemm_hash(dist: Distribution) -> String {
    let inputs = generate_dual_gemm(Shape::new(130, 70, 96, 2).unwrap(), dist, 1111);
    let mut hasher = Sha256::new();
    for operand in [&inputs.a, &inputs.b1, &inputs.b2] {
        hasher.update(operand.data());
        hasher.update(operand.scales());
    }
    format!("{:x}", hasher.finalize())
}

/// These hashes were computed once; identical bytes on every machine and every run keep them.
/// A change here is a change of every generated case: bump the model version and regenerate
/// the golden set.
#[test]
fn generated_bytes_are_pinned() {
    let pinned = [
        (
            Distribution::Gpumode,
            "3b60d61e7f99ffe1bbde58047ec96c9f004387e664ea7ced9ae8f06e36ae7c9d",
        ),
        (
            Distribution::Full,
            "bdf27869c16e9d1e660a83d950784e9802d1dcfe095897328af7b46e9361bbee",
        ),
        (
            Distribution::Adversarial,
            "d3956b173a565cd5ebcc5e56cd7127babf45679b3c2c10d3ed74922b8b97ca4f",
        ),
        (
            // Re-pinned when the scale sign bits the campaign always set moved into the
            // generator (so `generate` gives the campaign's bytes); no expected, lo or hi bit
            // changed (tests/oracle/golden.rs), so the model version stands.
            Distribution::AdversarialNan,
            "811f36374d56f0af7b70590b571e2b07b4d2fa3872b1d6137c37eccaea467079",
        ),
    ];
    for (dist, expected) in pinned {
        assert_eq!(
            dual_gemm_hash(dist),
            expected,
            "{} generator output changed",
            dist.name()
        );
    }
}

#[test]
fn gpumode_inputs_follow_the_competition() {
    let inputs = generate_dual_gemm(
        Shape::new(64, 64, 256, 1).unwrap(),
        Distribution::Gpumode,
        5,
    );
    assert!(
        inputs.a.data().iter().all(|b| b & !0b1011_1011 == 0),
        "FP4 bytes are masked with 0b1011_1011"
    );
    assert!(
        inputs.b1.scales().iter().all(|&s| s <= 0x38),
        "scales are e4m3(uniform[0, 1)), at most 1 after rounding"
    );
    let groups = [
        Shape::new(40, 64, 128, 1).unwrap(),
        Shape::new(8, 32, 64, 1).unwrap(),
    ];
    let grouped = generate_group_gemm(&groups, Distribution::Gpumode, 5).unwrap();
    for group in &grouped.groups {
        assert!(
            group
                .a
                .scales()
                .iter()
                .chain(group.b.scales())
                .all(|&s| s == 0x38 || s == 0x40),
            "grouped scales are 1 or 2"
        );
    }
}

#[test]
fn adversarial_nan_has_nan_scales_and_nan_padding() {
    let inputs = generate_dual_gemm(
        Shape::new(64, 64, 256, 1).unwrap(),
        Distribution::AdversarialNan,
        9,
    );
    assert!(inputs.a.scales().contains(&0x7F) || inputs.b1.scales().contains(&0x7F));
    assert_eq!(Distribution::AdversarialNan.blocked_padding_fill(), 0x7F);
}

proptest! {
    #[test]
    fn blocked_layout_is_a_bijection_on_the_unpadded_region(rows in 1usize..300, cols in 1usize..12, batches in 1usize..3) {
        let dims = ScaleDims { rows, cols, batches };
        let layout = BlockedScaleLayout(dims);
        let mut seen = HashSet::new();
        for l in 0..batches {
            for i in 0..rows {
                for j in 0..cols {
                    let offset = layout.offset(i, j, l);
                    prop_assert!(offset < layout.len());
                    prop_assert!(seen.insert(offset), "offset {offset} reached twice");
                }
            }
        }
        let plain: Vec<u8> = (0..rows * cols * batches).map(|x| (x % 251) as u8).collect();
        let blocked = plain_to_blocked(&plain, dims, 0xEE);
        prop_assert_eq!(blocked_to_plain(&blocked, dims), plain);
        // Padding holds the fill and nothing else.
        prop_assert_eq!(blocked.iter().filter(|&&b| b == 0xEE).count() >= layout.len() - seen.len(), true);
    }
}
