//! Scores the Rust Hopper mma.sync model (`model::mma::hopper_hmma_step`) against raw H100
//! outputs exported by the probe (`model::mma::probe` has the record format):
//!
//!     python3 kernels/probe/probe_mma.py export --dir RUN1 RUN2 --out /tmp/mma.bin
//!     cargo run --release --example score_hopper_model -- /tmp/mma.bin

use nvfp4_model::model::mma::probe::parse_records;
use nvfp4_model::model::mma::{hopper_hmma_step, hopper_published_step};

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: score_hopper_model RECORDS.bin");
    let records =
        parse_records(&std::fs::read(&path).expect("readable records")).expect("whole records");
    let index: Vec<(String, usize)> =
        serde_json::from_str(&std::fs::read_to_string(format!("{path}.json")).expect("index"))
            .expect("index JSON");
    let mut offset = 0;
    let (mut total, mut ok_measured, mut ok_published) = (0usize, 0usize, 0usize);
    println!("| family | dot products | measured model | published model |\n|---|---|---|---|");
    for (name, count) in index {
        let family = &records[offset..offset + count];
        let ok = family
            .iter()
            .filter(|r| hopper_hmma_step(r.c, &r.a, &r.b).to_bits() == r.d)
            .count();
        let ok_pub = family
            .iter()
            .filter(|r| hopper_published_step(r.c, &r.a, &r.b).to_bits() == r.d)
            .count();
        println!(
            "| {name} | {count} | {:.4}% | {:.2}% |",
            100.0 * ok as f64 / count as f64,
            100.0 * ok_pub as f64 / count as f64
        );
        offset += count;
        total += count;
        ok_measured += ok;
        ok_published += ok_pub;
    }
    let rate = |ok: usize| 100.0 * ok as f64 / total as f64;
    println!(
        "| all | {total} | {:.4}% ({ok_measured}) | {:.2}% |",
        rate(ok_measured),
        rate(ok_published)
    );
}
