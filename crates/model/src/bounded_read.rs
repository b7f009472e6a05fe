//! Every file the tools read from a user is read through here, bounded by what its format
//! allows before its body is read: a text file (a manifest, a certificate, PTX, a golden
//! manifest) up to a cap, a safetensors file up to the size its header declares and no more
//! than this machine can hold. A path given by mistake (`/dev/zero`, a FIFO, a multi-gigabyte
//! file of something else) is then refused within a read of a few bytes or of the cap, with
//! its reason, instead of being read until the process is killed for memory.

use crate::error::{Error, Result};
use std::io::Read;
use std::path::Path;

/// The largest manifest (TOML) read: a kernel manifest is a few hundred bytes.
pub const MANIFEST_CAP: u64 = 1 << 20;
/// The largest JSON read (certificates, baselines, bench reports, the golden manifest, about
/// 1.7 MB today).
pub const JSON_CAP: u64 = 64 << 20;
/// The largest PTX read (the largest variant's is well under a megabyte).
pub const PTX_CAP: u64 = 64 << 20;
/// The largest safetensors header (the safetensors crate refuses larger ones too).
pub const SAFETENSORS_HEADER_CAP: u64 = 100_000_000;

fn open(path: &Path, what: &str) -> Result<std::fs::File> {
    let file = std::fs::File::open(path)
        .map_err(|err| Error::file(path, format!("cannot read the {what}: {err}")))?;
    let meta = file
        .metadata()
        .map_err(|err| Error::file(path, format!("cannot read the {what}: {err}")))?;
    if meta.is_dir() {
        return Err(Error::file(path, format!("the {what} is a directory")));
    }
    Ok(file)
}

/// The bytes of `path`, a `what`, refused past `cap` bytes: at most `cap + 1` bytes are read,
/// whatever the file is.
pub fn read_bytes(path: &Path, what: &str, cap: u64) -> Result<Vec<u8>> {
    let file = open(path, what)?;
    if let Ok(meta) = file.metadata() {
        if meta.is_file() && meta.len() > cap {
            return Err(too_long(path, what, cap));
        }
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| Error::file(path, format!("cannot read the {what}: {err}")))?;
    if bytes.len() as u64 > cap {
        return Err(too_long(path, what, cap));
    }
    Ok(bytes)
}

fn too_long(path: &Path, what: &str, cap: u64) -> Error {
    Error::file(
        path,
        format!(
            "longer than {} bytes, the most a {what} may be: is this the right file?",
            cap
        ),
    )
}

/// The text of `path`, a `what` (UTF-8), refused past `cap` bytes.
pub fn read_text(path: &Path, what: &str, cap: u64) -> Result<String> {
    let bytes = read_bytes(path, what, cap)?;
    String::from_utf8(bytes).map_err(|err| {
        Error::file(
            path,
            format!(
                "the {what} is not UTF-8 text (byte {} is not): is this the right file?",
                err.utf8_error().valid_up_to()
            ),
        )
    })
}

/// The bytes of a safetensors file, its header read and checked first: the body is read only
/// up to the end of the last tensor the header declares, and only when that fits in `cap` bytes
/// and in this machine's available memory.
pub fn read_safetensors(path: &Path, cap: u64) -> Result<Vec<u8>> {
    let invalid =
        |reason: String| Error::file(path, format!("not a valid safetensors file: {reason}"));
    let mut file = open(path, "safetensors file")?;
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix)
        .map_err(|err| invalid(format!("cannot read its 8-byte header length: {err}")))?;
    let header_len = u64::from_le_bytes(prefix);
    if header_len == 0 || header_len > SAFETENSORS_HEADER_CAP {
        return Err(invalid(format!(
            "its header length is {header_len} bytes (1 to {SAFETENSORS_HEADER_CAP})"
        )));
    }
    let mut header = Vec::with_capacity(header_len as usize);
    (&mut file)
        .take(header_len)
        .read_to_end(&mut header)
        .map_err(|err| invalid(format!("cannot read its header: {err}")))?;
    if (header.len() as u64) < header_len {
        return Err(invalid(format!(
            "the file ends inside its {header_len}-byte header"
        )));
    }
    let body_len = declared_body(&header).map_err(invalid)?;
    let total = 8 + header_len + body_len;
    if total > cap {
        return Err(Error::file(
            path,
            format!("its header declares {total} bytes, more than the {cap} this reads"),
        ));
    }
    if let Ok(meta) = file.metadata() {
        if meta.is_file() && meta.len() != total {
            return Err(invalid(format!(
                "its header declares {total} bytes, the file has {}",
                meta.len()
            )));
        }
    }
    crate::problem::memory::check_bytes(
        &format!("reading {} ({total} bytes)", path.display()),
        u128::from(total),
    )?;
    let mut bytes = Vec::with_capacity(total as usize);
    bytes.extend_from_slice(&prefix);
    bytes.extend_from_slice(&header);
    file.take(body_len)
        .read_to_end(&mut bytes)
        .map_err(|err| Error::file(path, format!("cannot read: {err}")))?;
    if (bytes.len() as u64) < total {
        return Err(invalid(format!(
            "the file ends after {} of the {total} bytes its header declares",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// The length of the tensor data a safetensors header declares: the largest end offset.
fn declared_body(header: &[u8]) -> std::result::Result<u64, String> {
    let text = std::str::from_utf8(header).map_err(|_| "its header is not UTF-8".to_string())?;
    let entries: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text.trim_end_matches(' '))
            .map_err(|err| format!("its header is not a JSON object: {err}"))?;
    let mut end = 0u64;
    for (name, entry) in &entries {
        if name == "__metadata__" {
            continue;
        }
        let offsets = entry
            .get("data_offsets")
            .and_then(|v| v.as_array())
            .filter(|a| a.len() == 2)
            .and_then(|a| Some((a[0].as_u64()?, a[1].as_u64()?)))
            .ok_or_else(|| format!("tensor '{name}' has no valid data_offsets"))?;
        end = end.max(offsets.1);
    }
    Ok(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn an_endless_file_is_refused_quickly() {
        let started = std::time::Instant::now();
        let zero = Path::new("/dev/zero");
        let text = read_text(zero, "manifest", MANIFEST_CAP)
            .unwrap_err()
            .to_string();
        assert!(text.contains("longer than"), "{text}");
        let case = read_safetensors(zero, u64::MAX).unwrap_err().to_string();
        assert!(case.contains("header length is 0"), "{case}");
        assert!(started.elapsed().as_secs() < 5);
    }

    #[test]
    fn a_header_past_the_cap_is_refused_before_the_body() {
        let dir = std::env::temp_dir().join(format!("nvfp4-bounded-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.safetensors");
        let header = br#"{"a":{"dtype":"U8","shape":[1000000000],"data_offsets":[0,1000000000]}}"#;
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        std::fs::write(&path, &bytes).unwrap();
        let err = read_safetensors(&path, 1 << 20).unwrap_err().to_string();
        assert!(err.contains("declares"), "{err}");
        let err = read_safetensors(&path, u64::MAX).unwrap_err().to_string();
        assert!(err.contains("declares") || err.contains("memory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
