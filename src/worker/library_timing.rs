//! The worker's side of timing a C-ABI library ([`super::timing`] drives it): every set
//! of inputs uploaded first, CUDA events around each call after an L2 flush, each timed call's
//! output copied aside right after it, the outputs the parent picks written back.

use super::protocol::{CaseFiles, Reply, Request, TimedCalls};
use super::serve::{lmn_to_mnl, read_case};
use crate::gpu::launch::LaunchBuffers;
use crate::gpu::library::LoadedLibrary;
use crate::kernels::{DualGemmCase, KernelFailure};
use crate::problem::Shape;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DriverError};
use std::sync::Arc;

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
                    crate::compare::diagnosis::POISON.to_bits();
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
    sets: Vec<Uploaded>,
    warmup: usize,
    /// The timed calls' outputs, copied aside right after each call.
    snapshots: Vec<CudaSlice<u16>>,
}

impl LibraryTiming {
    /// Answers one timing request.
    pub fn serve(
        &mut self,
        stream: &Arc<CudaStream>,
        library: &LoadedLibrary,
        request: Request,
    ) -> Reply {
        match request {
            Request::Prepare { sets, warmup } => Reply::Done(self.prepare(stream, &sets, warmup)),
            Request::Warmup => Reply::Done(self.warmup(stream, library)),
            Request::Loop { null } => Reply::Timed(self.run_loop(stream, library, null)),
            Request::Outputs { indices, paths } => {
                Reply::Done(self.outputs(stream, &indices, &paths))
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
        self.snapshots.clear();
        for files in sets {
            let case = read_case(files)?;
            self.sets
                .push(Uploaded::new(stream, case.dual_or_refuse()?)?);
        }
        self.warmup = warmup.min(self.sets.len());
        Ok(())
    }

    fn warmup(
        &mut self,
        stream: &Arc<CudaStream>,
        library: &LoadedLibrary,
    ) -> Result<(), KernelFailure> {
        for set in &mut self.sets[..self.warmup] {
            let buffers = set.buffers(stream);
            library.call(&buffers, set.shape, stream)?;
        }
        stream.synchronize().map_err(crashed)
    }

    fn run_loop(
        &mut self,
        stream: &Arc<CudaStream>,
        library: &LoadedLibrary,
        null: bool,
    ) -> Result<TimedCalls, KernelFailure> {
        let ctx = stream.context();
        let l2 = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .map_err(crashed)? as usize;
        let mut flush: CudaSlice<u8> = stream.alloc_zeros(4 * l2).map_err(crashed)?;
        let start = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(crashed)?;
        let end = ctx
            .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(crashed)?;
        let wall = std::time::Instant::now();
        let mut samples_us = Vec::new();
        let mut after_end_us = Vec::new();
        let mut snapshots = Vec::new();
        for set in &mut self.sets[self.warmup..] {
            stream.memset_zeros(&mut flush).map_err(crashed)?;
            let buffers = set.buffers(stream);
            start.record(stream).map_err(crashed)?;
            if !null {
                library.call(&buffers, set.shape, stream)?;
            }
            end.record(stream).map_err(crashed)?;
            end.synchronize().map_err(crashed)?;
            samples_us.push(f64::from(start.elapsed_ms(&end).map_err(crashed)?) * 1000.0);
            snapshots.push(stream.clone_dtod(&set.output).map_err(crashed)?);
            let after_end = std::time::Instant::now();
            ctx.synchronize().map_err(crashed)?;
            after_end_us.push(after_end.elapsed().as_secs_f64() * 1e6);
        }
        stream.context().synchronize().map_err(crashed)?;
        if !null {
            self.snapshots = snapshots;
        }
        Ok(TimedCalls {
            samples_us,
            wall_us: wall.elapsed().as_secs_f64() * 1e6,
            after_end_us,
        })
    }

    fn outputs(
        &self,
        stream: &Arc<CudaStream>,
        indices: &[usize],
        paths: &[std::path::PathBuf],
    ) -> Result<(), KernelFailure> {
        for (&i, path) in indices.iter().zip(paths) {
            let (Some(snapshot), Some(set)) =
                (self.snapshots.get(i), self.sets.get(self.warmup + i))
            else {
                return Err(KernelFailure::Crashed(format!("no timed call {i}")));
            };
            let lmn = stream.clone_dtoh(snapshot).map_err(crashed)?;
            let bytes: Vec<u8> = lmn_to_mnl(&lmn, set.shape)
                .iter()
                .flat_map(|bits| bits.to_le_bytes())
                .collect();
            std::fs::write(path, bytes).map_err(|err| KernelFailure::Crashed(err.to_string()))?;
        }
        Ok(())
    }
}
