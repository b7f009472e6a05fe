//! A user's compiled kernel behind the C ABI of `include/nvfp4_oracle.h`, loaded in the worker
//! process with `libloading` (never in the parent: its code is untrusted).

use super::launch::LaunchBuffers;
use super::GpuError;
use crate::kernels::KernelFailure;
use cudarc::driver::CudaStream;
use nvfp4_model::problem::Shape;
use std::ffi::{c_char, c_int, c_void};
use std::path::Path;
use std::sync::Arc;

pub const ABI_VERSION: u32 = 1;
const OK: c_int = 0;
const UNSUPPORTED_SHAPE: c_int = 1;

/// `nvfp4_oracle_dual_gemm_args`, field for field.
#[repr(C)]
struct DualGemmArgs {
    abi_version: u32,
    m: i32,
    n: i32,
    k: i32,
    l: i32,
    a: u64,
    b1: u64,
    b2: u64,
    sfa: u64,
    sfb1: u64,
    sfb2: u64,
    sfa_permuted: u64,
    sfb1_permuted: u64,
    sfb2_permuted: u64,
    c: u64,
}

type DualGemmFn =
    unsafe extern "C" fn(*const DualGemmArgs, *mut c_void, *mut c_char, usize) -> c_int;

pub struct LoadedLibrary {
    // Kept alive for as long as `function` may be called.
    _library: libloading::Library,
    function: DualGemmFn,
    symbol: String,
}

/// An error with its causes: libloading's "dlopen failed" carries the loader's own reason
/// (dlerror's text: a missing dependency, a wrong ELF class, not an ELF file) as its source.
fn with_causes(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        text.push_str(&format!(": {inner}"));
        cause = inner.source();
    }
    text
}

impl LoadedLibrary {
    pub fn open(path: &Path, symbol: &str) -> Result<Self, GpuError> {
        // SAFETY: loading runs the library's initialisers: this is the untrusted code the worker
        // process exists to contain.
        let library = unsafe { libloading::Library::new(path) }.map_err(|err| {
            format!(
                "{}: cannot load the library: {}",
                path.display(),
                with_causes(&err)
            )
        })?;
        // SAFETY: the symbol's type is the ABI's; a library that exports another signature under
        // this name breaks the contract the user declared with --symbol.
        let function = unsafe { library.get::<DualGemmFn>(symbol.as_bytes()) }
            .map(|f| *f)
            .map_err(|err| {
                format!(
                    "{}: no symbol '{symbol}': {}",
                    path.display(),
                    with_causes(&err)
                )
            })?;
        Ok(LoadedLibrary {
            _library: library,
            function,
            symbol: symbol.to_string(),
        })
    }

    /// Calls the kernel on `buffers` (output `[L][M][N]`).
    pub fn call(
        &self,
        buffers: &LaunchBuffers,
        shape: Shape,
        stream: &Arc<CudaStream>,
    ) -> Result<(), KernelFailure> {
        let [a, b1, b2, sfa_permuted, sfb1_permuted, sfb2_permuted] = buffers.inputs;
        let [sfa, sfb1, sfb2] = buffers.plain_scales;
        let args = DualGemmArgs {
            abi_version: ABI_VERSION,
            m: shape.m as i32,
            n: shape.n as i32,
            k: shape.k as i32,
            l: shape.l as i32,
            a,
            b1,
            b2,
            sfa,
            sfb1,
            sfb2,
            sfa_permuted,
            sfb1_permuted,
            sfb2_permuted,
            c: buffers.output,
        };
        let mut message = vec![0u8; 1024];
        // SAFETY: every pointer is a live device allocation of the size the ABI states, the
        // stream is the worker's, and the message buffer's length is passed with it.
        let code = unsafe {
            (self.function)(
                &args,
                stream.cu_stream() as *mut c_void,
                message.as_mut_ptr() as *mut c_char,
                message.len(),
            )
        };
        // The library's message, if it wrote one, as ": message".
        let detail = {
            let end = message
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(message.len());
            let text = String::from_utf8_lossy(&message[..end]).trim().to_string();
            if text.is_empty() {
                text
            } else {
                format!(": {text}")
            }
        };
        match code {
            OK => Ok(()),
            UNSUPPORTED_SHAPE => Err(KernelFailure::Refused(format!(
                "{}: {shape}{detail}",
                self.symbol
            ))),
            other => Err(KernelFailure::Raised(format!(
                "{} returned {other}{detail}",
                self.symbol
            ))),
        }
    }
}

/// The C ABI's `[L][M][N]` output in the harness's `[M][N][L]` order, as little-endian fp16
/// bytes; the same bytes when L is 1 (returned as they are: an output may be gigabytes).
pub fn lmn_to_mnl(lmn: Vec<u8>, shape: nvfp4_model::problem::Shape) -> Vec<u8> {
    if shape.l == 1 {
        return lmn;
    }
    let mut mnl = vec![0u8; lmn.len()];
    lmn_into_mnl(&lmn, shape, &mut mnl);
    mnl
}

/// [`lmn_to_mnl`] into `mnl` (as long as `lmn`), on every core: a deployment case's output is
/// hundreds of megabytes, gathered from L places each.
pub fn lmn_into_mnl(lmn: &[u8], shape: nvfp4_model::problem::Shape, mnl: &mut [u8]) {
    use rayon::prelude::*;
    let (mn, l) = (shape.m * shape.n, shape.l);
    assert_eq!(lmn.len(), mnl.len(), "an output and its reordering");
    // Element i's L values, from L places of the [L][M][N] storage.
    mnl.par_chunks_mut(2 * l)
        .enumerate()
        .for_each(|(i, values)| {
            for (b, value) in values.chunks_exact_mut(2).enumerate() {
                let from = 2 * (b * mn + i);
                value.copy_from_slice(&lmn[from..from + 2]);
            }
        });
}

#[cfg(test)]
mod tests {
    use super::lmn_to_mnl;
    use nvfp4_model::problem::Shape;

    #[test]
    fn an_lmn_output_is_reordered_element_by_element() {
        let shape = Shape::new(2, 3, 64, 2).unwrap();
        // Element e of the [L][M][N] storage is the bytes (e, 100 + e).
        let lmn: Vec<u8> = (0..12u8).flat_map(|e| [e, 100 + e]).collect();
        let mnl = lmn_to_mnl(lmn.clone(), shape);
        for (b, i) in (0..2).flat_map(|b| (0..6).map(move |i| (b, i))) {
            let e = (b * 6 + i) as u8;
            assert_eq!(&mnl[2 * (i * 2 + b)..][..2], &[e, 100 + e]);
        }
        let single = Shape::new(2, 3, 64, 1).unwrap();
        assert_eq!(lmn_to_mnl(lmn[..12].to_vec(), single), lmn[..12]);
    }
}
