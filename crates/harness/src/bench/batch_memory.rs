//! A timed batch's memory: R slots of every tensor of the data tuple, in one exportable fenced
//! buffer per tensor of the parent's context, shared with the kernel's worker and the baseline
//! worker ([`BatchSlots`], [`BatchMemory`]); tests without a GPU share files instead. What
//! fills the slots and judges them is [`super::batch_inputs`]; the requests that time them,
//! [`super::batch`].

use crate::gpu::check;
use crate::gpu::fenced::FencedBuffer;
use crate::gpu::input_generator::DeviceBytes;
use crate::gpu::GpuError;
use crate::kernels::KernelCase;
use crate::worker::protocol::{slot_stride, SharedTensor};
use crate::worker::shared_inputs::{device_tensors, fenced_tensors, send_buffers};
use cudarc::driver::{sys, CudaStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// The memory a batch's calls read and write, shared with both workers: R slots of every
/// tensor of the data tuple. [`BatchMemory`] on a GPU; tests without one share files.
pub trait BatchSlots {
    /// Calls a batch holds.
    fn slots(&self) -> usize;
    /// One entry per tensor (one slot's length), in the order of the descriptors
    /// [`BatchSlots::send_to`] sends.
    fn layout(&self) -> Vec<SharedTensor>;
    /// Sends a descriptor of every tensor's memory on `socket`, in layout order.
    fn send_to(&self, socket: &UnixStream) -> Result<(), GpuError>;
    /// Writes `cases` (one per slot, in order) and their poisoned outputs into the slots, and
    /// returns once they are there.
    fn write(&self, cases: &[KernelCase]) -> Result<(), GpuError>;
    /// Slot `slot`'s output as the worker left it (GPU MODE's (L, M, N) fp16 storage).
    fn output(&self, slot: usize) -> Result<Vec<u8>, GpuError>;
}

/// A batch's device memory in the parent's context: one fenced, exportable buffer per tensor
/// of the data tuple (the output `c` last), each holding every slot.
pub struct BatchMemory {
    stream: Arc<CudaStream>,
    buffers: Vec<FencedBuffer>,
    layout: Vec<SharedTensor>,
    slots: usize,
}

/// The bytes one call's tensors take in a batch (each rounded up to its slot stride) and its
/// inputs alone (without the output); None for the grouped GEMM (host tensors).
pub fn slot_bytes(case: &KernelCase) -> Option<(usize, usize)> {
    let tensors = device_tensors(case)?;
    let all = tensors.iter().map(|(_, b)| slot_stride(b.len())).sum();
    let inputs = tensors
        .iter()
        .filter(|(key, _)| key != "c")
        .map(|(_, b)| b.len())
        .sum();
    Some((all, inputs))
}

/// The device memory free now, in the parent's context (0 where the driver does not say).
pub fn free_memory() -> usize {
    crate::gpu::device::open_device()
        .ok()
        .and_then(|(ctx, _)| ctx.bind_to_thread().ok())
        .and_then(|()| cudarc::driver::result::mem_get_info().ok())
        .map_or(0, |(free, _)| free)
}

impl BatchMemory {
    /// Buffers for `slots` calls shaped like `case`, canaries written.
    pub fn new(case: &KernelCase, slots: usize) -> Result<Self, GpuError> {
        let tensors = device_tensors(case).ok_or(
            "the grouped GEMM's data tuple holds host tensors: it has no batch in shared memory",
        )?;
        let (stream, buffers, layout) =
            fenced_tensors(&tensors, |len| slot_stride(len) * (slots - 1) + len)?;
        Ok(BatchMemory {
            stream,
            buffers,
            layout,
            slots,
        })
    }

    /// The stream its buffers were filled on (the parent's context's default stream).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Where slot `slot` of tensor `tensor` (layout order) lies: one call's bytes.
    pub fn slot(&self, tensor: usize, slot: usize) -> DeviceBytes {
        let len = self.layout[tensor].len;
        assert!(slot < self.slots, "slot {slot} of {}", self.slots);
        DeviceBytes {
            ptr: self.buffers[tensor].body_ptr() + (slot * slot_stride(len)) as u64,
            len,
        }
    }

    fn bind(&self) -> Result<(), GpuError> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| GpuError(e.to_string()))
    }

    /// Slot `slot` of tensor `tensor`, read back.
    pub fn read_slot(&self, tensor: usize, slot: usize) -> Result<Vec<u8>, GpuError> {
        self.bind()?;
        let at = self.slot(tensor, slot);
        let mut bytes = vec![0u8; at.len];
        // SAFETY: the slot lies inside the body; `bytes` holds its length.
        check("cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(bytes.as_mut_ptr().cast(), at.ptr, bytes.len())
        })?;
        Ok(bytes)
    }

    /// Writes `bytes` (one call's length) into slot `slot` of tensor `tensor` and waits.
    pub fn write_slot(&self, tensor: usize, slot: usize, bytes: &[u8]) -> Result<(), GpuError> {
        self.bind()?;
        let at = self.slot(tensor, slot);
        if bytes.len() != at.len {
            return Err("a batch's case is not shaped like the first".into());
        }
        // SAFETY: the slot lies inside the body and holds `bytes.len()`; the host bytes outlive
        // the copy (synchronized below).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                at.ptr,
                bytes.as_ptr().cast(),
                bytes.len(),
                self.stream.cu_stream(),
            )
        })?;
        self.stream.synchronize().map_err(GpuError::from)
    }
}

impl BatchSlots for BatchMemory {
    fn slots(&self) -> usize {
        self.slots
    }

    fn layout(&self) -> Vec<SharedTensor> {
        self.layout.clone()
    }

    fn send_to(&self, socket: &UnixStream) -> Result<(), GpuError> {
        send_buffers(socket, &self.buffers)
    }

    fn write(&self, cases: &[KernelCase]) -> Result<(), GpuError> {
        for (slot, case) in cases.iter().enumerate() {
            let tensors = device_tensors(case).ok_or("a grouped GEMM case")?;
            for (tensor, ((key, bytes), t)) in tensors.iter().zip(&self.layout).enumerate() {
                if *key != t.key {
                    return Err("a batch's case is not shaped like the first".into());
                }
                self.write_slot(tensor, slot, bytes)?;
            }
        }
        Ok(())
    }

    fn output(&self, slot: usize) -> Result<Vec<u8>, GpuError> {
        match self.layout.last() {
            Some(t) if t.key == "c" => self.read_slot(self.layout.len() - 1, slot),
            _ => Err("the batch's tensors end with no output".into()),
        }
    }
}
