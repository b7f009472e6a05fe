//! Device buffers that end at unmapped memory, so that a kernel reading or writing past the end
//! of a tensor faults in every run, not only under compute-sanitizer.
//!
//! CUDA's virtual memory management reserves a range of addresses and maps physical memory into
//! part of it: one granule (2 MiB on Hopper) before and one after the mapping stay unmapped.
//! The body is placed at the end of the mapping, aligned to [`ALIGNMENT`] as cudaMalloc aligns,
//! so it ends at most `ALIGNMENT - 1` bytes before the unmapped granule; those slack bytes and
//! [`CANARY_BYTES`] before the body hold [`CANARY_BYTE`], checked after the launch.
//! `submission_worker.py` places the Python door's tensors the same way.

use super::{check, GpuError};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// Canary bytes checked before every buffer's body.
pub const CANARY_BYTES: usize = 4096;
pub const CANARY_BYTE: u8 = 0xA5;
/// Where a body starts: cudaMalloc's alignment, so a kernel may assume what it could assume of
/// an ordinary allocation.
pub const ALIGNMENT: usize = 256;

/// One fenced device buffer; freed (unmapped) on drop, which the caller must not do while a
/// launch may still use it.
pub struct FencedBuffer {
    reserved: CUdeviceptr,
    reserved_len: usize,
    mapped: CUdeviceptr,
    mapped_len: usize,
    handle: Option<sys::CUmemGenericAllocationHandle>,
    is_mapped: bool,
    /// Offset of the body in the mapping.
    start: usize,
    len: usize,
}

impl FencedBuffer {
    /// A buffer whose body holds `body`, canaries around it, uploaded on `stream`.
    pub fn upload(stream: &Arc<CudaStream>, body: &[u8]) -> Result<Self, GpuError> {
        let buffer = Self::canaries_around(stream, body.len(), false)?;
        buffer.write_body(stream, body)?;
        stream.synchronize().map_err(|e| e.to_string())?;
        Ok(buffer)
    }

    /// A buffer whose body is `count` copies of the 16-bit `value` (filled on the device: an
    /// output's poison, gigabytes for the largest cases, never made on the host), canaries
    /// around it.
    pub fn filled_u16(
        stream: &Arc<CudaStream>,
        count: usize,
        value: u16,
    ) -> Result<Self, GpuError> {
        let buffer = Self::canaries_around(stream, 2 * count, false)?;
        buffer.fill_body_u16(stream, value)?;
        stream.synchronize().map_err(|e| e.to_string())?;
        Ok(buffer)
    }

    /// Enqueues on `stream` the copy of `bytes` (the body's length) into the body; the caller
    /// synchronizes before `bytes` is dropped.
    pub fn write_body(&self, stream: &Arc<CudaStream>, bytes: &[u8]) -> Result<(), GpuError> {
        if bytes.len() != self.len {
            return Err(GpuError(format!(
                "{} bytes for a body of {}",
                bytes.len(),
                self.len
            )));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the body lies inside the mapping and has `bytes.len()` bytes; the host
        // memory outlives the copy (the caller synchronizes first).
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(
                self.body_ptr(),
                bytes.as_ptr().cast(),
                bytes.len(),
                stream.cu_stream(),
            )
        })
    }

    /// Enqueues on `stream` the fill of the body with the 16-bit `value` (a body of an odd
    /// length keeps its last byte).
    pub fn fill_body_u16(&self, stream: &Arc<CudaStream>, value: u16) -> Result<(), GpuError> {
        let count = self.len / 2;
        if count == 0 {
            return Ok(());
        }
        // The body lies inside the mapping and starts 256-byte aligned.
        super::device_fill::fill_u16(stream, self.body_ptr(), 2 * count, value)
    }

    /// A buffer for a body of `len` bytes holding canary bytes only (the fill enqueued on
    /// `stream`). `exportable`: its memory can be handed to another process as a file
    /// descriptor ([`FencedBuffer::export_fd`]).
    pub fn canaries(
        stream: &Arc<CudaStream>,
        len: usize,
        exportable: bool,
    ) -> Result<Self, GpuError> {
        let buffer = Self::unfilled(stream, len, exportable)?;
        buffer.fill_canaries(stream, 0, buffer.mapped_len)?;
        Ok(buffer)
    }

    /// A buffer for a body of `len` bytes with canary bytes around it and the body left as
    /// the driver gave it: for a caller that writes every byte of the body (an upload, a fill)
    /// before anything else can read it, so that the body's bytes are not copied twice.
    pub fn canaries_around(
        stream: &Arc<CudaStream>,
        len: usize,
        exportable: bool,
    ) -> Result<Self, GpuError> {
        let buffer = Self::unfilled(stream, len, exportable)?;
        buffer.fill_canaries(stream, 0, buffer.start)?;
        buffer.fill_canaries(stream, buffer.start + buffer.len, buffer.mapped_len)?;
        Ok(buffer)
    }

    /// Enqueues on `stream` the canary fill of the mapping's bytes `from..to`.
    fn fill_canaries(
        &self,
        stream: &Arc<CudaStream>,
        from: usize,
        to: usize,
    ) -> Result<(), GpuError> {
        let canary = u16::from_le_bytes([CANARY_BYTE; 2]);
        super::device_fill::fill_u16(stream, self.mapped + from as u64, to - from, canary)
    }

    /// A buffer for a body of `len` bytes, nothing written, not exportable: device memory of
    /// its own (no pool's), for a caller that writes the body before reading it and never
    /// hands the buffer to a kernel (a device copy: `super::pristine`).
    pub fn uninitialized(stream: &Arc<CudaStream>, len: usize) -> Result<Self, GpuError> {
        Self::unfilled(stream, len, false)
    }

    /// A mapped buffer for a body of `len` bytes, nothing written.
    fn unfilled(stream: &Arc<CudaStream>, len: usize, exportable: bool) -> Result<Self, GpuError> {
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| e.to_string())?;
        let prop = allocation_prop(stream, exportable);
        let granularity = granularity(&prop)?;
        let padded = len.div_ceil(ALIGNMENT) * ALIGNMENT;
        let mapped_len = (CANARY_BYTES + padded).div_ceil(granularity) * granularity;
        let mut handle = 0;
        // SAFETY: the out-pointer is valid; the size is a multiple of the granularity.
        check("cuMemCreate", unsafe {
            sys::cuMemCreate(&mut handle, mapped_len, &prop, 0)
        })?;
        Self::map(
            &prop,
            granularity,
            handle,
            mapped_len,
            mapped_len - padded,
            len,
        )
    }

    /// The buffer another process made and exported as `fd` ([`FencedBuffer::export_fd`]),
    /// mapped here between unmapped granules as it is there: `mapped_len` bytes, the body of
    /// `len` bytes at `body_offset`. Nothing is written.
    pub fn import(
        stream: &Arc<CudaStream>,
        fd: std::os::fd::OwnedFd,
        mapped_len: usize,
        body_offset: usize,
        len: usize,
    ) -> Result<Self, GpuError> {
        use std::os::fd::AsRawFd;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| e.to_string())?;
        let prop = allocation_prop(stream, false);
        let granularity = granularity(&prop)?;
        if mapped_len == 0
            || mapped_len % granularity != 0
            || body_offset
                .checked_add(len)
                .is_none_or(|end| end > mapped_len)
        {
            return Err(GpuError(format!(
                "a shared buffer of {mapped_len} bytes cannot hold a body of {len} bytes at {body_offset}"
            )));
        }
        let mut handle = 0;
        // SAFETY: the out-pointer is valid; the driver reads the descriptor (a POSIX file
        // descriptor handle is passed as its value), which `fd` keeps open until after the call.
        check("cuMemImportFromShareableHandle", unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                fd.as_raw_fd() as usize as *mut std::ffi::c_void,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        })?;
        Self::map(&prop, granularity, handle, mapped_len, body_offset, len)
    }

    /// Maps allocation `handle` (released with the buffer) into a reserved range with one
    /// unmapped granule before it and one after it, readable and writable by this device.
    fn map(
        prop: &sys::CUmemAllocationProp,
        granularity: usize,
        handle: sys::CUmemGenericAllocationHandle,
        mapped_len: usize,
        start: usize,
        len: usize,
    ) -> Result<Self, GpuError> {
        let reserved_len = mapped_len + 2 * granularity;
        // From here on, drop undoes whatever succeeded.
        let mut buffer = FencedBuffer {
            reserved: 0,
            reserved_len,
            mapped: 0,
            mapped_len,
            handle: Some(handle),
            is_mapped: false,
            start,
            len,
        };
        // SAFETY: out-pointers valid for the calls; sizes are multiples of the granularity.
        unsafe {
            check(
                "cuMemAddressReserve",
                sys::cuMemAddressReserve(&mut buffer.reserved, reserved_len, 0, 0, 0),
            )?;
            buffer.mapped = buffer.reserved + granularity as u64;
            check(
                "cuMemMap",
                sys::cuMemMap(buffer.mapped, mapped_len, 0, handle, 0),
            )?;
            buffer.is_mapped = true;
            let mut access: sys::CUmemAccessDesc = std::mem::zeroed();
            access.location = prop.location;
            access.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            check(
                "cuMemSetAccess",
                sys::cuMemSetAccess(buffer.mapped, mapped_len, &access, 1),
            )?;
        }
        Ok(buffer)
    }

    /// A new file descriptor for the buffer's memory (it must have been made `exportable`):
    /// another process imports it with `cuMemImportFromShareableHandle` and maps it
    /// ([`FencedBuffer::mapped_len`] bytes, the body at [`FencedBuffer::body_offset`]).
    pub fn export_fd(&self) -> Result<std::os::fd::OwnedFd, GpuError> {
        let handle = self.handle.ok_or("the buffer has no memory")?;
        let mut fd: std::ffi::c_int = -1;
        // SAFETY: the out-pointer is valid; on success the descriptor is new and ours.
        check("cuMemExportToShareableHandle", unsafe {
            sys::cuMemExportToShareableHandle(
                (&mut fd as *mut std::ffi::c_int).cast(),
                handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        })?;
        // SAFETY: the driver just opened this descriptor for us.
        Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
    }

    pub fn mapped_len(&self) -> usize {
        self.mapped_len
    }

    /// Where the body starts in the mapping.
    pub fn body_offset(&self) -> usize {
        self.start
    }

    pub fn body_ptr(&self) -> CUdeviceptr {
        self.mapped + self.start as u64
    }

    pub fn body_len(&self) -> usize {
        self.len
    }

    /// The canary bytes checked before the body.
    pub fn lead(&self) -> usize {
        CANARY_BYTES.min(self.start)
    }

    /// Copies the mapping's bytes from offset `from` into `bytes` and waits for them.
    fn read_into(
        &self,
        stream: &Arc<CudaStream>,
        from: usize,
        bytes: &mut [u8],
    ) -> Result<(), GpuError> {
        if from + bytes.len() > self.mapped_len {
            return Err(GpuError(format!(
                "{} bytes at {from} of a mapping of {}",
                bytes.len(),
                self.mapped_len
            )));
        }
        if bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: the range lies inside the mapping (checked above); the host buffer has its
        // length and outlives the synchronize below.
        check("cuMemcpyDtoHAsync", unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                bytes.as_mut_ptr().cast(),
                self.mapped + from as u64,
                bytes.len(),
                stream.cu_stream(),
            )
        })?;
        stream.synchronize().map_err(GpuError::from)
    }

    /// The checked window: `lead()` canary bytes, the body, and the slack up to the unmapped
    /// granule.
    pub fn download_window(&self, stream: &Arc<CudaStream>) -> Result<Vec<u8>, GpuError> {
        let from = self.start - self.lead();
        let mut bytes = vec![0u8; self.mapped_len - from];
        self.read_into(stream, from, &mut bytes)?;
        Ok(bytes)
    }

    /// The body's bytes.
    pub fn download_body(&self, stream: &Arc<CudaStream>) -> Result<Vec<u8>, GpuError> {
        let mut bytes = vec![0u8; self.len];
        self.download_body_into(stream, &mut bytes)?;
        Ok(bytes)
    }

    /// The body's bytes, into `bytes` (the body's length: no copy of gigabytes in between).
    pub fn download_body_into(
        &self,
        stream: &Arc<CudaStream>,
        bytes: &mut [u8],
    ) -> Result<(), GpuError> {
        if bytes.len() != self.len {
            return Err(GpuError(format!(
                "a body of {} bytes into {}",
                self.len,
                bytes.len()
            )));
        }
        self.read_into(stream, self.start, bytes)
    }

    /// Whether the body holds `bytes` (the body's length), read back in chunks into one small
    /// buffer: no second copy of a gigabyte output on the host.
    pub fn body_equals(&self, stream: &Arc<CudaStream>, bytes: &[u8]) -> Result<bool, GpuError> {
        const CHUNK: usize = 64 << 20;
        if bytes.len() != self.len {
            return Ok(false);
        }
        let mut chunk = vec![0u8; CHUNK.min(self.len)];
        for (i, expected) in bytes.chunks(CHUNK).enumerate() {
            let part = &mut chunk[..expected.len()];
            self.read_into(stream, self.start + i * CHUNK, part)?;
            if part != expected {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Where the canaries around the body were overwritten, in words; None if intact.
    /// Downloads the canary bytes alone (the checked lead and the slack after the body), not
    /// the body.
    pub fn canaries_overwritten(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<String>, GpuError> {
        let lead = self.lead();
        let tail = self.mapped_len - self.start - self.len;
        let mut before = vec![0u8; lead];
        let mut after = vec![0u8; tail];
        self.read_into(stream, self.start - lead, &mut before)?;
        self.read_into(stream, self.start + self.len, &mut after)?;
        Ok(overwritten_canary(&before, &after))
    }

    /// The window as uploaded: canaries, `body`, canaries.
    pub fn expected_window(&self, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![CANARY_BYTE; self.mapped_len - (self.start - self.lead())];
        bytes[self.lead()..self.lead() + body.len()].copy_from_slice(body);
        bytes
    }
}

/// Where canary bytes `before` a body (its last byte next to the body) or `after` it are not
/// [`CANARY_BYTE`], in words.
pub fn overwritten_canary(before: &[u8], after: &[u8]) -> Option<String> {
    if let Some(i) = before.iter().position(|&b| b != CANARY_BYTE) {
        return Some(format!("{} bytes before the body", before.len() - i));
    }
    after
        .iter()
        .position(|&b| b != CANARY_BYTE)
        .map(|i| format!("byte {i} past the end of the body"))
}

/// Pinned device memory on `stream`'s device, exportable as a file descriptor or not.
fn allocation_prop(stream: &Arc<CudaStream>, exportable: bool) -> sys::CUmemAllocationProp {
    // SAFETY: zeroed is a valid bit pattern for this plain C struct.
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = stream.context().cu_device();
    if exportable {
        prop.requestedHandleTypes =
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    }
    prop
}

/// The mapping granule of such memory (2 MiB on Hopper).
fn granularity(prop: &sys::CUmemAllocationProp) -> Result<usize, GpuError> {
    let mut granularity = 0usize;
    // SAFETY: both pointers are valid for the call.
    check("cuMemGetAllocationGranularity", unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    })?;
    Ok(granularity)
}

impl Drop for FencedBuffer {
    fn drop(&mut self) {
        // SAFETY: each step undoes one that succeeded; errors (a context a crash made unusable)
        // leave nothing more to free.
        unsafe {
            if self.is_mapped {
                let _ = sys::cuMemUnmap(self.mapped, self.mapped_len);
            }
            if let Some(handle) = self.handle {
                let _ = sys::cuMemRelease(handle);
            }
            if self.reserved != 0 {
                let _ = sys::cuMemAddressFree(self.reserved, self.reserved_len);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overwritten_canary_is_placed_before_or_after_the_body() {
        let intact = [CANARY_BYTE; 8];
        assert_eq!(overwritten_canary(&intact, &intact[..3]), None);
        assert_eq!(overwritten_canary(&[], &[]), None);
        let mut before = intact;
        before[5] = 0;
        assert_eq!(
            overwritten_canary(&before, &intact).as_deref(),
            Some("3 bytes before the body")
        );
        let mut after = intact;
        after[2] = 0;
        assert_eq!(
            overwritten_canary(&intact, &after).as_deref(),
            Some("byte 2 past the end of the body")
        );
    }
}
