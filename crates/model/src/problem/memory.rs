//! How much memory the model needs for a shape, checked against what this machine can give
//! before anything is allocated: a valid but huge shape (each dimension may be up to 2^24) is
//! refused with the size it needs, instead of an allocation failure that aborts the process.

use super::{ProblemKind, Shape, SCALE_BLOCK};
use crate::error::{Error, Result};

/// Bytes of memory the inputs of `shape` take, and with `with_reference` the model's outputs
/// (`expected`, `lo`, `hi`) and working set too, counted with the copies the case-file writer
/// makes. An upper estimate: the grouped GEMM is counted as `shape.l` groups of the full
/// `shape.m x shape.n`.
pub fn model_bytes(kind: ProblemKind, shape: Shape, with_reference: bool) -> u128 {
    let shape = kind.normalize(shape);
    let (m, n, k, l) = (
        shape.m as u128,
        shape.n as u128,
        shape.k as u128,
        shape.l as u128,
    );
    let rows = match kind {
        ProblemKind::DualGemm => m + 2 * n,
        _ => m + n,
    };
    let blocks = k / SCALE_BLOCK as u128;
    // Packed FP4 data, plain scales, and blocked scales padded to 128 rows and 4 blocks.
    let padded = |r: u128| r.div_ceil(128) * 128;
    let scales = (padded(m) + padded(n) * (rows - m) / n.max(1)) * blocks.div_ceil(4) * 4;
    let inputs = (rows * k / 2 + rows * blocks + scales) * l;
    // The generated operands, their bytes in the writer, and the serialized file.
    let mut total = 3 * inputs;
    if with_reference {
        let outputs = m * n * l;
        // Three fp16 tensors held three times (the model's, the writer's, the file's), one
        // batch of (expected, lo, hi) triples, and the decoded operands of one batch.
        total += 18 * outputs + 6 * m * n + 2 * rows * k;
    }
    total
}

/// The memory this process may still use: the least of the machine's available memory, the
/// cgroup's remaining allowance and the address-space limit, where each can be read.
pub fn available_bytes() -> Option<u128> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemAvailable:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u128>()
                        .ok()
                })
                .map(|kib| kib * 1024)
        });
    let read_number = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| text.trim().parse::<u128>().ok())
    };
    let cgroup = read_number("/sys/fs/cgroup/memory.max").map(|limit| {
        limit.saturating_sub(read_number("/sys/fs/cgroup/memory.current").unwrap_or(0))
    });
    let address_space = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("Max address space"))
                .and_then(|line| line.split_whitespace().nth(3))
                .and_then(|soft| soft.parse::<u128>().ok())
        });
    [meminfo, cgroup, address_space].into_iter().flatten().min()
}

/// Refuses `shape` when the model's estimate for it exceeds the memory available.
pub fn check_fits(kind: ProblemKind, shape: Shape, with_reference: bool) -> Result<()> {
    check_bytes(
        &format!(
            "the {} {} {}",
            kind.name(),
            if with_reference {
                "reference for"
            } else {
                "inputs of"
            },
            kind.normalize(shape)
        ),
        model_bytes(kind, shape, with_reference),
    )
}

/// Refuses work that needs `needed` bytes when this machine has fewer available; `what` names
/// the work in the message.
pub fn check_bytes(what: &str, needed: u128) -> Result<()> {
    match available_bytes() {
        Some(available) if needed > available => Err(Error::TooLarge {
            what: what.to_string(),
            needed: gib(needed),
            available: gib(available),
        }),
        _ => Ok(()),
    }
}

pub fn gib(bytes: u128) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_outputs_and_inputs() {
        let shape = Shape::new(100_000, 100_000, 16, 1).unwrap();
        // 10^10 outputs, 18 bytes each at least: far past any machine here.
        assert!(model_bytes(ProblemKind::DualGemm, shape, true) > 180_000_000_000);
        // The inputs alone are small.
        assert!(model_bytes(ProblemKind::DualGemm, shape, false) < 100_000_000);
        let gemv = Shape::new(100_000, 100_000, 16, 1).unwrap();
        assert!(model_bytes(ProblemKind::Gemv, gemv, true) < 100_000_000);
    }

    #[test]
    fn a_shape_past_the_memory_is_refused_with_its_size() {
        let shape = Shape::new(1 << 24, 1 << 24, 16, 1).unwrap();
        let message = check_fits(ProblemKind::DualGemm, shape, true)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("GiB") && message.contains("16777216x16777216x16"),
            "{message}"
        );
        assert!(check_fits(
            ProblemKind::DualGemm,
            Shape::new(128, 128, 64, 1).unwrap(),
            true
        )
        .is_ok());
    }
}
