// TEST KERNEL, deliberately different: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu) with its K loop reversed: last k-tile first, and
// inside a k-tile the last scale block first. Its results are correct (inside every acceptance
// interval) but its f32 accumulators see K in another order than the baseline's declared
// schedule, so `certify --exact` must report "correct within interval, schedule differs from
// declared".
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_reversed_k(const unsigned char* a, const unsigned char* b1,
                           const unsigned char* b2, const unsigned char* sfa,
                           const unsigned char* sfb1, const unsigned char* sfb2,
                           unsigned short* c, int M, int N, int K, int L) {
  dual_gemm_tile<kBaselineStages, true>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L, blockIdx.y,
                                        blockIdx.x, blockIdx.z);
}
