// TEST KERNEL, deliberately broken: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu), except that the CTA of the last output tile returns at once, so
// that tile is never written. The harness must report incomplete output.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_missing_tile(const unsigned char* a, const unsigned char* b1,
                             const unsigned char* b2, const unsigned char* sfa,
                             const unsigned char* sfb1, const unsigned char* sfb2,
                             unsigned short* c, int M, int N, int K, int L) {
  if (blockIdx.x == gridDim.x - 1 && blockIdx.y == gridDim.y - 1 && blockIdx.z == gridDim.z - 1)
    return;
  dual_gemm_tile<kBaselineStages>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L, blockIdx.y,
                                  blockIdx.x, blockIdx.z);
}
