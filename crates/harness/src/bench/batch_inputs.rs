//! What fills a timed batch's slots with fresh inputs and judges every output the kernel left
//! there ([`super::batch::time_batches`] calls it around each batch): on the host, or on the GPU
//! in the parent's own context.
//!
//! Why the GPU: a batch holds tens to hundreds of calls, each on inputs no call has seen. Made on
//! the host, a benchmark shape's inputs took about 15 ms a call on 16 cores, then an upload; its
//! reference went up again and came back as three fp16 arrays to be judged on the host. A
//! bench of four shapes made and judged thousands of calls that way, most of its minutes. On the
//! GPU ([`DeviceInputs`]) the harness's own generator writes each slot's inputs where the kernel
//! reads them (the CPU generator's bytes: a GPU test), and the judge regenerates the same inputs
//! into memory of the parent's alone, computes the reference there and judges the slot's output
//! against it on the device: two numbers come back a call.
//!
//! Why the reference is not computed from the slots: the kernel's worker maps them and may have
//! changed its inputs (zeros in, zeros out would then pass). The regenerated copy is memory the
//! worker never sees.

use super::batch_memory::{BatchMemory, BatchSlots};
use crate::gpu::exact_reference::{DeviceOperand, GpuReference};
use crate::gpu::input_generator::{abi_input_lens, DeviceBytes, InputGenerator};
use crate::gpu::GpuError;
use crate::kernels::interface::ABI_INPUT_KEYS;
use crate::kernels::KernelCase;
use cudarc::driver::{sys, CudaSlice, CudaStream, DevicePtr};
use nvfp4_model::model::bounds::KOrder;
use nvfp4_model::problem::{Distribution, Shape, POISON};
use std::sync::Arc;

/// A wrong output: the batch, the slot (the call's place in the batch) and how many elements
/// were wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrongCall {
    pub batch: usize,
    pub slot: usize,
    pub elements: usize,
}

/// Fills a batch's slots and judges them.
pub trait BatchInputs {
    /// Writes batch `b`'s inputs (fresh for every call) and a poisoned output into every slot,
    /// and returns once they are there.
    fn fill(&mut self, b: usize) -> Result<(), GpuError>;
    /// Judges every slot's output of batch `b` (after the kernel's request has been answered):
    /// the calls whose outputs were wrong.
    fn judge(&mut self, b: usize) -> Result<Vec<WrongCall>, GpuError>;
}

/// Inputs made on the host (every core), written into `memory`, outputs read back and judged by
/// `judge` (the elements it found wrong; 0: right): any problem, and tests without a GPU.
pub struct HostInputs<'a, Make, Judge> {
    pub memory: &'a dyn BatchSlots,
    /// Batch b's slot i gets `make_case(b, i)`.
    pub make_case: Make,
    pub judge: Judge,
    cases: Vec<KernelCase>,
}

impl<'a, Make, Judge> HostInputs<'a, Make, Judge>
where
    Make: Fn(usize, usize) -> KernelCase + Sync,
    Judge: FnMut(usize, usize, &KernelCase, Vec<u8>) -> usize,
{
    pub fn new(memory: &'a dyn BatchSlots, make_case: Make, judge: Judge) -> Self {
        HostInputs {
            memory,
            make_case,
            judge,
            cases: Vec::new(),
        }
    }
}

impl<Make, Judge> BatchInputs for HostInputs<'_, Make, Judge>
where
    Make: Fn(usize, usize) -> KernelCase + Sync,
    Judge: FnMut(usize, usize, &KernelCase, Vec<u8>) -> usize,
{
    fn fill(&mut self, b: usize) -> Result<(), GpuError> {
        use rayon::prelude::*;
        let make_case = &self.make_case;
        self.cases = (0..self.memory.slots())
            .into_par_iter()
            .map(|i| make_case(b, i))
            .collect();
        self.memory.write(&self.cases)
    }

    fn judge(&mut self, b: usize) -> Result<Vec<WrongCall>, GpuError> {
        let mut wrong = Vec::new();
        for (slot, case) in self.cases.iter().enumerate() {
            let output = self.memory.output(slot).map_err(|why| {
                GpuError(format!("reading batch {b} call {slot}'s output: {why}"))
            })?;
            let elements = (self.judge)(b, slot, case, output);
            if elements > 0 {
                wrong.push(WrongCall {
                    batch: b,
                    slot,
                    elements,
                });
            }
        }
        Ok(wrong)
    }
}

/// A dual GEMM's batch made and judged on the GPU, in the parent's context (see the module's
/// overview). The distribution is GPU MODE's, padding 0: the bytes of the host path's
/// `KernelCase::new(generate_problem(.., Gpumode, seed), 0)`.
pub struct DeviceInputs<'a> {
    memory: &'a BatchMemory,
    reference: &'a GpuReference,
    generator: InputGenerator,
    stream: Arc<CudaStream>,
    shape: Shape,
    /// Batch b's slot i gets the inputs of `seed(b, i)`.
    seed: Box<dyn Fn(usize, usize) -> u64 + 'a>,
    /// The memory's tensor of each ABI input, in `ABI_INPUT_KEYS` order, and of the output.
    abi_tensors: [usize; 9],
    output_tensor: usize,
    /// The parent's own copy of a call's inputs, for its reference (ABI order), and where
    /// each lies.
    _private: Vec<CudaSlice<u8>>,
    private_bytes: [DeviceBytes; 9],
}

impl<'a> DeviceInputs<'a> {
    /// The GPU path for `memory`'s batches of `shape`, or why not (the generator or a buffer
    /// could not be had; the caller then makes and judges on the host).
    pub fn new(
        memory: &'a BatchMemory,
        reference: &'a GpuReference,
        shape: Shape,
        seed: impl Fn(usize, usize) -> u64 + 'a,
    ) -> Result<Self, GpuError> {
        let stream = memory.stream().clone();
        let generator = InputGenerator::new(stream.context())?;
        let layout = memory.layout();
        let position = |key: &str| {
            layout
                .iter()
                .position(|t| t.key == key)
                .ok_or_else(|| GpuError(format!("the batch has no tensor {key}")))
        };
        let mut abi_tensors = [0; 9];
        for (slot, key) in abi_tensors.iter_mut().zip(ABI_INPUT_KEYS) {
            *slot = position(key)?;
        }
        let lens = abi_input_lens(shape);
        for (&tensor, (len, key)) in abi_tensors.iter().zip(lens.iter().zip(ABI_INPUT_KEYS)) {
            if layout[tensor].len != *len {
                return Err(GpuError(format!(
                    "{key}: {} bytes a slot for a tensor of {len}",
                    layout[tensor].len
                )));
            }
        }
        let private = lens
            .iter()
            .map(|&len| {
                stream
                    .alloc_zeros::<u8>(len.max(1))
                    .map_err(|err| GpuError(format!("the judge's copy of the inputs: {err}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let private_bytes: [DeviceBytes; 9] = std::array::from_fn(|i| DeviceBytes {
            ptr: private[i].device_ptr(&stream).0,
            len: lens[i],
        });
        Ok(DeviceInputs {
            memory,
            reference,
            generator,
            stream,
            shape,
            seed: Box::new(seed),
            abi_tensors,
            output_tensor: position("c")?,
            _private: private,
            private_bytes,
        })
    }

    /// Makes the inputs of `seed` into `outputs` (ABI order) and waits for them.
    fn generate(&self, seed: u64, outputs: [DeviceBytes; 9]) -> Result<(), GpuError> {
        // SAFETY: each output is a slot of one of the batch's tensors (inside its body, slots
        // apart, no two overlapping) or one of the private buffers, all in the stream's context;
        // no other work of the parent's uses them until the generation returns.
        unsafe {
            self.generator.generate_dual_gemm(
                &self.stream,
                self.shape,
                Distribution::Gpumode,
                seed,
                outputs,
            )
        }
    }
}

impl BatchInputs for DeviceInputs<'_> {
    fn fill(&mut self, b: usize) -> Result<(), GpuError> {
        let output = self.memory.slot(self.output_tensor, 0);
        let elements = output.len / 2;
        for slot in 0..self.memory.slots() {
            let outputs = self
                .abi_tensors
                .map(|tensor| self.memory.slot(tensor, slot));
            self.generate((self.seed)(b, slot), outputs)?;
            let c = self.memory.slot(self.output_tensor, slot);
            // SAFETY: the slot holds `elements` fp16 values of the batch's memory.
            crate::gpu::check("cuMemsetD16Async", unsafe {
                sys::cuMemsetD16Async(c.ptr, POISON.to_bits(), elements, self.stream.cu_stream())
            })?;
        }
        self.stream.synchronize().map_err(GpuError::from)
    }

    fn judge(&mut self, b: usize) -> Result<Vec<WrongCall>, GpuError> {
        let mut wrong = Vec::new();
        for slot in 0..self.memory.slots() {
            let private = self.private_bytes;
            self.generate((self.seed)(b, slot), private)?;
            // ABI order: a, b1, b2, three blocked scales, then the plain scales of a, b1, b2.
            let operand = |i: usize| DeviceOperand {
                data: private[i].ptr,
                scales: private[6 + i].ptr,
            };
            // SAFETY: the private buffers hold the shape's operands (generated just above and
            // waited for), untouched by anything else.
            let reference = unsafe {
                self.reference.dual_gemm_on_device(
                    self.shape,
                    [operand(0), operand(1), operand(2)],
                    KOrder::Contiguous,
                )
            }?;
            let output = self.memory.slot(self.output_tensor, slot);
            // SAFETY: the output slot holds the reference's element count of fp16 values, in
            // GPU MODE's [L][M][N] storage.
            let failed =
                unsafe { self.reference.judge_on_device(&reference, output.ptr, true) }?.failed;
            if failed > 0 {
                wrong.push(WrongCall {
                    batch: b,
                    slot,
                    elements: failed as usize,
                });
            }
        }
        Ok(wrong)
    }
}
