// TEST KERNEL, deliberately broken: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu) without the barrier at the end of its k loop, so
// warp 0 copies the next k-tile into the shared-memory slot while the other warps may still read
// the current one. Its outputs are usually right (the copy tends to lose the race); the harness
// must report the shared-memory race (compute-sanitizer racecheck).
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_race_missing_barrier(const unsigned char* a, const unsigned char* b1,
                                     const unsigned char* b2, const unsigned char* sfa,
                                     const unsigned char* sfb1, const unsigned char* sfb2,
                                     unsigned short* c, int M, int N, int K, int L) {
  dual_gemm_tile<kBaselineStages, false, true>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L,
                                               blockIdx.y, blockIdx.x, blockIdx.z);
}
