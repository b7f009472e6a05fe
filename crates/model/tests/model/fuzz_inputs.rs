//! The fuzz targets' bodies driven by proptest on the stable toolchain: random bytes, and valid
//! files with random corruption, must never panic. (`fuzz/` runs the same functions under
//! libFuzzer: see its README section in the main README.)

use nvfp4_model::fuzzing::{case_reader, encoders, manifest_reader};
use proptest::prelude::*;

fn valid_case() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../golden/cases/adversarial-batch-ignored.safetensors"
    ))
    .expect("golden case")
}

fn valid_manifest() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../golden/manifest.json"
    ))
    .expect("golden manifest")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn case_reader_survives_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        case_reader(&bytes);
    }

    #[test]
    fn case_reader_survives_corrupted_files(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8), cut in any::<prop::sample::Index>()) {
        let mut bytes = valid_case();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        case_reader(&bytes);
        case_reader(&bytes[..cut.index(bytes.len())]);
    }

    #[test]
    fn manifest_reader_survives_random_and_corrupted_text(bytes in proptest::collection::vec(any::<u8>(), 0..256), at in any::<prop::sample::Index>(), value in any::<char>()) {
        manifest_reader(&bytes);
        let mut text: Vec<char> = valid_manifest().chars().take(4000).collect();
        let i = at.index(text.len());
        text[i] = value;
        manifest_reader(text.iter().collect::<String>().as_bytes());
    }

    #[test]
    fn encoders_survive_any_bits(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        encoders(&bytes);
    }
}
