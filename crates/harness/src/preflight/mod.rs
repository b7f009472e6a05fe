//! Preflight: what can be said of a kernel before any GPU runs it, from its compiled code. The
//! first step is the instruction census of its PTX ([`census`]): the MMA kind and scale block
//! (block16 is NVFP4, block32 the MX formats: a kernel for the wrong format shows here), a CTA
//! pair (`cta_group::2`), warp roles (`setmaxnreg`), TMA, mbarriers, the cluster, and which of
//! the mission's variants the code is. Nothing is run and no numerical claim is made.

pub mod bounded;
pub mod census;
pub mod diff;
pub mod resources;
pub mod submission;

use census::{Census, Variant};
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
            .map(|(form, (_, n))| format!("tcgen05.mma {form} (x{n})"))
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
            c.cluster
                .map_or("none required".into(), |d| format!("{} x {} x {}", d[0], d[1], d[2])),
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
