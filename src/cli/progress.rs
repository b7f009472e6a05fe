//! Progress bars for the long computations of `reference` and `scaled-gemm reference`: a bar
//! appears only where the work is long enough to leave the user waiting without one.

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
