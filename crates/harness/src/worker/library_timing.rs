//! The worker's side of timing a C-ABI library ([`super::timing`] drives it): the warm-up sets
//! uploaded and run, an untimed warm call before each timed one in a request of its own, then
//! each call's inputs uploaded with its own request, CUDA events around the call after an L2
//! flush, the output written where the request says (the parent reads it right after the
//! reply). With no library ([`super::serve::WorkerTarget::Baseline`]) it serves the requests
//! without the kernel that set the parent's clock.

use super::protocol::{CaseFiles, Reply, Request, TimedCalls};
use crate::gpu::launch::LaunchBuffers;
use crate::gpu::library::{lmn_to_mnl, LoadedLibrary};
use crate::kernels::{DualGemmCase, KernelFailure};
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError};
use nvfp4_model::problem::Shape;
use std::sync::Arc;

const NOT_SHARED: &str = "shared device inputs were sent to a worker that does not map them";

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
        let inputs = case.inputs;
        let s = inputs.shape;
        let bodies: [&[u8]; 9] = [
            inputs.a.data(),
            inputs.b1.data(),
            inputs.b2.data(),
            case.sfa_blocked,
            case.sfb1_blocked,
            case.sfb2_blocked,
            inputs.a.scales(),
            inputs.b1.scales(),
            inputs.b2.scales(),
        ];
        Ok(Uploaded {
            shape: s,
            inputs: bodies
                .iter()
                .map(|b| stream.clone_htod(*b))
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

/// What a timing has prepared so far.
#[derive(Default)]
pub struct LibraryTiming {
    /// The warm-up sets.
    sets: Vec<Uploaded>,
    /// The L2 flush buffer, made once.
    flush: Option<CudaSlice<u8>>,
    /// Calls served so far (which warm-up set warms the next).
    calls: usize,
}

impl LibraryTiming {
    /// Answers one timing request.
    pub fn serve(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
        request: Request,
    ) -> Reply {
        match request {
            // This worker does not offer shared inputs (its Ready says so): the parent sends
            // every call's inputs as files.
            Request::Prepare { shared, .. } if !shared.is_empty() => {
                Reply::Done(Err(KernelFailure::Crashed(NOT_SHARED.into())))
            }
            Request::Call { shared: true, .. } => {
                Reply::Timed(Err(KernelFailure::Crashed(NOT_SHARED.into())))
            }
            Request::Prepare { sets, warmup, .. } => {
                Reply::Done(self.prepare(stream, &sets, warmup))
            }
            Request::Warmup => Reply::Done(self.warmup(stream, library)),
            Request::Warm => Reply::Done(self.warm(stream, library)),
            Request::Call {
                set, null, output, ..
            } => {
                let library = if null { None } else { library };
                Reply::Timed(self.call(stream, library, &set, output.as_deref()))
            }
            Request::Run { .. } => Reply::Done(Err(KernelFailure::Crashed(
                "a case request reached the timing".into(),
            ))),
        }
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

    /// One call between CUDA events (`library` None: the same without a kernel), its output
    /// written to `output`.
    fn call(
        &mut self,
        stream: &Arc<CudaStream>,
        library: Option<&LoadedLibrary>,
        files: &CaseFiles,
        output: Option<&std::path::Path>,
    ) -> Result<TimedCalls, KernelFailure> {
        let ctx = stream.context();
        if self.flush.is_none() {
            let l2 = ctx
                .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
                .map_err(crashed)? as usize;
            self.flush = Some(stream.alloc_zeros(4 * l2).map_err(crashed)?);
        }
        let case = files.read_in_worker()?;
        let mut set = Uploaded::new(stream, case.dual_or_refuse()?)?;
        ctx.synchronize().map_err(crashed)?;
        let start = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(crashed)?;
        let end = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(crashed)?;
        let wall = std::time::Instant::now();
        let flush = self.flush.as_mut().expect("made above");
        stream.memset_zeros(flush).map_err(crashed)?;
        let buffers = set.buffers(stream);
        start.record(stream).map_err(crashed)?;
        if let Some(library) = library {
            library.call(&buffers, set.shape, stream)?;
        }
        end.record(stream).map_err(crashed)?;
        end.synchronize().map_err(crashed)?;
        let sample = f64::from(start.elapsed_ms(&end).map_err(crashed)?) * 1000.0;
        let after_end = std::time::Instant::now();
        ctx.synchronize().map_err(crashed)?;
        let after_end_us = after_end.elapsed().as_secs_f64() * 1e6;
        if let (Some(path), Some(_)) = (output, library) {
            let lmn = stream.clone_dtoh(&set.output).map_err(crashed)?;
            let bytes: Vec<u8> = lmn_to_mnl(&lmn, set.shape)
                .iter()
                .flat_map(|bits| bits.to_le_bytes())
                .collect();
            std::fs::write(path, bytes).map_err(|err| KernelFailure::Crashed(err.to_string()))?;
        }
        Ok(TimedCalls {
            samples_us: vec![sample],
            wall_us: wall.elapsed().as_secs_f64() * 1e6,
            after_end_us: vec![after_end_us],
            other_threads: Vec::new(),
        })
    }
}
