//! Prints the README's table of planted bugs in the block-scaled family, each judged by the
//! libraries' tolerance checks and by the oracle (see `certify::field_comparison`):
//!     cargo run --release --example field_mutants

fn main() {
    match nvfp4_harness::certify::mutant_table(2026) {
        Ok(table) => print!("{}", nvfp4_harness::certify::render_table(&table)),
        Err(err) => {
            eprintln!("error: {err}");
            std::process::exit(1);
        }
    }
}
