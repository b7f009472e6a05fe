// Probe for the arithmetic of wgmma.mma_async m64n8k16 .f32.f16.f16 on Hopper (A from registers,
// B from shared memory). The same inputs and output layout as mma_f16_f32.cu, so probe_mma.py
// scores both with one analysis: one independent 16x8x16 problem per warpgroup (CTA of 128
// threads); warp 0 carries the problem's A rows and C, warps 1-3 multiply zeros.
// Built with `nvcc -cubin -gencode=arch=compute_90a,code=sm_90a` (wgmma needs sm_90a).
//
// B (8 n x 16 k, K-major) is stored as two core matrices of 8 rows x 16 bytes: k 0-7 at byte 0,
// k 8-15 at byte 128. The descriptor says so with the "leading dimension byte offset" (distance
// of K-adjacent core matrices) = 128; the "stride" offset (N-adjacent core matrices, unused with
// N = 8) is set to 1024, so a swapped reading of the two fields gives visibly wrong results.

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

extern "C" __global__ void __launch_bounds__(128)
wgmma_f16_f32(const unsigned short* __restrict__ A, const unsigned short* __restrict__ Bt,
              const float* __restrict__ C, float* __restrict__ D, int nprob) {
  __shared__ __align__(128) unsigned short bs[128];
  const int prob = blockIdx.x;
  if (prob >= nprob) return;  // the whole CTA: wgmma needs all four warps
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane >> 2, t = lane & 3;
  const unsigned short* a = A + (size_t)prob * 256;
  const unsigned short* bt = Bt + (size_t)prob * 128;
  const float* c = C + (size_t)prob * 128;
  float* d = D + (size_t)prob * 128;
  {
    const int i = threadIdx.x, n = i / 16, k = i % 16;
    bs[(k / 8) * 64 + n * 8 + k % 8] = bt[n * 16 + k];
  }
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  unsigned a0 = 0, a1 = 0, a2 = 0, a3 = 0;
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  if (warp == 0) {  // the m16n8k16 A fragment and C layout, rows 0-15 of the m64 tile
    a0 = (unsigned)a[g * 16 + 2 * t] | ((unsigned)a[g * 16 + 2 * t + 1] << 16);
    a1 = (unsigned)a[(g + 8) * 16 + 2 * t] | ((unsigned)a[(g + 8) * 16 + 2 * t + 1] << 16);
    a2 = (unsigned)a[g * 16 + 2 * t + 8] | ((unsigned)a[g * 16 + 2 * t + 9] << 16);
    a3 = (unsigned)a[(g + 8) * 16 + 2 * t + 8] | ((unsigned)a[(g + 8) * 16 + 2 * t + 9] << 16);
    d0 = c[g * 8 + 2 * t];
    d1 = c[g * 8 + 2 * t + 1];
    d2 = c[(g + 8) * 8 + 2 * t];
    d3 = c[(g + 8) * 8 + 2 * t + 1];
  }
  const unsigned long long addr = smem_u32(bs);
  const unsigned long long desc =
      ((addr & 0x3FFFF) >> 4) | ((unsigned long long)(128 >> 4) << 16) |
      ((unsigned long long)(1024 >> 4) << 32);
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, 0;\n}\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  if (warp == 0) {
    d[g * 8 + 2 * t] = d0;
    d[g * 8 + 2 * t + 1] = d1;
    d[(g + 8) * 8 + 2 * t] = d2;
    d[(g + 8) * 8 + 2 * t + 1] = d3;
  }
}
