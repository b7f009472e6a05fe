//! The golden set: it verifies against the model, every adversarial case exposes the bug it names,
//! and any alteration of a golden file is caught and named.

use half::f16;
use nvfp4_model::case_file::{fp16_from_bytes, CaseReader};
use nvfp4_model::compare::diagnosis::{acceptance, WrongProblem};
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::golden::{cost, read_manifest, verify_case, CaseStatus, ManifestCase};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::POISON;
use safetensors::Dtype;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

/// All whole cases, plus the cheapest large ones up to this many multiply-adds in total.
const LARGE_SAMPLE_BUDGET: usize = 8_000_000_000;

#[test]
fn golden_set_verifies_small_cases_and_a_sample_of_large_ones() {
    let dir = golden_dir();
    let manifest = read_manifest(&dir).expect("golden/manifest.json is committed");
    assert!(
        manifest.cases.len() >= 50,
        "the golden set has {} cases",
        manifest.cases.len()
    );
    let started = Instant::now();
    let mut large: Vec<&ManifestCase> =
        manifest.cases.iter().filter(|c| c.file.is_none()).collect();
    large.sort_by_key(|c| cost(c));
    let mut budget = LARGE_SAMPLE_BUDGET;
    let mut verified = 0;
    for case in
        manifest
            .cases
            .iter()
            .filter(|c| c.file.is_some())
            .chain(large.into_iter().take_while(|c| {
                let fits = cost(c) <= budget;
                budget = budget.saturating_sub(cost(c));
                fits
            }))
    {
        assert_eq!(
            verify_case(&dir, case, manifest.k_order).unwrap(),
            CaseStatus::Ok,
            "{}",
            case.name
        );
        verified += 1;
    }
    eprintln!(
        "verified {verified} of {} golden cases in {:.1} s",
        manifest.cases.len(),
        started.elapsed().as_secs_f64()
    );
}

fn read_f16(reader: &CaseReader, name: &str, dims: &[usize]) -> Vec<f16> {
    fp16_from_bytes(&reader.tensor(name, Dtype::F16, dims).unwrap())
}

/// The output a kernel with `bug` would produce on this case.
fn mutated_output(bug: &str, reader: &CaseReader, expected: &[f16]) -> Vec<f16> {
    let inputs = reader.dual_gemm_inputs().unwrap();
    let s = inputs.shape;
    let fill = u8::from_str_radix(
        reader
            .meta("blocked_padding_fill")
            .unwrap()
            .trim_start_matches("0x"),
        16,
    )
    .unwrap();
    let mut out = expected.to_vec();
    match bug {
        "m-edge-tile-missing" => out[(s.m / 128 * 128) * s.n * s.l..].fill(POISON),
        "n-edge-tile-missing" => {
            for (i, value) in out.iter_mut().enumerate() {
                if (i / s.l) % s.n >= s.n / 128 * 128 {
                    *value = POISON;
                }
            }
        }
        "output-transposed" => {
            for m in 0..s.m {
                for n in 0..s.n {
                    out[(n * s.m + m) * s.l] = expected[(m * s.n + n) * s.l];
                }
            }
        }
        name => {
            let problem = WrongProblem::ALL
                .into_iter()
                .find(|p| p.name() == name)
                .unwrap_or_else(|| panic!("unknown bug {name}"));
            out = acceptance(problem, &inputs, fill, KOrder::Contiguous)
                .unwrap_or_else(|| panic!("{name} cannot show on its own case"))
                .representative();
        }
    }
    out
}

#[test]
fn every_adversarial_case_exposes_its_bug() {
    let dir = golden_dir();
    let manifest = read_manifest(&dir).unwrap();
    let adversarial: Vec<&ManifestCase> = manifest
        .cases
        .iter()
        .filter(|c| c.exposes.is_some())
        .collect();
    assert!(
        adversarial.len() >= 20,
        "only {} adversarial cases",
        adversarial.len()
    );
    let mut bugs = std::collections::HashSet::new();
    for case in adversarial {
        let bug = case.exposes.as_deref().unwrap();
        assert!(bugs.insert(bug.to_string()), "{bug} named twice");
        let reader = CaseReader::open(
            &dir.join(
                case.file
                    .as_ref()
                    .expect("adversarial cases are stored whole"),
            ),
        )
        .unwrap();
        let s = case.shapes[0];
        let dims = [s.m, s.n, s.l];
        let (expected, lo, hi) = (
            read_f16(&reader, "expected", &dims),
            read_f16(&reader, "lo", &dims),
            read_f16(&reader, "hi", &dims),
        );
        let shape = OutputShape {
            m: s.m,
            n: s.n,
            l: s.l,
        };
        assert!(
            judge(shape, &expected, &expected, &lo, &hi).pass,
            "{}: the model's own answer must pass",
            case.name
        );
        let mutated = mutated_output(bug, &reader, &expected);
        let verdict = judge(shape, &mutated, &expected, &lo, &hi);
        assert!(!verdict.pass, "{}: the {bug} output passed", case.name);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("cases")).unwrap();
    for file in ["manifest.json", "scaled-gemm.json"] {
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
    for entry in std::fs::read_dir(from.join("cases")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join("cases").join(entry.file_name())).unwrap();
    }
}

#[test]
fn an_altered_golden_file_fails_verify_naming_the_case() {
    let copy = std::env::temp_dir().join(format!("nvfp4-oracle-golden-{}", std::process::id()));
    copy_dir(&golden_dir(), &copy);
    let manifest = read_manifest(&copy).unwrap();
    let victim = manifest
        .cases
        .iter()
        .find(|c| c.name == "adversarial-truncated-output")
        .unwrap();
    let path = copy.join(victim.file.as_ref().unwrap());
    // Flip one bit of the last byte of the file: the end of the last tensor's data.
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&path, bytes).unwrap();
    match verify_case(&copy, victim, manifest.k_order).unwrap() {
        CaseStatus::Drift(reason) => assert!(reason.contains("differ"), "{reason}"),
        CaseStatus::Ok => panic!("an altered file verified"),
    }
    let out = crate::common::oracle_command()
        .args(["golden", "verify", "--max-cost", "1e8", "--dir"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("adversarial-truncated-output"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A tampered hash in the manifest is drift too.
    let text = std::fs::read_to_string(copy.join("manifest.json")).unwrap();
    let tampered = text.replacen(&manifest.cases[0].sha256_expected, &"0".repeat(64), 1);
    std::fs::write(copy.join("manifest.json"), tampered).unwrap();
    let manifest = read_manifest(&copy).unwrap();
    assert!(matches!(
        verify_case(&copy, &manifest.cases[0], manifest.k_order).unwrap(),
        CaseStatus::Drift(_)
    ));
}

#[test]
fn the_built_in_campaign_cases_are_the_committed_manifests() {
    // certify runs the golden cases built into the binary wherever it is started; they must be
    // the ones the committed manifest lists.
    use nvfp4_harness::certify::{builtin_golden_campaign_cases, golden_campaign_cases};
    let manifest = read_manifest(&golden_dir()).unwrap();
    let (built_in, committed) = (
        builtin_golden_campaign_cases(),
        golden_campaign_cases(&manifest),
    );
    assert!(built_in.len() >= 10, "{}", built_in.len());
    let key = |c: &nvfp4_harness::certify::CaseSpec| (c.shape, c.dist.name(), c.seed);
    assert_eq!(
        built_in.iter().map(key).collect::<Vec<_>>(),
        committed.iter().map(key).collect::<Vec<_>>()
    );
}

#[test]
fn the_block_scaled_family_hashes_verify_and_a_tampered_one_is_drift() {
    use nvfp4_model::golden::scaled::{compute_scaled_manifest, verify_scaled_manifest};
    let results = verify_scaled_manifest(&golden_dir()).unwrap();
    assert_eq!(results.len(), 12);
    for (name, _, drift) in &results {
        assert!(drift.is_none(), "{name}: {drift:?}");
    }
    // Every operand format and output type is among the cases.
    let manifest = compute_scaled_manifest().unwrap();
    for format in [
        "nvfp4",
        "mxfp4",
        "mxfp8-e4m3",
        "mxfp8-e5m2",
        "fp8-e4m3",
        "bf16",
    ] {
        assert!(
            manifest
                .cases
                .iter()
                .any(|c| c.a_format == format || c.b_format == format),
            "{format}"
        );
    }
    let copy =
        std::env::temp_dir().join(format!("nvfp4-oracle-golden-scaled-{}", std::process::id()));
    copy_dir(&golden_dir(), &copy);
    let text = std::fs::read_to_string(copy.join("scaled-gemm.json")).unwrap();
    let victim = &manifest.cases[3];
    std::fs::write(
        copy.join("scaled-gemm.json"),
        text.replacen(&victim.sha256_lo, &"0".repeat(64), 1),
    )
    .unwrap();
    let drifted: Vec<_> = verify_scaled_manifest(&copy)
        .unwrap()
        .into_iter()
        .filter(|(_, _, drift)| drift.is_some())
        .collect();
    assert_eq!(drifted.len(), 1);
    assert_eq!(drifted[0].0, victim.name);
    assert!(drifted[0].2.as_ref().unwrap().contains("model drift"));
    let out = crate::common::oracle_command()
        .args(["golden", "verify", "--max-cost", "1e6", "--dir"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&victim.name));
    let _ = std::fs::remove_dir_all(copy);
}
