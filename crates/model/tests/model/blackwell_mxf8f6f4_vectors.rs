//! The Blackwell `tcgen05.mma kind::mxf8f6f4` model (`model::mma::mxf8f6f4`, FP8 operands) against
//! vectors that microsoft/MMA-Sim produced, bit for bit, per family
//! (golden/conformance/blackwell_mmasim_mxf8f6f4.safetensors, written on the GPU machine's CPU by
//! scripts/gen_blackwell_mxf8f6f4_vectors.py, whose docstring has the format and the command).

use crate::common::{as_f32, load_vectors, repo_path, tensor};
use nvfp4_model::model::mma::mxf8f6f4::{blackwell_mxf8f6f4_step, Fp8Type, MXF8F6F4_K};
use std::collections::BTreeMap;

const FILE: &str = "golden/conformance/blackwell_mmasim_mxf8f6f4.safetensors";

#[test]
fn mxf8f6f4_model_matches_mmasim_bit_for_bit() {
    let bytes = std::fs::read(repo_path(FILE)).unwrap();
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    let metadata = header.metadata().clone().expect("metadata");
    assert!(
        metadata["source"].starts_with("microsoft/MMA-Sim "),
        "{FILE} was not made by MMA-Sim: {}",
        metadata["source"]
    );
    let families: Vec<&str> = metadata["families"].split(',').collect();
    let v = load_vectors(FILE);
    let (a, b) = (tensor(&v, "a"), tensor(&v, "b"));
    let (types, scales) = (tensor(&v, "types"), tensor(&v, "scales"));
    let (c, d) = (as_f32(tensor(&v, "c")), as_f32(tensor(&v, "d")));
    let family = tensor(&v, "family");
    let n = family.len();
    assert!(n >= 30_000, "{n} vectors");
    let type_of = |t: u8| Fp8Type::ALL[usize::from(t)];
    // family -> (vectors, mismatches, NaN results, infinite results)
    let mut tally: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    let mut first_mismatch = None;
    for i in 0..n {
        let row = |x: &[u8]| -> [u8; MXF8F6F4_K] {
            x[i * MXF8F6F4_K..][..MXF8F6F4_K].try_into().unwrap()
        };
        let (ta, tb) = (type_of(types[2 * i]), type_of(types[2 * i + 1]));
        let ours = blackwell_mxf8f6f4_step(
            c[i],
            ta,
            &row(a),
            scales[2 * i],
            tb,
            &row(b),
            scales[2 * i + 1],
        );
        let entry = tally.entry(families[usize::from(family[i])]).or_default();
        entry[0] += 1;
        if ours.to_bits() != d[i].to_bits() {
            entry[1] += 1;
            first_mismatch.get_or_insert((i, ta, tb, ours, d[i]));
        }
        entry[2] += usize::from(d[i].is_nan());
        entry[3] += usize::from(d[i].is_infinite());
    }
    let report: Vec<String> = tally
        .iter()
        .map(|(name, [count, bad, nan, inf])| {
            format!("{name}: {count} vectors, {bad} differ ({nan} NaN, {inf} inf)")
        })
        .collect();
    if let Some((i, ta, tb, ours, theirs)) = first_mismatch {
        panic!(
            "vector {i} ({} x {}, scales {:#04x} {:#04x}, C {:e}): ours {ours:e} ({:#010x}), \
             MMA-Sim {theirs:e} ({:#010x})\n{}",
            ta.name(),
            tb.name(),
            scales[2 * i],
            scales[2 * i + 1],
            c[i],
            ours.to_bits(),
            theirs.to_bits(),
            report.join("\n")
        );
    }
    // Every family is present, and the specials reach NaN and infinity.
    assert_eq!(tally.len(), families.len(), "{}", report.join("\n"));
    let specials = tally["specials"];
    assert!(specials[2] > 0 && specials[3] > 0, "{}", report.join("\n"));
}
