//! Timed inputs that reach the worker without a load (the parent's side; the Python worker maps
//! them in `submission_worker.py`).
//!
//! Why: the untimed warm call must run before a timed call's inputs exist in the worker (else
//! the kernel's code could compute the answer ahead), so whatever the worker does to get those
//! inputs lies between the warm call and the timed call, and a timed call that follows a gap
//! of milliseconds is measurably slower than one that follows its warm call directly (5-10% for
//! the torch example on the H100: results/sandbox/h100-medians/). Reading files and
//! mapping fresh device memory took that long.
//!
//! How: before the warm-up the parent creates, in its own CUDA context, one fenced buffer per
//! tensor of the case's data tuple ([`crate::gpu::fenced`]: the body ends at unmapped memory),
//! exportable as a file descriptor, and sends the descriptors once over the worker's input
//! socket; the worker maps them once. The parent also generates the timed calls' inputs and
//! uploads them into device memory of its own context, which no other process can address.
//! Just before each timed call the parent copies that call's inputs (and the poisoned output)
//! device to device into the shared buffers and only then sends the call request; the worker
//! builds the data tuple on the buffers it already maps and calls the kernel. No code of the
//! kernel's runs between the copy and the timed call except what was already running (the
//! parent's clock around each request bounds that), and the gap after the warm call is a
//! request's round trip.

use super::protocol::SharedTensor;
use crate::gpu::check;
use crate::gpu::fenced::FencedBuffer;
use crate::gpu::GpuError;
use crate::kernels::interface::ABI_INPUT_KEYS;
use crate::kernels::KernelCase;
use cudarc::driver::{sys, CudaSlice, CudaStream, DevicePtr};
use nvfp4_model::problem::ProblemKind;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// The descriptor number a worker's input socket has in the worker.
pub const INPUT_SOCKET_FD: RawFd = 3;
// The sandbox keeps the descriptors below its first foreign one open and closes the rest.
const _: () = assert!(INPUT_SOCKET_FD + 1 == crate::sandbox::dev::FIRST_FOREIGN_FD);

/// Rows GPU MODE's GEMV pads b (and its plain scales) to.
const GEMV_PADDED_ROWS: usize = 128;

/// The bytes of every device tensor of `case`'s data tuple, as the Python worker's case
/// builder lays them out and keys them: per operand X, `X` (packed FP4), `sfX` (plain scales)
/// and `sfX_permuted` (blocked scales), the GEMV's b and its plain scales padded to 128 rows
/// with the case's padding byte; then the output `c`, poisoned. None for the grouped GEMM,
/// whose plain scales are host tensors in GPU MODE's data tuple.
pub fn device_tensors(case: &KernelCase) -> Option<Vec<(String, Vec<u8>)>> {
    let problem = case.problem();
    if problem == ProblemKind::GroupGemm {
        return None;
    }
    let mut tensors = Vec::new();
    for ((name, operand), blocked) in case.inputs.operands().into_iter().zip(&case.blocked) {
        let padded_rows = (problem == ProblemKind::Gemv && name == "b").then_some(GEMV_PADDED_ROWS);
        let pad = |bytes: &[u8], per_row: usize| match padded_rows {
            Some(rows) => {
                let batches = operand.data().len() / (operand.rows() * operand.k() / 2);
                let mut out = vec![case.padding_fill; batches * rows * per_row];
                for (b, chunk) in bytes.chunks(operand.rows() * per_row).enumerate() {
                    out[b * rows * per_row..][..chunk.len()].copy_from_slice(chunk);
                }
                out
            }
            None => bytes.to_vec(),
        };
        tensors.push((name.clone(), pad(operand.data(), operand.k() / 2)));
        tensors.push((
            format!("sf{name}"),
            pad(
                operand.scales(),
                operand.k() / nvfp4_model::problem::shape::SCALE_BLOCK,
            ),
        ));
        tensors.push((format!("sf{name}_permuted"), blocked.clone()));
    }
    let poison = nvfp4_model::problem::POISON.to_bits().to_le_bytes();
    tensors.push(("c".into(), poison.repeat(case.inputs.output_len())));
    Some(tensors)
}

/// One exportable fenced buffer per tensor of `tensors` (`buffer_len` of its length: one call's
/// bytes, or a batch's slots), canaries written, on the default stream of the parent's context,
/// and the layout the worker maps them by (`len`: one call's bytes of the tensor).
pub(crate) fn fenced_tensors(
    tensors: &[(String, Vec<u8>)],
    buffer_len: impl Fn(usize) -> usize,
) -> Result<(Arc<CudaStream>, Vec<FencedBuffer>, Vec<SharedTensor>), GpuError> {
    let (ctx, _) = crate::gpu::device::open_device()?;
    let stream = ctx.default_stream();
    let mut buffers = Vec::new();
    let mut layout = Vec::new();
    for (key, bytes) in tensors {
        let buffer = FencedBuffer::canaries(&stream, buffer_len(bytes.len()), true)?;
        layout.push(SharedTensor {
            key: key.clone(),
            len: bytes.len(),
            mapped: buffer.mapped_len(),
            start: buffer.body_offset(),
        });
        buffers.push(buffer);
    }
    stream.synchronize().map_err(|e| e.to_string())?;
    Ok((stream, buffers, layout))
}

/// The tensors of a dual-GEMM call in the parent's shared memory, by their data-tuple keys
/// ([`super::shared_inputs::device_tensors`]), in the C ABI's order: a, b1, b2, the blocked
/// scales, the plain scales, the output.
pub const SHARED_KEYS: [&str; 10] = {
    let mut keys = ["c"; 10];
    let mut i = 0;
    while i < ABI_INPUT_KEYS.len() {
        keys[i] = ABI_INPUT_KEYS[i];
        i += 1;
    }
    keys
};

/// The worker's side: maps the buffers the parent shares for a dual-GEMM call (`layout`, one
/// descriptor each on `socket`, in order) and returns them in [`SHARED_KEYS`] order.
pub fn map_dual_gemm_tensors(
    socket: Option<&UnixStream>,
    stream: &Arc<CudaStream>,
    layout: &[SharedTensor],
) -> Result<Vec<FencedBuffer>, crate::kernels::KernelFailure> {
    use crate::kernels::KernelFailure;
    let socket = socket.ok_or_else(|| {
        KernelFailure::Crashed("shared inputs, but this worker has no input socket".into())
    })?;
    let fds = receive_fds(socket, layout.len())
        .map_err(|err| KernelFailure::Crashed(format!("receiving the shared memory: {err}")))?;
    let mut mapped: Vec<(String, FencedBuffer)> = Vec::new();
    for (tensor, fd) in layout.iter().zip(fds) {
        let buffer = FencedBuffer::import(stream, fd, tensor.mapped, tensor.start, tensor.len)
            .map_err(|err| {
                KernelFailure::Crashed(format!("mapping shared tensor {}: {err}", tensor.key))
            })?;
        mapped.push((tensor.key.clone(), buffer));
    }
    SHARED_KEYS
        .iter()
        .map(|key| {
            let i = mapped.iter().position(|(k, _)| k == key).ok_or_else(|| {
                KernelFailure::Crashed(format!("the shared memory holds no tensor {key}"))
            })?;
            Ok(mapped.swap_remove(i).1)
        })
        .collect()
}

/// One case's tensors in the parent's own device memory, ready to be copied into the shared
/// buffers.
pub struct StagedCase {
    bodies: Vec<CudaSlice<u8>>,
}

/// The shared buffers of one timing loop, in the parent's CUDA context.
pub struct SharedInputs {
    stream: Arc<CudaStream>,
    buffers: Vec<FencedBuffer>,
    tensors: Vec<SharedTensor>,
}

impl SharedInputs {
    /// Exportable fenced buffers for cases shaped like `case`, canaries written.
    pub fn new(case: &KernelCase) -> Result<Self, GpuError> {
        let tensors = device_tensors(case).ok_or(
            "the grouped GEMM's data tuple holds host tensors: its inputs are sent as files",
        )?;
        let (stream, buffers, layout) = fenced_tensors(&tensors, |len| len)?;
        Ok(SharedInputs {
            stream,
            buffers,
            tensors: layout,
        })
    }

    pub fn layout(&self) -> Vec<SharedTensor> {
        self.tensors.clone()
    }

    /// The bytes one staged case takes in device memory.
    pub fn case_bytes(&self) -> usize {
        self.tensors.iter().map(|t| t.len).sum()
    }

    /// How many cases can be staged at once: a quarter of the device memory free now.
    pub fn staging_capacity(&self) -> usize {
        let free = cudarc::driver::result::mem_get_info()
            .map(|(free, _)| free)
            .unwrap_or(0);
        (free / 4 / self.case_bytes().max(1)).max(1)
    }

    /// Sends a descriptor of every buffer's memory on `socket`, in layout order.
    pub fn send_to(&self, socket: &UnixStream) -> Result<(), GpuError> {
        send_buffers(socket, &self.buffers)
    }

    /// Uploads `case`'s tensors into the parent's own device memory.
    pub fn stage(&self, case: &KernelCase) -> Result<StagedCase, GpuError> {
        let tensors = device_tensors(case).ok_or("a grouped GEMM case")?;
        if tensors.len() != self.tensors.len()
            || tensors
                .iter()
                .zip(&self.tensors)
                .any(|((key, bytes), t)| *key != t.key || bytes.len() != t.len)
        {
            return Err("a timed case is not shaped like the first".into());
        }
        let bodies = tensors
            .iter()
            .map(|(_, bytes)| self.stream.clone_htod(bytes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        self.stream.synchronize().map_err(|e| e.to_string())?;
        Ok(StagedCase { bodies })
    }

    /// Copies a staged case into the shared buffers and waits until it is there.
    pub fn deliver(&self, staged: &StagedCase) -> Result<(), GpuError> {
        for (body, buffer) in staged.bodies.iter().zip(&self.buffers) {
            let (source, _guard) = body.device_ptr(&self.stream);
            // SAFETY: both ranges are live device memory of `body_len` bytes in this context.
            check("cuMemcpyDtoDAsync", unsafe {
                sys::cuMemcpyDtoDAsync_v2(
                    buffer.body_ptr(),
                    source,
                    buffer.body_len(),
                    self.stream.cu_stream(),
                )
            })?;
        }
        self.stream.synchronize().map_err(GpuError::from)
    }
}

/// One timed call's output, copied out of the shared output buffer by the parent right after
/// the call's reply: into the parent's own device memory while it fits, else to the host.
pub enum KeptOutput {
    Device(CudaSlice<u8>),
    Host(Vec<u8>),
}

impl SharedInputs {
    /// The shared output buffer (the data tuple's last tensor, `c`).
    fn output_buffer(&self) -> Result<&FencedBuffer, GpuError> {
        match (self.tensors.last(), self.buffers.last()) {
            (Some(t), Some(buffer)) if t.key == "c" => Ok(buffer),
            _ => Err("the shared tensors end with no output buffer".into()),
        }
    }

    /// Copies the output buffer's body out, in the parent's own context, before anything else
    /// can run: the worker never serves an output from its own memory. `on_device`: keep the
    /// copy in device memory (no transfer to the host between calls).
    pub fn copy_output(&self, on_device: bool) -> Result<KeptOutput, GpuError> {
        let c = self.output_buffer()?;
        if !on_device {
            return c.download_body(&self.stream).map(KeptOutput::Host);
        }
        let kept = self
            .stream
            .alloc_zeros::<u8>(c.body_len())
            .map_err(|e| e.to_string())?;
        let (target, guard) = kept.device_ptr(&self.stream);
        // SAFETY: both ranges are live device memory of `body_len` bytes in this context.
        check("cuMemcpyDtoDAsync", unsafe {
            sys::cuMemcpyDtoDAsync_v2(target, c.body_ptr(), c.body_len(), self.stream.cu_stream())
        })?;
        drop(guard);
        self.stream.synchronize().map_err(|e| e.to_string())?;
        Ok(KeptOutput::Device(kept))
    }

    /// How many outputs fit in a quarter of the device memory free now.
    pub fn output_capacity(&self) -> usize {
        let len = self
            .output_buffer()
            .map_or(1, FencedBuffer::body_len)
            .max(1);
        let free = cudarc::driver::result::mem_get_info()
            .map(|(free, _)| free)
            .unwrap_or(0);
        free / 4 / len
    }

    /// A kept output's bytes on the host.
    pub fn download(&self, kept: KeptOutput) -> Result<Vec<u8>, GpuError> {
        match kept {
            KeptOutput::Host(bytes) => Ok(bytes),
            KeptOutput::Device(slice) => self.stream.clone_dtoh(&slice).map_err(GpuError::from),
        }
    }
}

/// A timing loop's timed calls on shared inputs: the buffers, a warm-up set staged for the
/// calls without the kernel, and the timed calls' inputs staged ahead in batches that fit the
/// device memory (a batch staged mid-loop lies between one warm call and its timed call).
pub struct SharedCalls {
    pub inputs: SharedInputs,
    /// The call request's description of every case (they are all shaped alike).
    pub described: super::protocol::CaseFiles,
    warm: StagedCase,
    staged: std::collections::VecDeque<(usize, StagedCase)>,
    timed: usize,
    capacity: usize,
}

impl SharedCalls {
    /// Buffers shaped like `warmup` (the first warm-up set), and the first batch of the `timed`
    /// calls' inputs (`make_case(i)` for call i) staged.
    pub fn new(
        warmup: &KernelCase,
        timed: usize,
        make_case: &(impl Fn(usize) -> KernelCase + Sync),
        dir: &std::path::Path,
    ) -> Result<Self, GpuError> {
        let inputs = SharedInputs::new(warmup)?;
        let warm = inputs.stage(warmup)?;
        let capacity = inputs.staging_capacity();
        let mut calls = SharedCalls {
            inputs,
            described: super::protocol::CaseFiles::describe(warmup, dir),
            warm,
            staged: Default::default(),
            timed,
            capacity,
        };
        calls.stage_from(0, make_case)?;
        Ok(calls)
    }

    /// Generates (on every core) and stages calls `first..` up to the capacity.
    fn stage_from(
        &mut self,
        first: usize,
        make_case: &(impl Fn(usize) -> KernelCase + Sync),
    ) -> Result<(), GpuError> {
        use rayon::prelude::*;
        let end = self.timed.min(first + self.capacity);
        let cases: Vec<KernelCase> = (first..end).into_par_iter().map(make_case).collect();
        for (i, case) in (first..end).zip(&cases) {
            self.staged.push_back((i, self.inputs.stage(case)?));
        }
        Ok(())
    }

    /// Puts the warm-up set into the shared buffers (a call without the kernel).
    pub fn deliver_warm(&self) -> Result<(), GpuError> {
        self.inputs.deliver(&self.warm)
    }

    /// Puts timed call `i`'s inputs into the shared buffers; calls come in order.
    pub fn deliver(
        &mut self,
        i: usize,
        make_case: &(impl Fn(usize) -> KernelCase + Sync),
    ) -> Result<(), GpuError> {
        if self.staged.is_empty() {
            self.stage_from(i, make_case)?;
        }
        match self.staged.pop_front() {
            Some((staged_call, staged)) if staged_call == i => self.inputs.deliver(&staged),
            _ => Err(GpuError(format!("timed call {i}'s inputs were not staged"))),
        }
    }
}

/// Sends `fds` on `socket` as SCM_RIGHTS messages (at most 200 a message, under the kernel's
/// limit of 253), each with one byte of payload. Written on libc: std's ancillary-data API is
/// not stable.
pub fn send_fds(socket: &UnixStream, fds: &[RawFd]) -> std::io::Result<()> {
    for chunk in fds.chunks(200) {
        let payload = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        };
        let data_len = std::mem::size_of_val(chunk) as u32;
        // SAFETY: CMSG_SPACE is arithmetic.
        let space = unsafe { libc::CMSG_SPACE(data_len) } as usize;
        // u64 words: the control buffer must be aligned for a cmsghdr.
        let mut control = vec![0u64; space.div_ceil(8)];
        // SAFETY: zeroed is a valid msghdr; every pointer set below outlives the sendmsg.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the control buffer holds CMSG_SPACE(data_len) bytes, room for one header and
        // `chunk`.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&msg);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(data_len) as _;
            std::ptr::copy_nonoverlapping(
                chunk.as_ptr(),
                libc::CMSG_DATA(header).cast::<RawFd>(),
                chunk.len(),
            );
            if libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Receives `count` descriptors sent by [`send_fds`] (the worker's side; the Python worker
/// uses socket.recv_fds). Fails if the socket closes first or a message's descriptors did not
/// all fit the control buffer.
pub fn receive_fds(socket: &UnixStream, count: usize) -> std::io::Result<Vec<OwnedFd>> {
    let mut fds = Vec::with_capacity(count);
    while fds.len() < count {
        let mut payload = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        // Room for the 200 descriptors send_fds puts in one message, and more.
        let mut control = vec![0u64; 256];
        // SAFETY: zeroed is a valid msghdr; every pointer set below outlives the recvmsg.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = (control.len() * 8) as _;
        // SAFETY: msg describes live buffers of the lengths it states.
        let received =
            unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if received < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if received == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!(
                    "the socket closed after {} of {count} descriptors",
                    fds.len()
                ),
            ));
        }
        // SAFETY: the CMSG macros walk the control buffer recvmsg filled; each SCM_RIGHTS
        // header's data holds the descriptors it counts, new and ours.
        unsafe {
            let mut header = libc::CMSG_FIRSTHDR(&msg);
            while !header.is_null() {
                if (*header).cmsg_level == libc::SOL_SOCKET
                    && (*header).cmsg_type == libc::SCM_RIGHTS
                {
                    let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                    let data = libc::CMSG_DATA(header).cast::<RawFd>();
                    for i in 0..bytes / std::mem::size_of::<RawFd>() {
                        fds.push(std::os::fd::FromRawFd::from_raw_fd(
                            data.add(i).read_unaligned(),
                        ));
                    }
                }
                header = libc::CMSG_NXTHDR(&msg, header);
            }
        }
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(std::io::Error::other("descriptors were cut off in transit"));
        }
    }
    if fds.len() > count {
        return Err(std::io::Error::other(format!(
            "{} descriptors arrived where {count} were sent",
            fds.len()
        )));
    }
    Ok(fds)
}

/// Sends a descriptor of each of `buffers`' memory on `socket`, in order (the descriptors are
/// closed here once sent: the worker holds its own).
pub(crate) fn send_buffers(socket: &UnixStream, buffers: &[FencedBuffer]) -> Result<(), GpuError> {
    let fds: Vec<OwnedFd> = buffers
        .iter()
        .map(FencedBuffer::export_fd)
        .collect::<Result<_, _>>()?;
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    send_fds(socket, &raw).map_err(|err| GpuError(format!("sending the shared memory: {err}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvfp4_model::problem::{GemmInputs, ProblemInputs, Shape};
    use std::io::{Read, Write};

    #[test]
    fn descriptors_cross_the_socket_and_still_name_what_they_named() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let pipes: Vec<(std::fs::File, std::fs::File)> = (0..3)
            .map(|_| {
                let (r, w) = std::io::pipe().unwrap();
                (
                    std::fs::File::from(OwnedFd::from(r)),
                    std::fs::File::from(OwnedFd::from(w)),
                )
            })
            .collect();
        let writers: Vec<RawFd> = pipes.iter().map(|(_, w)| w.as_raw_fd()).collect();
        send_fds(&ours, &writers).unwrap();
        let received = receive_fds(&theirs, 3).unwrap();
        assert_eq!(received.len(), 3);
        for (i, (fd, (reader, _))) in received.into_iter().zip(&pipes).enumerate() {
            assert!(!writers.contains(&fd.as_raw_fd()), "a new descriptor");
            std::fs::File::from(fd).write_all(&[i as u8 + 7]).unwrap();
            let mut byte = [0u8];
            (&*reader).read_exact(&mut byte).unwrap();
            assert_eq!(byte[0], i as u8 + 7);
        }
    }

    #[test]
    fn descriptors_sent_in_several_messages_all_arrive_and_a_short_send_is_an_error() {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let file = std::fs::File::open("/dev/null").unwrap();
        // More than one message's 200.
        let many = vec![file.as_raw_fd(); 230];
        send_fds(&ours, &many).unwrap();
        let received = receive_fds(&theirs, 230).unwrap();
        assert_eq!(received.len(), 230);
        assert!(received.iter().all(|fd| fd.as_raw_fd() != file.as_raw_fd()));
        drop(received);
        send_fds(&ours, &many[..2]).unwrap();
        drop(ours);
        let err = receive_fds(&theirs, 3).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(err.to_string().contains("after 2 of 3"), "{err}");
    }

    fn case(problem: ProblemKind, shape: Shape) -> KernelCase {
        let inputs = nvfp4_model::problem::generate::generate_gemm(
            shape,
            nvfp4_model::problem::generate::Distribution::Gpumode,
            5,
        );
        let inputs = match problem {
            ProblemKind::Gemv => ProblemInputs::Gemv(inputs),
            _ => ProblemInputs::Gemm(inputs),
        };
        KernelCase::new(inputs, 0x3C)
    }

    #[test]
    fn the_gemv_b_is_padded_to_128_rows_as_the_worker_pads_it() {
        let shape = Shape::new(64, 1, 32, 2).unwrap();
        let case = case(ProblemKind::Gemv, shape);
        let tensors = device_tensors(&case).unwrap();
        let keys: Vec<&str> = tensors.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["a", "sfa", "sfa_permuted", "b", "sfb", "sfb_permuted", "c"]
        );
        let ProblemInputs::Gemv(GemmInputs { b, .. }) = &case.inputs else {
            unreachable!()
        };
        let (_, data) = &tensors[3];
        assert_eq!(data.len(), 2 * 128 * 16);
        // Batch 1 starts at row 128: its first row is b's second batch; the rows after b's
        // one row hold the padding byte.
        assert_eq!(&data[..16], &b.data()[..16]);
        assert_eq!(&data[128 * 16..][..16], &b.data()[16..32]);
        assert!(data[16..128 * 16].iter().all(|&x| x == 0x3C));
        let (_, scales) = &tensors[4];
        assert_eq!(scales.len(), 2 * 128 * 2);
        assert_eq!(&scales[128 * 2..][..2], &b.scales()[2..4]);
        let (_, c) = &tensors[6];
        assert_eq!(c.len(), 2 * 64 * 2);
        assert_eq!(
            u16::from_le_bytes([c[0], c[1]]),
            nvfp4_model::problem::POISON.to_bits()
        );
    }
}
