// TEST KERNEL, deliberately broken: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu), plus a "prefetch" of the k-tile after the last one
// for the last row of A: 4 bytes read just past the end of A. The value is only compared with a
// constant under a condition that never holds, so it never reaches an output, and the outputs
// are right. The harness must report the out-of-bounds global read (compute-sanitizer memcheck,
// with each tensor in an allocation of exactly its size).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_oob_read_unused(const unsigned char* a, const unsigned char* b1,
                                const unsigned char* b2, const unsigned char* sfa,
                                const unsigned char* sfb1, const unsigned char* sfb2,
                                unsigned short* c, int M, int N, int K, int L) {
  dual_gemm_tile<kBaselineStages>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L, blockIdx.y,
                                  blockIdx.x, blockIdx.z);
  if (threadIdx.x == 0 && blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 &&
      blockIdx.z == gridDim.z - 1) {
    const long long end = (long long)L * M * (K / 2);  // one past A's last byte
    const unsigned int next = *reinterpret_cast<const volatile unsigned int*>(a + end);
    if (next == 0x5A5A5A5Au && K < 0) c[0] = 0;  // never: the prefetch is not used
  }
}
