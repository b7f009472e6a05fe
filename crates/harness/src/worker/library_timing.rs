//! The worker's side of timing a C-ABI library (`crate::bench`'s per-call timing and batch clock
//! drive it from the parent, through [`super::serve`]): the warm-up sets
//! uploaded and run, an untimed warm call before each timed one in a request of its own, then
//! the timed call between CUDA events. Its inputs arrive in device memory the parent shares
//! ([`super::shared_inputs`]: mapped once, filled and L2-flushed by the parent just before each
//! call), and its output stays in the shared buffer, which the parent reads. With no library
//! ([`super::serve::WorkerTarget::Baseline`]) it serves the requests without the kernel that
//! set the parent's clock.

use super::protocol::{CaseFiles, Reply, Request, SharedTensor, TimedCalls};
use super::shared_inputs::{map_dual_gemm_tensors, SHARED_KEYS};
use crate::gpu::fenced::FencedBuffer;
use crate::gpu::launch::LaunchBuffers;
use crate::gpu::library::LoadedLibrary;
use crate::kernels::{DualGemmCase, KernelFailure};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError,
};
use nvfp4_model::problem::Shape;
use std::os::unix::net::UnixStream;
use std::sync::Arc;

const NOT_SHARED: &str = "a call on shared inputs before any were shared";

fn crashed(err: DriverError) -> KernelFailure {
    KernelFailure::Crashed(err.to_string())
}

/// One case's buffers on the device (no guards: timing only; the campaign checked the kernel).
struct Uploaded {
    shape: Shape,
    inputs: Vec<CudaSlice<u8>>,
    output: CudaSlice<u16>,
}

impl Uploaded {
    fn new(stream: &Arc<CudaStream>, case: DualGemmCase<'_>) -> Result<Self, KernelFailure> {
        let s = case.inputs.shape;
        Ok(Uploaded {
            shape: s,
            inputs: case
                .abi_inputs()
                .iter()
                .map(|(_, body)| stream.clone_htod(*body))
                .collect::<Result<_, _>>()
                .map_err(crashed)?,
            output: stream
                .clone_htod(&vec![
                    nvfp4_model::problem::POISON.to_bits();
                    s.m * s.n * s.l
                ])
                .map_err(crashed)?,
        })
    }

    fn buffers(&mut self, stream: &Arc<CudaStream>) -> LaunchBuffers {
        // The raw pointers outlive their guards: sound here, one stream synchronized per call.
        let ptrs: Vec<u64> = self.inputs.iter().map(|b| b.device_ptr(stream).0).collect();
        LaunchBuffers {
            inputs: std::array::from_fn(|i| ptrs[i]),
            plain_scales: std::array::from_fn(|i| ptrs[6 + i]),
            output: self.output.device_ptr_mut(stream).0,
        }
    }
}

/// Two timing events of `ctx`: a call's start and end.
fn event_pair(ctx: &Arc<CudaContext>) -> Result<(CudaEvent, CudaEvent), KernelFailure> {
    let event = || {
        ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(crashed)
    };
    Ok((event()?, event()?))
}

/// One call on `buffers` between CUDA events (`library` None: the events alone), then a
/// device-wide synchronize: the sample, how long the device stayed busy after the end event,
/// and the wall time since `wall`.
fn timed_call(
    stream: &Arc<CudaStream>,
    library: Option<&LoadedLibrary>,
    buffers: &LaunchBuffers,
    shape: Shape,
    wall: std::time::Instant,
) -> Result<TimedCalls, KernelFailure> {
    let ctx = stream.context();
    let (start, end) = event_pair(&ctx)?;
    start.record(stream).map_err(crashed)?;
    if let Some(library) = library {
        library.call(buffers, shape, stream)?;
    }
    end.record(stream).map_err(crashed)?;
    end.synchronize().map_err(crashed)?;
    let sample = f64::from(start.elapsed_ms(&end).map_err(crashed)?) * 1000.0;
    let after_end = std::time::Instant::now();
    ctx.synchronize().map_err(crashed)?;
    let after_end_us = after_end.elapsed().as_secs_f64() * 1e6;
    Ok(TimedCalls {
        samples_us: vec![sample],
        wall_us: wall.elapsed().as_secs_f64() * 1e6,
        after_end_us: vec![after_end_us],
        other_threads: Vec::new(),
    })
}

/// What a timing has prepared so far.
#[derive(Default)]
pub struct LibraryTiming {
    /// The parent's input socket, where the shared memory's descriptors arrive.
    input_socket: Option<UnixStream>,
    /// The shared buffers, mapped, in [`SHARED_KEYS`] order.
    shared: Vec<FencedBuffer>,
    /// The warm-up sets.
    sets: Vec<Uploaded>,
    /// Calls served so far (which warm-up set warms the next).
    calls: usize,
    /// A timed batch's shared buffers ([`Request::PrepareBatch`]), in [`SHARED_KEYS`] order,
    /// and every slot's launch buffers, made once.
    batch: Vec<FencedBuffer>,
    batch_slots: Vec<LaunchBuffers>,
    batch_shape: Option<Shape>,
    /// The lone-call batch's flush buffer (4x the L2), made at the first one.
    lone_flush: Option<CudaSlice<u8>>,
}

impl LibraryTiming {
    /// A timing that receives shared memory on `input_socket` (None: it can time nothing).
    pub fn new(input_socket: Option<UnixStream>) -> Self {
        LibraryTiming {
            input_socket,
            ..Default::default()
        }
    }

    /// Whether this worker can map the memory the parent shares.
    pub fn offers_shared_inputs(&self) -> bool {
        self.input_socket.is_some()
    }

    /// Answers one timing request.
    pub fn serve(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
        request: Request,
    ) -> Reply {
        match request {
            Request::Prepare {
                sets,
                warmup,
                shared,
                ..
            } => Reply::Done(
                self.map_shared(stream, &shared)
                    .and_then(|()| self.prepare(stream, &sets, warmup)),
            ),
            Request::Call {
                set,
                null,
                shared: true,
                ..
            } => {
                let library = if null { None } else { library };
                Reply::Timed(self.shared_call(stream, library, &set))
            }
            Request::Warmup => Reply::Done(self.warmup(stream, library)),
            Request::Warm => Reply::Done(self.warm(stream, library)),
            // The parent times a library on shared memory only (`external.rs`).
            Request::Call { shared: false, .. } => Reply::Timed(Err(KernelFailure::Crashed(
                "a timed call on files reached a C-ABI library's worker, which is timed on \
                 shared device memory only"
                    .into(),
            ))),
            Request::PrepareBatch { set, slots, shared } => {
                Reply::Done(self.prepare_batch(stream, &set, slots, &shared))
            }
            Request::TimedBatch { null, lone } => {
                let library = if null { None } else { library };
                Reply::Timed(if lone {
                    self.lone_batch(stream, library)
                } else {
                    self.batch(stream, library)
                })
            }
            Request::Run { .. } | Request::RunShared { .. } | Request::RunBatch { .. } => {
                Reply::Done(Err(KernelFailure::Crashed(
                    "a case request reached the timing".into(),
                )))
            }
        }
    }

    /// Maps the buffers the parent shares (`layout`, one descriptor each on the input socket,
    /// in order); nothing when it shares none.
    fn map_shared(
        &mut self,
        stream: &Arc<CudaStream>,
        layout: &[SharedTensor],
    ) -> Result<(), KernelFailure> {
        self.shared.clear();
        if !layout.is_empty() {
            self.shared = map_dual_gemm_tensors(self.input_socket.as_ref(), stream, layout)?;
        }
        Ok(())
    }

    /// The parent's input socket, where shared memory's descriptors arrive (None: a worker
    /// started without one).
    pub fn input_socket(&self) -> Option<&UnixStream> {
        self.input_socket.as_ref()
    }

    fn prepare(
        &mut self,
        stream: &Arc<CudaStream>,
        sets: &[CaseFiles],
        warmup: usize,
    ) -> Result<(), KernelFailure> {
        self.sets.clear();
        for files in &sets[..warmup.min(sets.len())] {
            let case = files.read_in_worker()?;
            self.sets
                .push(Uploaded::new(stream, case.dual_or_refuse()?)?);
        }
        Ok(())
    }

    fn warmup(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
    ) -> Result<(), KernelFailure> {
        if let Some(library) = library {
            for set in &mut self.sets {
                let buffers = set.buffers(stream);
                library.call(&buffers, set.shape, stream)?;
            }
        }
        stream.synchronize().map_err(crashed)
    }

    /// One untimed call on the next warm-up set.
    fn warm(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
    ) -> Result<(), KernelFailure> {
        if let (Some(library), false) = (library, self.sets.is_empty()) {
            let i = self.calls % self.sets.len();
            let warm = &mut self.sets[i];
            let buffers = warm.buffers(stream);
            library.call(&buffers, warm.shape, stream)?;
        }
        self.calls += 1;
        stream.context().synchronize().map_err(crashed)
    }

    /// One call on the shared buffers between CUDA events (`library` None: the same without a
    /// kernel). The parent has filled them and flushed L2; the output stays in the shared `c`.
    fn shared_call(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
        set: &CaseFiles,
    ) -> Result<TimedCalls, KernelFailure> {
        let arrived = std::time::Instant::now();
        if self.shared.len() != SHARED_KEYS.len() {
            return Err(KernelFailure::Crashed(NOT_SHARED.into()));
        }
        let shape = Shape {
            m: set.m,
            n: set.n,
            k: set.k,
            l: set.l,
        };
        let body = |i: usize| self.shared[i].body_ptr();
        let buffers = LaunchBuffers {
            inputs: std::array::from_fn(body),
            plain_scales: std::array::from_fn(|i| body(6 + i)),
            output: body(9),
        };
        timed_call(stream, library, &buffers, shape, arrived)
    }
}

impl LibraryTiming {
    /// Maps a batch's buffers and computes every slot's launch buffers (slot i of each tensor
    /// at its body plus i strides).
    fn prepare_batch(
        &mut self,
        stream: &Arc<CudaStream>,
        set: &CaseFiles,
        slots: usize,
        layout: &[SharedTensor],
    ) -> Result<(), KernelFailure> {
        self.batch.clear();
        self.batch_slots.clear();
        let mapped = map_dual_gemm_tensors(self.input_socket.as_ref(), stream, layout)?;
        // The layout's lengths are one slot's, in layout order; the mapped buffers are in
        // SHARED_KEYS order.
        let strides: Vec<usize> = SHARED_KEYS
            .iter()
            .map(|key| {
                layout
                    .iter()
                    .find(|t| t.key == *key)
                    .map(|t| super::protocol::slot_stride(t.len))
                    .ok_or_else(|| KernelFailure::Crashed(format!("no batch tensor {key}")))
            })
            .collect::<Result<_, _>>()?;
        for slot in 0..slots {
            let at = |i: usize| mapped[i].body_ptr() + (slot * strides[i]) as u64;
            self.batch_slots.push(LaunchBuffers {
                inputs: std::array::from_fn(at),
                plain_scales: std::array::from_fn(|i| at(6 + i)),
                output: at(9),
            });
        }
        self.batch = mapped;
        self.batch_shape = Some(Shape {
            m: set.m,
            n: set.n,
            k: set.k,
            l: set.l,
        });
        Ok(())
    }

    /// Every slot's call in order on `stream` (`library` None: the loop alone), events around
    /// the whole, then a device-wide synchronize.
    fn batch(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
    ) -> Result<TimedCalls, KernelFailure> {
        let arrived = std::time::Instant::now();
        let Some(shape) = self.batch_shape else {
            return Err(KernelFailure::Crashed(
                "a batch before its memory was shared".into(),
            ));
        };
        let ctx = stream.context();
        let (start, end) = event_pair(&ctx)?;
        start.record(stream).map_err(crashed)?;
        if let Some(library) = library {
            for buffers in &self.batch_slots {
                library.call(buffers, shape, stream)?;
            }
        }
        end.record(stream).map_err(crashed)?;
        end.synchronize().map_err(crashed)?;
        let sample = f64::from(start.elapsed_ms(&end).map_err(crashed)?) * 1000.0;
        let after_end = std::time::Instant::now();
        ctx.synchronize().map_err(crashed)?;
        Ok(TimedCalls {
            samples_us: vec![sample],
            wall_us: arrived.elapsed().as_secs_f64() * 1e6,
            after_end_us: vec![after_end.elapsed().as_secs_f64() * 1e6],
            other_threads: Vec::new(),
        })
    }

    /// A lone-call batch ([`Request::TimedBatch`] with `lone`): per slot, the worker's flush
    /// buffer written and the device synchronized, the call alone between CUDA events (one
    /// sample each, the kernel's word), the device synchronized again. The output is already in
    /// the slot (the C ABI writes it there), so neither worker copies one.
    fn lone_batch(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
    ) -> Result<TimedCalls, KernelFailure> {
        let arrived = std::time::Instant::now();
        let Some(shape) = self.batch_shape else {
            return Err(KernelFailure::Crashed(
                "a batch before its memory was shared".into(),
            ));
        };
        let ctx = stream.context().clone();
        if self.lone_flush.is_none() {
            let l2 = ctx
                .attribute(
                    cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE,
                )
                .map_err(crashed)? as usize;
            self.lone_flush = Some(
                stream
                    .alloc_zeros::<u8>((4 * l2).max(1 << 20))
                    .map_err(crashed)?,
            );
        }
        let flush = self.lone_flush.as_mut().expect("made above");
        let (start, end) = event_pair(&ctx)?;
        let mut samples = Vec::with_capacity(self.batch_slots.len());
        for buffers in &self.batch_slots {
            stream.memset_zeros(flush).map_err(crashed)?;
            ctx.synchronize().map_err(crashed)?;
            start.record(stream).map_err(crashed)?;
            if let Some(library) = library {
                library.call(buffers, shape, stream)?;
            }
            end.record(stream).map_err(crashed)?;
            end.synchronize().map_err(crashed)?;
            samples.push(f64::from(start.elapsed_ms(&end).map_err(crashed)?) * 1000.0);
            ctx.synchronize().map_err(crashed)?;
        }
        Ok(TimedCalls {
            samples_us: samples,
            wall_us: arrived.elapsed().as_secs_f64() * 1e6,
            after_end_us: vec![0.0],
            other_threads: Vec::new(),
        })
    }
}
