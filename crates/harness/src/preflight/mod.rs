//! Preflight: what can be said of a kernel before any GPU runs it, from its compiled code. The
//! first step is the instruction census of its PTX ([`census`]): the MMA kind and scale block
//! (block16 is NVFP4, block32 the MX formats: a kernel for the wrong format shows here), the
//! byte its scales are read from (scale layouts made for another block show there), a CTA pair
//! (`cta_group::2`), warp roles (`setmaxnreg`), TMA, mbarriers, the cluster (a submission's from
//! its host code too: a CTA pair launched without one shows there), and which of the mission's
//! variants the code is. Nothing is run and no numerical claim is made.

pub mod census;
pub mod diff;
pub mod host;
pub mod resources;
pub mod scale_ids;
pub mod submission;

// What the command line names of preflight beyond this file.
pub use crate::sandbox::bounded::{catch_interrupts, Deadline};
pub use census::{census, target, Variant};
pub use diff::{diff, record, PreflightRecord};
pub use resources::{find_ptxas, usage, Assembled};
pub use submission::{compile as compile_submission, how_compiled, Compilation, COMPILE_TIMEOUT};

use census::Census;
use host::LaunchCluster;
use resources::{ctas_per_sm, Usage};
use std::collections::BTreeMap;

/// What ptxas said of the module, or why it could not be asked.
pub enum Resources {
    Measured {
        arch: String,
        usages: BTreeMap<String, Usage>,
        /// The launch's dynamic shared memory, where known (a variant's, or --dynamic-smem).
        dynamic_shared: Option<u64>,
        /// Threads per CTA where the PTX does not say (a variant's launch).
        threads: Option<u32>,
    },
    Unavailable(String),
    /// ptxas refused the module for `arch`, as the driver would refuse to load it: a finding,
    /// with ptxas's own words.
    Refused {
        arch: String,
        message: String,
    },
}

impl Resources {
    /// Two modules' numbers as one (a submission compiles a module per kernel).
    pub fn merge(self, other: Resources) -> Resources {
        match (self, other) {
            (
                Resources::Measured {
                    arch,
                    mut usages,
                    dynamic_shared,
                    threads,
                },
                Resources::Measured { usages: more, .. },
            ) => {
                usages.extend(more);
                Resources::Measured {
                    arch,
                    usages,
                    dynamic_shared,
                    threads,
                }
            }
            (refused @ Resources::Refused { .. }, _) | (_, refused @ Resources::Refused { .. }) => {
                refused
            }
            (unavailable @ Resources::Unavailable(_), _) | (_, unavailable) => unavailable,
        }
    }

    /// (usage, threads per CTA, dynamic shared memory) of `entry`, where measured.
    pub(crate) fn of(&self, entry: &Census) -> Option<(&Usage, Option<u32>, u64)> {
        match self {
            Resources::Measured {
                usages,
                dynamic_shared,
                threads,
                ..
            } => usages.get(&entry.entry).map(|usage| {
                (
                    usage,
                    entry.max_threads.or(*threads),
                    dynamic_shared.unwrap_or(0),
                )
            }),
            Resources::Unavailable(_) | Resources::Refused { .. } => None,
        }
    }
}

/// Lines of ptxas's refusal a finding quotes: its first errors say what is wrong; a long list
/// of the same follows from them.
const REFUSAL_LINES: usize = 20;

/// Why a census contradicts what was expected of the kernel, one line each.
pub fn findings(
    entries: &[Census],
    resources: &Resources,
    expect_nvfp4: bool,
    claims: &[Variant],
) -> Vec<String> {
    let mut out = Vec::new();
    if let Resources::Refused { arch, message } = resources {
        let lines: Vec<&str> = message.lines().collect();
        let more = lines.len().saturating_sub(REFUSAL_LINES);
        out.push(format!(
            "ptxas refused the code for {arch} (the driver would not load it): {}{}",
            lines[..lines.len().min(REFUSAL_LINES)].join("\n  "),
            if more > 0 {
                format!("\n  ({more} more lines)")
            } else {
                String::new()
            }
        ));
    }
    for c in entries {
        if let Some((usage, Some(threads), dynamic)) = resources.of(c) {
            let (ctas, limit) = ctas_per_sm(usage, threads, dynamic);
            if ctas == 0 {
                out.push(format!(
                    "{}: does not fit on an SM ({limit}: {} bytes of shared memory, {} \
                     registers x {threads} threads): it compiles and fails at launch",
                    c.entry,
                    usage.static_shared + dynamic,
                    usage.registers
                ));
            }
        }
        if expect_nvfp4 {
            for (form, (mma, _)) in &c.tcgen05_mma {
                let nvfp4 = mma.kind == "mxf4nvf4" && mma.scale_block == Some(16);
                if mma.scale_block.is_some() && !nvfp4 {
                    out.push(format!(
                        "{}: its MMA is {form}, not NVFP4's kind::mxf4nvf4 block16 (e2m1 with an \
                         e4m3 scale per 16): a kernel for another format",
                        c.entry
                    ));
                }
            }
        }
        out.extend(scale_granularity(c));
        out.extend(pair_without_cluster(c));
        let shown: Vec<Variant> = c.variant().into_iter().map(|(v, _)| v).collect();
        for claim in claims {
            if !shown.contains(claim) {
                out.push(format!(
                    "{}: claimed {}, but the code shows {}",
                    c.entry,
                    claim.name(),
                    shown
                        .iter()
                        .map(|v| v.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
    }
    out
}

/// The K elements one block-scaled MMA instruction covers, by kind.
fn mma_k(kind: &str) -> Option<u32> {
    match kind {
        "mxf4" | "mxf4nvf4" => Some(64),
        "mxf8f6f4" => Some(32),
        _ => None,
    }
}

/// A block-scaled MMA told to read its scales from a byte where its own scale block never
/// starts: the scale layouts (and the copies that fill them) were made for a coarser block than
/// the MMA's. A block16 MMA of 64 K elements takes four one-byte scales per row, a whole
/// tensor-memory word, from byte 0; scale-factor ID 2 means the layout gave it two, one per 32.
fn scale_granularity(c: &Census) -> Vec<String> {
    let mut out = Vec::new();
    for (form, (mma, _)) in &c.tcgen05_mma {
        let (Some(block), Some(k)) = (mma.scale_block, mma_k(&mma.kind)) else {
            continue;
        };
        let Some(ids) = c.scale_factor_ids.get(form) else {
            continue;
        };
        let per_mma = (k / block).max(1);
        let misread = [("A", &ids.a), ("B", &ids.b)]
            .into_iter()
            .flat_map(|(which, ids)| ids.iter().map(move |id| (which, *id)))
            .filter(|(_, id)| id % per_mma != 0);
        let operands: Vec<(&str, u32)> = misread.collect();
        let Some(&(_, id)) = operands.first() else {
            continue;
        };
        // The layout gave each MMA as many scales per row as the lowest set bit of the ID.
        let layout = k / (id & id.wrapping_neg());
        out.push(format!(
            "{}: its scales are laid out one per {layout} K elements, but its MMA ({form}) reads \
             one per {block}: it is told to start reading {}'s scales at byte {id} of a \
             tensor-memory scale word (scale-factor ID {id}), while the {per_mma} scales per \
             row of a block{block} MMA over {k} K elements start at {}. The scale layouts (and \
             the copies that fill them) were made for blocks of {layout}: the MMA applies each \
             scale to {block} elements where the layout meant {layout}, so K blocks are \
             multiplied by other blocks' scales",
            c.entry,
            operands
                .iter()
                .map(|(which, _)| *which)
                .collect::<Vec<_>>()
                .join(" and "),
            if per_mma == 4 {
                "byte 0 and fill the word".to_string()
            } else {
                format!("a byte that is a multiple of {per_mma}")
            }
        ));
    }
    out
}

/// A CTA-pair MMA (cta_group::2) whose launch has no pair to run on. The two CTAs of a pair are
/// one cluster's ranks 2k and 2k+1, and CuTe DSL's 2SM kernels put them along the cluster's
/// first dimension. The cluster is the PTX's `.reqnctapercluster` where it has one (a launch
/// asking for another is refused), else what the host code launches with.
fn pair_without_cluster(c: &Census) -> Vec<String> {
    if !c.tcgen05_mma.values().any(|(m, _)| m.cta_group == 2) {
        return Vec::new();
    }
    let (clusters, whence) = match c.cluster {
        Some(d) => (vec![LaunchCluster::Shape(d)], "its PTX requires"),
        None => (c.launch_clusters.clone(), "the host code launches it with"),
    };
    let mut out = Vec::new();
    for cluster in clusters {
        let why = match cluster {
            LaunchCluster::Without => "the host code launches it without a cluster: the pair \
                 does not exist at run time, each CTA being a cluster of its own"
                .to_string(),
            LaunchCluster::Shape([1, 1, 1]) => format!(
                "{whence} a cluster of one CTA (1 x 1 x 1): the pair does not exist at run time"
            ),
            LaunchCluster::Shape([x, y, z]) if x % 2 != 0 => {
                let odd = (x * y * z) % 2 != 0;
                format!(
                    "{whence} a cluster of {x} x {y} x {z}, whose first extent is odd: the \
                     pairs (cluster ranks 2k and 2k+1) are not two CTAs along the first \
                     dimension, where CuTe DSL's 2SM tiles put a pair{}",
                    if odd {
                        ", and with an odd number of CTAs the last of each cluster has no peer \
                         at all"
                    } else {
                        ""
                    }
                )
            }
            LaunchCluster::Shape(_) | LaunchCluster::Unknown => continue,
        };
        out.push(format!(
            "{}: its MMA runs on a CTA pair (cta_group::2), but {why}; the MMA needs a cluster \
             whose first extent is a multiple of 2 (e.g. 2 x 1 x 1)",
            c.entry
        ));
    }
    out
}

/// The cluster row of the report: what the PTX requires, then what the host code launches with.
fn cluster_row(c: &Census) -> String {
    let mut row = c.cluster.map_or("none required".into(), |d| {
        format!("{} x {} x {}", d[0], d[1], d[2])
    });
    for cluster in &c.launch_clusters {
        row.push_str(&match cluster {
            LaunchCluster::Without => "; launched without a cluster (host code)".to_string(),
            LaunchCluster::Shape([x, y, z]) => {
                format!("; launched with {x} x {y} x {z} (host code)")
            }
            LaunchCluster::Unknown => {
                "; launched with a cluster the host code sets at run time".to_string()
            }
        });
    }
    row
}

/// A submission that did not compile, in Markdown: the compiler's message, where in the
/// submission's own files it arose (`lines`, innermost last), and what it means.
pub fn refused_report(
    source: &str,
    phase: &str,
    message: &str,
    meaning: Option<&str>,
    lines: &[String],
) -> String {
    let when = match phase {
        "raised" => {
            "the submission raised: an exception of its own code (its innermost frame is in \
             the submission), not a refusal of the compiler; its traceback"
        }
        "import" => "importing the submission failed",
        _ => "its compilation was refused",
    };
    let mut md = format!(
        "# Preflight of {source}\n\nNothing was run and no numerical claim is made: this is \
         what compiling the code showed.\n\nDid not compile: {when}.\n\n```\n{}\n```\n\n",
        message.trim()
    );
    if let Some(innermost) = lines.last() {
        md.push_str(&format!("In the submission: {innermost}\n\n"));
        if lines.len() > 1 {
            md.push_str("Reached through:\n\n");
            for line in &lines[..lines.len() - 1] {
                md.push_str(&format!("- {line}\n"));
            }
            md.push('\n');
        }
    }
    if let Some(meaning) = meaning {
        md.push_str(&format!("What it means: {meaning}.\n"));
    }
    md
}

/// A finding where the code a compilation produced is not for the architecture asked for:
/// read from each PTX module's `.target`, never from the flags preflight gave the compiler
/// (a submission may set its own).
pub fn arch_finding(modules: &[String], asked: &str) -> Option<String> {
    let mut other: Vec<String> = modules
        .iter()
        .map(|ptx| census::target(ptx).unwrap_or_else(|| "no .target".to_string()))
        .filter(|target| target != asked)
        .collect();
    other.dedup();
    (!other.is_empty()).then(|| {
        format!(
            "the compilation produced code for {}, not for {asked} as asked (read from the \
             PTX's .target): the submission chose its own architecture, and its code would \
             not load on {asked}",
            other.join(", ")
        )
    })
}

/// The census in Markdown, the first line saying what preflight is not.
pub fn report(
    source: &str,
    entries: &[Census],
    resources: &Resources,
    findings: &[String],
) -> String {
    let mut md = format!(
        "# Preflight of {source}\n\nNothing was run and no numerical claim is made: this is \
         what the compiled code shows.\n\n"
    );
    for c in entries {
        let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let mmas: Vec<String> = c
            .tcgen05_mma
            .iter()
            .map(|(form, (_, n))| {
                let ids = c
                    .scale_factor_ids
                    .get(form)
                    .filter(|i| !i.a.is_empty() || !i.b.is_empty());
                let list = |ids: &std::collections::BTreeSet<u32>| {
                    ids.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                match ids {
                    Some(ids) => format!(
                        "tcgen05.mma {form} (x{n}; scale-factor IDs A {{{}}}, B {{{}}})",
                        list(&ids.a),
                        list(&ids.b)
                    ),
                    None => format!("tcgen05.mma {form} (x{n})"),
                }
            })
            .chain(
                c.wgmma
                    .iter()
                    .map(|(form, n)| format!("wgmma {form} (x{n})")),
            )
            .chain(
                c.mma_sync
                    .iter()
                    .map(|(form, n)| format!("mma.sync {form} (x{n})")),
            )
            .collect();
        md.push_str(&format!(
            "## {}\n\n| | |\n|---|---|\n| variant | {} |\n| matrix instructions | {} |\n\
             | setmaxnreg | {} |\n| TMA copies | {} ({} multicast) |\n| mbarrier operations | {} |\n\
             | cluster | {} |\n| shared memory | {} bytes static{} |\n| .maxnreg | {} |\n\n",
            c.entry,
            c.variant()
                .iter()
                .map(|(v, why)| format!("{} ({why})", v.name()))
                .collect::<Vec<_>>()
                .join("; "),
            if mmas.is_empty() {
                "none".into()
            } else {
                mmas.join(", ")
            },
            if c.setmaxnreg_inc.is_empty() && c.setmaxnreg_dec.is_empty() {
                "none".into()
            } else {
                format!(
                    "up to {} / down to {}",
                    list(&c.setmaxnreg_inc),
                    list(&c.setmaxnreg_dec)
                )
            },
            c.tma_copies,
            c.tma_multicast,
            c.mbarrier_ops,
            cluster_row(c),
            c.static_shared_bytes,
            if c.dynamic_shared {
                ", plus dynamic shared memory set at launch (not in the PTX)"
            } else {
                ""
            },
            c.maxnreg.map_or("-".into(), |n| n.to_string()),
        ));
        match (resources, resources.of(c)) {
            (Resources::Measured { arch, .. }, Some((usage, threads, dynamic))) => {
                let fit = match threads {
                    Some(threads) => {
                        let (ctas, limit) = ctas_per_sm(usage, threads, dynamic);
                        format!("{ctas} CTA(s) of {threads} threads (limited by {limit})")
                    }
                    None => "unknown: the PTX does not give the threads per CTA".into(),
                };
                md.push_str(&format!(
                    "ptxas for {arch}: {} registers, {} bytes spill stores / {} loads, {} bytes \
                     stack, {} bytes static shared memory{}; per SM: {fit}\n\n",
                    usage.registers,
                    usage.spill_stores,
                    usage.spill_loads,
                    usage.stack_frame,
                    usage.static_shared,
                    if dynamic > 0 {
                        format!(" + {dynamic} dynamic")
                    } else {
                        String::new()
                    }
                ));
            }
            (Resources::Unavailable(why), _) => {
                md.push_str(&format!("Registers and occupancy not measured: {why}\n\n"));
            }
            (Resources::Refused { arch, .. }, _) => {
                md.push_str(&format!(
                    "Registers and occupancy not measured: ptxas refused the code for {arch} \
                     (see the findings)\n\n"
                ));
            }
            _ => {}
        }
    }
    if findings.is_empty() {
        md.push_str("No finding.\n");
    } else {
        md.push_str("Findings:\n\n");
        for f in findings {
            md.push_str(&format!("- {f}\n"));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    #[test]
    fn code_for_another_architecture_is_a_finding() {
        let ptx = |target: &str| format!(".version 8.7\n.target {target}\n.address_size 64\n");
        assert_eq!(arch_finding(&[ptx("sm_100a")], "sm_100a"), None);
        let finding = arch_finding(&[ptx("sm_100a"), ptx("sm_90a")], "sm_100a").unwrap();
        assert!(
            finding.contains("sm_90a") && finding.contains("not for sm_100a"),
            "{finding}"
        );
        assert!(arch_finding(&[".version 8.7\n".to_string()], "sm_100a").is_some());
    }

    #[test]
    fn an_exception_of_the_submissions_own_is_not_a_compiler_refusal() {
        let report = refused_report(
            "sub.py",
            "raised",
            "ValueError: tile too big\nTraceback ...",
            None,
            &["sub.py:12 in compile_kernel: raise ValueError(\"tile too big\")".into()],
        );
        assert!(report.contains("the submission raised"), "{report}");
        assert!(!report.contains("compilation was refused"), "{report}");
        assert!(report.contains("sub.py:12"), "{report}");
    }

    use super::*;

    fn entry(ptx: &str) -> Census {
        census::census(ptx).remove(0)
    }

    const PAIR: &str = ".visible .entry k(\n)\n{\n\
        tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [%r1], %rd1, %rd2, %r2, \
        [%r3], [%r4], %p1;\n}\n";

    #[test]
    fn a_cta_pair_needs_a_cluster_of_two_along_its_first_dimension() {
        let found = |c: &Census| pair_without_cluster(c).join("\n");
        // Nothing known of the launch (a PTX file): nothing said.
        assert_eq!(found(&entry(PAIR)), "");
        let launched = |cluster: &str| {
            entry(&format!(
                "{} k cluster {cluster}\n{PAIR}",
                host::LAUNCH_COMMENT
            ))
        };
        assert!(found(&launched("none")).contains("launches it without a cluster"));
        assert!(found(&launched("1x1x1")).contains("a cluster of one CTA"));
        let f = found(&launched("3x1x1"));
        assert!(
            f.contains("first extent is odd") && f.contains("has no peer"),
            "{f}"
        );
        let f = found(&launched("1x2x1"));
        assert!(
            f.contains("first extent is odd") && !f.contains("no peer"),
            "{f}"
        );
        for fine in ["2x1x1", "4x2x1", "unknown"] {
            assert_eq!(found(&launched(fine)), "", "{fine}");
        }
        // A cluster the PTX requires is the one every launch gets.
        let required = PAIR.replace("{\n", ".reqnctapercluster 2, 1, 1\n{\n");
        let c = entry(&format!(
            "{} k cluster none\n{required}",
            host::LAUNCH_COMMENT
        ));
        assert_eq!(found(&c), "");
        assert!(cluster_row(&c).starts_with("2 x 1 x 1; launched without a cluster"));
    }

    #[test]
    fn scales_read_from_another_byte_than_the_mmas_block_are_a_finding() {
        let mma = |kind: &str, idesc: u32| {
            entry(&format!(
                ".visible .entry k(\n)\n{{\nmov.b32 %r2, {idesc};\n\
                 tcgen05.mma.cta_group::1.kind::{kind}.block_scale [%r1], %rd1, %rd2, %r2, \
                 [%r3], [%r4], %p1;\n}}\n"
            ))
        };
        let (a2, b2) = (2 << 29, 2 << 4);
        let f = scale_granularity(&mma("mxf4nvf4.block16", a2 | b2)).join("\n");
        assert!(f.contains("laid out one per 32 K elements"), "{f}");
        assert!(f.contains("A and B's scales at byte 2"), "{f}");
        assert!(scale_granularity(&mma("mxf4nvf4.block16", 0)).is_empty());
        // MXFP4's block32 MMA takes two scales per 64 K: byte 2 is its second MMA's start.
        assert!(scale_granularity(&mma("mxf4nvf4.block32", a2 | b2)).is_empty());
        let f = scale_granularity(&mma("mxf4nvf4.block32", 1 << 4)).join("\n");
        assert!(
            f.contains("one per 64 K elements") && f.contains("B's scales"),
            "{f}"
        );
    }
}
