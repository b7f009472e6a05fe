//! The kernel contract and the kernels that run in this process:
//! - [`interface`]: the contract every kernel under test meets ([`KernelUnderTest`]), with the
//!   case it is given, its failures and the conditions it runs under;
//! - [`cpu`], [`cpu_hopper_sim`], [`cpu_fma`]: built-in CPU kernels and planted-bug mutants
//!   (run anywhere);
//! - [`scaled_mutants`]: a CPU kernel of the block-scaled family and its planted bugs;
//! - [`manifest`]: the TOML file that describes an external kernel (a GPU MODE `submission.py`
//!   or a compiled kernel behind the C ABI of `include/nvfp4_oracle.h`).
//!
//! The GPU kernels (the built-in NVRTC variants, submissions and C-ABI libraries) run in worker
//! processes and are built in the `worker` module, which also holds the list of every kernel
//! (its `registry`). This module uses neither the `gpu` nor the `worker` module, both of which
//! use it; the campaign (`certify`) sees only the trait.

pub mod cpu;
pub mod cpu_fma;
pub mod cpu_hopper_sim;
pub mod interface;
pub mod manifest;
pub mod scaled_mutants;

pub use interface::{
    poisoned_output, DualGemmCase, KeptOutput, KernelCase, KernelEnvironment, KernelFailure,
    KernelUnderTest, PrepareError, RunConditions, ShapeSupport, ToolWrapper, Unavailable,
};
pub use manifest::{ArchRequirement, KernelCode, Manifest};
