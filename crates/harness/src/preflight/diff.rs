//! A preflight against an earlier one of the same kernel (`preflight --baseline`): what a change
//! did to each entry's registers, spills, shared memory and CTAs per SM, with no GPU. The
//! pipeline-stage regression of the mission's history shows as shared memory up and CTAs per SM
//! down; fewer CTAs per SM, or spills where there were none, count as regressions.

use super::census::Census;
use super::resources::ctas_per_sm;
use super::Resources;
use serde::{Deserialize, Serialize};

/// One entry's numbers, as `preflight --json` writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryRecord {
    pub entry: String,
    pub variants: Vec<String>,
    pub registers: Option<u32>,
    pub spill_bytes: Option<u64>,
    pub shared_bytes: Option<u64>,
    pub ctas_per_sm: Option<u32>,
}

/// A whole preflight, as `preflight --json` writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreflightRecord {
    pub source: String,
    pub arch: Option<String>,
    pub entries: Vec<EntryRecord>,
}

/// The record of a census and its measurement.
pub fn record(source: &str, entries: &[Census], resources: &Resources) -> PreflightRecord {
    let arch = match resources {
        Resources::Measured { arch, .. } => Some(arch.clone()),
        Resources::Unavailable(_) | Resources::Refused { .. } => None,
    };
    PreflightRecord {
        source: source.to_string(),
        arch,
        entries: entries
            .iter()
            .map(|c| {
                let measured = resources.of(c);
                EntryRecord {
                    entry: c.entry.clone(),
                    variants: c
                        .variant()
                        .into_iter()
                        .map(|(v, _)| v.name().to_string())
                        .collect(),
                    registers: measured.map(|(u, _, _)| u.registers),
                    spill_bytes: measured.map(|(u, _, _)| u.spill_stores + u.spill_loads),
                    shared_bytes: measured.map(|(u, _, dynamic)| u.static_shared + dynamic),
                    ctas_per_sm: measured.and_then(|(u, threads, dynamic)| {
                        threads.map(|t| ctas_per_sm(u, t, dynamic).0)
                    }),
                }
            })
            .collect(),
    }
}

/// (what changed, whether it is a regression), entry by entry.
pub fn diff(old: &PreflightRecord, new: &PreflightRecord) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for n in &new.entries {
        let Some(o) = old.entries.iter().find(|o| o.entry == n.entry) else {
            out.push((format!("{}: new entry", n.entry), false));
            continue;
        };
        let mut changed = |what: &str, before: Option<u64>, after: Option<u64>, worse: bool| {
            if let (Some(b), Some(a)) = (before, after) {
                if a != b {
                    out.push((format!("{}: {what} {b} -> {a}", n.entry), worse));
                }
            }
        };
        let (spills_b, spills_a) = (o.spill_bytes, n.spill_bytes);
        changed(
            "registers",
            o.registers.map(u64::from),
            n.registers.map(u64::from),
            false,
        );
        changed(
            "spill bytes",
            spills_b,
            spills_a,
            spills_a.unwrap_or(0) > spills_b.unwrap_or(0),
        );
        changed("shared memory bytes", o.shared_bytes, n.shared_bytes, false);
        changed(
            "CTAs per SM",
            o.ctas_per_sm.map(u64::from),
            n.ctas_per_sm.map(u64::from),
            n.ctas_per_sm < o.ctas_per_sm,
        );
        if o.variants != n.variants {
            out.push((
                format!(
                    "{}: variant {} -> {}",
                    n.entry,
                    o.variants.join(", "),
                    n.variants.join(", ")
                ),
                false,
            ));
        }
    }
    for o in &old.entries {
        if !new.entries.iter().any(|n| n.entry == o.entry) {
            out.push((format!("{}: entry gone", o.entry), false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(shared: u64, ctas: u32, spills: u64) -> PreflightRecord {
        PreflightRecord {
            source: "k".into(),
            arch: Some("sm_100a".into()),
            entries: vec![EntryRecord {
                entry: "gemm".into(),
                variants: vec!["warp-specialized".into()],
                registers: Some(168),
                spill_bytes: Some(spills),
                shared_bytes: Some(shared),
                ctas_per_sm: Some(ctas),
            }],
        }
    }

    #[test]
    fn a_deeper_pipeline_shows_as_shared_memory_up_and_ctas_down() {
        let changes = diff(&record(100_000, 2, 0), &record(150_000, 1, 0));
        assert_eq!(
            changes,
            [
                (
                    "gemm: shared memory bytes 100000 -> 150000".to_string(),
                    false
                ),
                ("gemm: CTAs per SM 2 -> 1".to_string(), true),
            ]
        );
        assert!(diff(&record(1, 2, 0), &record(1, 2, 0)).is_empty());
        assert!(diff(&record(1, 2, 0), &record(1, 2, 64))[0].1, "new spills");
        assert!(
            !diff(&record(1, 1, 0), &record(1, 2, 0))[0].1,
            "more CTAs is no regression"
        );
    }
}
