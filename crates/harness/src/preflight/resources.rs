//! What each entry of a PTX module costs an SM, from the assembler itself: `ptxas -v` for the
//! named architecture (found as NVFP4_ORACLE_PTXAS, on PATH or in the CUDA toolkit; PyPI's
//! `nvidia-cuda-nvcc-cu12` has one) gives registers, spills, stack and static shared memory; with
//! the threads per CTA (`.maxntid`) and the dynamic shared memory the launch asks for, the CTAs
//! that fit on one SM follow from the architecture's limits. A kernel over the shared-memory
//! limit compiles and fails only at launch, so it is a finding here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per-SM and per-CTA limits of Hopper (sm_90) and Blackwell datacenter (sm_100) GPUs, the same
/// for both (CUDA C Programming Guide, compute capability 9.0 and 10.0).
pub const REGISTERS_PER_SM: u32 = 65_536;
pub const MAX_THREADS_PER_SM: u32 = 2_048;
pub const MAX_CTAS_PER_SM: u32 = 32;
pub const SHARED_PER_SM: u64 = 233_472;
pub const MAX_SHARED_PER_CTA: u64 = 232_448;
/// Shared memory the system reserves per CTA.
pub const RESERVED_SHARED_PER_CTA: u64 = 1_024;
/// Registers are allocated per warp in units of 256.
const REGISTER_UNIT_PER_WARP: u32 = 256;

/// What ptxas reported for one entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    pub registers: u32,
    pub spill_stores: u64,
    pub spill_loads: u64,
    pub stack_frame: u64,
    pub static_shared: u64,
    pub barriers: u32,
}

/// ptxas to use, if one is found.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NVFP4_ORACLE_PTXAS") {
        return Some(PathBuf::from(path));
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("ptxas"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let toolkit = PathBuf::from("/usr/local/cuda/bin/ptxas");
        toolkit.is_file().then_some(toolkit)
    })
}

/// What came of assembling a module.
pub enum Assembled {
    /// Per entry, its usage.
    Measured(BTreeMap<String, Usage>),
    /// ptxas refused the code: its own words.
    Refused(String),
}

/// Runs `ptxas -v` on the PTX text `ptx` for `arch` (e.g. `sm_100a`), within `deadline`.
///
/// The PTX is handed over in an anonymous memory file (`memfd_create`), and ptxas's output comes
/// back in another: nothing is written to disk, so nothing is left behind however preflight ends.
pub fn usage(
    ptxas: &Path,
    ptx: &str,
    arch: &str,
    deadline: &crate::sandbox::bounded::Deadline,
) -> crate::error::Result<Assembled> {
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsRawFd;
    let memory_file = |name: &std::ffi::CStr| -> crate::error::Result<std::fs::File> {
        // SAFETY: a NUL-terminated name and valid flags; the descriptor, when valid, is owned
        // by the File made from it and by nothing else.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(crate::Error::Preflight(format!(
                "cannot make a memory file for ptxas: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    };
    let io =
        |err: std::io::Error| crate::Error::Preflight(format!("handing ptxas its input: {err}"));
    let mut input = memory_file(c"preflight.ptx")?;
    input.write_all(ptx.as_bytes()).map_err(io)?;
    let mut output = memory_file(c"ptxas-output")?;
    let input_fd = input.as_raw_fd();
    let mut command = std::process::Command::new(ptxas);
    command
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(format!("/proc/self/fd/{input_fd}"))
        .args(["-o", "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(output.try_clone().map_err(io)?)
        .stderr(output.try_clone().map_err(io)?);
    // SAFETY: fcntl only, async-signal-safe: the input stays open across exec in ptxas alone.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            if libc::fcntl(input_fd, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let status = crate::sandbox::bounded::run(
        &mut command,
        &format!("ptxas (registers and occupancy for {arch})"),
        deadline,
        |err| crate::Error::Preflight(format!("cannot run {}: {err}", ptxas.display())),
    )?;
    let mut text = String::new();
    output.rewind().map_err(io)?;
    output
        .read_to_string(&mut text)
        .map_err(|err| crate::Error::Preflight(format!("reading what ptxas said: {err}")))?;
    if !status.success() {
        // Its messages name the memory file's path, which means nothing to the reader.
        let said = text
            .trim()
            .replace(&format!("/proc/self/fd/{input_fd}"), "(the PTX)");
        return Ok(Assembled::Refused(if said.is_empty() {
            format!("ptxas ended with {status} and said nothing")
        } else {
            said
        }));
    }
    Ok(Assembled::Measured(parse(&text)))
}

/// The numbers of `ptxas -v` output, per entry.
pub fn parse(text: &str) -> BTreeMap<String, Usage> {
    let mut usages = BTreeMap::new();
    let mut current: Option<String> = None;
    // "12 bytes stack frame" -> 12: the number before `what`.
    let before = |line: &str, what: &str| -> Option<u64> {
        let at = line.find(what)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or("").to_string();
            usages.insert(name.clone(), Usage::default());
            current = Some(name);
            continue;
        }
        let Some(usage) = current.as_ref().and_then(|name| usages.get_mut(name)) else {
            continue;
        };
        if line.contains("bytes stack frame") {
            usage.stack_frame = before(line, "bytes stack frame").unwrap_or(0);
            usage.spill_stores = before(line, "bytes spill stores").unwrap_or(0);
            usage.spill_loads = before(line, "bytes spill loads").unwrap_or(0);
        }
        if line.contains("Used ") && line.contains("registers") {
            usage.registers = before(line, "registers").unwrap_or(0) as u32;
            usage.static_shared = before(line, "bytes smem").unwrap_or(0);
            usage.barriers = before(line, "barriers").unwrap_or(0) as u32;
        }
    }
    usages
}

/// How many CTAs of `threads` threads using `usage` and `dynamic_shared` bytes fit on one SM,
/// and what limits it: (CTAs, the limit's name). Zero CTAs means the launch fails.
pub fn ctas_per_sm(usage: &Usage, threads: u32, dynamic_shared: u64) -> (u32, &'static str) {
    let warps = threads.div_ceil(32).max(1);
    let per_warp =
        (usage.registers.max(1) * 32).div_ceil(REGISTER_UNIT_PER_WARP) * REGISTER_UNIT_PER_WARP;
    let shared = usage.static_shared + dynamic_shared;
    let by_shared = if shared > MAX_SHARED_PER_CTA {
        0
    } else if shared == 0 {
        u32::MAX
    } else {
        (SHARED_PER_SM / (shared + RESERVED_SHARED_PER_CTA)) as u32
    };
    [
        (REGISTERS_PER_SM / (per_warp * warps), "registers"),
        (MAX_THREADS_PER_SM / (warps * 32), "threads"),
        (by_shared, "shared memory"),
        (MAX_CTAS_PER_SM, "CTAs per SM"),
    ]
    .into_iter()
    .min_by_key(|(n, _)| *n)
    .expect("four limits")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTXAS: &str = "ptxas info    : 108 bytes gmem
ptxas info    : Compiling entry function 'ws' for 'sm_100a'
ptxas info    : Function properties for ws
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 2 barriers
ptxas info    : Compiling entry function 'tiled' for 'sm_100a'
ptxas info    : Function properties for tiled
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 13824 bytes smem, 400 bytes cmem[0]
";

    #[test]
    fn ptxas_numbers_per_entry() {
        let usages = parse(PTXAS);
        assert_eq!(
            usages["ws"],
            Usage {
                registers: 168,
                barriers: 2,
                ..Usage::default()
            }
        );
        let tiled = &usages["tiled"];
        assert_eq!(
            (
                tiled.registers,
                tiled.static_shared,
                tiled.spill_stores,
                tiled.spill_loads
            ),
            (128, 13_824, 8, 12)
        );
        assert_eq!(tiled.stack_frame, 16);
    }

    #[test]
    fn what_fits_on_an_sm() {
        let usage = |registers, static_shared| Usage {
            registers,
            static_shared,
            ..Usage::default()
        };
        // 384 threads at 168 registers: 12 warps x 5376 = 64,512 of 65,536 registers: one CTA.
        assert_eq!(ctas_per_sm(&usage(168, 0), 384, 200_000), (1, "registers"));
        // A pipeline stage more: shared memory past the per-CTA limit, the launch fails.
        assert_eq!(
            ctas_per_sm(&usage(168, 0), 384, 232_449),
            (0, "shared memory")
        );
        // 128 threads, 64 registers, 100 KB: shared memory allows two.
        assert_eq!(
            ctas_per_sm(&usage(64, 0), 128, 100 * 1024),
            (2, "shared memory")
        );
        assert_eq!(ctas_per_sm(&usage(16, 0), 32, 0), (32, "CTAs per SM"));
    }
}
