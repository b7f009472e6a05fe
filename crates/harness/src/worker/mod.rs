//! The process boundary, in one folder: every GPU kernel under test (a built-in NVRTC variant, a
//! user's C-ABI library, a Python submission) runs in a worker process of its own, so that a
//! crash, a hang or a corrupted CUDA context is a verdict for one case instead of the end of the
//! campaign, and the answer stays out of the kernel's reach (a worker receives inputs only).
//! - [`protocol`]: the messages both sides exchange ([`protocol::Request`], [`protocol::Reply`],
//!   [`protocol::CaseFiles`], [`protocol::TimedCalls`]), one JSON line each;
//! - the parent's side: [`parent`] starts a worker, sends it requests and keeps the watchdog;
//!   [`isolated`] makes a worker-backed kernel a `crate::kernels::KernelUnderTest`; [`nvrtc`]
//!   (the built-in variants) and [`external`] (what users bring, described by a
//!   `crate::kernels::manifest`) build those kernels; [`registry`] lists every kernel;
//! - the serving sides: [`serve`], the `nvfp4-oracle gpu-worker` loop in Rust (variants and C-ABI
//!   libraries, on `crate::gpu`; a library's side of timing in [`library_timing`]), and
//!   `submission_worker.py`, the Python one (submissions, embedded in the binary as
//!   [`SUBMISSION_WORKER`]);
//! - timing an external kernel on facts the parent holds is `crate::bench`'s (the baseline
//!   worker it sets its clock against: `timing_baseline.py`, or `gpu-worker --timing-baseline`);
//!   [`shared_inputs`] hands a timed call's inputs over,
//!   and its output back, in device memory shared with the worker; [`shared_run`] does the
//!   same for a campaign's large cases run by the Rust worker (both sides);
//! - [`command`]: how a worker is started, and wrapped in the sandbox (`crate::sandbox`, the
//!   operating-system boundary); [`fresh_start`]: nothing one worker writes reaches another.
//!
//! This module may use `crate::kernels` (the contract) and `crate::gpu` (the backend); neither
//! uses it.

//! Without the `gpu` feature only the protocol is here (the Python package writes a case's
//! files and hands out the Python worker's source; it starts no worker).

#[cfg(feature = "gpu")]
pub mod command;
#[cfg(feature = "gpu")]
mod command_line;
#[cfg(feature = "gpu")]
pub mod external;
#[cfg(feature = "gpu")]
pub mod fresh_start;
#[cfg(feature = "gpu")]
pub mod isolated;
#[cfg(feature = "gpu")]
pub mod library_timing;
#[cfg(feature = "gpu")]
pub mod nvrtc;
#[cfg(feature = "gpu")]
pub mod parent;
pub mod protocol;
#[cfg(feature = "gpu")]
pub mod serve;
#[cfg(feature = "gpu")]
pub mod shared_inputs;
#[cfg(feature = "gpu")]
pub mod shared_run;

#[cfg(feature = "gpu")]
use crate::kernels::{cpu, cpu_fma, cpu_hopper_sim, KernelUnderTest};
// What the command line, the Python package and the examples name of the workers.
#[cfg(feature = "gpu")]
pub use crate::sandbox::environment::pass_env;
#[cfg(feature = "gpu")]
pub use command_line::GPU_WORKER_COMMAND;
#[cfg(feature = "gpu")]
pub use external::{external_kernel, set_start_timeout};
#[cfg(feature = "gpu")]
pub use isolated::IsolatedKernel;
#[cfg(feature = "gpu")]
pub use nvrtc::gpu_availability;
pub use protocol::CaseFiles;
#[cfg(feature = "gpu")]
pub use serve::{serve, WorkerTarget};

/// The Python worker that serves submissions (`submission_worker.py`), embedded so that the
/// binary alone can certify a submission; also handed to the Python package, whose
/// `to_gpumode` runs its `build_data`.
pub const SUBMISSION_WORKER: &str = include_str!("submission_worker.py");

/// Every kernel built into this binary, in listing order: the CPU kernels, then the GPU variants.
#[cfg(feature = "gpu")]
pub fn registry() -> Vec<Box<dyn KernelUnderTest>> {
    let mut kernels: Vec<Box<dyn KernelUnderTest>> = cpu::cpu_kernels()
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .collect();
    kernels.push(Box::new(cpu_hopper_sim::CpuHopperSim::correct()));
    kernels.push(Box::new(cpu_fma::CpuFmaPerProduct));
    kernels.push(Box::new(cpu_hopper_sim::CpuHopperSim::reordered_k_mutant()));
    kernels.extend(nvrtc::nvrtc_kernels());
    kernels
}

#[cfg(all(test, feature = "gpu"))]
mod tests {
    /// The value the Python worker gives `name` (a line `NAME = VALUE` at the top level).
    fn python_constant(name: &str) -> String {
        let prefix = format!("{name} = ");
        super::SUBMISSION_WORKER
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("submission_worker.py has no {name}"))
            .trim()
            .to_string()
    }

    fn python_number(name: &str) -> usize {
        let text = python_constant(name).replace('_', "");
        match text.strip_prefix("0x") {
            Some(hex) => usize::from_str_radix(hex, 16).unwrap(),
            None => text.parse().unwrap(),
        }
    }

    /// The protocol's constants are written twice, in Rust and in the Python worker: a change to
    /// one side alone would break the protocol (a reply never recognised) or the fences (a
    /// tensor placed where the parent does not look for its canaries).
    #[test]
    fn the_python_worker_and_the_parent_agree_on_the_protocols_constants() {
        use crate::gpu::fenced::{ALIGNMENT, CANARY_BYTE, CANARY_BYTES};
        assert_eq!(
            python_constant("MARKER"),
            format!("{:?}", super::protocol::REPLY_MARKER)
        );
        assert_eq!(python_number("CANARY"), CANARY_BYTES);
        assert_eq!(python_number("CANARY_BYTE"), usize::from(CANARY_BYTE));
        assert_eq!(python_number("ALIGNMENT"), ALIGNMENT);
        assert_eq!(
            python_number("SCALE_BLOCK"),
            nvfp4_model::problem::SCALE_BLOCK
        );
        let socket_env = format!("os.environ.get({:?})", super::protocol::INPUT_SOCKET_ENV);
        assert!(
            super::SUBMISSION_WORKER.contains(&socket_env),
            "the Python worker does not read {socket_env}"
        );
    }
}
