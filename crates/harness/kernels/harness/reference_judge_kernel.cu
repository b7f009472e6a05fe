// Kernels that read a reference the GPU computed and kept in device memory (appended to
// exact_reference_kernel.cu's source, whose types and fp16 helpers they use).

// An output judged against a reference kept on the device where both lie, on the device: the model's rule
// (`accepted_bits` in the model's compare module), element by element. Where lo or hi is NaN
// (a NaN scale contributed) only a NaN is accepted; otherwise a number in [lo, hi] in fp16's
// order, -0 and +0 one value. `got` is stored [L][M][N] (GPU MODE's storage) when lmn is 1,
// else as the reference, [M][N][L]. Adds the failing elements to *failed, lowers *first to the
// least failing index in the reference's order, and raises *worst_tight to the largest distance
// (fp16 positions) of `got` from `expected` over the elements whose interval is at most
// TIGHT_ULPS wide, no NaN among the four (`worst_tight` in the harness's values_seen.rs: the
// coverage's figure for a passing output). Three numbers go back to the host.
#define TIGHT_ULPS 2u

__device__ __forceinline__ bool fp16_is_nan(u16 bits) { return (bits & 0x7FFF) > 0x7C00; }
__device__ __forceinline__ int fp16_order(u16 bits) {
  const int magnitude = bits & 0x7FFF;
  return (bits & 0x8000) ? -magnitude : magnitude;
}

extern "C" __global__ void nvfp4_oracle_judge_output(const u16* got, const u16* expected,
                                                     const u16* lo, const u16* hi, int m, int n,
                                                     int batches, int lmn,
                                                     unsigned long long* failed,
                                                     unsigned long long* first,
                                                     u32* worst_tight) {
  const unsigned long long total = (unsigned long long)m * n * batches;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long mine = 0, least = ~0ull;
  u32 tightest = 0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
       i < total; i += stride) {
    // i in the reference's order [M][N][L].
    unsigned long long at = i;
    if (lmn) {
      const unsigned long long l = i % batches, mn = i / batches;
      at = l * ((unsigned long long)m * n) + mn;
    }
    const u16 g = got[at], e = expected[i], low = lo[i], high = hi[i];
    const bool nan_required = fp16_is_nan(low) || fp16_is_nan(high);
    const int o = fp16_order(g);
    const bool inside = !fp16_is_nan(g) && fp16_order(low) <= o && o <= fp16_order(high);
    const bool accepted = nan_required ? fp16_is_nan(g) : inside;
    if (!accepted) {
      ++mine;
      if (i < least) least = i;
    }
    const bool tight = !(nan_required || fp16_is_nan(g) || fp16_is_nan(e)) &&
                       (u32)(fp16_order(high) - fp16_order(low)) <= TIGHT_ULPS;
    if (tight) tightest = max(tightest, (u32)abs(o - fp16_order(e)));
  }
  if (mine != 0) {
    atomicAdd(failed, mine);
    atomicMin(first, least);
  }
  tightest = __reduce_max_sync(0xFFFFFFFFu, tightest);
  if (tightest != 0 && (threadIdx.x & 31) == 0) atomicMax(worst_tight, tightest);
}

// The elements at `indices` (in the reference's order) of expected, lo and hi, into `out`
// (count of each, in that order): the few elements the CPU model recomputes to check a
// reference that stays on the device.
extern "C" __global__ void nvfp4_oracle_gather_reference(const u16* expected, const u16* lo,
                                                         const u16* hi,
                                                         const unsigned long long* indices,
                                                         int count, u16* out) {
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= count) return;
  const unsigned long long i = indices[j];
  out[j] = expected[i];
  out[count + j] = lo[i];
  out[2 * count + j] = hi[i];
}
