// The Hopper baseline kernel (kernels/hopper/baseline.cu) built as a shared library behind the C
// ABI of include/nvfp4_oracle.h, for `nvfp4-oracle certify --library` (see build.sh). The kernel
// itself is untouched: this file only adapts the ABI's layouts to its launch.
//
// The baseline writes C as [M][N][L]; the ABI's C is [L][M][N] (GPU MODE's storage). Both agree
// when L = 1, so each batch is launched on its own with every pointer moved to that batch.

#include "include/nvfp4_oracle.h"
#include "kernels/hopper/common.cuh"
#include "kernels/hopper/baseline.cu"

#include <cstdio>

// How far apart consecutive batches of the blocked scales are, in bytes (a deliberately broken
// copy of this example redefines it).
#ifndef SCALE_BATCH_BYTES
#define SCALE_BATCH_BYTES(rows, rest_k) (((size_t)(rows) + 127) / 128 * (rest_k) * 512)
#endif

extern "C" int nvfp4_baseline_dual_gemm(const nvfp4_oracle_dual_gemm_args* args, void* stream,
                                        char* error, size_t error_len) {
  if (args->abi_version != NVFP4_ORACLE_ABI_VERSION) {
    snprintf(error, error_len, "built for ABI %d, called with %u", NVFP4_ORACLE_ABI_VERSION,
             args->abi_version);
    return 2;
  }
  const int M = args->m, N = args->n, K = args->k, L = args->l;
  if (K % 64 != 0) {  // the kernel's main loop takes 64 k per step
    snprintf(error, error_len, "K = %d: the baseline needs K %% 64 == 0", K);
    return NVFP4_ORACLE_UNSUPPORTED_SHAPE;
  }
  const size_t rest_k = ((size_t)K / 16 + 3) / 4;
  const size_t a_batch = (size_t)M * K / 2, b_batch = (size_t)N * K / 2;
  const size_t sfa_batch = SCALE_BATCH_BYTES(M, rest_k), sfb_batch = SCALE_BATCH_BYTES(N, rest_k);
  const dim3 grid((N + 127) / 128, (M + 127) / 128, 1), block(kThreads);
  for (int l = 0; l < L; ++l) {
    nvfp4_dual_gemm<<<grid, block, 0, (cudaStream_t)stream>>>(
        args->a + l * a_batch, args->b1 + l * b_batch, args->b2 + l * b_batch,
        args->sfa_permuted + l * sfa_batch, args->sfb1_permuted + l * sfb_batch,
        args->sfb2_permuted + l * sfb_batch, args->c + (size_t)l * M * N, M, N, K, 1);
  }
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    snprintf(error, error_len, "launch failed: %s", cudaGetErrorString(status));
    return 3;
  }
  return NVFP4_ORACLE_OK;
}
