//! The Blackwell `tcgen05.mma kind::mxf4nvf4` model (`model::mma::blackwell_block_scaled_step`,
//! and its fast path, the one the replay runs) against vectors that microsoft/MMA-Sim produced,
//! bit for bit, per family. The file (golden/conformance/blackwell_mmasim_mxf4nvf4.bin) is
//! written by `scripts/gen_blackwell_mma_vectors.py`, whose docstring has the format and the
//! command; `NVFP4_BLACKWELL_VECTORS=path` reads another file (for example the script's
//! `--backend model` self-test output).

use crate::common;
use nvfp4_model::formats::E2m1;
use nvfp4_model::model::mma::fast::blackwell_block_scaled_step_fast;
use nvfp4_model::model::mma::{blackwell_block_scaled_step, BlackwellScales, BLACKWELL_K};
use std::collections::BTreeMap;

const MAGIC: &str = "nvfp4-oracle blackwell-mma-vectors v1";
const OPERAND_BYTES: usize = 64;
const RECORD_BYTES: usize = 22;
const COMMITTED: &str = "golden/conformance/blackwell_mmasim_mxf4nvf4.bin";

struct Vectors {
    source: String,
    families: BTreeMap<u8, String>,
    kinds: BTreeMap<u8, String>,
    operands: Vec<([E2m1; BLACKWELL_K], [E2m1; BLACKWELL_K])>,
    records: Vec<Record>,
}

struct Record {
    operand: usize,
    kind: u8,
    family: u8,
    sfa: [u8; 4],
    sfb: [u8; 4],
    c: u32,
    d: u32,
}

fn unpack(packed: &[u8]) -> [E2m1; BLACKWELL_K] {
    std::array::from_fn(|k| E2m1::from_bits(packed[k / 2] >> (4 * (k % 2)) & 0xF))
}

fn parse(bytes: &[u8]) -> Vectors {
    let mut at = 0;
    let mut line = || {
        let end = at
            + bytes[at..]
                .iter()
                .position(|&b| b == b'\n')
                .expect("header line");
        let text = std::str::from_utf8(&bytes[at..end]).expect("ASCII header");
        at = end + 1;
        text.to_string()
    };
    assert_eq!(line(), MAGIC, "not a v1 vector file");
    let (mut source, mut families, mut kinds, mut counts) =
        (String::new(), BTreeMap::new(), BTreeMap::new(), (0, 0));
    let pairs = |rest: &str| -> BTreeMap<String, String> {
        rest.split(' ')
            .map(|item| {
                let (key, value) = item.split_once('=').expect("key=value");
                (key.to_string(), value.to_string())
            })
            .collect()
    };
    let ids = |rest: &str| -> BTreeMap<u8, String> {
        pairs(rest)
            .into_iter()
            .map(|(id, name)| (id.parse().expect("numeric id"), name))
            .collect()
    };
    loop {
        let text = line();
        let (key, rest) = text.split_once(' ').unwrap_or((text.as_str(), ""));
        match key {
            "source" => source = rest.to_string(),
            "families" => families = ids(rest),
            "kinds" => kinds = ids(rest),
            "counts" => {
                let n = pairs(rest);
                counts = (
                    n["operands"].parse().expect("operands"),
                    n["instructions"].parse().expect("instructions"),
                );
            }
            "end" => break,
            _ => panic!("unknown header line {text:?}"),
        }
    }
    let (n_operands, n_records): (usize, usize) = counts;
    let body = &bytes[at..];
    assert_eq!(
        body.len(),
        n_operands * OPERAND_BYTES + n_records * RECORD_BYTES,
        "file length"
    );
    let (operand_bytes, record_bytes) = body.split_at(n_operands * OPERAND_BYTES);
    let operands = operand_bytes
        .chunks_exact(OPERAND_BYTES)
        .map(|r| (unpack(&r[..32]), unpack(&r[32..])))
        .collect();
    let u32_at = |r: &[u8], i: usize| u32::from_le_bytes(r[i..i + 4].try_into().unwrap());
    let records = record_bytes
        .chunks_exact(RECORD_BYTES)
        .map(|r| Record {
            operand: u32_at(r, 0) as usize,
            kind: r[4],
            family: r[5],
            sfa: r[6..10].try_into().unwrap(),
            sfb: r[10..14].try_into().unwrap(),
            c: u32_at(r, 14),
            d: u32_at(r, 18),
        })
        .collect();
    Vectors {
        source,
        families,
        kinds,
        operands,
        records,
    }
}

fn scales_of(kind: u8, qualifier: &str) -> BlackwellScales {
    let scales = match kind {
        0 => BlackwellScales::Block16Ue4m3,
        1 => BlackwellScales::Block32Ue8m0,
        2 => BlackwellScales::Block16Ue8m0,
        _ => panic!("unknown kind {kind}"),
    };
    // The qualifier in the file must say the same.
    let expected = match scales {
        BlackwellScales::Block16Ue4m3 => ".block16.f32.e2m1.e2m1.ue4m3",
        BlackwellScales::Block32Ue8m0 => ".block32.f32.e2m1.e2m1.ue8m0",
        BlackwellScales::Block16Ue8m0 => ".block16.f32.e2m1.e2m1.ue8m0",
    };
    assert!(
        qualifier.starts_with("m128n") && qualifier.ends_with(expected),
        "kind {kind}: {qualifier}"
    );
    scales
}

#[test]
fn blackwell_model_matches_mmasim_bit_for_bit() {
    let (path, committed) = match std::env::var("NVFP4_BLACKWELL_VECTORS") {
        Ok(path) => (std::path::PathBuf::from(path), false),
        Err(_) => (common::repo_path(COMMITTED), true),
    };
    // The committed file is part of the repository: its absence is a failure, not a skip.
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (regenerate it with scripts/gen_blackwell_mma_vectors.py)",
            path.display()
        )
    });
    let v = parse(&bytes);
    let from_mmasim = v.source.starts_with("microsoft/MMA-Sim");
    println!("{}: {} instructions", path.display(), v.records.len());
    println!("source: {}", v.source);
    if committed {
        assert!(from_mmasim, "the committed vectors must come from MMA-Sim");
    } else if !from_mmasim {
        println!("NOTE: these vectors are not MMA-Sim's; agreement below proves nothing about it");
    }
    // family -> (instructions, model agrees, fast agrees, first disagreement)
    let mut tally: BTreeMap<u8, (usize, usize, usize, Option<String>)> = BTreeMap::new();
    for (i, r) in v.records.iter().enumerate() {
        let scales = scales_of(r.kind, &v.kinds[&r.kind]);
        let (a, b) = &v.operands[r.operand];
        let c = f32::from_bits(r.c);
        let model = blackwell_block_scaled_step(scales, c, a, r.sfa, b, r.sfb).to_bits();
        let fast = blackwell_block_scaled_step_fast(scales, c, a, r.sfa, b, r.sfb).to_bits();
        let t = tally.entry(r.family).or_default();
        t.0 += 1;
        t.1 += usize::from(model == r.d);
        t.2 += usize::from(fast == r.d);
        if (model != r.d || fast != r.d) && t.3.is_none() {
            t.3 = Some(format!(
                "record {i}: C {:#010x}, scales {:02x?} {:02x?}, MMA-Sim {:#010x}, model {model:#010x}, fast {fast:#010x}",
                r.c, r.sfa, r.sfb, r.d
            ));
        }
    }
    println!(
        "{:34} {:>8} {:>8} {:>8}",
        "family", "vectors", "model", "fast"
    );
    let mut all_agree = true;
    for (family, (n, model, fast, first)) in &tally {
        let name = v.families.get(family).map_or("?", String::as_str);
        println!("{name:34} {n:8} {model:8} {fast:8}");
        if let Some(first) = first {
            println!("    first difference: {first}");
            all_agree = false;
        }
    }
    let total = v.records.len();
    let agree = tally.values().map(|t| t.1).sum::<usize>();
    println!("all families: {agree} of {total} (model), fast path the same: {all_agree}");
    assert!(all_agree, "the model differs from the vectors");
}
