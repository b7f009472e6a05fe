//! Helpers shared by the harness's integration tests.

use std::path::PathBuf;

/// A path of the checkout: committed files (the golden set, README.md) live at its root, two
/// levels above this crate.
pub fn repo_path(relative: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(relative)
}
