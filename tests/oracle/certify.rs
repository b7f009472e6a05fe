//! The certification pipeline end to end on the CPU kernels: the correct kernel is certified,
//! every planted-bug mutant is rejected and diagnosed, and the competition's gpumode inputs alone
//! miss the FP4 decoding bug that the full campaign catches.

use nvfp4_harness::certify::{certify_variant, CampaignLimits};
use nvfp4_harness::certify::{Certificate, Status};
use nvfp4_harness::kernels::cpu::{Bug, CpuKernel};
use nvfp4_model::compare::diagnosis::WrongProblem;
use nvfp4_model::model::bounds::KOrder;

fn limits(cases: usize, only_gpumode: bool) -> CampaignLimits {
    CampaignLimits {
        cases,
        seed: 7,
        only_gpumode,
        ..CampaignLimits::default()
    }
}

/// What certification should say of each planted bug.
enum Expected {
    /// The diagnosis names this class.
    Named(WrongProblem),
    /// Incomplete output (elements never written).
    Unwritten,
    /// Outside every class: the localization of the shrunk data must say this.
    Localized(&'static str),
    /// A regime bug: the identification names this nearby problem, explaining every element.
    Identified(&'static str),
}

fn expected(bug: Bug) -> Expected {
    use Expected::*;
    match bug {
        Bug::GemmOnly => Named(WrongProblem::GemmWithB1),
        Bug::SiluWrongGemm => Named(WrongProblem::SiluOnSecondGemm),
        Bug::ScalesIgnored => Named(WrongProblem::ScalesIgnored),
        Bug::ScaleRowsSwapped => Named(WrongProblem::ScaleAtomRowsSwapped),
        Bug::KTailDropped => Named(WrongProblem::KTailDropped),
        Bug::Fp16Accumulation => Named(WrongProblem::Fp16Accumulation),
        Bug::TruncatedOutput => Named(WrongProblem::TruncatedOutput),
        Bug::Fp4HighExponent => Named(WrongProblem::Fp4HighExponentBitIgnored),
        Bug::MEdgeOffByOne | Bug::NEdgeOffByOne => Unwritten,
        Bug::SiluSignError => Named(WrongProblem::SiluSignFlipped),
        Bug::NoSilu => Named(WrongProblem::NoSilu),
        Bug::GemmB2Only => Named(WrongProblem::GemmWithB2),
        Bug::ScaleAtomTransposed => Named(WrongProblem::ScaleAtomTransposed),
        Bug::NanScalesAsZero => Named(WrongProblem::NanScalesIgnored),
        Bug::SubnormalScalesFlushed => Named(WrongProblem::SubnormalScalesFlushed),
        Bug::BatchIgnored => Named(WrongProblem::BatchIgnored),
        Bug::OverflowSaturated => Named(WrongProblem::OverflowSaturated),
        Bug::ScalesOfBatch0 => Named(WrongProblem::ScalesOfBatch0),
        Bug::ScalePer32 => Named(WrongProblem::ScalePer32),
        Bug::ScaleSignHonored => Localized("the scale's sign bit"),
        // Only +-3.0 fails, whichever sign the shrunk input has: "[-3.0], passes with [...]".
        Bug::Fp4ThreeReadAsTwo => Localized("3.0], passes with [0.5, 1.0, 1.5, 2.0, 4.0, 6.0]"),
        // Wrong only at production depths and widths, caught by the production cases and named
        // from the runs that fail.
        Bug::DeepKScalePer32 => Named(WrongProblem::ScalePer32),
        Bug::WideNSiluOnD2 => Named(WrongProblem::SiluOnSecondGemm),
        // Wrong only in a regime, each reading another batch, column, K range or epilogue
        // there (tests/oracle/wrong_problems.rs asserts their regions and words).
        Bug::ScalesOfBatchMod2 => Identified("batches-scales-from-mod-2"),
        Bug::SfaRingOf2DeepK => Identified("batches-sfa-from-0-from-2"),
        Bug::NTileIndexWraps => Identified("columns-b-from-mod-512"),
        Bug::KTailPreviousChunkScales => Identified("k-range-previous-chunk-scales-k-tail-of-256"),
        Bug::LastRowTileUnwrittenPast128 => Unwritten,
        Bug::Fp16SiluTallTiles => Identified("fp16-silu-epilogue"),
        Bug::SplitKB2WithSfb1 => Identified("k-range-b2-with-sfb1-second-half-of-k"),
        Bug::LastBatchB1FromBatch0 => Identified("batches-b1-from-0-for-the-last"),
    }
}

#[test]
fn the_correct_cpu_kernel_is_certified() {
    let result = certify_variant(&CpuKernel::correct(), limits(40, false), &[], |_, _| {});
    assert!(
        result.failure.is_none(),
        "cpu-tiled failed: {:?}",
        result.failure.map(|f| f.minimal.spec)
    );
    assert!(result.coverage.cases >= 40);
    assert_eq!(
        result.coverage.fp4_codes_seen.len(),
        16,
        "all FP4 codes exercised"
    );
    assert!(result.coverage.nan_scales_seen);
    // The four random distributions and the fixed stagnation cases.
    assert_eq!(result.coverage.by_distribution.len(), 5);
    assert_eq!(result.coverage.by_distribution.get("stagnation"), Some(&4));
    // Where the time went, by phase and by shape class, each phase and class of a case counted.
    let phases = &result.coverage.seconds_by_phase;
    assert_eq!(
        phases.keys().map(String::as_str).collect::<Vec<_>>(),
        ["inputs", "judgement", "kernel", "model"]
    );
    assert!(phases["kernel"] > 0.0 && phases["model"] > 0.0);
    assert_eq!(
        result.coverage.seconds_by_shape_class.len(),
        result.coverage.by_shape_class.len()
    );
}

#[test]
fn every_mutant_is_rejected_and_diagnosed() {
    let mut wrong = Vec::new();
    for bug in Bug::ALL {
        let result = certify_variant(&CpuKernel::mutant(bug), limits(200, false), &[], |_, _| {});
        let failure = result
            .failure
            .unwrap_or_else(|| panic!("{} was certified", bug.slug()));
        let diagnosis = failure
            .diagnosis
            .expect("a CPU mutant always produces output");
        let localized = failure
            .data
            .as_ref()
            .map(|d| d.localization.join("; "))
            .unwrap_or_default();
        let right = match expected(bug) {
            Expected::Named(problem) => diagnosis.best_problem() == Some(problem),
            Expected::Unwritten => diagnosis.unwritten > 0,
            // Values compared by magnitude: the shrunk input may be negative.
            Expected::Localized(feature) => localized.replace('-', "").contains(feature),
            Expected::Identified(problem) => failure
                .identification
                .as_ref()
                .is_some_and(|i| i.problem == problem && i.explains_all),
        };
        eprintln!(
            "{:<24} minimal {} -> {} | {localized}",
            bug.slug(),
            failure.minimal.spec.shape,
            diagnosis.summary()
        );
        if !right {
            wrong.push(bug.slug());
        }
        // The element counts say which runs they are over (not the minimal case alone).
        if diagnosis.best.is_some() {
            let summary = diagnosis.summary();
            let over = if diagnosis.runs.len() == 1 {
                "elements of the minimal case".to_string()
            } else {
                format!("the minimal case {}", failure.minimal.spec.shape)
            };
            assert!(summary.contains(&over), "{}: {summary}", bug.slug());
        }
    }
    // Every one of them, each as its table row in results/diagnosis.md says.
    assert!(wrong.is_empty(), "not as expected: {wrong:?}");
}

#[test]
fn gpumode_alone_misses_the_fp4_decoding_bug_that_the_campaign_catches() {
    let mutant = CpuKernel::mutant(Bug::Fp4HighExponent);
    let gpumode = certify_variant(&mutant, limits(40, true), &[], |_, _| {});
    assert!(
        gpumode.failure.is_none(),
        "gpumode inputs never set the FP4 high exponent bit"
    );
    let full = certify_variant(&mutant, limits(40, false), &[], |_, _| {});
    assert!(full.failure.is_some());
}

#[test]
fn the_minimal_repro_replays_with_check() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-certify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mutant = CpuKernel::mutant(Bug::TruncatedOutput);
    let result = certify_variant(&mutant, limits(50, false), &[], |_, _| {});
    let certificate =
        Certificate::from_campaign(&mutant, &limits(50, false), result, &dir).unwrap();
    certificate.write(&dir).unwrap();
    assert_eq!(certificate.status, Status::Failed);
    assert!(
        dir.join("cpu-mutant-truncated-output.json").exists()
            && dir.join("cpu-mutant-truncated-output.md").exists()
    );
    let failure = certificate.failure.unwrap();
    let replay = crate::common::oracle_command()
        .args([
            "check",
            "--case",
            failure.repro_case.to_str().unwrap(),
            "--output",
            failure.repro_output.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        replay.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&replay.stdout)
    );
    // The data shrunk further has the kernel's output beside its case file, and replays too.
    let replay_minimal = failure
        .replay_minimal()
        .expect("the minimal data and the kernel's output on it were written");
    let markdown = std::fs::read_to_string(dir.join("cpu-mutant-truncated-output.md")).unwrap();
    assert!(markdown.contains(&replay_minimal), "{markdown}");
    let args: Vec<&str> = replay_minimal.split(' ').skip(1).collect();
    let replay = crate::common::oracle_command()
        .args(&args)
        .output()
        .unwrap();
    assert_eq!(
        replay.status.code(),
        Some(1),
        "{replay_minimal}: {}",
        String::from_utf8_lossy(&replay.stdout)
    );
}

#[test]
fn certify_command_exit_codes() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-certify-cli-{}", std::process::id()));
    let run = |args: &[&str]| {
        crate::common::oracle_command()
            .args(args)
            .arg("--report-dir")
            .arg(&dir)
            .output()
            .unwrap()
    };
    assert_eq!(
        run(&[
            "certify",
            "--kernel",
            "cpu-tiled",
            "--cases",
            "10",
            "--seed",
            "7"
        ])
        .status
        .code(),
        Some(0)
    );
    assert_eq!(
        run(&[
            "certify",
            "--kernel",
            "cpu-mutant-gemm-only",
            "--cases",
            "10",
            "--seed",
            "7"
        ])
        .status
        .code(),
        Some(1)
    );
    let unknown = run(&["certify", "--kernel", "no-such-kernel"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("cpu-tiled"),
        "lists the known kernels"
    );
}

/// Data shrinking: every mutant that writes a wrong output is left with a handful of
/// nonzero inputs, where one input read differently explains the output it is named, and the
/// feature a bug depends on (FP4 codes, K tail, scale value) is found by controlled changes.
#[test]
fn failing_data_shrinks_to_a_few_inputs_and_a_single_misread_input_is_named() {
    for bug in Bug::ALL {
        let result = certify_variant(&CpuKernel::mutant(bug), limits(60, false), &[], |_, _| {});
        let failure = result.failure.expect("rejected");
        let Some(data) = failure.data else {
            // Only a kernel that leaves elements unwritten may keep its whole minimal case.
            assert!(
                failure.diagnosis.is_some_and(|d| d.unwritten > 0),
                "{}",
                bug.slug()
            );
            continue;
        };
        eprintln!(
            "{:<20} {} nonzero in {} after {} runs: {}",
            bug.slug(),
            data.nonzero.len(),
            data.shape,
            data.runs,
            data.explanation.as_deref().unwrap_or("-")
        );
        // Rounding bugs (fp16 accumulation, a truncated output) show only on sums that are not
        // representable: those need several products; the rest need one or two.
        let most = if matches!(bug, Bug::Fp16Accumulation | Bug::TruncatedOutput) {
            16
        } else {
            6
        };
        assert!(
            data.nonzero.len() <= most,
            "{}: {:?}",
            bug.slug(),
            data.nonzero
        );
        assert!(data.observed.to_bits() != data.expected.to_bits() || data.observed.is_nan());
        // Localization names the feature the failure depends on.
        let localized = data.localization.join("\n");
        let feature = match bug {
            Bug::Fp4HighExponent => Some("depends on which FP4 codes are read"),
            Bug::KTailDropped => Some("passes with K padded with zeros to a multiple of 256"),
            Bug::ScalesIgnored => Some("depends on the scale's value"),
            _ => None,
        };
        if let Some(feature) = feature {
            assert!(localized.contains(feature), "{}: {localized}", bug.slug());
        }
        let explanation = data.explanation.unwrap_or_default();
        match bug {
            // Decoding a code wrong is an input read as another value...
            Bug::Fp4HighExponent => {
                assert!(
                    explanation.contains(" read as ") && !explanation.contains("scale"),
                    "{explanation}"
                )
            }
            // ...ignoring the scales, a scale read as 1.0.
            Bug::ScalesIgnored => assert!(
                explanation.contains("the scale of") && explanation.contains("read as 1 (0x38)"),
                "{explanation}"
            ),
            _ => {}
        }
    }
}

#[test]
fn a_failing_case_regenerated_by_its_printed_command_is_byte_identical() {
    // The sign-bit mutant fails only on adversarial-nan inputs, whose scales carry sign bits:
    // the command must reproduce those too.
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-regen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mutant = CpuKernel::mutant(Bug::ScaleSignHonored);
    let result = certify_variant(&mutant, limits(100, false), &[], |_, _| {});
    let certificate =
        Certificate::from_campaign(&mutant, &limits(100, false), result, &dir).unwrap();
    let failure = certificate.failure.expect("the sign-bit mutant fails");
    assert_eq!(failure.minimal_case.dist.name(), "adversarial-nan");
    let regenerated = dir.join("regenerated.safetensors");
    let words: Vec<&str> = failure.regenerate.split_whitespace().collect();
    assert_eq!(words[0], "nvfp4-oracle", "{}", failure.regenerate);
    let out_flag = words.iter().position(|w| *w == "--out").unwrap();
    let mut args: Vec<String> = words[1..out_flag].iter().map(|w| w.to_string()).collect();
    args.extend(["--out".into(), regenerated.display().to_string()]);
    let run = crate::common::oracle_command()
        .args(&args)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let read = |path: &std::path::Path| std::fs::read(path).unwrap();
    let (ran, again) = (read(&failure.repro_case), read(&regenerated));
    let ran = safetensors::SafeTensors::deserialize(&ran).unwrap();
    let again = safetensors::SafeTensors::deserialize(&again).unwrap();
    let mut names = ran.names();
    names.sort();
    assert!(names.len() >= 9, "{names:?}");
    let mut signed_scales = 0;
    for name in names {
        let (x, y) = (ran.tensor(name).unwrap(), again.tensor(name).unwrap());
        assert_eq!(x.shape(), y.shape(), "{name}");
        assert!(
            x.data() == y.data(),
            "tensor {name} differs from the case the campaign ran"
        );
        if name.starts_with("sf") {
            signed_scales += x.data().iter().filter(|b| **b & 0x80 != 0).count();
        }
    }
    assert!(signed_scales > 0, "the case holds sign-set scales");
    let _ = std::fs::remove_dir_all(dir);
}

/// The two mutants wrong only at production depth (K > 4096) and width (N > 2048) are rejected
/// by a bare `certify --kernel NAME` on a machine with no GPU (the thin production cases reach
/// them) and named.
#[test]
fn certify_with_default_flags_rejects_the_production_depth_and_width_mutants() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-deep-wide-{}", std::process::id()));
    for (kernel, class) in [
        ("cpu-mutant-deep-k-scale-per-32", "scale-per-32"),
        ("cpu-mutant-wide-n-silu-on-d2", "silu-on-second-gemm"),
    ] {
        let run = crate::common::oracle_command()
            .args(["certify", "--kernel", kernel, "--report-dir"])
            .arg(&dir)
            .output()
            .unwrap();
        assert_eq!(
            run.status.code(),
            Some(1),
            "{kernel}: {}",
            String::from_utf8_lossy(&run.stdout)
        );
        let json = std::fs::read_to_string(dir.join(format!("{kernel}.json"))).unwrap();
        let certificate: serde_json::Value = serde_json::from_str(&json).unwrap();
        let failure = &certificate["failure"];
        let diagnosis = failure["diagnosis"].as_str().unwrap();
        assert!(diagnosis.starts_with(class), "{kernel}: {diagnosis}");
        // Caught at a production shape, and only there: the small cases before it passed.
        let first = &failure["first_case"]["shape"];
        assert!(
            first["k"].as_u64().unwrap() > 4096 || first["n"].as_u64().unwrap() > 2048,
            "{kernel}: first failing case {first}"
        );
        let coverage = &certificate["coverage"];
        assert!(coverage["planned_production_cases"].as_u64().unwrap() > 0);
        assert!(coverage["production_note"]
            .as_str()
            .unwrap()
            .contains("2 rows of M"));
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `certify --kernel cpu-tiled ARGS --report-dir DIR`, which must certify it: its certificate's
/// JSON and Markdown.
fn certify_cpu_tiled(args: &[&str], dir: &std::path::Path) -> (serde_json::Value, String) {
    let run = crate::common::oracle_command()
        .args(["certify", "--kernel", "cpu-tiled"])
        .args(args)
        .arg("--report-dir")
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let json = std::fs::read_to_string(dir.join("cpu-tiled.json")).unwrap();
    let markdown = std::fs::read_to_string(dir.join("cpu-tiled.md")).unwrap();
    (serde_json::from_str(&json).unwrap(), markdown)
}

/// Without --cases, a campaign judged by the CPU model draws 200 random cases (one whose
/// reference is on the GPU draws 2,000: results/gpu-reference/, on a GPU machine).
#[test]
fn a_campaign_on_the_cpu_model_draws_200_random_cases_by_default() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-default-{}", std::process::id()));
    let run = crate::common::oracle_command()
        .args(["certify", "--kernel", "cpu-tiled", "--quick", "--seed", "3"])
        .args(["--time-budget", "1", "--report-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 kernel(s), 200 cases each"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

/// `--quick` runs no production-size case, says so, and leaves a certificate bench refuses.
#[test]
fn a_quick_campaign_skips_the_production_size_cases_and_is_not_timed() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-quick-{}", std::process::id()));
    let (certificate, markdown) =
        certify_cpu_tiled(&["--quick", "--cases", "20", "--seed", "3"], &dir);
    let coverage = &certificate["coverage"];
    assert_eq!(coverage["production_size_skipped"], serde_json::json!(true));
    assert!(coverage["planned_production_cases"].as_u64().unwrap() > 0);
    for class in ["production", "large"] {
        assert!(coverage["by_shape_class"][class].is_null(), "{class} ran");
    }
    assert!(
        markdown.contains("production-size cases skipped (--quick)"),
        "{markdown}"
    );
    let refusal = nvfp4_harness::certify::production_coverage_gap(coverage).unwrap();
    assert!(refusal.contains("--quick"), "{refusal}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A case too large to judge whole is judged on sampled rows plus whole-output checks: a
/// correct kernel passes, a wrong problem is caught on the sampled rows, and an element left
/// unwritten is caught wherever it is, sampled or not.
#[test]
fn sampled_rows_catch_wrong_values_and_unwritten_elements_anywhere() {
    use half::f16;
    use nvfp4_harness::certify::shape_products;
    use nvfp4_harness::certify::{run_case_within, CaseSpec};
    use nvfp4_harness::kernels::{KernelCase, KernelFailure, KernelUnderTest};
    use nvfp4_model::problem::POISON;
    use nvfp4_model::problem::{Distribution, Shape};

    /// cpu-tiled, then one element of row `row` put back to the poison fill.
    struct LeavesOneUnwritten(CpuKernel, usize);
    impl KernelUnderTest for LeavesOneUnwritten {
        fn name(&self) -> &str {
            "leaves-one-unwritten"
        }
        fn is_deliberately_broken(&self) -> bool {
            true
        }
        fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure> {
            self.0.run(case, output)?;
            let (_, n, l) = case.inputs.output_dims();
            output[self.1 * n * l + 3] = POISON;
            Ok(())
        }
    }

    let shape = Shape::new(600, 96, 256, 1).unwrap();
    // A budget of 5 rows' products: one row from each of the 5 128-row tiles, and the last row.
    let budget = 5 * shape_products(Shape { m: 1, ..shape }, 2);
    let spec = |seed| CaseSpec {
        shape,
        dist: Distribution::Full,
        seed,
    };
    let correct = run_case_within(
        &CpuKernel::correct(),
        spec(1),
        KOrder::Contiguous,
        None,
        budget,
    );
    let sample = correct.sample.clone().expect("judged on sampled rows");
    assert_eq!(sample.of, 600);
    assert!(sample.rows.len() <= 6, "{:?}", sample.rows);
    assert!(!correct.failed());
    let wrong = run_case_within(
        &CpuKernel::mutant(Bug::GemmOnly),
        spec(1),
        KOrder::Contiguous,
        None,
        budget,
    );
    assert!(wrong.sample.is_some() && wrong.failed());
    for row in [0, 1, 130, 599] {
        let unwritten = LeavesOneUnwritten(CpuKernel::correct(), row);
        let outcome = run_case_within(&unwritten, spec(2), KOrder::Contiguous, None, budget);
        let verdict = outcome.result.as_ref().unwrap();
        assert!(!verdict.pass, "row {row}");
        assert_eq!(verdict.failed, 1, "row {row}");
        assert_eq!(verdict.unexpected_nan, 1, "row {row}");
    }
}

/// A bug outside the catalogue gets no "closest" class: the certificate's diagnosis line says
/// what the shrunk case showed instead (the input that reproduces the output read differently,
/// and what the failure depends on).
#[test]
fn a_bug_outside_the_catalogue_is_localized_in_the_diagnosis_line() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-localized-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (bug, words) in [
        (
            Bug::ScaleSignHonored,
            "the failure depends on the scale's sign bit",
        ),
        (Bug::Fp4ThreeReadAsTwo, "read as 2 instead of 3"),
    ] {
        let mutant = CpuKernel::mutant(bug);
        let result = certify_variant(&mutant, limits(100, false), &[], |_, _| {});
        let certificate =
            Certificate::from_campaign(&mutant, &limits(100, false), result, &dir).unwrap();
        // Each of the two blocks says which shrunk case it describes.
        let md = certificate.markdown();
        assert!(
            md.contains("## Failure: the minimal case (its shape shrunk"),
            "{md}"
        );
        assert!(
            md.contains("## Minimal data: the minimal case's data shrunk further"),
            "{md}"
        );
        let line = certificate.failure.expect("rejected").diagnosis;
        assert!(
            line.starts_with("no known bug class: in the minimal data, "),
            "{line}"
        );
        // Values compared by magnitude: the shrunk input may be negative.
        assert!(line.replace('-', "").contains(words), "{line}");
        assert!(!line.contains("closest"), "{line}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Every certificate counts the cases of each deployment regime (decode steps, wide N, many
/// tiles...): a CPU kernel draws none of its own and is told why, but its thin production cases
/// are decode steps and are counted as such; bench's per-shape rule reads the count.
#[test]
fn a_certificate_counts_the_deployment_regimes_its_cases_reached() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-regimes-{}", std::process::id()));
    let (certificate, markdown) = certify_cpu_tiled(&["--cases", "5", "--seed", "11"], &dir);
    let coverage = &certificate["coverage"];
    assert_eq!(coverage["planned_regime_cases"], serde_json::json!(0));
    assert!(coverage["regime_note"]
        .as_str()
        .unwrap()
        .contains("CPU kernel"));
    // Its production shapes at 2 rows of M: N >= 2048 and K >= 4096 make them decode steps.
    let decode_cases = coverage["by_regime"]["decode"]["cases"].as_u64().unwrap();
    assert!(decode_cases > 0);
    // Each deployment-size case once, however many regimes it lies in (a decode step of a
    // public model's shape is in three or four), and none of them on sampled rows here.
    let deployment = &coverage["deployment_cases"];
    let total = deployment["cases"].as_u64().unwrap();
    let per_regime: u64 = coverage["by_regime"]
        .as_object()
        .unwrap()
        .values()
        .map(|count| count["cases"].as_u64().unwrap())
        .sum();
    assert!(
        total >= decode_cases && total < per_regime,
        "{total} deployment cases, {per_regime} regime memberships"
    );
    assert_eq!(deployment["sampled"], serde_json::json!(0));
    let decode = nvfp4_model::problem::Shape::new(8, 4096, 7168, 1).unwrap();
    assert_eq!(
        nvfp4_harness::certify::uncovered_regime(coverage, decode),
        None
    );
    // No case past 16,384 tiles (nor tall M, nor N past 8192 at full rows): bench would not
    // time such a shape on this certificate.
    assert_eq!(coverage["by_regime"]["many-tiles"], serde_json::Value::Null);
    let many_tiles = nvfp4_model::problem::Shape::new(16384, 16512, 256, 1).unwrap();
    assert!(
        nvfp4_harness::certify::uncovered_regime(coverage, many_tiles)
            .unwrap()
            .contains("ran no case there")
    );
    let row = markdown
        .lines()
        .find(|l| l.starts_with("| deployment regimes"))
        .expect("a regime row");
    assert!(
        row.contains("decode: ")
            && row.contains("no case in")
            && row.contains(&format!(
                "{total} case(s) in at least one (all judged whole)"
            )),
        "{row}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
