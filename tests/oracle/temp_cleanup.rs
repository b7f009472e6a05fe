//! The test process leaves nothing in /tmp: its temporary folder (common::private_temp_dir)
//! goes when it exits, with whatever a test wrote there and forgot.

use crate::common;

/// Run alone, in a process of its own, by the test below: writes into the temporary directory
/// and does not clean up, as a forgetful test would.
#[test]
#[ignore = "a helper: run by a_test_process_leaves_nothing_in_the_temporary_directory"]
fn helper_writes_into_the_temporary_directory_and_forgets_it() {
    let dir = std::env::temp_dir().join(format!("nvfp4-oracle-forgotten-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("report.json"), "{}").unwrap();
    // The oracle it starts makes its private folder there too.
    let (code, text) = common::oracle(&["variants"]);
    assert_eq!(code, 0, "{text}");
    println!("TEMP_ROOT={}", common::TEMP_ROOT.get().unwrap().display());
}

#[test]
fn a_test_process_leaves_nothing_in_the_temporary_directory() {
    let root = common::TEMP_ROOT.get().expect("a private temporary folder");
    assert_eq!(
        &std::env::temp_dir(),
        root,
        "TMPDIR is this process's folder"
    );
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "temp_cleanup::helper_writes_into_the_temporary_directory_and_forgets_it",
            "--nocapture",
        ])
        .env_remove("TMPDIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let helper_root = text
        .lines()
        .find_map(|line| line.strip_prefix("TEMP_ROOT="))
        .unwrap_or_else(|| panic!("the helper ran: {text}"));
    assert!(helper_root.contains("nvfp4-oracle-tests-"), "{helper_root}");
    assert!(
        !std::path::Path::new(helper_root).exists(),
        "{helper_root} left behind"
    );
}
