//! Records of the H100 `mma.sync` probe (`kernels/probe/probe_mma.py export`): one per dot
//! product, little-endian: C (f32 bits), 16 fp16 of A's row, 16 fp16 of B's column, the
//! hardware's f32 result. An index file beside them (`<file>.json`) lists (family, count).

use half::f16;

/// Bytes per record.
pub const RECORD_BYTES: usize = 72;

#[derive(Debug, Clone, Copy)]
pub struct ProbeRecord {
    pub c: f32,
    pub a: [f16; 16],
    pub b: [f16; 16],
    /// The hardware's output bits.
    pub d: u32,
}

/// Parses records; `None` if the length is not a whole number of records.
pub fn parse_records(bytes: &[u8]) -> Option<Vec<ProbeRecord>> {
    if bytes.len() % RECORD_BYTES != 0 {
        return None;
    }
    let u16_at = |r: &[u8], i: usize| u16::from_le_bytes([r[2 * i], r[2 * i + 1]]);
    let u32_at = |r: &[u8], i: usize| {
        u32::from_le_bytes([r[2 * i], r[2 * i + 1], r[2 * i + 2], r[2 * i + 3]])
    };
    Some(
        bytes
            .chunks_exact(RECORD_BYTES)
            .map(|r| ProbeRecord {
                c: f32::from_bits(u32_at(r, 0)),
                a: std::array::from_fn(|k| f16::from_bits(u16_at(r, 2 + k))),
                b: std::array::from_fn(|k| f16::from_bits(u16_at(r, 18 + k))),
                d: u32_at(r, 34),
            })
            .collect(),
    )
}
