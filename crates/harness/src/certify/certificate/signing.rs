//! Certificates `bench` can trust: each certificate's JSON is signed with HMAC-SHA-256 under a
//! key kept in the oracle's secrets directory ([`crate::secrets::secrets_dir`]), which every worker's sandbox
//! covers, so neither a kernel nor anything it left behind can forge or edit a certificate
//! that `bench` then believes. The signature covers the whole certificate in a canonical form
//! (serde_json's sorted keys), so no field can change without it failing.

use crate::error::{Error, Result};
use crate::secrets::{check_private, make_private_dir, secrets_dir, Secret, SECRETS_ENV};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::path::PathBuf;

/// The field of a certificate's JSON that holds its signature.
pub const SIGNATURE_FIELD: &str = "signature";

fn key_path() -> PathBuf {
    secrets_dir().join("certificate.key")
}

/// The length of a signing key, exactly: a key of another length is damaged (a truncated copy, a
/// stray newline), never taken for a key of its own.
pub const KEY_BYTES: usize = 32;

/// The signing key, made (32 random bytes, mode 0600 in a 0700 directory) on first use. A key
/// that exists but cannot be read, is of another length, or that another user could have
/// planted ([`check_private`]) is an error, never replaced or used: every certificate signed
/// with it would silently stop verifying, or prove nothing.
fn key() -> Result<Vec<u8>> {
    let path = key_path();
    if let Some(bytes) = read_key(&path)? {
        return Ok(bytes);
    }
    make_private_dir(&secrets_dir())?;
    let mut bytes = vec![0u8; KEY_BYTES];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|err| Error::file("/dev/urandom", err))?;
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    // create_new: two runs making the first key at once must not each write their own.
    options.write(true).create_new(true).mode(0o600);
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
            format!(
                "cannot write the signing key: {err}; name a directory of your own with \
                 {SECRETS_ENV}=DIR"
            ),
        )),
    }
}

/// The key in `path`; `None` where there is none yet. Its folder and the key are checked private
/// first, and at most one byte more than a key is read, whatever the file is (`/dev/zero`).
fn read_key(path: &std::path::Path) -> Result<Option<Vec<u8>>> {
    match std::fs::metadata(path) {
        // No key, nor its folder (a HOME that is not a folder included): one is to be made.
        Err(err)
            if err.kind() == std::io::ErrorKind::NotFound
                || err.raw_os_error() == Some(libc::ENOTDIR) =>
        {
            return Ok(None)
        }
        Err(err) => return Err(damaged(path, format!("it cannot be read: {err}"))),
        Ok(_) => {}
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        check_private(dir, Secret::Directory)?;
    }
    check_private(path, Secret::Key)?;
    let bytes = nvfp4_model::bounded_read::read_bytes(path, "signing key", KEY_BYTES as u64)
        .map_err(|_| damaged(path, format!("it holds more than {KEY_BYTES} bytes")))?;
    if bytes.len() != KEY_BYTES {
        return Err(damaged(
            path,
            format!("it holds {} bytes, not {KEY_BYTES}", bytes.len()),
        ));
    }
    Ok(Some(bytes))
}

fn damaged(path: &std::path::Path, why: impl std::fmt::Display) -> Error {
    Error::file(
        path,
        format!(
            "the signing key is damaged ({why}: a key is exactly {KEY_BYTES} bytes); it is not \
             replaced, since every certificate signed with it would then fail to verify: restore \
             it from a copy (or, to start over with a new key and leave earlier certificates \
             unverifiable, remove it)"
        ),
    )
}

/// Refuses, before any certificate is read, a signing key that exists but cannot be used (damaged,
/// or not private): `verify` then names the key once, instead of calling every certificate
/// edited. No key yet is no error here.
pub fn check_key() -> Result<()> {
    read_key(&key_path()).map(|_| ())
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
    /// The key exists and is not used: damaged, or another user's to plant or read.
    #[error("{0}")]
    KeyRefused(String),
    #[error("its signature does not match its content (it was edited, or signed by another key)")]
    Mismatch,
}

/// `Ok` when a certificate's signature is this oracle's, else why it is not to be trusted.
pub fn verify(certificate: &serde_json::Value) -> std::result::Result<(), SignatureError> {
    let Some(given) = certificate.get(SIGNATURE_FIELD).and_then(|s| s.as_str()) else {
        return Err(SignatureError::NotSigned);
    };
    let key = match read_key(&key_path()) {
        Ok(Some(key)) => key,
        Ok(None) => {
            return Err(SignatureError::KeyUnreadable {
                path: key_path().display().to_string(),
                reason: "there is none".into(),
            })
        }
        Err(err) => return Err(SignatureError::KeyRefused(err.to_string())),
    };
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
        let dir = TestDir::new("secrets");
        // SAFETY: this test alone reads the variable in this process's tests of this module.
        unsafe { std::env::set_var("NVFP4_ORACLE_SECRETS", &dir.0) };
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
    }

    /// A key file written with this user's own, private mode.
    fn write_key(path: &std::path::Path, bytes: &[u8]) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    /// A fresh private folder for one test, removed when dropped.
    struct TestDir(std::path::PathBuf);
    impl TestDir {
        fn new(name: &str) -> TestDir {
            let dir =
                std::env::temp_dir().join(format!("nvfp4-oracle-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            make_private_dir(&dir).unwrap();
            TestDir(dir)
        }
    }
    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_damaged_key_is_an_error_and_is_kept() {
        let dir = TestDir::new("damaged-key");
        let path = dir.0.join("certificate.key");
        assert!(
            read_key(&path).unwrap().is_none(),
            "no key yet: one is made"
        );
        write_key(&path, b"short");
        let err = read_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("damaged") && err.contains("holds 5 bytes, not 32"),
            "{err}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"short", "left as it was");
        // One stray byte (a newline a copy added) is a damaged key, not a key of its own.
        write_key(&path, &[7u8; 33]);
        let err = read_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("damaged") && err.contains("more than 32"),
            "{err}"
        );
        write_key(&path, &[7u8; 32]);
        assert_eq!(read_key(&path).unwrap(), Some(vec![7u8; 32]));
    }

    /// A key linked to an endless file is refused after 33 bytes, not read until memory ends.
    #[test]
    fn an_endless_key_is_refused_after_a_bounded_read() {
        let dir = TestDir::new("endless-key");
        let path = dir.0.join("certificate.key");
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        // /dev/zero is 0666, root's: refused as readable by others before a byte is read.
        let err = read_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("not private") && err.contains("mode 666"),
            "{err}"
        );
        let fifo = dir.0.join("fifo.key");
        let status = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut file = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                let chunk = vec![0u8; 1 << 16];
                // Endless until the reader goes: a write error ends it.
                while file.write_all(&chunk).is_ok() {}
            })
        };
        let err = read_key(&fifo).unwrap_err().to_string();
        assert!(
            err.contains("damaged") && err.contains("more than 32"),
            "{err}"
        );
        // Where the writer still waits for a reader, one that opens and goes releases it.
        use std::os::unix::fs::OpenOptionsExt;
        drop(
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo),
        );
        writer.join().unwrap();
    }

    /// A secrets folder or key another user could have written is refused, with the fix named.
    #[test]
    fn a_key_others_could_plant_or_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = TestDir::new("planted-key");
        let path = dir.0.join("certificate.key");
        write_key(&path, &[9u8; 32]);
        assert!(read_key(&path).is_ok());
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = read_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("secrets directory is not private") && err.contains("mode 777"),
            "{err}"
        );
        assert!(err.contains(SECRETS_ENV), "the fix named: {err}");
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_key(&path).unwrap_err().to_string();
        assert!(
            err.contains("signing key is not private") && err.contains("chmod 600"),
            "{err}"
        );
        // Owned by another user (root can give a file away; others cannot make one).
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).unwrap();
            let err = read_key(&path).unwrap_err().to_string();
            assert!(err.contains("owned by uid 65534"), "{err}");
        }
    }
}
