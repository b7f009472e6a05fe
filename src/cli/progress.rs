//! Progress bars: each kernel's campaign in `certify`, and the long computations of `reference`
//! and `scaled-gemm reference` (a bar appears only where the work is long enough to leave the
//! user waiting without one).

use indicatif::{ProgressBar, ProgressStyle};

/// Products past this many get a progress bar (a few seconds on two cores).
pub const PROGRESS_PRODUCTS: u128 = 1 << 28;

/// A bar counting `rows` output rows on stderr, labelled `what`, when the work is at least
/// [`PROGRESS_PRODUCTS`] multiply-adds; `None` for shorter work.
pub fn rows_bar(what: &str, rows: usize, products: u128) -> Option<ProgressBar> {
    if products < PROGRESS_PRODUCTS {
        return None;
    }
    let bar = ProgressBar::new(rows as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{what} [{{bar:30}}] {{pos}}/{{len}} rows, {{eta}} left"
        ))
        .expect("valid template")
        .progress_chars("=> "),
    );
    Some(bar)
}

/// A campaign's bar on stderr: `kernel`'s cases done of `cases` planned. On a terminal
/// (indicatif draws nothing elsewhere), unless `quiet`; ticking, so that a long case (a
/// production shape, a shrink) is seen to run.
pub fn cases_bar(kernel: &str, cases: usize, quiet: bool) -> ProgressBar {
    let bar = ProgressBar::new(cases as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>28} [{bar:30}] {pos}/{len} cases {elapsed}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(kernel.to_string());
    if quiet {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    } else {
        bar.enable_steady_tick(std::time::Duration::from_millis(500));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_long_work_gets_a_bar() {
        assert!(rows_bar("reference", 128, PROGRESS_PRODUCTS - 1).is_none());
        let bar = rows_bar("reference", 30_000, PROGRESS_PRODUCTS).expect("a bar");
        assert_eq!(bar.length(), Some(30_000));
    }
}
