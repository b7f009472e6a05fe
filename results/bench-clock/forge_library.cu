// A forgery of the latency for a C-ABI library, whose worker (Rust) keeps its CUDA events where
// the library cannot rebind them: the example library (examples/submissions/library), honest in
// every output, which makes every call the parent times in a batch (a stream or lone calls)
// slower than the calls its own worker times one at a time with CUDA events. What bench then
// sees is what a forged timer shows: the events' latency below the time the parent measures
// for the same lone call, by FORGE_US microseconds plus FORGE_FRAC of the reported latency
// (the truth is reported as (1 - FORGE_FRAC) of itself less FORGE_US).
//
// How it tells the calls apart: bench's per-call timing of a shape makes the library's first
// five calls on four output buffers (three warm-up sets, then the shared buffer of the timed
// calls); every call on another output buffer is in a batch. There it adds a one-thread kernel
// that spins on the global timer after the honest launch, on the same stream. Per-call samples
// are the library's own events around its honest launch (their median sets the fraction).
//
// Built by run.sh with nvcc -O3 -arch=sm_90a -shared ... -DFORGE_FRAC=0.05 -DFORGE_US=0; FORGE_FRAC
// = FORGE_US = 0 is the honest control, the example itself with this wrapper's bookkeeping.

#define nvfp4_baseline_dual_gemm honest_dual_gemm
#include "examples/submissions/library/baseline_abi.cu"
#undef nvfp4_baseline_dual_gemm

#include <algorithm>

#ifndef FORGE_FRAC
#define FORGE_FRAC 0.0
#endif
#ifndef FORGE_US
#define FORGE_US 0.0
#endif

__global__ void forge_spin(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while ((long long)(t - t0) < ns);
}

namespace {
int shape[4] = {-1, -1, -1, -1};
int calls = 0;
const void* known[8];
int n_known = 0;
float samples_ms[256];
int n_samples = 0;
cudaEvent_t ev0 = nullptr, ev1 = nullptr;
bool pending = false;

double median_us() {
  if (n_samples == 0) return 0.0;
  float sorted[256];
  std::copy(samples_ms, samples_ms + n_samples, sorted);
  std::sort(sorted, sorted + n_samples);
  return 1000.0 * sorted[n_samples / 2];
}
}  // namespace

extern "C" int nvfp4_baseline_dual_gemm(const nvfp4_oracle_dual_gemm_args* args, void* stream,
                                        char* error, size_t error_len) {
  if (!ev0) {
    cudaEventCreate(&ev0);
    cudaEventCreate(&ev1);
  }
  const int now[4] = {args->m, args->n, args->k, args->l};
  if (!std::equal(now, now + 4, shape)) {
    std::copy(now, now + 4, shape);
    calls = n_known = n_samples = 0;
    pending = false;
  }
  if (pending) {  // the worker synchronized after the last call: its events are done
    float ms = 0;
    if (cudaEventElapsedTime(&ms, ev0, ev1) == cudaSuccess && n_samples < 256)
      samples_ms[n_samples++] = ms;
    pending = false;
  }
  bool in_batch;
  if (calls < 5) {
    if (std::find(known, known + n_known, args->c) == known + n_known && n_known < 8)
      known[n_known++] = args->c;
    in_batch = false;
  } else {
    in_batch = std::find(known, known + n_known, args->c) == known + n_known;
  }
  ++calls;
  if (!in_batch) {
    cudaEventRecord(ev0, (cudaStream_t)stream);
    const int status = honest_dual_gemm(args, stream, error, error_len);
    cudaEventRecord(ev1, (cudaStream_t)stream);
    pending = true;
    return status;
  }
  const int status = honest_dual_gemm(args, stream, error, error_len);
  if (status != NVFP4_ORACLE_OK) return status;
  const double extra_us = FORGE_US + (FORGE_FRAC / (1.0 - FORGE_FRAC)) * median_us();
  if (extra_us > 0) forge_spin<<<1, 1, 0, (cudaStream_t)stream>>>((long long)(extra_us * 1000.0));
  return cudaGetLastError() == cudaSuccess ? NVFP4_ORACLE_OK : 3;
}
