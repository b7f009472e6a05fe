//! Kernels under test, from every source behind one interface ([`KernelUnderTest`]):
//! - [`cpu`], [`cpu_hopper_sim`]: built-in CPU kernels and planted-bug mutants (run anywhere);
//! - [`nvrtc`]: the built-in GPU variants under `kernels/`, compiled with NVRTC at run time;
//! - [`external`]: what users bring, described by a [`manifest`]: a GPU MODE `submission.py`
//!   (CuTe DSL, Triton, torch, inline CUDA; run by `submission_worker.py`) or a compiled kernel
//!   behind the C ABI of `include/nvfp4_oracle.h`.
//!
//! The GPU ones run in worker processes ([`process`], [`isolated`]); [`manifest`] reads the TOML
//! file that describes an external kernel. The campaign (`crate::certify`) sees only the trait.

pub mod cpu;
pub mod cpu_hopper_sim;
pub mod external;
pub mod interface;
pub mod isolated;
pub mod manifest;
pub mod nvrtc;
pub mod process;
pub mod timing;

pub use interface::{
    DualGemmCase, KernelCase, KernelEnvironment, KernelFailure, KernelUnderTest, PrepareError,
    RunConditions, ShapeSupport, ToolWrapper,
};

/// Every kernel built into this binary, in listing order: the CPU kernels, then the GPU variants.
pub fn registry() -> Vec<Box<dyn KernelUnderTest>> {
    let mut kernels: Vec<Box<dyn KernelUnderTest>> = cpu::cpu_kernels()
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .collect();
    kernels.push(Box::new(cpu_hopper_sim::CpuHopperSim::correct()));
    kernels.push(Box::new(cpu_hopper_sim::CpuHopperSim::reordered_k_mutant()));
    kernels.extend(nvrtc::nvrtc_kernels());
    kernels
}
