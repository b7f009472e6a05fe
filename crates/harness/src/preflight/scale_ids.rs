//! Which byte of a tensor-memory scale word a block-scaled `tcgen05.mma` starts reading its
//! scales at: the scale-factor IDs of its instruction descriptor (A's in bits 29-30, B's in bits
//! 4-5). A tensor-memory column holds four one-byte scales per row. A 64-K MMA of NVFP4
//! (block16, `scale_vec::4X`) takes four scales per row, the whole word, so it reads from byte
//! 0 only; a scale layout made for one scale per 32 elements gives each such MMA two bytes, and
//! every second MMA is then told to start at byte 2. The ID is the one trace of the scale
//! layout's granularity in the MMA itself, read here where the PTX has it as a constant:
//!
//! - the descriptor itself, where it is an immediate (`mov.b32 %r11, 1210057888`);
//! - else the scale addresses (`add.s32 %r22, %r12, -2147483520`): CuTe DSL (as CUTLASS) keeps
//!   the byte in bits 30-31 of a scale's tensor-memory address and moves it into the
//!   descriptor at run time (`shr.u32`, `and.b32 ..., 1610612736`). Lane bits are never that
//!   high (128 lanes), and an offset with other high bits set (a negative one) is not read.
//!
//! Where neither is a constant, nothing is read.

use std::collections::{BTreeSet, HashMap};

/// The scale-factor IDs an MMA form was seen to read, A's and B's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScaleIds {
    pub a: BTreeSet<u32>,
    pub b: BTreeSet<u32>,
}

impl ScaleIds {
    pub fn add(&mut self, (a, b): (Option<u32>, Option<u32>)) {
        self.a.extend(a);
        self.b.extend(b);
    }

    pub fn merge(&mut self, other: &ScaleIds) {
        self.a.extend(&other.a);
        self.b.extend(&other.b);
    }
}

/// How each register of an entry is defined, where the census can use it: a constant, or a
/// constant added to another register. A register defined twice is not read.
#[derive(Debug, Default)]
pub struct Definitions(HashMap<String, Option<Definition>>);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Definition {
    Constant(u32),
    Offset(u32),
}

/// An integer literal of PTX (decimal, negative, or hex), as the 32 bits it sets.
fn literal(text: &str) -> Option<u32> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        return u32::from_str_radix(hex.trim_end_matches('U'), 16).ok();
    }
    text.parse::<i64>()
        .ok()
        .filter(|v| *v >= i64::from(i32::MIN) && *v <= i64::from(u32::MAX))
        .map(|v| v as u32)
}

/// The operands of an instruction (`op a, [b], {c, d}`), split at the commas outside brackets.
pub fn operands(statement: &str) -> Vec<&str> {
    let Some((_, rest)) = statement.split_once(char::is_whitespace) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in rest.char_indices() {
        match c {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(rest[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(rest[start..].trim());
    out.retain(|o| !o.is_empty());
    out
}

impl Definitions {
    /// Notes what `statement` defines.
    pub fn record(&mut self, opcode: &str, statement: &str) {
        let ops = operands(statement);
        let (Some(&target), true) = (ops.first(), opcode.contains('.')) else {
            return;
        };
        // A vector target (`mov.b64 {%r1, %r2}, %rd1`) defines each of its registers.
        if let Some(list) = target.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            for register in list.split(',').map(str::trim) {
                self.0.insert(register.to_string(), None);
            }
            return;
        }
        if !target.starts_with('%') {
            return;
        }
        let definition = match (opcode.split('.').next(), &ops[1..]) {
            (Some("mov"), [value]) => literal(value).map(Definition::Constant),
            (Some("add"), [a, b]) => match (literal(a), literal(b)) {
                (None, Some(v)) | (Some(v), None) => Some(Definition::Offset(v)),
                _ => None,
            },
            _ => None,
        };
        // Only writes to a register count: stores and the like have an address first.
        let seen = self.0.contains_key(target);
        self.0
            .insert(target.to_string(), if seen { None } else { definition });
    }

    fn get(&self, operand: &str) -> Option<Definition> {
        self.0.get(operand.trim()).copied().flatten()
    }
}

/// The scale-factor IDs (A's, B's) a block-scaled `tcgen05.mma` statement reads, where the PTX
/// gives them as constants. Its operands: `[d], a, b, idesc, [scale-A], [scale-B], enable`.
pub fn scale_factor_ids(statement: &str, defs: &Definitions) -> (Option<u32>, Option<u32>) {
    let ops = operands(statement);
    let Some(idesc) = ops.get(3) else {
        return (None, None);
    };
    let descriptor = literal(idesc).or(match defs.get(idesc) {
        Some(Definition::Constant(v)) => Some(v),
        _ => None,
    });
    if let Some(d) = descriptor {
        return (Some((d >> 29) & 3), Some((d >> 4) & 3));
    }
    let mut scales = ops[4..]
        .iter()
        .filter_map(|o| o.strip_prefix('[')?.strip_suffix(']'));
    let byte = |address: Option<&str>| {
        let address = address?;
        let offset = literal(address).or(match defs.get(address)? {
            Definition::Constant(v) | Definition::Offset(v) => Some(v),
        })?;
        // Bits 16-29 are the lane (below 128) or the sign of a negative offset: then bits 30-31
        // are no byte selector.
        (offset & 0x3fff_0000 == 0).then_some(offset >> 30)
    };
    (byte(scales.next()), byte(scales.next()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defs(lines: &[&str]) -> Definitions {
        let mut d = Definitions::default();
        for line in lines {
            d.record(line.split_whitespace().next().unwrap(), line);
        }
        d
    }

    #[test]
    fn the_ids_come_from_a_constant_descriptor() {
        // CuTe DSL 4.8.1, our test kernel with scale layouts for 32 under NVFP4's MMA.
        let d = defs(&[
            "mov.b32 %r15, -2147483520",
            "mov.b32 %r14, -2147483512",
            "mov.b32 %r16, 1210057888",
        ]);
        let mma = "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r17], %rd6, \
                   %rd5, %r16, [%r15], [%r14], %p6";
        assert_eq!(scale_factor_ids(mma, &d), (Some(2), Some(2)));
        let d = defs(&["mov.b32 %r16, 136316032"]);
        assert_eq!(scale_factor_ids(mma, &d), (Some(0), Some(0)));
    }

    #[test]
    fn else_from_the_scale_addresses() {
        // GPU MODE's NVFP4 GEMM with scale layouts for 32: the descriptor is computed at run
        // time from addresses above the allocated base.
        let d = defs(&[
            "add.s32 %r13, %r12, 128",
            "add.s32 %r22, %r12, -2147483520",
            "add.s32 %r23, %r12, -2147483512",
            "or.b32 %r110, %r29, %r24",
        ]);
        let mma = |a: &str, b: &str| {
            format!(
                "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r12], %rd7, \
                 %rd6, %r110, [{a}], [{b}], %p40"
            )
        };
        assert_eq!(
            scale_factor_ids(&mma("%r22", "%r23"), &d),
            (Some(2), Some(2))
        );
        assert_eq!(scale_factor_ids(&mma("%r13", "%r99"), &d), (Some(0), None));
        // A negative offset is not a byte selector; a register defined twice is not read.
        let d = defs(&[
            "add.s32 %r5, %r12, -4",
            "mov.b32 %r6, 128",
            "mov.b32 %r6, -2147483520",
        ]);
        assert_eq!(scale_factor_ids(&mma("%r5", "%r6"), &d), (None, None));
    }
}
