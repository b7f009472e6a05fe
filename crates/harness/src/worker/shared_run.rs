//! A campaign's large case run on device memory the parent shares with the worker (the Rust
//! worker of the built-in variants and C-ABI libraries, and a Python submission's worker where it
//! says it can map such memory) instead of files: the parent's side and the Rust worker's; the
//! Python worker's is `run_on_shared_memory` in `submission_worker.py`.
//!
//! Why: a deployment-size case moves hundreds of megabytes of inputs. On files the parent
//! wrote them, the worker read them, uploaded them into fresh buffers and downloaded them again
//! to see that the kernel left them alone; on the H100 that took a 2 x 6376 x 19776 case 0.39 s
//! for a kernel of about a millisecond, and a hundred such cases most of a campaign's budget.
//!
//! How: the parent allocates one fenced buffer per tensor (`crate::gpu::fenced`: canaries
//! around the body, unmapped memory past them), exportable as a file descriptor, uploads the
//! inputs into them, fills the output with poison on the device (`crate::gpu::shared_buffers`:
//! at the run, or before the case's turn on a campaign's input makers, [`fill_ahead`]), sends
//! the descriptors on the worker's input socket and then a [`Request::RunShared`]. The worker
//! maps them, calls the kernel once, waits for its stream, unmaps them and answers. Every
//! buffer is the parent's and fresh for the case: a mapping a worker keeps reaches nothing of a
//! later case.
//!
//! What the parent then reads and checks itself (the worker's code is the kernel's): the
//! output; the canaries around it; every input, body and canaries, against the bytes it
//! uploaded; and the output once more after those checks, which a kernel that left work
//! running on another stream after its call returned is still changing.

use super::parent::{fp16_bytes, Worker};
use super::protocol::{CaseFiles, Reply, Request, SharedTensor};
use super::shared_inputs::{map_dual_gemm_tensors, send_fds, SHARED_KEYS};
use crate::gpu::fenced::FencedBuffer;
use crate::gpu::kept_output::KeptOutput;
use crate::gpu::launch::LaunchBuffers;
use crate::gpu::library::lmn_into_mnl;
use crate::gpu::pristine::Pristine;
use crate::gpu::shared_buffers::SharedBuffers;
use crate::gpu::staging::Staging;
use crate::kernels::{KernelCase, KernelFailure};
use crate::trace::trace;
use cudarc::driver::CudaStream;
use half::f16;
use nvfp4_model::problem::ProblemKind;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A dual-GEMM case whose inputs and output take at least this many bytes runs on shared
/// memory; a smaller one on files (ten exportable allocations cost more than a few small files).
/// The output counts as the inputs do: a case of K = 32 with a 512 MB output, on files, had the
/// worker write the output to a file and the parent read it back (1.1 s of a torch submission's
/// case whose kernel takes milliseconds).
pub const SHARED_RUN_BYTES: usize = 4 << 20;

/// How a worker's kernel stores its output `c`: the harness's `[M][N][L]`, or the C ABI's
/// `[L][M][N]` (GPU MODE's storage).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputOrder {
    Mnl,
    Lmn,
}

/// Whether `case` runs on shared memory: a dual GEMM whose inputs and output take at least
/// [`SHARED_RUN_BYTES`].
pub fn runs_shared(case: &KernelCase) -> bool {
    case.problem() == ProblemKind::DualGemm
        && case.dual().is_some_and(|dual| {
            let inputs: usize = dual.abi_inputs().iter().map(|(_, body)| body.len()).sum();
            inputs + case.inputs.output_len() * std::mem::size_of::<f16>() >= SHARED_RUN_BYTES
        })
}

/// A stream of the parent's and the pinned memory its copies go through
/// (`crate::gpu::staging`; None where it cannot be allocated: the copies are then the driver's
/// from pageable memory). Two for the process: the runs' own, and that of buffers made ahead.
struct CopyLane {
    stream: Arc<CudaStream>,
    staging: Option<Mutex<Staging>>,
}

/// The runs' lane: a non-blocking stream of its own, so that its copies overlap the GPU
/// reference computed beside the kernel's run, and of the highest priority, so that the
/// output's device copy and the comparisons after the worker's answer (kernels on the SMs) do
/// not wait for that reference's kernel to end: a 512 MB output's copy waited 0.1 s for it
/// (results/ahead-buffers/README.md, call 7).
fn run_lane() -> Result<&'static CopyLane, String> {
    static LANE: OnceLock<Result<CopyLane, String>> = OnceLock::new();
    LANE.get_or_init(|| new_lane(true))
        .as_ref()
        .map_err(Clone::clone)
}

/// The lane of buffers made ahead, on the threads that make a campaign's inputs: apart from the
/// runs', so that a run's copies and checks (each waits for its stream) never wait behind an
/// upload for a later case, nor a run's download for its pinned memory.
fn ahead_lane() -> Result<&'static CopyLane, String> {
    static LANE: OnceLock<Result<CopyLane, String>> = OnceLock::new();
    LANE.get_or_init(|| new_lane(false))
        .as_ref()
        .map_err(Clone::clone)
}

/// A lane on a stream of its own, of the highest priority when `urgent`.
fn new_lane(urgent: bool) -> Result<CopyLane, String> {
    let (ctx, _) = crate::gpu::device::open_device().map_err(|err| err.0)?;
    let stream = match urgent {
        true => crate::gpu::device::urgent_stream(&ctx)?,
        false => ctx.new_stream().map_err(|err| err.to_string())?,
    };
    let staging = Staging::new(&ctx).ok().map(Mutex::new);
    Ok(CopyLane { stream, staging })
}

/// Makes `case`'s shared-run buffers now and holds them in the case for its run
/// ([`KernelCase::ready`]), where it runs shared and the bytes held ahead allow
/// (`crate::gpu::shared_buffers::AHEAD_BYTES`); else does nothing (the run makes its own).
pub fn fill_ahead(case: &KernelCase) {
    if !runs_shared(case) {
        return;
    }
    let (Ok(dual), Ok(lane)) = (case.dual_or_refuse(), ahead_lane()) else {
        return;
    };
    let bodies = dual.abi_inputs().map(|(_, body)| body);
    let elements = case.inputs.output_len();
    if let Some(made) =
        SharedBuffers::fill_ahead(&lane.stream, lane.staging.as_ref(), &bodies, elements)
    {
        case.ready.put(made);
    }
}

/// Where a shared run puts the output it reads.
pub enum OutputTarget<'a> {
    /// Read back into the caller's buffer, `[M][N][L]`.
    Host(&'a mut [f16]),
    /// Left on the GPU, as the parent's private copy of it ([`KeptOutput`]); where that copy
    /// cannot be made, read back into the vector (empty when given) as for `Host`.
    Kept(&'a mut Vec<f16>),
}

impl<'a> OutputTarget<'a> {
    /// The same target, borrowed again (for a run on files after a shared run not set up).
    pub fn reborrow(&mut self) -> OutputTarget<'_> {
        match self {
            OutputTarget::Host(output) => OutputTarget::Host(output),
            OutputTarget::Kept(output) => OutputTarget::Kept(output),
        }
    }

    /// The host buffer the output is read into: a kept target's vector made `elements` of
    /// poison first.
    pub fn into_host(self, elements: usize) -> &'a mut [f16] {
        match self {
            OutputTarget::Host(output) => output,
            OutputTarget::Kept(output) => {
                *output = crate::kernels::poisoned_output(elements);
                output.as_mut_slice()
            }
        }
    }
}

/// What a shared run did with the output, once the kernel's run passed the parent's checks.
pub enum SharedRun {
    /// The parent could not set the memory up (no memory left for it, say): the caller runs
    /// the case on files instead.
    NotSetUp,
    /// The output was read back into the target's buffer.
    ReadBack,
    /// The output stayed on the GPU.
    Kept(KeptOutput),
}

/// The parent's side: runs `case` in `worker` on shared memory and reads its output into
/// `target`, or says how the kernel failed.
pub fn run_shared(
    worker: &mut Worker,
    case: &KernelCase,
    order: OutputOrder,
    target: OutputTarget,
    timeout: Duration,
) -> Result<SharedRun, KernelFailure> {
    let dual = case.dual_or_refuse()?;
    let shape = dual.inputs.shape;
    // With one batch the two orders are one: the output is read straight into `output`.
    let order = if shape.l == 1 {
        OutputOrder::Mnl
    } else {
        order
    };
    // In SHARED_KEYS order: the ABI's inputs, then the output `c` (made on the device).
    let bodies = dual.abi_inputs().map(|(_, body)| body);
    let elements = shape.m * shape.n * shape.l;
    let Ok(lane) = run_lane() else {
        return Ok(SharedRun::NotSetUp);
    };
    let stream = &lane.stream;
    let started = Instant::now();
    let made = match case.ready.take() {
        Some(ready) => ready,
        None => match SharedBuffers::fill(stream, lane.staging.as_ref(), &bodies, elements) {
            Ok(made) => made,
            Err(_) => return Ok(SharedRun::NotSetUp),
        },
    };
    let steps = match made.made_ahead() {
        true => format!("made ahead in {:.3} s: {}", made.seconds, made.steps),
        false => made.steps.clone(),
    };
    let pristine_inputs = made.pristine.clone();
    let buffers = &made.buffers;
    let allocated = started.elapsed().as_secs_f64();
    let fds: Vec<OwnedFd> = match buffers.iter().map(FencedBuffer::export_fd).collect() {
        Ok(fds) => fds,
        Err(_) => return Ok(SharedRun::NotSetUp),
    };
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let layout: Vec<SharedTensor> = SHARED_KEYS
        .iter()
        .zip(buffers)
        .map(|(key, buffer)| SharedTensor {
            key: key.to_string(),
            len: buffer.body_len(),
            mapped: buffer.mapped_len(),
            start: buffer.body_offset(),
        })
        .collect();
    send_fds(&worker.input_socket, &raw)
        .map_err(|err| KernelFailure::Crashed(format!("sending the shared memory: {err}")))?;
    drop(fds);
    worker.send(&Request::RunShared {
        set: CaseFiles::describe(case, std::path::Path::new("")),
        shared: layout,
    })?;
    let sent = started.elapsed().as_secs_f64();
    let answered = Instant::now();
    let reply = worker.receive(timeout)?;
    let worker_seconds = answered.elapsed().as_secs_f64();
    match reply {
        Reply::Done(Ok(())) => {}
        Reply::Done(Err(failure)) => return Err(super::parent::quoted_failure(failure)),
        _ => {
            return Err(KernelFailure::Crashed(
                "the worker answered out of turn".into(),
            ))
        }
    }
    // A check that cannot run fails the case.
    let unreadable = |err: crate::gpu::GpuError| {
        KernelFailure::Crashed(format!("reading the shared output: {err}"))
    };
    let c = &buffers[SHARED_KEYS.len() - 1];
    // The output as the worker left it, copied on the device at once where there is room: the
    // bytes read and judged, and what `c` must still hold after the checks below.
    let c_copy = Pristine::of(stream, c).ok();
    // The copy is the parent's alone: the output may stay on the GPU as that copy. Without
    // one, the output is read back.
    let keep = matches!(target, OutputTarget::Kept(_)) && c_copy.is_some();
    let output: &mut [f16] = match target {
        OutputTarget::Kept(output) if keep => output.as_mut_slice(),
        target => target.into_host(elements),
    };
    // The bytes as the kernel left them: straight into `output` where it is stored as the
    // harness stores it (memory the caller has already written, so the copy takes no page
    // faults), else into a buffer of their own.
    let mut lmn = Vec::new();
    if order == OutputOrder::Lmn && !keep {
        lmn = vec![0u8; c.body_len()];
    }
    if !keep {
        let read_into: &mut [u8] = match order {
            OutputOrder::Mnl => fp16_bytes(output),
            OutputOrder::Lmn => &mut lmn,
        };
        let source = match &c_copy {
            Some(copy) => copy.device_ptr(),
            None => c.body_ptr(),
        };
        match &lane.staging {
            Some(staging) => staging
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .download(stream, source, read_into),
            None => match &c_copy {
                Some(copy) => copy.download_into(stream, read_into),
                None => c.download_body_into(stream, read_into),
            },
        }
        .map_err(unreadable)?;
    }
    let downloaded = started.elapsed().as_secs_f64() - sent - worker_seconds;
    let since = |mark: f64| started.elapsed().as_secs_f64() - sent - worker_seconds - mark;
    // Its first wait for the stream: the output's copy on the device ends there.
    let canaries_read = c.canaries_overwritten(stream).map_err(unreadable)?;
    let c_canaries = since(downloaded);
    if let Some(place) = canaries_read {
        return Err(KernelFailure::OutOfBounds(format!(
            "the canary around c was overwritten ({place})"
        )));
    }
    for (i, ((key, body), buffer)) in SHARED_KEYS.iter().zip(bodies).zip(buffers).enumerate() {
        let unchanged = match &pristine_inputs {
            Some(copies) => copies[i].matches(stream, buffer),
            None => buffer.body_equals(stream, body),
        };
        let kind = if !unchanged.map_err(unreadable)? {
            Some("its contents changed")
        } else if buffer
            .canaries_overwritten(stream)
            .map_err(unreadable)?
            .is_some()
        {
            Some("its canary was overwritten")
        } else {
            None
        };
        if let Some(kind) = kind {
            return Err(KernelFailure::ModifiedInputs(format!(
                "input {key}: {kind}"
            )));
        }
    }
    let inputs_checked = since(downloaded + c_canaries);
    let unchanged = match &c_copy {
        Some(copy) => copy.matches(stream, c),
        None => {
            let read: &[u8] = match order {
                OutputOrder::Mnl => fp16_bytes(output),
                OutputOrder::Lmn => &lmn,
            };
            c.body_equals(stream, read)
        }
    };
    if !unchanged.map_err(unreadable)? {
        return Err(KernelFailure::Unordered(
            "c changed after the worker had answered: the kernel's work continued on another \
             stream"
                .into(),
        ));
    }
    let rechecked = since(downloaded + c_canaries + inputs_checked);
    if order == OutputOrder::Lmn && !keep {
        lmn_into_mnl(&lmn, shape, fp16_bytes(output));
    }
    trace(format_args!(
        "shared run {shape}: {:.3} s buffers and inputs ({steps}, {:.3} s the descriptors), \
         {:.3} s the worker's answer, {:.3} s reading and checks ({downloaded:.3} s the \
         output's copy{}, {} MB; {c_canaries:.3} s the output's canaries, {inputs_checked:.3} s \
         the inputs checked, {rechecked:.3} s the output checked again)",
        allocated,
        sent - allocated,
        worker_seconds,
        started.elapsed().as_secs_f64() - sent - worker_seconds,
        if keep {
            ", kept on the device"
        } else {
            " and download"
        },
        (elements * 2) >> 20,
    ));
    match c_copy {
        Some(copy) if keep => {
            // The copy's work has ended before anyone else's stream reads it.
            stream.synchronize().map_err(|err| unreadable(err.into()))?;
            Ok(SharedRun::Kept(KeptOutput::new(
                copy,
                stream.clone(),
                shape,
                order == OutputOrder::Lmn,
            )))
        }
        _ => Ok(SharedRun::ReadBack),
    }
}

/// The worker's side of a [`Request::RunShared`]: maps the parent's buffers (`layout`, the
/// descriptors on `socket`), calls `launch` on them, waits for `stream` and unmaps them before
/// answering.
pub fn serve_shared_run(
    socket: Option<&UnixStream>,
    stream: &Arc<CudaStream>,
    layout: &[SharedTensor],
    launch: impl FnOnce(&LaunchBuffers) -> Result<(), KernelFailure>,
) -> Result<(), KernelFailure> {
    let shared = map_dual_gemm_tensors(socket, stream, layout)?;
    let body = |i: usize| shared[i].body_ptr();
    let buffers = LaunchBuffers {
        inputs: std::array::from_fn(body),
        plain_scales: std::array::from_fn(|i| body(6 + i)),
        output: body(9),
    };
    launch(&buffers)?;
    stream
        .synchronize()
        .map_err(|err| KernelFailure::Crashed(err.to_string()))?;
    drop(shared);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::problem::generate::generate_problem;
    use nvfp4_model::problem::{Distribution, Shape};

    fn dual_case(m: usize, n: usize, k: usize) -> KernelCase {
        let shape = Shape::new(m, n, k, 1).unwrap();
        KernelCase::new(
            generate_problem(ProblemKind::DualGemm, shape, Distribution::Gpumode, 3),
            0,
        )
    }

    /// A case of a short K and a wide output moves its output, not its inputs: it goes on
    /// shared memory all the same.
    #[test]
    fn the_output_counts_toward_a_shared_run() {
        // 2048 x 1024 fp16 outputs are 4 MB; the inputs, 3072 rows of 8 + 1 bytes, are 27 kB.
        let wide = dual_case(2048, 1024, 16);
        assert!(
            wide.dual()
                .unwrap()
                .abi_inputs()
                .iter()
                .map(|(_, b)| b.len())
                .sum::<usize>()
                < 1 << 20
        );
        assert!(runs_shared(&wide));
        // Half of it is below the line: small cases stay on files (and in batches).
        assert!(!runs_shared(&dual_case(1024, 1024, 16)));
        assert!(!runs_shared(&dual_case(64, 48, 128)));
    }
}
