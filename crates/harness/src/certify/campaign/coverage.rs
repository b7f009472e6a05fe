//! What a campaign covered: cases by distribution and shape class, the time each class took, the
//! FP4 codes and scale exponents its inputs reached, the tightest intervals met, and for an exact
//! campaign its replay comparisons. Certificates carry it; a CI gate compares it with the main
//! branch's.

use super::cases::CaseOutcome;
use nvfp4_model::problem::Shape;

/// Tallies of what a campaign covered.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Coverage {
    pub cases: usize,
    pub by_distribution: std::collections::BTreeMap<String, usize>,
    pub by_shape_class: std::collections::BTreeMap<String, usize>,
    /// Seconds each shape class took (inputs, kernel, model and judgement; a failure's shrinking
    /// not included): what the production-size cases add to a campaign.
    pub seconds_by_shape_class: std::collections::BTreeMap<String, f64>,
    /// Seconds of every case's phases, summed: inputs, kernel, model, judgement
    /// ([`super::cases::CasePhases`]): where a campaign's time goes.
    pub seconds_by_phase: std::collections::BTreeMap<String, f64>,
    /// What the campaign planned beside the random cases: the fixed edge cases (smallest
    /// shapes, tile edges, a K tail, L > 1) and the golden cases the kernel supports.
    pub planned_edge_cases: usize,
    pub planned_golden_cases: usize,
    /// The production shapes (benchmark and competition test shapes, crates/harness/src/certify/campaign/production.rs)
    /// and, when they are fewer or thinner than a GPU kernel's, why.
    pub planned_production_cases: usize,
    pub production_note: Option<String>,
    /// Random large shapes (crates/harness/src/certify/campaign/production.rs) and, when fewer or thinner than a GPU
    /// kernel's, why.
    pub planned_large_cases: usize,
    pub large_note: Option<String>,
    /// Deployment-regime cases (crates/harness/src/certify/campaign/regimes.rs) planned, and why some
    /// regime has none. `None` in certificates from before the regimes.
    #[serde(default)]
    pub planned_regime_cases: Option<usize>,
    #[serde(default)]
    pub regime_note: Option<String>,
    /// Per deployment regime, every case of the campaign whose shape lies in it (whatever
    /// drew it) and how many of those were judged on sampled rows.
    #[serde(default)]
    pub by_regime: std::collections::BTreeMap<String, super::regimes::RegimeCount>,
    /// The deployment-size cases: those whose shape lies in at least one regime (a case in
    /// several counts once), and how many of them were judged on sampled rows.
    #[serde(default)]
    pub deployment_cases: super::regimes::RegimeCount,
    /// The shape space's pairs (and band triples) of ranges the campaign's cases reached, and
    /// those it could not hold (crates/harness/src/certify/campaign/shape_ranges.rs). `None` in
    /// certificates from before the ranges.
    #[serde(default)]
    pub ranges: Option<super::shape_ranges::RangeCoverage>,
    /// The models whose shapes the campaign ran (`certify --model`).
    #[serde(default)]
    pub models: Vec<super::models::ModelCoverage>,
    /// `certify --quick`: the planned production-size cases were not run.
    pub production_size_skipped: bool,
    /// The fixed cases of per-product rounding's worst case ([`super::fixed_cases::stagnation_cases`]).
    pub planned_stagnation_cases: usize,
    /// Cases judged on sampled rows (too large to judge whole), the rows judged and the rows
    /// of M they were drawn from.
    pub sampled_cases: usize,
    pub sampled_rows_judged: usize,
    pub sampled_rows_of: usize,
    /// Which of the 16 FP4 codes and of the 16 e4m3 exponent fields (NaN counted apart) occurred.
    pub fp4_codes_seen: Vec<u8>,
    pub scale_exponents_seen: Vec<u8>,
    pub nan_scales_seen: bool,
    /// For kernels with a restricted shape support: whether a shape outside it was refused
    /// cleanly (`None` when the kernel supports every shape).
    pub refuses_unsupported_shape: Option<bool>,
    /// Largest distance, in fp16 ulps, between an accepted output and the model's answer, over
    /// elements whose interval is at most [`super::values_seen::TIGHT_ULPS`] wide (elsewhere cancellation, not the
    /// kernel, sets the distance).
    pub worst_ulps_from_expected: u32,
    /// Exact mode: what the replay comparisons covered.
    pub exact: Option<ExactCoverage>,
}

/// Tallies of the replay comparisons of an exact campaign.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ExactCoverage {
    /// Cases whose output passed the intervals and was compared with the replay.
    pub cases_replayed: usize,
    pub elements_compared: usize,
    /// Elements whose epilogue is a near-tie (either fp16 candidate accepted).
    pub ambiguous_elements: usize,
    /// Of those, how many outputs were the other candidate, not the replay's own rounding.
    pub ambiguous_alternative_observed: usize,
    pub cases_mismatching: usize,
    pub elements_mismatching: usize,
}

impl Coverage {
    pub(crate) fn record(&mut self, outcome: &CaseOutcome, class: &str, seconds: f64) {
        self.cases += 1;
        *self
            .seconds_by_shape_class
            .entry(class.to_string())
            .or_default() += seconds;
        let phases = outcome.phases;
        for (phase, seconds) in [
            ("inputs", phases.inputs),
            ("kernel", phases.kernel),
            ("model", phases.model),
            ("judgement", phases.judge),
        ] {
            *self.seconds_by_phase.entry(phase.to_string()).or_default() += seconds;
        }
        *self
            .by_distribution
            .entry(outcome.spec.dist.name().to_string())
            .or_default() += 1;
        *self.by_shape_class.entry(class.to_string()).or_default() += 1;
        let regimes = super::regimes::regimes_of(outcome.spec.shape);
        let sampled = usize::from(outcome.sample.is_some());
        for regime in &regimes {
            let count = self.by_regime.entry(regime.name().to_string()).or_default();
            count.cases += 1;
            count.sampled += sampled;
        }
        if let Some(ranges) = self.ranges.as_mut() {
            ranges.record(outcome.spec.shape);
        }
        if !regimes.is_empty() {
            self.deployment_cases.cases += 1;
            self.deployment_cases.sampled += sampled;
        }
        if let Some(sample) = &outcome.sample {
            self.sampled_cases += 1;
            self.sampled_rows_judged += sample.rows.len();
            self.sampled_rows_of += sample.of;
        }
        if let Some(comparison) = outcome.exact {
            let exact = self.exact.get_or_insert_with(ExactCoverage::default);
            exact.cases_replayed += 1;
            exact.elements_compared += comparison.elements;
            exact.ambiguous_elements += comparison.ambiguous;
            exact.ambiguous_alternative_observed += comparison.ambiguous_alternative;
            exact.cases_mismatching += usize::from(comparison.mismatches > 0);
            exact.elements_mismatching += comparison.mismatches;
        }
        let seen = outcome.seen;
        self.nan_scales_seen |= seen.nan_scales;
        merge(&mut self.fp4_codes_seen, seen.fp4_codes);
        merge(&mut self.scale_exponents_seen, seen.scale_exponents);
        self.worst_ulps_from_expected = self.worst_ulps_from_expected.max(seen.worst_tight_ulps);
    }
}

/// Adds the values whose bits are set in `flags` to the sorted list `seen`.
fn merge(seen: &mut Vec<u8>, flags: u16) {
    for value in 0..16u8 {
        if flags & 1 << value != 0 && !seen.contains(&value) {
            seen.push(value);
            seen.sort_unstable();
        }
    }
}

/// "aligned" when every dimension is a multiple of the 128 x 128 x 256 competition tiles, else
/// "unaligned"; "batched" when L > 1; "tiny" below one tile.
pub fn shape_class(shape: Shape) -> &'static str {
    if shape.l > 1 {
        "batched"
    } else if shape.m < 128 && shape.n < 128 {
        "tiny"
    } else if shape.m % 128 == 0 && shape.n % 128 == 0 && shape.k % 256 == 0 {
        "aligned"
    } else {
        "unaligned"
    }
}
