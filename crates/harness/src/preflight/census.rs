//! What a kernel's PTX says about it, read without running it: per entry point, the matrix
//! instructions (Blackwell's `tcgen05.mma` with its kind, scale block and CTA group; Hopper's
//! `wgmma`), warp-role register reallocation (`setmaxnreg`), TMA copies and mbarriers, the
//! cluster shape it requires (and the one it is launched with, where a launch comment says so),
//! the scale-factor IDs its block-scaled MMAs read, its static shared memory, and whether it reads the grid's size (a
//! tile loop over the launched grid) or cancels clusters (Blackwell's dynamic persistent
//! scheduler). From those, which of the mission's variants it is ([`Census::variant`]).
//!
//! PTX is text with one instruction per statement; the census matches instruction names and
//! their dot-separated qualifiers, directive lines, and for the scale IDs the constants that
//! define an MMA's operands, nothing more.

use super::host::{launch_comments, LaunchCluster};
use super::scale_ids::{scale_factor_ids, Definitions, ScaleIds};
use std::collections::BTreeMap;

/// One Blackwell MMA form found, e.g. `kind::mxf4nvf4`, `block16`, `cta_group::1`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct TcgenMma {
    /// `f16`, `tf32`, `f8f6f4`, `i8`, `mxf8f6f4`, `mxf4`, `mxf4nvf4`.
    pub kind: String,
    /// Elements per scale factor for block-scaled kinds (16: NVFP4, 32: MX formats); None for
    /// a kind without scales.
    pub scale_block: Option<u32>,
    /// 1, or 2 for a pair of CTAs sharing one MMA.
    pub cta_group: u32,
    /// The weight-stationary form (`tcgen05.mma.ws`).
    pub weight_stationary: bool,
}

/// One entry point's census.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Census {
    pub entry: String,
    /// Distinct `tcgen05.mma` forms and how many times each occurs.
    pub tcgen05_mma: BTreeMap<String, (TcgenMma, usize)>,
    /// Distinct `wgmma.mma_async` shapes and types (Hopper), with counts.
    pub wgmma: BTreeMap<String, usize>,
    /// Distinct warp-level `mma.sync` shapes and types, with counts.
    pub mma_sync: BTreeMap<String, usize>,
    /// `setmaxnreg.inc` / `.dec` register counts: producer and consumer warps given different
    /// register budgets.
    pub setmaxnreg_inc: Vec<u32>,
    pub setmaxnreg_dec: Vec<u32>,
    /// `cp.async.bulk.tensor` copies (TMA), of which multicast to a cluster.
    pub tma_copies: usize,
    pub tma_multicast: usize,
    pub mbarrier_ops: usize,
    /// `.reqnctapercluster` (or `.explicitcluster` with no shape): the cluster it needs.
    pub cluster: Option<[u32; 3]>,
    /// The clusters it is launched with, from the launch comments preflight puts in a
    /// submission's PTX (read from the host code; [`super::host`]); empty where not known.
    pub launch_clusters: Vec<LaunchCluster>,
    /// Per block-scaled MMA form, the scale-factor IDs it reads where the PTX has them as
    /// constants ([`super::scale_ids`]): the byte of a tensor-memory scale word it starts at.
    pub scale_factor_ids: BTreeMap<String, ScaleIds>,
    /// Bytes of `.shared` variables declared in the entry (dynamic shared memory is set at
    /// launch, outside the PTX).
    pub static_shared_bytes: u64,
    pub dynamic_shared: bool,
    /// Reads `%nctaid`: the grid's size, as a tile loop over the launched grid does.
    pub reads_grid_size: bool,
    /// `clusterlaunchcontrol.try_cancel`: Blackwell's dynamic tile scheduler.
    pub cluster_launch_control: bool,
    /// `.maxnreg N` on the entry.
    pub maxnreg: Option<u32>,
    /// Threads per CTA from `.maxntid x, y, z` (or `.reqntid`), where the entry says.
    pub max_threads: Option<u32>,
}

/// The mission's variants, as far as the code shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    Baseline,
    TwoSm,
    Persistent,
    WarpSpecialized,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Baseline => "baseline",
            Variant::TwoSm => "2SM (cta_group::2)",
            Variant::Persistent => "persistent",
            Variant::WarpSpecialized => "warp-specialized",
        }
    }
}

impl Census {
    /// Which variants the code shows, with the evidence for each; `Baseline` alone when none.
    pub fn variant(&self) -> Vec<(Variant, String)> {
        let mut found = Vec::new();
        if self.tcgen05_mma.values().any(|(m, _)| m.cta_group == 2) {
            found.push((
                Variant::TwoSm,
                "tcgen05.mma.cta_group::2: one MMA over a pair of CTAs".to_string(),
            ));
        }
        if self.cluster_launch_control {
            found.push((
                Variant::Persistent,
                "clusterlaunchcontrol.try_cancel: tiles taken from the launched grid's \
                 unstarted clusters"
                    .to_string(),
            ));
        } else if self.reads_grid_size {
            found.push((
                Variant::Persistent,
                "reads %nctaid: a loop over tiles by the grid's size".to_string(),
            ));
        }
        if !self.setmaxnreg_inc.is_empty() && !self.setmaxnreg_dec.is_empty() {
            found.push((
                Variant::WarpSpecialized,
                format!(
                    "setmaxnreg: warps raise their registers to {:?} and others lower theirs to \
                     {:?} (producer and consumer roles)",
                    self.setmaxnreg_inc, self.setmaxnreg_dec
                ),
            ));
        }
        if found.is_empty() {
            found.push((
                Variant::Baseline,
                "none of cta_group::2, a grid-size tile loop or setmaxnreg".to_string(),
            ));
        }
        found
    }
}

/// The PTX statements of `ptx` (comments dropped), each trimmed, split at `;`, `{` and `}`.
fn statements(ptx: &str) -> impl Iterator<Item = &str> {
    ptx.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .flat_map(|line| line.split([';', '{', '}']))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The architecture a PTX module targets (`.target sm_100a`).
pub fn target(ptx: &str) -> Option<String> {
    statements(ptx)
        .find_map(|s| s.strip_prefix(".target"))
        .and_then(|rest| rest.split(',').next())
        .map(|arch| arch.trim().to_string())
}

/// The census of every `.entry` in `ptx`, in order. Shared memory declared at module level (as
/// compilers emit a kernel's `__shared__` variables) is counted for every entry, and so is what
/// non-inlined device functions (`.func`) hold: PTX does not say which entry uses either.
pub fn census(ptx: &str) -> Vec<Census> {
    let mut module = Census::default();
    let mut functions = Census::default();
    let mut entries: Vec<Census> = Vec::new();
    let mut in_function = false;
    // Register definitions of the entry or function being read, for the MMAs' scale IDs.
    let mut defs = Definitions::default();
    for statement in statements(ptx) {
        // A predicate guard (`@%p1 bra ...`) comes before the instruction.
        let statement = match statement.strip_prefix('@') {
            Some(rest) => rest
                .split_once(char::is_whitespace)
                .map_or("", |(_, s)| s.trim()),
            None => statement,
        };
        if let Some(at) = statement.find(".entry ") {
            let name = statement[at + 7..]
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()
                .unwrap_or("")
                .to_string();
            entries.push(Census {
                entry: name,
                ..Census::default()
            });
            in_function = false;
            defs = Definitions::default();
            continue;
        }
        if statement.starts_with(".func") || statement.contains(" .func ") {
            in_function = true;
            defs = Definitions::default();
            continue;
        }
        let target = if in_function {
            &mut functions
        } else {
            entries.last_mut().unwrap_or(&mut module)
        };
        record(target, statement, &mut defs);
    }
    let launches = launch_comments(ptx);
    for entry in &mut entries {
        entry.static_shared_bytes += module.static_shared_bytes;
        entry.dynamic_shared |= module.dynamic_shared;
        add_instructions(entry, &functions);
        for (_, cluster) in launches.iter().filter(|(name, _)| *name == entry.entry) {
            if !entry.launch_clusters.contains(cluster) {
                entry.launch_clusters.push(*cluster);
            }
        }
    }
    entries
}

/// Adds what `from` counted of instructions to `entry`.
fn add_instructions(entry: &mut Census, from: &Census) {
    for (form, (mma, n)) in &from.tcgen05_mma {
        entry
            .tcgen05_mma
            .entry(form.clone())
            .or_insert((mma.clone(), 0))
            .1 += n;
    }
    for (form, ids) in &from.scale_factor_ids {
        entry
            .scale_factor_ids
            .entry(form.clone())
            .or_default()
            .merge(ids);
    }
    for (into, add) in [
        (&mut entry.wgmma, &from.wgmma),
        (&mut entry.mma_sync, &from.mma_sync),
    ] {
        for (form, n) in add {
            *into.entry(form.clone()).or_default() += n;
        }
    }
    for (into, add) in [
        (&mut entry.setmaxnreg_inc, &from.setmaxnreg_inc),
        (&mut entry.setmaxnreg_dec, &from.setmaxnreg_dec),
    ] {
        into.extend(add);
        into.sort_unstable();
        into.dedup();
    }
    entry.tma_copies += from.tma_copies;
    entry.tma_multicast += from.tma_multicast;
    entry.mbarrier_ops += from.mbarrier_ops;
    entry.reads_grid_size |= from.reads_grid_size;
    entry.cluster_launch_control |= from.cluster_launch_control;
}

fn number(text: &str) -> Option<u32> {
    text.trim().trim_end_matches(',').parse().ok()
}

fn record(entry: &mut Census, statement: &str, defs: &mut Definitions) {
    let mut words = statement.split_whitespace();
    let opcode = words.next().unwrap_or("");
    defs.record(opcode, statement);
    let qualifiers: Vec<&str> = opcode.split('.').collect();
    // A directive (`.shared`, `.reqnctapercluster`) is matched whole, an instruction by its name.
    let head = if opcode.starts_with('.') {
        opcode
    } else {
        qualifiers[0]
    };
    match head {
        "tcgen05" if qualifiers.get(1) == Some(&"mma") => {
            let find = |prefix: &str| {
                qualifiers
                    .iter()
                    .find_map(|q| q.strip_prefix(prefix))
                    .map(str::to_string)
            };
            let kind = find("kind::").unwrap_or_else(|| "f16".into());
            // block16/block32 (or the older scale_vec::4X / ::2X / ::1X for the element count).
            // `block16` or `block32`; `block_scale` is another qualifier, which also starts so.
            let scale_block = qualifiers
                .iter()
                .find_map(|q| q.strip_prefix("block")?.parse::<u32>().ok())
                .or_else(|| match find("scale_vec::").as_deref() {
                    Some("4X") => Some(16),
                    Some("2X" | "1X") => Some(32),
                    _ => None,
                })
                .or_else(|| {
                    qualifiers
                        .contains(&"block_scale")
                        .then_some(if kind == "mxf4nvf4" { 16 } else { 32 })
                });
            let mma = TcgenMma {
                cta_group: find("cta_group::")
                    .and_then(|g| g.parse().ok())
                    .unwrap_or(1),
                weight_stationary: qualifiers.get(2) == Some(&"ws"),
                kind,
                scale_block,
            };
            let key = format!(
                "kind::{}{} cta_group::{}{}",
                mma.kind,
                mma.scale_block
                    .map_or(String::new(), |b| format!(" block{b}")),
                mma.cta_group,
                if mma.weight_stationary { " ws" } else { "" }
            );
            if mma.scale_block.is_some() {
                entry
                    .scale_factor_ids
                    .entry(key.clone())
                    .or_default()
                    .add(scale_factor_ids(statement, defs));
            }
            entry.tcgen05_mma.entry(key).or_insert((mma, 0)).1 += 1;
        }
        "mma" if qualifiers.get(1) == Some(&"sync") => {
            let form: Vec<&str> = qualifiers[2..]
                .iter()
                .copied()
                .filter(|q| *q != "aligned")
                .collect();
            *entry.mma_sync.entry(form.join(".")).or_default() += 1;
        }
        "wgmma" if qualifiers.get(1) == Some(&"mma_async") => {
            let form: Vec<&str> = qualifiers[2..]
                .iter()
                .copied()
                .filter(|q| *q != "sync" && *q != "aligned")
                .collect();
            *entry.wgmma.entry(form.join(".")).or_default() += 1;
        }
        "setmaxnreg" => {
            let count = statement
                .rsplit(char::is_whitespace)
                .next()
                .and_then(number);
            match (qualifiers.get(1).copied(), count) {
                (Some("inc"), Some(n)) => entry.setmaxnreg_inc.push(n),
                (Some("dec"), Some(n)) => entry.setmaxnreg_dec.push(n),
                _ => {}
            }
            entry.setmaxnreg_inc.sort_unstable();
            entry.setmaxnreg_inc.dedup();
            entry.setmaxnreg_dec.sort_unstable();
            entry.setmaxnreg_dec.dedup();
        }
        "cp" if opcode.starts_with("cp.async.bulk.tensor") => {
            entry.tma_copies += 1;
            if opcode.contains(".multicast::cluster") {
                entry.tma_multicast += 1;
            }
        }
        "mbarrier" => entry.mbarrier_ops += 1,
        "clusterlaunchcontrol" => entry.cluster_launch_control = true,
        ".reqnctapercluster" => {
            let dims: Vec<u32> = statement[opcode.len()..]
                .split(',')
                .filter_map(number)
                .collect();
            entry.cluster = Some([
                dims.first().copied().unwrap_or(1),
                dims.get(1).copied().unwrap_or(1),
                dims.get(2).copied().unwrap_or(1),
            ]);
        }
        ".maxnreg" => entry.maxnreg = words.next().and_then(number),
        ".maxntid" | ".reqntid" => {
            let dims: Vec<u32> = statement[opcode.len()..]
                .split(',')
                .filter_map(number)
                .collect();
            entry.max_threads = (!dims.is_empty()).then(|| dims.iter().product());
        }
        ".shared" => {
            // `.shared .align 16 .b8 name[49152]`; `.extern .shared ... name[]` is dynamic.
            let bytes_per = |ty: &str| match ty {
                ".b8" | ".u8" | ".s8" => 1,
                ".b16" | ".u16" | ".s16" | ".f16" => 2,
                ".b32" | ".u32" | ".s32" | ".f32" => 4,
                ".b64" | ".u64" | ".s64" | ".f64" => 8,
                _ => 0,
            };
            let ty = statement
                .split_whitespace()
                .find(|w| bytes_per(w) > 0)
                .map_or(0, bytes_per);
            let count = statement
                .rsplit_once('[')
                .and_then(|(_, rest)| rest.trim_end_matches(']').parse::<u64>().ok())
                .unwrap_or(1);
            entry.static_shared_bytes += ty * count;
        }
        ".extern" if statement.contains(".shared") => entry.dynamic_shared = true,
        _ => {}
    }
    if statement.contains("%nctaid") {
        entry.reads_grid_size = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PTX as CuTe DSL and nvcc emit it for Blackwell (instructions as the PTX ISA writes them).
    const BLACKWELL: &str = r#"
.version 8.7
.target sm_100a
.visible .entry gemm_2sm(
    .param .u64 p
)
.reqnctapercluster 2, 1, 1
.maxnreg 168
{
    .reg .pred %p<4>;
    .extern .shared .align 1024 .b8 smem[];
    .shared .align 8 .b64 barriers[6];
    mov.u32 %r1, %nctaid.x;
    setmaxnreg.dec.sync.aligned.u32 40;
    setmaxnreg.inc.sync.aligned.u32 232;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r2], [%rd1, {%r3, %r4}], [%r5], %rs1;
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r5], %r6;
    @%p1 tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [%r7], %rd2, %rd3, %r8, [%r9], [%r10], %p2;
    tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.block16 [%r7], %rd2, %rd3, %r8, [%r9], [%r10], %p2; // again
    clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r11], [%r5];
    ret;
}
.visible .entry gemm_mx(
)
{
    tcgen05.mma.cta_group::1.kind::mxf4.block_scale.scale_vec::2X [%r1], %rd1, %rd2, %r2, [%r3], [%r4], %p1;
    ret;
}
"#;

    #[test]
    fn the_scale_block_is_read_from_its_own_qualifier() {
        // CuTe DSL's MXFP4-scaled form of the NVFP4 kind: scales per 32, not NVFP4.
        let ptx = ".visible .entry k(\n)\n{\n\
            tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block32.collector::a::discard \
            [%r12], %rd4, %rd3, %r11, [%r10], [%r9], %p3;\n\
            tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X \
            [%r12], %rd4, %rd3, %r11, [%r10], [%r9], %p3;\n}\n";
        let entries = census(ptx);
        let blocks: Vec<Option<u32>> = entries[0]
            .tcgen05_mma
            .values()
            .map(|(m, _)| m.scale_block)
            .collect();
        assert_eq!(blocks, [Some(16), Some(32)]);
    }

    #[test]
    fn what_a_device_function_holds_counts_for_the_entries() {
        let ptx = ".visible .func helper(\n)\n{\n\
            setmaxnreg.inc.sync.aligned.u32 240;\n\
            setmaxnreg.dec.sync.aligned.u32 24;\n\
            ret;\n}\n\
            .visible .entry k(\n)\n{\n\
            call helper, ();\n\
            ret;\n}\n";
        let entries = census(ptx);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].setmaxnreg_inc, [240]);
        assert_eq!(entries[0].variant()[0].0, Variant::WarpSpecialized);
    }

    #[test]
    fn a_blackwell_2sm_persistent_warp_specialized_nvfp4_kernel_is_read_as_such() {
        let entries = census(BLACKWELL);
        assert_eq!(entries.len(), 2);
        let c = &entries[0];
        assert_eq!(c.entry, "gemm_2sm");
        let (mma, count) = c.tcgen05_mma.values().next().unwrap();
        assert_eq!(
            (mma.kind.as_str(), mma.scale_block, mma.cta_group, *count),
            ("mxf4nvf4", Some(16), 2, 2)
        );
        assert_eq!(
            (c.setmaxnreg_dec.clone(), c.setmaxnreg_inc.clone()),
            (vec![40], vec![232])
        );
        assert_eq!((c.tma_copies, c.tma_multicast, c.mbarrier_ops), (1, 1, 1));
        assert_eq!(c.cluster, Some([2, 1, 1]));
        assert_eq!(c.maxnreg, Some(168));
        assert_eq!(c.static_shared_bytes, 48);
        assert!(c.dynamic_shared && c.reads_grid_size && c.cluster_launch_control);
        let variants: Vec<Variant> = c.variant().into_iter().map(|(v, _)| v).collect();
        assert_eq!(
            variants,
            [
                Variant::TwoSm,
                Variant::Persistent,
                Variant::WarpSpecialized
            ]
        );
        // The second entry: MXFP4 (scales per 32), one CTA, nothing else: a baseline.
        let mx = &entries[1];
        let (mma, _) = mx.tcgen05_mma.values().next().unwrap();
        assert_eq!((mma.kind.as_str(), mma.scale_block), ("mxf4", Some(32)));
        assert_eq!(mx.variant()[0].0, Variant::Baseline);
    }
}
