//! The signing key as a user meets it: with no HOME, its folder is this user's own, made private;
//! one another user planted is refused with the fix named; a damaged key is named by `verify`.

use crate::common::{self, code_and_text, scratch_dir};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// The oracle run with no HOME, XDG_CONFIG_HOME or NVFP4_ORACLE_SECRETS (cron, `env -i`), its
/// temporary directory `tmp`.
fn without_home(tmp: &Path, args: &[&str]) -> (i32, String) {
    let out = common::oracle_command()
        .args(args)
        .env_remove("HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("NVFP4_ORACLE_SECRETS")
        .env("TMPDIR", tmp)
        .output()
        .unwrap();
    code_and_text(out)
}

fn fallback_dir(tmp: &Path) -> std::path::PathBuf {
    // SAFETY: geteuid has no preconditions.
    tmp.join(format!("nvfp4-oracle-secrets-uid{}", unsafe {
        libc::geteuid()
    }))
}

const PLAN: [&str; 7] = [
    "certify",
    "--plan",
    "--kernel",
    "cpu-tiled",
    "--seed",
    "1",
    "--quick",
];

#[test]
fn without_home_the_key_folder_is_made_private_to_this_user() {
    let tmp = scratch_dir("secrets-fresh");
    let (code, text) = without_home(&tmp, &PLAN);
    assert_eq!(code, 0, "{text}");
    let dir = fallback_dir(&tmp);
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", dir.display());
    let key = std::fs::metadata(dir.join("certificate.key")).unwrap();
    assert_eq!((key.len(), key.permissions().mode() & 0o777), (32, 0o600));
    let _ = std::fs::remove_dir_all(tmp);
}

#[test]
fn a_key_planted_where_home_is_missing_is_refused() {
    let tmp = scratch_dir("secrets-planted");
    let dir = fallback_dir(&tmp);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let key = dir.join("certificate.key");
    std::fs::write(&key, [b'K'; 32]).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (code, text) = without_home(&tmp, &PLAN);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("not private to this user"), "{text}");
    assert!(
        text.contains("NVFP4_ORACLE_SECRETS"),
        "the fix named: {text}"
    );
    // verify refuses it too, once, naming the key, instead of trusting what it signed.
    let certificate = tmp.join("forged.json");
    std::fs::write(&certificate, r#"{"kernel": "k", "signature": "00"}"#).unwrap();
    let (code, text) = without_home(&tmp, &["verify", certificate.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("not private to this user"), "{text}");
    let _ = std::fs::remove_dir_all(tmp);
}

/// A 10-byte key, and a key with one stray byte, are named as a damaged key by verify (exit 2),
/// not reported as every certificate's edited signature.
#[test]
fn verify_names_a_damaged_key() {
    let dir = scratch_dir("secrets-damaged");
    let secrets = dir.join("secrets");
    std::fs::create_dir(&secrets).unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o700)).unwrap();
    let certificate = dir.join("k.json");
    std::fs::write(&certificate, r#"{"kernel": "k", "signature": "00"}"#).unwrap();
    let key = secrets.join("certificate.key");
    for (bytes, says) in [(10, "holds 10 bytes, not 32"), (33, "more than 32 bytes")] {
        std::fs::write(&key, vec![1u8; bytes]).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (code, text) =
            common::oracle_with_key(&secrets, &["verify", certificate.to_str().unwrap()]);
        assert_eq!(code, 2, "{bytes} bytes: {text}");
        assert!(
            text.contains("signing key is damaged") && text.contains(says),
            "{bytes} bytes: {text}"
        );
        assert!(
            text.contains(key.to_str().unwrap()),
            "the key named: {text}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}
