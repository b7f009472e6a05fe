// TEST KERNEL, deliberately broken: the Hopper baseline (compiled together with
// kernels/hopper/common.cuh and baseline.cu), then an epilogue "bias" that lives in shared
// memory and is never initialized (the store meant to zero it sits behind a condition that never
// holds). The bias is multiplied by 0 on the assumption that this is harmless; it is not when the
// stale shared memory holds a NaN or an infinity, and then every output of the CTA becomes NaN.
// With the shared memory earlier kernels left behind (finite values, usually) the outputs are
// right; the harness must find that they change with what shared memory held before the launch.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
nvfp4_dual_gemm_uninit_shared(const unsigned char* a, const unsigned char* b1,
                              const unsigned char* b2, const unsigned char* sfa,
                              const unsigned char* sfb1, const unsigned char* sfb2,
                              unsigned short* c, int M, int N, int K, int L) {
  __shared__ float bias[kThreads];
  if (K < 0) bias[threadIdx.x] = 0.0f;  // the forgotten initialization: never runs
  dual_gemm_tile<kBaselineStages>(a, b1, b2, sfa, sfb1, sfb2, c, M, N, K, L, blockIdx.y,
                                  blockIdx.x, blockIdx.z);
  __syncthreads();  // this CTA's outputs are written (each thread re-reads its CTA's tile below)
  const float stale = *static_cast<volatile float*>(&bias[threadIdx.x]);
  if (stale * 0.0f == 0.0f) return;  // a finite stale value: "harmless"
  const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
  for (int i = threadIdx.x; i < kBM * kBN; i += kThreads) {
    const int row = m0 + i / kBN, col = n0 + i % kBN;
    if (row < M && col < N) c[((long long)row * N + col) * L + blockIdx.z] = 0x7E00;  // NaN
  }
}
