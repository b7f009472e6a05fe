//! NVRTC compilation for the present GPU, cached per (source hash, arch) so repeated runs skip it.

use super::variants::GpuVariant;
use crate::error::{Error, Result};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileError, CompileOptions, Ptx};
use std::path::PathBuf;

/// Where compiled variants are kept between runs: `NVFP4_ORACLE_CACHE`, else
/// `$XDG_CACHE_HOME/nvfp4-oracle` or `~/.cache/nvfp4-oracle`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NVFP4_ORACLE_CACHE") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    base.unwrap_or_else(std::env::temp_dir).join("nvfp4-oracle")
}

/// What to do where NVRTC cannot be loaded: the CUDA toolkit, or PyPI's wheel (what `.ci/run`
/// installs) where there is no toolkit.
pub const NVRTC_MISSING: &str = "NVRTC not found (libnvrtc.so): add the CUDA toolkit's lib64 to \
LD_LIBRARY_PATH, or, without the toolkit, `pip install nvidia-cuda-nvrtc-cu12` (into a directory D \
with --target D) and add its nvidia/cuda_nvrtc/lib to LD_LIBRARY_PATH";

/// Whether NVRTC can be loaded on this machine.
pub fn nvrtc_present() -> bool {
    // SAFETY: only probes whether the shared library can be loaded.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compiles a variant to PTX for its architecture; compile errors carry NVRTC's log, whose lines
/// name the kernel file and line.
pub fn compile_variant(variant: &GpuVariant) -> Result<Ptx> {
    compile_variant_in(variant, &cache_dir())
}

/// `compile_variant` with its cache in `cache` rather than `cache_dir()`: for a caller that needs
/// a cache of its own without changing the process's environment (a test that must really
/// compile, beside others that share the process).
pub fn compile_variant_in(variant: &GpuVariant, cache: &std::path::Path) -> Result<Ptx> {
    if !nvrtc_present() {
        return Err(Error::Gpu(NVRTC_MISSING.into()));
    }
    let cached = cache.join(format!(
        "{}-{}-lineinfo.ptx",
        variant.source_hash(),
        variant.arch.target
    ));
    if let Ok(text) = std::fs::read_to_string(&cached) {
        return Ok(Ptx::from_src(text));
    }
    let options = CompileOptions {
        arch: Some(variant.arch.target),
        name: Some(format!("{}.cu", variant.name)),
        // Source lines in the PTX (no effect on the code): compute-sanitizer's reports then
        // name the kernel file and line.
        options: vec!["-lineinfo".to_string()],
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(variant.source(), options).map_err(|err| match err {
        CompileError::CompileError { log, .. } => Error::Gpu(format!(
            "{} does not compile for {}:\n{}",
            variant.name,
            variant.arch.target,
            log.to_string_lossy()
        )),
        other => Error::Gpu(format!("{}: NVRTC failed: {other:?}", variant.name)),
    })?;
    if std::fs::create_dir_all(cached.parent().expect("cache file has a parent")).is_ok() {
        // A failed cache write only costs a recompilation next time.
        let _ = std::fs::write(&cached, ptx.to_src());
    }
    Ok(ptx)
}
