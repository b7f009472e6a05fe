//! Certification: run any kernel against the model on many cases, shrink the first failure,
//! diagnose it, and write a certificate.

pub mod campaign;
pub mod cpu_kernels;
pub mod kernel;
pub mod report;

pub use campaign::{certify_variant, CampaignLimits, CampaignResult};
pub use kernel::{KernelCase, KernelFailure, KernelUnderTest, ShapeSupport};

/// Every kernel this build knows, in listing order.
pub fn registry() -> Vec<Box<dyn KernelUnderTest>> {
    cpu_kernels::cpu_kernels()
        .into_iter()
        .map(|k| Box::new(k) as Box<dyn KernelUnderTest>)
        .collect()
}
