//! Certification: run any kernel against the model on many cases, shrink the first failure,
//! diagnose it, and write a certificate.

pub mod campaign;
pub mod cpu_hopper_sim;
pub mod cpu_kernels;
pub mod kernel;
pub mod report;

pub use campaign::{certify_variant, CampaignLimits, CampaignResult};
pub use kernel::{KernelCase, KernelFailure, KernelUnderTest, ShapeSupport};

/// Every kernel this build knows, in listing order: the CPU kernels, then the GPU variants.
pub fn registry() -> Vec<Box<dyn KernelUnderTest>> {
    let cpu = cpu_kernels::cpu_kernels()
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .chain([
            Box::new(cpu_hopper_sim::CpuHopperSim::correct()) as Box<dyn KernelUnderTest>,
            Box::new(cpu_hopper_sim::CpuHopperSim::reordered_k_mutant()),
        ]);
    let gpu = crate::gpu::worker::gpu_kernels()
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>);
    cpu.chain(gpu).collect()
}
