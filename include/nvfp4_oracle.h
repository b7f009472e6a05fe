/* nvfp4_oracle.h: the C ABI through which `nvfp4-oracle certify --library libX.so --symbol NAME`
 * calls a compiled NVFP4 dual-GEMM kernel.
 *
 * The harness loads the library in a worker process (never in its own), allocates every tensor
 * on the GPU with guard bytes around it, fills c with NaN, calls NAME once per case, synchronizes
 * the stream, and judges c against its model. The function must only enqueue work on `stream`
 * (it may also synchronize it) and must not keep pointers after it returns.
 *
 * Layouts are those of the GPU MODE problem (docs/problem.md, section 3), all contiguous,
 * batch outermost:
 *   a              [L][M][K/2]  packed e2m1, two values per byte, low nibble = even k
 *   b1, b2         [L][N][K/2]  same packing
 *   sfa            [L][M][K/16] e4m3fn, one scale per 16 consecutive k (sign bit to be ignored)
 *   sfb1, sfb2     [L][N][K/16]
 *   sf*_permuted   [L][ceil(MN/128)][ceil(K/64)][32][4][4] the blocked (tensor-core) layout:
 *                  row i, scale column j at ((l*rest_mn + i/128)*rest_k + j/4)*512
 *                  + (i%32)*16 + ((i%128)/32)*4 + j%4; padding holds arbitrary bytes
 *   c              [L][M][N]    fp16, the output
 *   c[m][n][l] = fp16( silu(sum_k A*SFA*B1*SFB1) * (sum_k A*SFA*B2*SFB2) ), fp32 accumulation.
 *
 * Return NVFP4_ORACLE_OK, NVFP4_ORACLE_UNSUPPORTED_SHAPE for a shape the kernel does not handle
 * (the harness then counts it as refused, not failed), or any other value for an error, with a
 * message of at most error_len bytes (NUL-terminated) written to `error`.
 */
#ifndef NVFP4_ORACLE_H
#define NVFP4_ORACLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NVFP4_ORACLE_ABI_VERSION 1

#define NVFP4_ORACLE_OK 0
#define NVFP4_ORACLE_UNSUPPORTED_SHAPE 1

typedef struct nvfp4_oracle_dual_gemm_args {
  uint32_t abi_version; /* NVFP4_ORACLE_ABI_VERSION */
  int32_t m, n, k, l;
  const uint8_t* a;
  const uint8_t* b1;
  const uint8_t* b2;
  const uint8_t* sfa;
  const uint8_t* sfb1;
  const uint8_t* sfb2;
  const uint8_t* sfa_permuted;
  const uint8_t* sfb1_permuted;
  const uint8_t* sfb2_permuted;
  uint16_t* c; /* fp16 bits */
} nvfp4_oracle_dual_gemm_args;

/* The signature of the symbol named with --symbol. `stream` is a cudaStream_t (CUstream). */
typedef int (*nvfp4_oracle_dual_gemm_fn)(const nvfp4_oracle_dual_gemm_args* args, void* stream,
                                         char* error, size_t error_len);

#ifdef __cplusplus
}
#endif

#endif /* NVFP4_ORACLE_H */
