// TEST KERNEL, deliberately broken: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu), plus one store one element past the end of C. The hardened launch
// must report it as an out-of-bounds write.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_oob_write(const unsigned char* a, const unsigned char* b1, const unsigned char* b2,
                          const unsigned char* sfa, const unsigned char* sfb1,
                          const unsigned char* sfb2, unsigned short* c, int M, int N, int K, int L) {
  dual_gemm_tile<kBaselineStages>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L, blockIdx.y,
                                  blockIdx.x, blockIdx.z);
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0)
    c[(long long)M * N * L] = 0x3C00;  // fp16 1.0, one past the last element
}
