//! A reference kept in the GPU reference's device memory, and what the parent does with it
//! there: judge an output by the model's rule, gather the few elements the CPU model
//! recomputes, or bring the whole of it back.
//!
//! Why: a campaign's range class holds outputs of up to 2^28 elements. Brought back, a
//! reference is three fp16 arrays of that size (1.5 GB), written into fresh host memory and
//! scanned twice more there (the judgement and the coverage's tight distance). On the H200 a
//! 63 x 131072 x 64 x 32 case (K = 64, 2.6 x 10^8 elements) spent 0.47 s in its model that way,
//! about 1.8 ns an element. Judged where it lies, three numbers come back: the failing
//! elements, the first of them, and the worst distance on tight intervals. A failing output
//! still brings the arrays back, so that its verdict lists and maps its failures as before
//! (results/device-judge/README.md).
//!
//! All of it runs on the reference's judge stream, of the highest priority: the reference
//! kernel of the next case, on the reference's own stream, would otherwise run first.

use super::exact_reference::{bind, gpu, DeviceReference, GpuReference, ReferenceDims};
use super::GpuError;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};
use half::f16;
use half::vec::HalfBitsVecExt;
use nvfp4_model::model::Reference;
use rayon::iter::ParallelExtend;

/// The output judge's grid: enough CTAs of 256 threads (eight whole warps, which its maximum's
/// warp reduction needs) to keep every SM's loads in flight.
const JUDGE_GRID: (u32, u32) = (1024, 256);
/// The gather's threads per CTA.
const GATHER_THREADS: u32 = 256;

/// What judging an output on the device found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceJudgement {
    /// Elements the reference does not accept.
    pub failed: u64,
    /// The first of them in the reference's order `[M][N][L]`.
    pub first: Option<u64>,
    /// The largest distance (fp16 positions) of the output from the expected value over the
    /// elements whose interval is at most 2 ulps wide, no NaN among them: the coverage's
    /// figure for a passing output (`worst_tight` in the certify campaign's values_seen.rs).
    pub worst_tight_ulps: u32,
}

impl GpuReference {
    /// The whole reference, brought back to the host.
    pub fn download(&self, reference: &DeviceReference) -> Result<Reference, GpuError> {
        let stream = &self.judge_stream;
        bind(stream)?;
        let len = reference.len();
        let mut staging = self
            .staging
            .as_ref()
            .map(|staging| staging.lock().unwrap_or_else(|p| p.into_inner()));
        let mut download = |slice: &CudaSlice<u16>| -> Result<Vec<f16>, GpuError> {
            // Into memory written first on every core: a copy into fresh pages faults each in
            // on the way, one thread at a time (the 2^30-output case's three arrays are
            // 6 GB).
            let mut bits = Vec::new();
            bits.par_extend(rayon::iter::repeat_n(0u16, len));
            if len == 0 {
                return Ok(bits.reinterpret_into());
            }
            let slice = slice.slice(..len);
            match staging.as_mut() {
                Some(staging) => {
                    let (source, _record) = slice.device_ptr(stream);
                    staging.download(stream, source, u16_bytes(&mut bits))?;
                }
                None => stream
                    .memcpy_dtoh(&slice, &mut bits)
                    .map_err(gpu("reading the reference back"))?,
            }
            stream
                .synchronize()
                .map_err(gpu("reading the reference back"))?;
            // The same bits as f16 in place (f16 is a u16 underneath): no second array.
            Ok(bits.reinterpret_into())
        };
        Ok(Reference {
            expected: download(&reference.expected)?,
            lo: download(&reference.lo)?,
            hi: download(&reference.hi)?,
        })
    }

    /// The elements at `indices` (in the reference's order, each below its length) of the
    /// three arrays, as a reference of `indices.len()` elements.
    pub fn gather(
        &self,
        reference: &DeviceReference,
        indices: &[u64],
    ) -> Result<Reference, GpuError> {
        let len = reference.len() as u64;
        if let Some(&past) = indices.iter().find(|&&i| i >= len) {
            return Err(GpuError(format!("element {past} of a reference of {len}")));
        }
        if indices.is_empty() {
            return Ok(Reference {
                expected: vec![],
                lo: vec![],
                hi: vec![],
            });
        }
        let stream = &self.judge_stream;
        bind(stream)?;
        let count = indices.len();
        let on_device = stream
            .clone_htod(indices)
            .map_err(gpu("uploading the gathered indices"))?;
        let mut out = stream
            .alloc_zeros::<u16>(3 * count)
            .map_err(gpu("allocating the gathered elements"))?;
        let count32 = count as i32;
        let mut launch = stream.launch_builder(&self.gather);
        launch
            .arg(&reference.expected)
            .arg(&reference.lo)
            .arg(&reference.hi)
            .arg(&on_device)
            .arg(&count32)
            .arg(&mut out);
        let config = LaunchConfig {
            grid_dim: (count.div_ceil(GATHER_THREADS as usize) as u32, 1, 1),
            block_dim: (GATHER_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel's arguments in its order; every index is below the arrays' length
        // (checked above) and `out` holds 3 x count elements.
        unsafe { launch.launch(config) }.map_err(gpu("launching the gather"))?;
        let bits = stream
            .clone_dtoh(&out)
            .map_err(gpu("reading the gathered elements"))?;
        stream
            .synchronize()
            .map_err(gpu("reading the gathered elements"))?;
        let part = |i: usize| bits[i * count..(i + 1) * count].to_vec().reinterpret_into();
        Ok(Reference {
            expected: part(0),
            lo: part(1),
            hi: part(2),
        })
    }

    /// `output` (the host's, `[M][N][L]`) judged against `reference` on the device: uploaded
    /// through the pinned staging, then [`GpuReference::judge_on_device`].
    pub fn judge_host_output(
        &self,
        reference: &DeviceReference,
        output: &[f16],
    ) -> Result<DeviceJudgement, GpuError> {
        if output.len() != reference.len() {
            return Err(GpuError(format!(
                "an output of {} elements for a reference of {}",
                output.len(),
                reference.len()
            )));
        }
        if output.is_empty() {
            return Ok(DeviceJudgement {
                failed: 0,
                first: None,
                worst_tight_ulps: 0,
            });
        }
        let stream = &self.judge_stream;
        bind(stream)?;
        // SAFETY: every byte is written by the upload below before the judge reads it.
        let mut copy = unsafe { stream.alloc::<u16>(output.len()) }
            .map_err(gpu("allocating the output's copy"))?;
        // SAFETY: f16 is a u16 underneath: the same bits.
        let bits =
            unsafe { std::slice::from_raw_parts(output.as_ptr().cast::<u16>(), output.len()) };
        match &self.staging {
            Some(staging) => {
                let (target, _record) = copy.device_ptr_mut(stream);
                // SAFETY: u16 has no padding: its bytes.
                let bytes = unsafe {
                    std::slice::from_raw_parts(bits.as_ptr().cast::<u8>(), 2 * bits.len())
                };
                staging
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .upload(stream, target, bytes)?;
            }
            None => stream
                .memcpy_htod(bits, &mut copy)
                .map_err(gpu("uploading the output"))?,
        }
        let (output_ptr, _record) = copy.device_ptr(stream);
        // SAFETY: the copy holds the reference's element count of fp16 values.
        unsafe { self.judge_on_device(reference, output_ptr, false) }
    }

    /// The output at `output` (fp16, `[L][M][N]` when `lmn`, else the reference's `[M][N][L]`)
    /// judged against `reference` on the device by the model's rule: three numbers come back.
    ///
    /// # Safety
    /// `output` must point at the reference's element count of fp16 values in this context's
    /// memory, written by work that has ended (this runs on the judge's stream, not the stream
    /// that wrote it).
    pub unsafe fn judge_on_device(
        &self,
        reference: &DeviceReference,
        output: CUdeviceptr,
        lmn: bool,
    ) -> Result<DeviceJudgement, GpuError> {
        let stream = &self.judge_stream;
        bind(stream)?;
        let ReferenceDims { m, n, batches, .. } = reference.dims;
        if reference.is_empty() {
            return Ok(DeviceJudgement {
                failed: 0,
                first: None,
                worst_tight_ulps: 0,
            });
        }
        // [failed, first, worst tight]: three u64 (the last read as its low u32).
        let mut counts = stream
            .clone_htod(&[0u64, u64::MAX, 0])
            .map_err(gpu("allocating the judge's counts"))?;
        let (counts_ptr, record) = counts.device_ptr_mut(stream);
        let (failed_ptr, first_ptr, worst_ptr) = (counts_ptr, counts_ptr + 8, counts_ptr + 16);
        let (m32, n32, batches32, lmn32) = (m as i32, n as i32, batches as i32, i32::from(lmn));
        let mut launch = stream.launch_builder(&self.judge);
        launch
            .arg(&output)
            .arg(&reference.expected)
            .arg(&reference.lo)
            .arg(&reference.hi)
            .arg(&m32)
            .arg(&n32)
            .arg(&batches32)
            .arg(&lmn32)
            .arg(&failed_ptr)
            .arg(&first_ptr)
            .arg(&worst_ptr);
        let config = LaunchConfig {
            grid_dim: (JUDGE_GRID.0, 1, 1),
            block_dim: (JUDGE_GRID.1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the kernel's arguments in its order; every index is below m * n * batches,
        // the length of expected, lo, hi and (the caller's promise) the output.
        unsafe { launch.launch(config) }.map_err(gpu("launching the output judge"))?;
        drop(record);
        let back = stream
            .clone_dtoh(&counts)
            .map_err(gpu("reading the judge's counts"))?;
        stream
            .synchronize()
            .map_err(gpu("waiting for the output judge"))?;
        Ok(DeviceJudgement {
            failed: back[0],
            first: (back[0] > 0).then_some(back[1]),
            // Little-endian: the u32 the kernel raised is the low half of the third word.
            worst_tight_ulps: back[2] as u32,
        })
    }
}

/// A u16 buffer's bytes, for a copy into it.
fn u16_bytes(bits: &mut [u16]) -> &mut [u8] {
    // SAFETY: u16 has no invalid bit patterns and no padding: its bytes.
    unsafe { std::slice::from_raw_parts_mut(bits.as_mut_ptr().cast::<u8>(), 2 * bits.len()) }
}
