//! What no kernel may know: the directory of the oracle's secrets (the key that signs
//! certificates), which every worker's sandbox covers, and seeds no kernel can know in advance,
//! for what the harness draws after (or apart from) the public case seeds: the rows a large case
//! is judged on, the inputs of timed calls, the names of a worker's scratch directories.

use std::hash::BuildHasher;
use std::path::PathBuf;

/// The directory of the oracle's secrets (the key that signs certificates): covered by an
/// empty tmpfs in every sandbox, readable by the oracle alone (0700). `NVFP4_ORACLE_SECRETS`
/// names another; by default `$XDG_CONFIG_HOME/nvfp4-oracle` or `~/.config/nvfp4-oracle`.
pub fn secrets_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NVFP4_ORACLE_SECRETS") {
        return PathBuf::from(dir);
    }
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .unwrap_or_else(|| std::env::temp_dir().join("nvfp4-oracle-config"));
    config.join("nvfp4-oracle")
}

/// 64 bits from the operating system's random source; where `/dev/urandom` cannot be read,
/// std's hasher keys (also from the operating system) mixed with the clock.
pub fn unpredictable_seed() -> u64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut bytes))
        .is_ok()
    {
        return u64::from_le_bytes(bytes);
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one(nanos)
}

#[cfg(test)]
mod tests {
    #[test]
    fn successive_seeds_differ() {
        let seeds: std::collections::BTreeSet<u64> =
            (0..16).map(|_| super::unpredictable_seed()).collect();
        assert_eq!(seeds.len(), 16);
    }
}
