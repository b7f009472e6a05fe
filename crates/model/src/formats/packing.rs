//! Two e2m1 codes per byte, as NVFP4 tensors store them: the low nibble holds the even k index,
//! the high nibble the odd one (torch's float4_e2m1fn_x2 and the tensor cores agree on this).

use super::e2m1::E2m1;
use crate::error::Error;

/// Packs a row of e2m1 values. An odd count cannot be packed: the last byte would be half empty.
pub fn pack_e2m1(values: &[E2m1]) -> Result<Vec<u8>, Error> {
    if values.len() % 2 != 0 {
        return Err(Error::OddFp4Count {
            count: values.len(),
        });
    }
    Ok(values
        .chunks_exact(2)
        .map(|pair| pair[0].to_bits() | (pair[1].to_bits() << 4))
        .collect())
}

/// Unpacks `packed` into `2 * packed.len()` values.
pub fn unpack_e2m1(packed: &[u8]) -> Vec<E2m1> {
    packed
        .iter()
        .flat_map(|&byte| [E2m1::from_bits(byte & 0xF), E2m1::from_bits(byte >> 4)])
        .collect()
}

/// The value at index `k` of a packed row.
#[inline]
pub fn e2m1_at(packed: &[u8], k: usize) -> E2m1 {
    let byte = packed[k / 2];
    E2m1::from_bits(if k % 2 == 0 { byte & 0xF } else { byte >> 4 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_nibble_holds_even_index() {
        let row = [
            E2m1::from_bits(0x1),
            E2m1::from_bits(0xA),
            E2m1::from_bits(0x7),
            E2m1::from_bits(0x8),
        ];
        let packed = pack_e2m1(&row).unwrap();
        assert_eq!(packed, vec![0xA1, 0x87]);
        assert_eq!(unpack_e2m1(&packed), row);
        assert_eq!(e2m1_at(&packed, 1), E2m1::from_bits(0xA));
    }

    #[test]
    fn odd_count_is_rejected() {
        let err = pack_e2m1(&[E2m1::from_bits(1); 3]).unwrap_err();
        assert!(err.to_string().contains("odd"), "{err}");
    }
}
