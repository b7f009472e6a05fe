//! The planted bugs of the block-scaled family against the libraries' tolerance checks and the
//! oracle (`certify::field_comparison`): the correct kernel passes everything it can be judged
//! by, the oracle catches every bug, and the README's table is this run's.

use crate::common;

use nvfp4_harness::certify::{mutant_table, render_table};
use nvfp4_model::compare::field_checks::FieldCheck;

#[test]
fn the_oracle_catches_every_planted_bug_and_the_readme_shows_this_table() {
    let table = mutant_table(2026).unwrap();
    let checks = FieldCheck::ALL.len();
    for (set, passes) in &table.correct {
        assert!(
            passes[checks],
            "the oracle rejects the correct kernel on {set}"
        );
        // Every tolerance check passes the correct kernel except where the answer holds NaN.
        let expected = !set.ends_with("/nan");
        assert!(
            passes[..checks].iter().all(|&p| p == expected),
            "{set}: {passes:?}"
        );
    }
    for row in &table.rows {
        assert!(row.oracle, "the oracle missed: {}", row.bug.describe());
    }
    // The tolerance checks each miss some: what the README claims.
    for i in 0..checks {
        assert!(
            table.rows.iter().any(|r| !r.field[i]),
            "check {i} caught all"
        );
    }
    let readme = std::fs::read_to_string(common::repo_path("README.md")).unwrap();
    let rendered = render_table(&table);
    assert!(
        readme.contains(&rendered),
        "README's table differs from this run; regenerate it with \
         `cargo run --release --example field_mutants`:\n{rendered}"
    );
}
