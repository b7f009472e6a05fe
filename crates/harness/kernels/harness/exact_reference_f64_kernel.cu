// The reference kernel again, its statistics kept in f64 instead of 64-bit integers: the same
// dot products, the same statistics, the same element (`store_element`). Appended to
// exact_reference_kernel.cu's source, whose formats, bounds and element it uses; one kernel per
// K order, each keeping only the statistics its order's bound reads.
//
// Why: a 64-bit integer add, maximum or absolute value is two to four 32-bit instructions on the
// integer pipe, and the integer kernel spends about fifty of them on each block of each element.
// In f64 each is one instruction on the f64 pipe, which a GPU for NVFP4 work (H100, H200, B200)
// runs at the integer pipe's rate. A GPU whose f64 is slow (the host reads the device's ratio)
// runs the integer kernel only.
//
// Why it is exact, or says it is not. Every statistic is an integer in units of 2^-20 (a block's
// term s * S_a * S_b < 2^48, each factor an exact f64). Every partial value of every statistic
// is at most, in magnitude, the partial sum of the block magnitudes (abs_terms): a sum of
// non-negative integers. While that sum is below 2^53, every partial value is an integer below
// 2^53 and every f64 operation on them is exact. Rounding is monotone, so once the true sum
// passes 2^53 the f64 sum stays at or above 2^53: a final abs_terms below 2^53 proves every
// statistic of that element exact. An element where it is not sets *inexact, and the host runs
// the integer kernel for the whole launch instead (deep K with scales near e4m3's largest).

#define EXACT_F64_LIMIT 9007199254740992.0  // 2^53
#define INT_MIN (-2147483647 - 1)
// Two CTAs an SM: at most 128 registers a thread. With one (168 registers) the SM had two warps
// a scheduler and no eligible warp half of the time; two made the kernel 1.15x faster on the
// H200 (results/f64-reference, call 3), against a few bytes spilled in the element's bounds.
#define MIN_CTAS_PER_SM 2

struct F64Stats {
  double sum, prefix_max, prefix_min, abs_blocks, abs_terms, max_block_abs;
  u32 raised_blocks;
  int raised_alignment;
};

// x (|x| < 2^31) as an f64 without a conversion instruction (which runs at a quarter of the f64
// pipe's rate): 2^52 + 2^31 + x has x + 2^31 in its low word, and subtracting 2^52 + 2^31 is exact.
__device__ __forceinline__ double int_to_f64(int x) {
  return __hiloint2double(0x43300000, (int)((u32)x ^ 0x80000000u)) - 4503601774854144.0;
}

// A thread's K blocks staged as in the integer kernel, with the magnitudes (decoded once here,
// not in the inner loop), each scale as an f64 (a NaN scale as 0, as the integer kernel counts
// it) and its alignment; a NaN scale marks its row or column, whose elements are NaN.
__device__ __forceinline__ void stage_operand_f64(const u8* data, const u8* scales, size_t row,
                                                  bool inside, int j, size_t packed_row,
                                                  int blocks, uint4* values, uint4* magnitudes,
                                                  double* scale, int* alignment, int* nan) {
  uint2 packed = make_uint2(0, 0);
  int s = 0;
  if (inside) {
    packed = *(const uint2*)(data + row * packed_row + (size_t)j * 8);
    s = scale_integer(scales[row * blocks + j]);
  }
  if (s == NAN_SCALE) {
    *nan = 1;
    s = 0;
  }
  const uint4 v = decode_block(packed);
  *values = v;
  *magnitudes = make_uint4(abs4(v.x), abs4(v.y), abs4(v.z), abs4(v.w));
  *scale = int_to_f64(s);
  *alignment = scale_alignment(s);
}

template <int ORDER>
__device__ __forceinline__ void exact_reference_f64(
    const u8* a_data, const u8* a_scales, const u8* b1_data, const u8* b1_scales,
    const u8* b2_data, const u8* b2_scales, int m, int n, int blocks, int batches,
    int first_batch, int problem, u16* expected, u16* lo_out, u16* hi_out, int* unbounded,
    int* inexact) {
  __shared__ uint4 a_values[STAGE_BLOCKS][TILE_M], a_magnitudes[STAGE_BLOCKS][TILE_M];
  __shared__ double a_scale[STAGE_BLOCKS][TILE_M];
  __shared__ int a_alignment[STAGE_BLOCKS][TILE_M];
  __shared__ uint4 b_values[MAX_OPERANDS][STAGE_BLOCKS][TILE_N];
  __shared__ uint4 b_magnitudes[MAX_OPERANDS][STAGE_BLOCKS][TILE_N];
  __shared__ double b_scale[MAX_OPERANDS][STAGE_BLOCKS][TILE_N];
  __shared__ int b_alignment[MAX_OPERANDS][STAGE_BLOCKS][TILE_N];
  __shared__ int a_nan[TILE_M], b_nan[MAX_OPERANDS][TILE_N];

  const int operands = problem == PROBLEM_DUAL_GEMM ? 2 : 1;
  const u8* b_data[MAX_OPERANDS] = {b1_data, b2_data};
  const u8* b_scales_of[MAX_OPERANDS] = {b1_scales, b2_scales};
  const int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;
  const int batch = first_batch + blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * THREADS_X + tx;
  const size_t packed_row = (size_t)blocks * 8;
  if (t < TILE_M) a_nan[t] = 0;
  if (t < MAX_OPERANDS * TILE_N) b_nan[t / TILE_N][t % TILE_N] = 0;

  F64Stats st[MAX_OPERANDS][2][2];
#pragma unroll
  for (int o = 0; o < MAX_OPERANDS; ++o)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        F64Stats& s = st[o][r][c];
        s.sum = s.prefix_max = s.prefix_min = s.abs_blocks = s.abs_terms = s.max_block_abs = 0.0;
        s.raised_blocks = 0;
        s.raised_alignment = INT_MIN;
      }
  __syncthreads();

  for (int j0 = 0; j0 < blocks; j0 += STAGE_BLOCKS) {
    {
      const int row = t / STAGE_BLOCKS, jb = t % STAGE_BLOCKS, j = j0 + jb;
      const int gm = m0 + row, gn = n0 + row;
      stage_operand_f64(a_data, a_scales, (size_t)batch * m + gm, gm < m && j < blocks, j,
                        packed_row, blocks, &a_values[jb][row], &a_magnitudes[jb][row],
                        &a_scale[jb][row], &a_alignment[jb][row], &a_nan[row]);
      for (int o = 0; o < operands; ++o)
        stage_operand_f64(b_data[o], b_scales_of[o], (size_t)batch * n + gn,
                          gn < n && j < blocks, j, packed_row, blocks, &b_values[o][jb][row],
                          &b_magnitudes[o][jb][row], &b_scale[o][jb][row],
                          &b_alignment[o][jb][row], &b_nan[o][row]);
    }
    __syncthreads();
    const int staged = min(STAGE_BLOCKS, blocks - j0);
    for (int jb = 0; jb < staged; ++jb) {
      uint4 a[2], a_abs[2];
      double sa[2];
      int a_align[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        a[r] = a_values[jb][ty + r * THREADS_Y];
        a_abs[r] = a_magnitudes[jb][ty + r * THREADS_Y];
        sa[r] = a_scale[jb][ty + r * THREADS_Y];
        a_align[r] = a_alignment[jb][ty + r * THREADS_Y];
      }
#pragma unroll
      for (int o = 0; o < MAX_OPERANDS; ++o) {
        if (o >= operands) break;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const uint4 b = b_values[o][jb][tx + c * THREADS_X];
          const uint4 b_abs = b_magnitudes[o][jb][tx + c * THREADS_X];
          const double sb = b_scale[o][jb][tx + c * THREADS_X];
          const int b_align = b_alignment[o][jb][tx + c * THREADS_X];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int s = block_dot(a[r], b);
            const u32 u = block_magnitude_dot(a_abs[r], b_abs);
            // S_a * S_b < 2^36, s * S_a * S_b < 2^48: exact products.
            const double scale = sa[r] * sb;
            const double term = int_to_f64(s) * scale;
            const double block_abs = int_to_f64((int)u) * scale;
            F64Stats& d = st[o][r][c];
            d.sum += term;
            // Comparisons and selects, not fmax and fmin: no value here is a NaN, and the
            // NaN handling of fmax costs three more instructions.
            if (ORDER != ORDER_ANY) {
              d.prefix_max = d.sum > d.prefix_max ? d.sum : d.prefix_max;
              d.prefix_min = d.sum < d.prefix_min ? d.sum : d.prefix_min;
            }
            d.abs_blocks += fabs(term);
            d.abs_terms += block_abs;
            if (ORDER == ORDER_PER_PRODUCT)
              d.max_block_abs = block_abs > d.max_block_abs ? block_abs : d.max_block_abs;
            // The largest alignment of the zero terms, without a branch: raised_alignment
            // starts below every alignment and is read only where raised_blocks is not 0.
            const bool zero = term == 0.0;
            d.raised_alignment = max(d.raised_alignment, zero ? a_align[r] + b_align : INT_MIN);
            d.raised_blocks += zero ? 1u : 0u;
          }
        }
      }
    }
    __syncthreads();
  }

  int any_unbounded = 0, any_inexact = 0;
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int row = ty + r * THREADS_Y, col = tx + c * THREADS_X;
      const int gm = m0 + row, gn = n0 + col;
      if (gm >= m || gn >= n) continue;
      DotStats exact[MAX_OPERANDS];
#pragma unroll
      for (int o = 0; o < MAX_OPERANDS; ++o) {
        const F64Stats& d = st[o][r][c];
        // Not below 2^53: not proven exact (and the conversions below could be wrong).
        if (!(d.abs_terms < EXACT_F64_LIMIT)) any_inexact = 1;
        exact[o].sum = __double2ll_rz(d.sum);
        exact[o].prefix_max = __double2ll_rz(d.prefix_max);
        exact[o].prefix_min = __double2ll_rz(d.prefix_min);
        exact[o].abs_blocks = __double2ll_rz(d.abs_blocks);
        exact[o].abs_terms = __double2ll_rz(d.abs_terms);
        exact[o].max_block_abs = __double2ll_rz(d.max_block_abs);
        exact[o].raised_blocks = d.raised_blocks;
        exact[o].raised_alignment = d.raised_blocks == 0 ? 0 : d.raised_alignment;
        exact[o].nan = a_nan[row] || b_nan[o][col];
      }
      const size_t at = ((size_t)gm * n + gn) * batches + batch;
      store_element(exact[0], exact[1], blocks, problem, ORDER, at, expected, lo_out, hi_out,
                    &any_unbounded);
    }
  if (any_unbounded) atomicOr(unbounded, 1);
  if (any_inexact) atomicOr(inexact, 1);
}

// One kernel per K order; the arguments are the integer kernel's, `order` dropped, `inexact`
// added.
#define EXACT_REFERENCE_F64(name, order)                                                         \
  extern "C" __global__ void __launch_bounds__(THREADS_X * THREADS_Y, MIN_CTAS_PER_SM)           \
      name(const u8* a_data, const u8* a_scales, const u8* b1_data, const u8* b1_scales,         \
           const u8* b2_data, const u8* b2_scales, int m, int n, int blocks, int batches,        \
           int first_batch, int problem, u16* expected, u16* lo_out, u16* hi_out,                \
           int* unbounded, int* inexact) {                                                       \
    exact_reference_f64<order>(a_data, a_scales, b1_data, b1_scales, b2_data, b2_scales, m, n,   \
                               blocks, batches, first_batch, problem, expected, lo_out, hi_out,  \
                               unbounded, inexact);                                              \
  }

EXACT_REFERENCE_F64(nvfp4_oracle_exact_reference_f64_contiguous, ORDER_CONTIGUOUS)
EXACT_REFERENCE_F64(nvfp4_oracle_exact_reference_f64_any, ORDER_ANY)
EXACT_REFERENCE_F64(nvfp4_oracle_exact_reference_f64_per_product, ORDER_PER_PRODUCT)
