//! The planted regime bugs of the CPU mutants, each wrong only in part of the shape space and
//! reading another batch, column, K range or epilogue there: a default campaign rejects each,
//! shrinks it to its smallest trigger in every dimension (L included), states its failing
//! region and names the problem it solved, in the certificate's Markdown and JSON.

use nvfp4_harness::certify::{certify_variant, CampaignLimits, Certificate};
use nvfp4_harness::kernels::cpu::{Bug, CpuKernel};

/// What the certificate of one regime mutant must say.
struct Expected {
    bug: Bug,
    /// The minimal case, every dimension.
    minimal: &'static str,
    /// Words of the failing region, and of what it needs.
    region: &'static [&'static str],
    /// The identified problem's JSON name and words.
    problem: &'static str,
    words: &'static str,
}

const EXPECTED: [Expected; 8] = [
    Expected {
        bug: Bug::ScalesOfBatchMod2,
        minimal: "1x1x16x3",
        region: &[
            "fails when L >= 3 (passes at L = 2; also fails at L = 4, 6), whatever M, N, K",
            "needs L >= 3",
        ],
        problem: "batches-scales-from-mod-2",
        words: "the exact answer with batch l's scale factors (SFA, SFB1, SFB2) taken from batch l mod 2",
    },
    Expected {
        bug: Bug::SfaRingOf2DeepK,
        minimal: "1x1x512x3",
        region: &["needs K >= 512 and L >= 3", "whatever M, N"],
        problem: "batches-sfa-from-0-from-2",
        words: "the exact answer with batch l's SFA (A's scale factors) taken from batch 0 for l >= 2",
    },
    Expected {
        bug: Bug::NTileIndexWraps,
        minimal: "1x513x16x1",
        region: &["fails when N >= 513 (passes at N = 512;", "needs N >= 513"],
        problem: "columns-b-from-mod-512",
        words: "the exact answer with column n's B1 and B2 rows (and their scale factors) taken from row n mod 512",
    },
    Expected {
        bug: Bug::KTailPreviousChunkScales,
        minimal: "1x1x272x1",
        region: &["K = 272 but not every K above it: not an interval (passes at K = 256, 512;"],
        problem: "k-range-previous-chunk-scales-k-tail-of-256",
        words: "every operand scaled with the scale factors of the K chunk before over the last K chunk of 256 (k >= 256)",
    },
    Expected {
        bug: Bug::LastRowTileUnwrittenPast128,
        minimal: "129x1x16x1",
        region: &["M = 129 but not every M above it: not an interval (passes at M = 128, 256;"],
        problem: "never-written",
        words: "the exact answer wherever it wrote; row m 128, every column (row tile 1, the last and partial one) never written",
    },
    Expected {
        bug: Bug::Fp16SiluTallTiles,
        minimal: "65x",
        region: &["M >= 65 (passes at M = 64;"],
        problem: "fp16-silu-epilogue",
        words: "the exact answer with silu(A@B1) rounded to fp16 before the product",
    },
    Expected {
        bug: Bug::SplitKB2WithSfb1,
        minimal: "1x1x512x1",
        region: &["fails when K >= 512 (passes at K = 496;", "needs K >= 512"],
        problem: "k-range-b2-with-sfb1-second-half-of-k",
        words: "the exact answer with B2 scaled with SFB1 (B1's scale factors) over the second half of K",
    },
    Expected {
        bug: Bug::LastBatchB1FromBatch0,
        minimal: "1x1x16x3",
        region: &["fails when L >= 3 (passes at L = 2;", "needs L >= 3", "whatever M, N, K"],
        problem: "batches-b1-from-0-for-the-last",
        words: "the exact answer with batch l's B1 and SFB1 taken from batch 0 for the last l",
    },
];

#[test]
fn each_regime_bug_is_shrunk_in_every_dimension_its_region_stated_and_its_wrong_problem_named() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-regime-bugs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let limits = CampaignLimits {
        seed: 7,
        ..CampaignLimits::default()
    };
    let mut wrong = Vec::new();
    for expected in EXPECTED {
        let mutant = CpuKernel::mutant(expected.bug);
        let result = certify_variant(&mutant, limits.clone(), &[], |_, _| {});
        let certificate = Certificate::from_campaign(&mutant, &limits, result, &dir).unwrap();
        let markdown = certificate.markdown();
        let json = serde_json::to_value(&certificate).unwrap();
        let failure = &json["failure"];
        let minimal = failure["minimal_case"]["shape"].clone();
        let shape = format!(
            "{}x{}x{}x{}",
            minimal["m"], minimal["n"], minimal["k"], minimal["l"]
        );
        let region = failure["region"]["words"].as_str().unwrap_or_default().to_string()
            + "; "
            + failure["region"]["needs"].as_str().unwrap_or_default();
        let identification = &failure["identification"];
        let words = identification["words"].as_str().unwrap_or_default();
        eprintln!(
            "{}: {shape} | {region} | {} | {words}",
            expected.bug.slug(),
            identification["problem"]
        );
        let right = shape.starts_with(expected.minimal)
            && expected.region.iter().all(|part| region.contains(part))
            && identification["problem"] == expected.problem
            && identification["explains_all"] == true
            && words.contains(expected.words)
            && markdown.contains(&format!("- wrong problem: **{words}"))
            && markdown.contains("- failing region: fails ")
            && failure.get("unfinished").is_none();
        if !right {
            wrong.push(expected.bug.slug());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(wrong.is_empty(), "not as expected: {wrong:?}");
}

/// A passing kernel's certificate has no region or identification, and its JSON no field for
/// them.
#[test]
fn a_passing_kernel_gets_no_region_and_no_identification() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-no-region-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let limits = CampaignLimits {
        cases: 20,
        seed: 7,
        ..CampaignLimits::default()
    };
    let kernel = CpuKernel::correct();
    let result = certify_variant(&kernel, limits.clone(), &[], |_, _| {});
    let certificate = Certificate::from_campaign(&kernel, &limits, result, &dir).unwrap();
    let text = serde_json::to_string(&certificate).unwrap();
    assert!(certificate.failure.is_none());
    for field in ["\"region\"", "\"identification\"", "\"unfinished\""] {
        assert!(!text.contains(field), "{field}");
    }
    let markdown = certificate.markdown();
    assert!(!markdown.contains("wrong problem:") && !markdown.contains("failing region:"));
    let _ = std::fs::remove_dir_all(&dir);
}
