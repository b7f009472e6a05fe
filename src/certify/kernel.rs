//! What the harness knows about a kernel under test: what it solves, which shapes it supports,
//! whether it can run here, and how to run it on one case.

use crate::model::mma::schedule::Schedule;
use crate::problem::{DualGemmInputs, ProblemKind, Shape};
use half::f16;

/// The shapes a kernel declares it supports. Shapes outside are not fuzzed; the harness checks
/// that the kernel refuses them cleanly instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShapeSupport {
    pub m_multiple: usize,
    pub n_multiple: usize,
    pub k_multiple: usize,
    pub max_l: usize,
}

impl ShapeSupport {
    pub const ANY: ShapeSupport = ShapeSupport {
        m_multiple: 1,
        n_multiple: 1,
        k_multiple: 16,
        max_l: usize::MAX,
    };

    pub fn supports(&self, shape: Shape) -> bool {
        shape.m % self.m_multiple == 0
            && shape.n % self.n_multiple == 0
            && shape.k % self.k_multiple == 0
            && shape.l <= self.max_l
    }

    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for (name, multiple) in [
            ("M", self.m_multiple),
            ("N", self.n_multiple),
            ("K", self.k_multiple),
        ] {
            if multiple > 1 {
                parts.push(format!("{name} % {multiple} == 0"));
            }
        }
        if self.max_l != usize::MAX {
            parts.push(format!("L <= {}", self.max_l));
        }
        if parts.is_empty() {
            "any shape".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// One launch's inputs, in both scale layouts, as a GPU kernel would receive them.
pub struct KernelCase {
    pub inputs: DualGemmInputs,
    /// Blocked (permuted) scales of A, B1, B2, padding filled with `padding_fill`.
    pub sfa_blocked: Vec<u8>,
    pub sfb1_blocked: Vec<u8>,
    pub sfb2_blocked: Vec<u8>,
    pub padding_fill: u8,
}

impl KernelCase {
    pub fn new(inputs: DualGemmInputs, padding_fill: u8) -> Self {
        KernelCase {
            sfa_blocked: inputs.a.blocked_scales(padding_fill),
            sfb1_blocked: inputs.b1.blocked_scales(padding_fill),
            sfb2_blocked: inputs.b2.blocked_scales(padding_fill),
            inputs,
            padding_fill,
        }
    }
}

/// How a run went wrong before any output could be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum KernelFailure {
    #[error("the kernel refused the shape: {0}")]
    Refused(String),
    #[error("the kernel crashed: {0}")]
    Crashed(String),
    #[error("the kernel hung (watchdog after {0} s)")]
    Hung(u64),
    #[error("the kernel wrote outside its output: {0}")]
    OutOfBounds(String),
    #[error("the kernel modified its inputs: {0}")]
    ModifiedInputs(String),
}

/// A kernel under test. `run` writes `[M, N, L]` fp16 into `output`, which the harness has filled
/// with the poison NaN ([`crate::compare::diagnosis::POISON`]).
pub trait KernelUnderTest: Sync {
    fn name(&self) -> &str;
    /// One line for `variants`: what the kernel is (for a mutant, its bug).
    fn description(&self) -> String;
    /// Deliberately broken kernels (mutants, harness tests) are never selected by default.
    fn is_deliberately_broken(&self) -> bool;
    /// Hash of the kernel's source, for kernels built from source at run time.
    fn source_hash(&self) -> Option<String> {
        None
    }
    fn problem(&self) -> ProblemKind;
    fn support(&self) -> ShapeSupport;
    /// `Err(reason)` when it cannot run on this machine (no GPU, wrong architecture).
    fn availability(&self) -> Result<(), String>;
    fn run(&self, case: &KernelCase, output: &mut [f16]) -> Result<(), KernelFailure>;
    /// The accumulation schedule the kernel declares, if any: `certify --exact` replays it.
    fn schedule(&self) -> Option<Schedule> {
        None
    }
}
