//! `bench --baseline`: medians against the main branch's bench report. A median counts as slower
//! when it exceeds the baseline's by more than the noise of both runs: the larger of their
//! spreads (p90 - p10 over the median), and at least [`MIN_NOISE`], the drift of medians between
//! runs of one binary on one machine measured on the H100 (up to 4.6%:
//! results/sandbox/h100-medians/).

use super::timing::Timing;
use crate::error::{Error, Result};
use std::path::Path;

pub const MIN_NOISE: f64 = 0.05;

/// One timing against its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct MedianChange {
    pub kernel: String,
    pub shape: String,
    pub was_us: f64,
    pub now_us: f64,
    /// The relative change that counts as noise here.
    pub noise: f64,
    pub slower: bool,
}

/// The baseline's timings (a bench.json this oracle wrote and signed).
pub fn read_baseline(path: &Path) -> Result<Vec<Timing>> {
    let value = crate::certify::read_verified(path, "baseline")?;
    let timings: Vec<(Timing, bool)> = serde_json::from_value(value["timings"].clone())
        .map_err(|err| Error::file(path, format!("not a bench report of this oracle: {err}")))?;
    Ok(timings.into_iter().map(|(timing, _)| timing).collect())
}

/// Every timing of `now` that the baseline has too, compared.
pub fn compare(baseline: &[Timing], now: &[Timing]) -> Vec<MedianChange> {
    now.iter()
        .filter_map(|t| {
            let old = baseline
                .iter()
                .find(|b| b.variant == t.variant && b.shape == t.shape)?;
            let noise = old.spread.max(t.spread).max(MIN_NOISE);
            Some(MedianChange {
                kernel: t.variant.clone(),
                shape: format!("{}x{}x{}", t.shape.m, t.shape.n, t.shape.k),
                was_us: old.median_us,
                now_us: t.median_us,
                noise,
                slower: t.median_us > old.median_us * (1.0 + noise),
            })
        })
        .collect()
}

/// The comparison as a Markdown table.
pub fn render(path: &Path, changes: &[MedianChange]) -> String {
    let mut md = format!(
        "\nAgainst the baseline {} (slower: beyond the larger spread of the two runs, at least \
         {:.0}%):\n\n| kernel | shape | baseline us | now us | change | noise | slower |\n\
         |---|---|---|---|---|---|---|\n",
        path.display(),
        MIN_NOISE * 100.0
    );
    for c in changes {
        md.push_str(&format!(
            "| {} | {} | {:.1} | {:.1} | {:+.1}% | {:.1}% | {} |\n",
            c.kernel,
            c.shape,
            c.was_us,
            c.now_us,
            (c.now_us / c.was_us - 1.0) * 100.0,
            c.noise * 100.0,
            if c.slower { "**yes**" } else { "no" }
        ));
    }
    md
}

/// Compares `report`'s medians with the signed baseline report at `path` (read before this run's
/// report is written: it may be the same file), appends the comparison to `markdown`, and says
/// whether any median got slower beyond the noise.
pub fn compare_with(
    path: &Path,
    report: &super::report::BenchReport,
    markdown: &mut String,
) -> Result<bool> {
    let baseline = read_baseline(path)?;
    let timings: Vec<_> = report.timings.iter().map(|(t, _)| t.clone()).collect();
    let changes = compare(&baseline, &timings);
    markdown.push_str(&render(path, &changes));
    Ok(changes.iter().any(|c| c.slower))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::problem::Shape;

    fn timing(variant: &str, median_us: f64, spread: f64) -> Timing {
        Timing {
            variant: variant.into(),
            shape: Shape::new(256, 3072, 4096, 1).unwrap(),
            median_us,
            min_us: median_us,
            max_us: median_us,
            spread,
            reps: 50,
            input_sets: 2,
            tflops: 1.0,
        }
    }

    #[test]
    fn slower_means_beyond_the_noise_of_both_runs() {
        let baseline = [timing("a", 100.0, 0.01), timing("b", 100.0, 0.20)];
        // 4% slower at 1% spread: inside the 5% floor.
        let changes = compare(&baseline, &[timing("a", 104.0, 0.01)]);
        assert!(!changes[0].slower);
        // 8% slower: beyond it.
        assert!(compare(&baseline, &[timing("a", 108.0, 0.01)])[0].slower);
        // 15% slower where the baseline's spread was 20%: noise.
        assert!(!compare(&baseline, &[timing("b", 115.0, 0.02)])[0].slower);
        // A kernel the baseline did not time is not compared.
        assert!(compare(&baseline, &[timing("c", 500.0, 0.0)]).is_empty());
    }
}
