//! Certificates `bench` can trust: each certificate's JSON is signed with HMAC-SHA-256 under a
//! key kept in the oracle's secrets directory ([`crate::secrets::secrets_dir`]), which every worker's sandbox
//! covers, so neither a kernel nor anything it left behind can forge or edit a certificate
//! that `bench` then believes. The signature covers the whole certificate in a canonical form
//! (serde_json's sorted keys), so no field can change without it failing.

use crate::error::{Error, Result};
use crate::secrets::secrets_dir;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::PathBuf;

/// The field of a certificate's JSON that holds its signature.
pub const SIGNATURE_FIELD: &str = "signature";

fn key_path() -> PathBuf {
    secrets_dir().join("certificate.key")
}

/// The signing key, made (32 random bytes, mode 0600 in a 0700 directory) on first use. A key
/// that exists but cannot be read, or is too short, is an error, never replaced: every
/// certificate signed with it would silently stop verifying.
fn key() -> Result<Vec<u8>> {
    let path = key_path();
    match read_key(&path) {
        Ok(Some(bytes)) => return Ok(bytes),
        Ok(None) => {}
        Err(err) => return Err(err),
    }
    let dir = secrets_dir();
    std::fs::create_dir_all(&dir)
        .map_err(|err| Error::file(&dir, format!("cannot create: {err}")))?;
    let mut bytes = vec![0u8; 32];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|err| Error::file("/dev/urandom", err))?;
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    // create_new: two runs making the first key at once must not each write their own.
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        options.mode(0o600);
    }
    match options.open(&path) {
        Ok(mut file) => {
            file.write_all(&bytes)
                .and_then(|()| file.sync_all())
                .map_err(|err| {
                    Error::file(&path, format!("cannot write the signing key: {err}"))
                })?;
            Ok(bytes)
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
            // Another run made it first: wait a moment for its 32 bytes.
            for _ in 0..50 {
                if let Ok(Some(bytes)) = read_key(&path) {
                    return Ok(bytes);
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            read_key(&path)?.ok_or_else(|| damaged(&path, "it is empty"))
        }
        Err(err) => Err(Error::file(
            &path,
            format!("cannot write the signing key: {err}"),
        )),
    }
}

/// The key in `path`; `None` where there is none yet.
fn read_key(path: &std::path::Path) -> Result<Option<Vec<u8>>> {
    match std::fs::metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(damaged(path, format!("it cannot be read: {err}"))),
        Ok(_) => {}
    }
    let bytes = nvfp4_model::bounded_read::read_bytes(path, "signing key", 4096)
        .map_err(|err| damaged(path, err))?;
    if bytes.len() < 32 {
        return Err(damaged(
            path,
            format!("it holds {} bytes, fewer than 32", bytes.len()),
        ));
    }
    Ok(Some(bytes))
}

fn damaged(path: &std::path::Path, why: impl std::fmt::Display) -> Error {
    Error::file(
        path,
        format!(
            "the signing key is damaged ({why}); it is not replaced, since every certificate \
             signed with it would then fail to verify: restore it from a copy (or, to start \
             over with a new key and leave earlier certificates unverifiable, remove it)"
        ),
    )
}

/// Makes the key now, before any worker starts: a sandbox hides the secrets directory only if
/// it exists when the sandbox is built.
pub fn ensure_key() -> Result<()> {
    key().map(|_| ())
}

fn mac_of(key: &[u8], certificate: &serde_json::Value) -> String {
    let mut unsigned = certificate.clone();
    if let Some(object) = unsigned.as_object_mut() {
        object.remove(SIGNATURE_FIELD);
    }
    let canonical = serde_json::to_string(&unsigned).expect("a JSON value serializes");
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(canonical.as_bytes());
    format!("{:x}", mac.finalize().into_bytes())
}

/// Adds the signature field to a certificate's JSON.
pub fn sign(certificate: &mut serde_json::Value) -> Result<()> {
    let signature = mac_of(&key()?, certificate);
    if let Some(object) = certificate.as_object_mut() {
        object.insert(SIGNATURE_FIELD.into(), serde_json::Value::String(signature));
    }
    Ok(())
}

/// The JSON in `path` (a certificate, a bench report), refused unless its signature is this
/// oracle's; `what` names it in the messages ("baseline not trusted: ...").
pub fn read_verified(path: &std::path::Path, what: &str) -> Result<serde_json::Value> {
    let text =
        nvfp4_model::bounded_read::read_text(path, what, nvfp4_model::bounded_read::JSON_CAP)?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|err| Error::file(path, format!("not a {what}: {err}")))?;
    verify(&value).map_err(|why| Error::file(path, format!("{what} not trusted: {why}")))?;
    Ok(value)
}

/// Why a certificate's JSON is not to be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("it is not signed")]
    NotSigned,
    #[error("the signing key {path} cannot be read: {reason}")]
    KeyUnreadable { path: String, reason: String },
    #[error("its signature does not match its content (it was edited, or signed by another key)")]
    Mismatch,
}

/// `Ok` when a certificate's signature is this oracle's, else why it is not to be trusted.
pub fn verify(certificate: &serde_json::Value) -> std::result::Result<(), SignatureError> {
    let Some(given) = certificate.get(SIGNATURE_FIELD).and_then(|s| s.as_str()) else {
        return Err(SignatureError::NotSigned);
    };
    let key = std::fs::read(key_path()).map_err(|err| SignatureError::KeyUnreadable {
        path: key_path().display().to_string(),
        reason: err.to_string(),
    })?;
    let expected = mac_of(&key, certificate);
    if constant_time_eq(expected.as_bytes(), given.as_bytes()) {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edited_certificate_fails_and_the_signed_one_passes() {
        let dir = std::env::temp_dir().join(format!("nvfp4-oracle-secrets-{}", std::process::id()));
        // SAFETY: this test alone reads the variable in this process's tests of this module.
        unsafe { std::env::set_var("NVFP4_ORACLE_SECRETS", &dir) };
        let mut certificate =
            serde_json::json!({"kernel": "k", "status": "failed", "elapsed_seconds": 0.1});
        assert!(verify(&certificate).is_err(), "unsigned");
        sign(&mut certificate).unwrap();
        assert_eq!(verify(&certificate), Ok(()));
        let mut forged = certificate.clone();
        forged["status"] = serde_json::json!("certified");
        assert_eq!(verify(&forged), Err(SignatureError::Mismatch));
        assert!(SignatureError::Mismatch
            .to_string()
            .contains("does not match"));
        // Through text, as bench reads it, with floats that only an exact parser round-trips.
        let text = serde_json::to_string_pretty(&certificate).unwrap();
        assert_eq!(verify(&serde_json::from_str(&text).unwrap()), Ok(()));
        let mut x = 0.1f64;
        for i in 0..2000 {
            x = (x * 1.618_033_988_7 + f64::from(i) * 1e-7).fract() * 10f64.powi(i % 40 - 20);
            let mut value = serde_json::json!({"x": x, "kernel": "k"});
            sign(&mut value).unwrap();
            let text = serde_json::to_string_pretty(&value).unwrap();
            assert_eq!(
                verify(&serde_json::from_str(&text).unwrap()),
                Ok(()),
                "{x:e}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_damaged_key_is_an_error_and_is_kept() {
        let dir =
            std::env::temp_dir().join(format!("nvfp4-oracle-damaged-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("certificate.key");
        assert!(
            read_key(&path).unwrap().is_none(),
            "no key yet: one is made"
        );
        std::fs::write(&path, b"short").unwrap();
        let err = read_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("damaged") && err.contains("fewer than 32"),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"short", "left as it was");
        std::fs::write(&path, [7u8; 32]).unwrap();
        assert_eq!(read_key(&path).unwrap(), Some(vec![7u8; 32]));
        let _ = std::fs::remove_dir_all(dir);
    }
}
