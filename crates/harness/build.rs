//! Records the commit the binary was built from, so that every certificate says which oracle
//! judged it: `NVFP4_ORACLE_BUILD` is the short commit hash, with "+modified" when the working
//! tree had uncommitted changes, or "unknown" outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let build = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let modified = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|status| !status.is_empty());
            format!("{commit}{}", if modified { "+modified" } else { "" })
        }
        None => "unknown".to_string(),
    };
    println!("cargo:rustc-env=NVFP4_ORACLE_BUILD={build}");
    // Run again after a new commit (HEAD or a branch ref moves) or an edit to what the binary
    // is built from (so "+modified" stays true).
    // Paths from this crate's folder (crates/harness); the checkout's root is two up.
    for path in [
        "../../.git/HEAD",
        "../../.git/refs/heads",
        "../../src",
        "../../crates",
        "kernels",
        "../../Cargo.toml",
    ] {
        if std::path::Path::new(path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
