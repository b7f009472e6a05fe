// TEST KERNEL, deliberately broken: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu) preceded by a loop that never ends. The harness's watchdog must
// report it as hung and go on with the next variant.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_spin(const unsigned char* a, const unsigned char* b1, const unsigned char* b2,
                     const unsigned char* sfa, const unsigned char* sfb1,
                     const unsigned char* sfb2, unsigned short* c, int M, int N, int K, int L) {
  // clock64() is always positive, and the compiler cannot know it: the loop never ends.
  while (clock64() > 0) __nanosleep(1000);
  dual_gemm_tile<kBaselineStages>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L, blockIdx.y,
                                  blockIdx.x, blockIdx.z);
}
