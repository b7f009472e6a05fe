//! Every timed call's output judged: the reference computed on the GPU, in the parent's own
//! context, by the harness's exact-reference kernel where it takes the case (it is checked
//! against the CPU model during certification), else by the CPU model; the output compared
//! with it element by element. No sample: a kernel wrong on one call in a hundred is wrong.

use crate::gpu::exact_reference::GpuReference;
use half::f16;
use nvfp4_model::compare::{judge, OutputShape};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::model::problem_reference;
use nvfp4_model::problem::ProblemInputs;

/// The judge of a bench run: the GPU reference loaded once, if it loads.
pub struct OutputJudge {
    gpu: Option<GpuReference>,
}

impl OutputJudge {
    pub fn new() -> Self {
        OutputJudge {
            gpu: GpuReference::new().ok(),
        }
    }

    /// The GPU reference, if it loaded: what judges a batch's outputs on the device.
    pub fn gpu(&self) -> Option<&GpuReference> {
        self.gpu.as_ref()
    }

    /// Where references are computed, in words (for the report).
    pub fn reference_engine(&self) -> &'static str {
        if self.gpu.is_some() {
            "the GPU reference, in the parent's own context (the CPU model where it declines a case)"
        } else {
            "the CPU model (the GPU reference did not load)"
        }
    }

    /// How many elements of `output` (`[M, N, L]` fp16) are wrong for `inputs`: 0 when it
    /// passes.
    pub fn failed_elements(&self, inputs: &ProblemInputs, output: &[f16]) -> usize {
        let order = KOrder::Contiguous;
        let reference = self
            .gpu
            .as_ref()
            .filter(|gpu| gpu.declines(inputs).is_none())
            .and_then(|gpu| gpu.reference(inputs, order).ok())
            .unwrap_or_else(|| problem_reference(inputs, order));
        let (m, n, l) = inputs.output_dims();
        let verdict = judge(
            OutputShape { m, n, l },
            output,
            &reference.expected,
            &reference.lo,
            &reference.hi,
        );
        if verdict.pass {
            0
        } else {
            verdict.failed.max(1)
        }
    }
}

impl Default for OutputJudge {
    fn default() -> Self {
        Self::new()
    }
}

/// fp16 values from their little-endian bytes.
pub fn f16_values(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks_exact(2)
        .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
        .collect()
}
