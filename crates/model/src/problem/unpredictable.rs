//! Seeds no kernel can know in advance, for what the harness draws after (or apart from) the
//! public case seeds: the rows a large case is judged on, the inputs of timed calls, the names
//! of a worker's scratch directories.

use std::hash::BuildHasher;

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
