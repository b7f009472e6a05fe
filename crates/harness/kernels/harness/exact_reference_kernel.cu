// The model's reference computed on the GPU, by the parent, in its own CUDA context. It is not
// a kernel under test: it is the CPU model (its exact grid of dot products, its bounds, its
// reference and its portable exp) written again operation for operation, and every campaign
// checks it against the CPU model on rows of every case (docs/numerics.md, section 8).
//
// Why it is exact. Values are e2m1 in half units (integers, |v| <= 12); a 16-element block's sum
// of products is at most 16 * 144 = 2304 in magnitude: four dp4a instructions. A UE4M3 scale is
// the integer S = sig << (e + 9) < 2^18 in units of 2^-9, so a block's term s * S_a * S_b (units
// of 2^-20) is below 1.22 * 10^14, and every statistic, a sum of at most 65,536 such terms (the
// host sends nothing longer), fits a signed 64-bit integer.
//
// Why it is bit-identical to the CPU model's intervals. The interval arithmetic is f64 with the
// same operations in the same order; compiled with --fmad=false so that no multiply-add is fused
// (Rust never fuses), IEEE division and square-free code, so every f64 result is the correctly
// rounded one of the same operation, as on the CPU. The f64 -> fp16 rounding is cvt.rn.f16.f64,
// one correctly rounded conversion; NaN is written as the model's 0x7E00.
//
// This file is the integer kernel and what every kernel of the module shares (the formats, the
// bounds, `store_element`). exact_reference_f64_kernel.cu keeps the same statistics in f64,
// faster where f64 is; reference_judge_kernel.cu judges an output against a reference kept on
// the device. The host compiles the three as one source.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;

// Output tile per CTA and K blocks staged per step: 16 x 16 threads, each 2 x 2 outputs.
#define TILE_M 32
#define TILE_N 32
#define THREADS_X 16
#define THREADS_Y 16
#define STAGE_BLOCKS 8
#define MAX_OPERANDS 2

// What the model's reference computes from the dot products.
#define PROBLEM_GEMM 0
#define PROBLEM_DUAL_GEMM 1

// The model's K orders (KOrder).
#define ORDER_CONTIGUOUS 0
#define ORDER_ANY 1
#define ORDER_PER_PRODUCT 2

#define MAX_SPLITS 16.0
#define SCALE_BLOCK 16.0

// A NaN scale's entry in shared memory: S is never negative otherwise.
#define NAN_SCALE (-1)

struct DotStats {
  i64 sum, prefix_max, prefix_min, abs_blocks, abs_terms, max_block_abs;
  u32 raised_blocks;
  int raised_alignment;
  bool nan;
};

// ---- the formats -------------------------------------------------------------------------------

// e2m1 code -> half units (value * 2), sign included.
__device__ __forceinline__ int e2m1_half_units(u32 code) {
  const int magnitude = code & 7;
  const int units = magnitude < 4 ? magnitude : (magnitude < 6 ? (magnitude - 2) * 2 : (magnitude - 4) * 4);
  return (code & 8) ? -units : units;
}

// Eight packed bytes (16 e2m1 codes, low nibble first) -> 16 int8 half units in four words.
__device__ __forceinline__ uint4 decode_block(uint2 packed) {
  u32 words[4];
  const u32 halves[2] = {packed.x, packed.y};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const u32 two_bytes = (halves[w / 2] >> (16 * (w % 2))) & 0xFFFF;
    u32 word = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const u32 code = (two_bytes >> (4 * i)) & 0xF;
      word |= (u32)(e2m1_half_units(code) & 0xFF) << (8 * i);
    }
    words[w] = word;
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// A UE4M3 scale byte as S (units of 2^-9), or NAN_SCALE. The sign bit is ignored, as a scale is
// read (E4m3::unsigned_scale_parts).
__device__ __forceinline__ int scale_integer(u32 bits) {
  const u32 magnitude = bits & 0x7F;
  if (magnitude == 0x7F) return NAN_SCALE;
  const u32 mantissa = magnitude & 7;
  const u32 exponent_field = magnitude >> 3;
  // sig * 2^(e + 9) with e = 1 - 7 - 3 = -9 (subnormal) or field - 10.
  return exponent_field == 0 ? (int)mantissa : (int)((mantissa | 8) << (exponent_field - 1));
}

// The model's scale_alignment: floor(log2) of S's value, -6 for a subnormal, -126 for zero.
__device__ __forceinline__ int scale_alignment(int s) {
  if (s == 0) return -126;
  const int top = 31 - __clz(s);
  return max(top - 9, -6);
}

__device__ __forceinline__ u32 abs4(u32 word) { return __vabs4(word); }

// A 16-block's sum of products of half units (|s| <= 2304): four dp4a.
__device__ __forceinline__ int block_dot(uint4 a, uint4 b) {
  int s = __dp4a((int)a.x, (int)b.x, 0);
  s = __dp4a((int)a.y, (int)b.y, s);
  s = __dp4a((int)a.z, (int)b.z, s);
  return __dp4a((int)a.w, (int)b.w, s);
}

// The same of the magnitudes (abs4 of each operand): the sum of |products|.
__device__ __forceinline__ u32 block_magnitude_dot(uint4 a_abs, uint4 b_abs) {
  u32 u = __dp4a(a_abs.x, b_abs.x, 0u);
  u = __dp4a(a_abs.y, b_abs.y, u);
  u = __dp4a(a_abs.z, b_abs.z, u);
  return __dp4a(a_abs.w, b_abs.w, u);
}

// ---- the model's portable exp and silu ---------------------------------------------------------

__device__ __forceinline__ double pow2(int e) {
  return __longlong_as_double((i64)(e + 1023) << 52);
}

__device__ double scale_by_pow2(double x, int k) {
  if (k > 1023) return x * pow2(1023) * pow2(k - 1023);
  if (k < -1022) return x * pow2(-1022) * pow2(max(k + 1022, -1022));
  return x * pow2(k);
}

__device__ double portable_factorial(int n) {
  double product = 1.0;
  for (int i = 1; i <= n; ++i) product = product * (double)i;
  return product;
}

__device__ double portable_exp(double x) {
  const double LN2_HI = __longlong_as_double(0x3FE62E42FEE00000LL);
  const double LN2_LO = 1.9082149292705877e-10;
  const double LOG2_E = 1.4426950408889634;
  if (isnan(x)) return x;
  if (x > 709.78) return __longlong_as_double(0x7FF0000000000000LL);
  if (x < -745.2) return 0.0;
  // Rust's f64::round: half away from zero, as C's round.
  const double k = round(x * LOG2_E);
  const double r = (x - k * LN2_HI) - k * LN2_LO;
  double poly = 1.0 / portable_factorial(13);
  for (int i = 12; i >= 0; --i) poly = poly * r + 1.0 / portable_factorial(i);
  return scale_by_pow2(poly, (int)k);
}

__device__ double silu(double x) { return x / (1.0 + portable_exp(-x)); }

// ---- the model's bounds -------------------------------------------------------------------------

#define F32_ULP (1.0 / 8388608.0)
#define STEP_ERROR_ULPS (17.0 / 4.0 + 1.0)
#define RELATIVE_SLACK (1.0 / 1099511627776.0)
#define ABSOLUTE_SLACK (1.0 / 1152921504606846976.0)
#define SILU_ARGMIN (-1.278464542761074)

struct Range {
  double lo, hi;
  // 0: real, 1: NaN, 2: unbounded.
  int kind;
};

__device__ __forceinline__ double fixed_to_f64(i64 n) { return (double)n * pow2(-20); }

// Rust's f64::min and max for the non-NaN values they see here.
__device__ __forceinline__ double min_f64(double a, double b) { return fmin(a, b); }
__device__ __forceinline__ double max_f64(double a, double b) { return fmax(a, b); }

__device__ Range accumulator_range(const DotStats& d, int blocks, int order) {
  Range out;
  out.lo = 0.0;
  out.hi = 0.0;
  if (d.nan) {
    out.kind = 1;
    return out;
  }
  const double exact = fixed_to_f64(d.sum);
  const double abs_terms = fixed_to_f64(d.abs_terms);
  double steps, factor, splits;
  if (order == ORDER_CONTIGUOUS) {
    steps = (double)blocks;
    factor = STEP_ERROR_ULPS;
    splits = fmin((double)blocks, MAX_SPLITS);
  } else if (order == ORDER_ANY) {
    steps = (double)blocks;
    factor = STEP_ERROR_ULPS;
    splits = (double)blocks;
  } else {
    steps = (double)blocks * SCALE_BLOCK;
    factor = 0.5;
    splits = fmin((double)blocks, MAX_SPLITS);
  }
  const i64 positive = (d.abs_blocks + d.sum) / 2;
  const i64 negative = (d.abs_blocks - d.sum) / 2;
  const double subset = fixed_to_f64(positive > negative ? positive : negative);
  const double run = fixed_to_f64(d.prefix_max - d.prefix_min);
  double partial, combined;
  if (order == ORDER_CONTIGUOUS) {
    partial = run;
    combined = min_f64(subset, splits * run);
  } else if (order == ORDER_ANY) {
    partial = subset;
    combined = subset;
  } else {
    const double inside = 2.0 * fixed_to_f64(d.max_block_abs);
    partial = run + inside;
    combined = splits * (run + inside);
  }
  const double unit = F32_ULP;
  const double max_value = 3.4028234663852886e38;  // f32::MAX
  const double step_error = factor * unit;
  const double raised = (d.raised_blocks == 0 || d.abs_terms == 0)
                            ? 0.0
                            : (double)d.raised_blocks * pow2(d.raised_alignment - 32);
  const double numerator =
      step_error * (steps * partial + abs_terms) + unit * (splits - 1.0) * combined + raised;
  const double denominator = 1.0 - step_error * steps - unit * (splits - 1.0) * splits;
  if (denominator <= 0.5) {
    out.kind = 2;
    return out;
  }
  const double error =
      numerator / denominator * (1.0 + RELATIVE_SLACK) + fabs(exact) * RELATIVE_SLACK;
  if (max_f64(partial, subset) + error >= max_value) {
    out.kind = 2;
    return out;
  }
  out.lo = exact - error;
  out.hi = exact + error;
  out.kind = 0;
  return out;
}

__device__ __forceinline__ double outward_down(double x) {
  return x - fabs(x) * RELATIVE_SLACK - ABSOLUTE_SLACK;
}
__device__ __forceinline__ double outward_up(double x) {
  return x + fabs(x) * RELATIVE_SLACK + ABSOLUTE_SLACK;
}

__device__ Range silu_mul_range(Range x1, Range x2) {
  Range out;
  out.lo = 0.0;
  out.hi = 0.0;
  if (x1.kind == 1 || x2.kind == 1) {
    out.kind = 1;
    return out;
  }
  if (x1.kind == 2 || x2.kind == 2) {
    out.kind = 2;
    return out;
  }
  const double at_lo = silu(x1.lo), at_hi = silu(x1.hi);
  const double smallest = (x1.lo <= SILU_ARGMIN && SILU_ARGMIN <= x1.hi) ? silu(SILU_ARGMIN)
                                                                         : min_f64(at_lo, at_hi);
  const double s_lo = outward_down(smallest);
  const double s_hi = outward_up(max_f64(at_lo, at_hi));
  const double corners[4] = {s_lo * x2.lo, s_lo * x2.hi, s_hi * x2.lo, s_hi * x2.hi};
  double lo = __longlong_as_double(0x7FF0000000000000LL);
  double hi = -lo;
  for (int i = 0; i < 4; ++i) {
    lo = min_f64(lo, corners[i]);
    hi = max_f64(hi, corners[i]);
  }
  // epilogue_budget(x1.lo): the clamp of -x1.lo to [0, 128].
  const double budget =
      F32_ULP * (8.0 + 2.0 * fmin(fmax(-x1.lo, 0.0), 128.0)) * max_f64(fabs(lo), fabs(hi));
  out.lo = outward_down(lo - budget);
  out.hi = outward_up(hi + budget);
  out.kind = 0;
  return out;
}

#define FP16_NAN 0x7E00

__device__ __forceinline__ u16 fp16_from_f64_rne(double x) {
  if (isnan(x)) return FP16_NAN;
  u16 bits;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(bits) : "d"(x));
  return bits;
}

__device__ __forceinline__ u16 fp16_from_f32_rne(float x) {
  if (isnan(x)) return FP16_NAN;
  u16 bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(x));
  return bits;
}

// fixed_to_f32_rne(sum, -20): the sum fits an i64 and scaling by 2^-20 is exact in f32 here
// (|sum| * 2^-20 < 2^43, and 2^-20 is normal).
__device__ __forceinline__ float sum_to_f32(i64 sum) { return __ll2float_rn(sum) * 9.5367431640625e-07f; }

struct Interval {
  u16 expected, lo, hi;
};

__device__ __forceinline__ void interval_bits(Range r, u16* lo, u16* hi, int* unbounded) {
  if (r.kind == 1) {
    *lo = FP16_NAN;
    *hi = FP16_NAN;
  } else if (r.kind == 2) {
    *lo = 0xFC00;
    *hi = 0x7C00;
    *unbounded = 1;
  } else {
    *lo = fp16_from_f64_rne(r.lo);
    *hi = fp16_from_f64_rne(r.hi);
  }
}

// One output element from its dot products' statistics (x2 read for the dual GEMM only): the
// expected value, lo and hi at `at`; sets *any_unbounded where the bound does not hold.
__device__ void store_element(const DotStats& x1s, const DotStats& x2s, int blocks, int problem,
                              int order, size_t at, u16* expected, u16* lo_out, u16* hi_out,
                              int* any_unbounded) {
  u16 e, lo, hi;
  const Range x1 = accumulator_range(x1s, blocks, order);
  if (problem == PROBLEM_DUAL_GEMM) {
    const Range x2 = accumulator_range(x2s, blocks, order);
    interval_bits(silu_mul_range(x1, x2), &lo, &hi, any_unbounded);
    if (x1s.nan || x2s.nan) {
      e = FP16_NAN;
    } else {
      const double v1 = (double)sum_to_f32(x1s.sum);
      const double v2 = (double)sum_to_f32(x2s.sum);
      e = fp16_from_f64_rne(silu(v1) * v2);
    }
  } else {
    interval_bits(x1, &lo, &hi, any_unbounded);
    e = x1s.nan ? FP16_NAN : fp16_from_f32_rne(sum_to_f32(x1s.sum));
  }
  expected[at] = e;
  lo_out[at] = lo;
  hi_out[at] = hi;
}

// ---- the dot products and the element -------------------------------------------------------------

// One output tile: rows [m0, m0 + TILE_M) of A against rows [n0, n0 + TILE_N) of each B operand,
// batch `first_batch + blockIdx.z`; writes expected, lo and hi at [m][n][l] (L fastest), as the
// model's Reference. The batches are the grid's third dimension, so that a case of a few output
// tiles and many batches fills the GPU in one launch (one launch per batch ran one CTA at a time
// on a 3 x 1 x 117056 x 256 case: 5 s).
extern "C" __global__ void __launch_bounds__(THREADS_X * THREADS_Y)
    nvfp4_oracle_exact_reference(const u8* a_data, const u8* a_scales, const u8* b1_data,
                                 const u8* b1_scales, const u8* b2_data, const u8* b2_scales,
                                 int m, int n, int blocks, int batches, int first_batch, int problem,
                                 int order, u16* expected, u16* lo_out, u16* hi_out,
                                 int* unbounded) {
  __shared__ uint4 a_values[STAGE_BLOCKS][TILE_M];
  __shared__ int a_scale[STAGE_BLOCKS][TILE_M];
  __shared__ uint4 b_values[MAX_OPERANDS][STAGE_BLOCKS][TILE_N];
  __shared__ int b_scale[MAX_OPERANDS][STAGE_BLOCKS][TILE_N];

  const int operands = problem == PROBLEM_DUAL_GEMM ? 2 : 1;
  const u8* b_data[MAX_OPERANDS] = {b1_data, b2_data};
  const u8* b_scales_of[MAX_OPERANDS] = {b1_scales, b2_scales};
  const int m0 = blockIdx.y * TILE_M, n0 = blockIdx.x * TILE_N;
  const int batch = first_batch + blockIdx.z;
  const int tx = threadIdx.x, ty = threadIdx.y, t = ty * THREADS_X + tx;
  const size_t packed_row = (size_t)blocks * 8;

  DotStats st[MAX_OPERANDS][2][2];
#pragma unroll
  for (int o = 0; o < MAX_OPERANDS; ++o)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        DotStats& s = st[o][r][c];
        s.sum = s.prefix_max = s.prefix_min = s.abs_blocks = s.abs_terms = s.max_block_abs = 0;
        s.raised_blocks = 0;
        s.raised_alignment = 0;
        s.nan = false;
      }

  for (int j0 = 0; j0 < blocks; j0 += STAGE_BLOCKS) {
    // Each thread stages one (row, block) of A and one of each B operand.
    {
      const int row = t / STAGE_BLOCKS, jb = t % STAGE_BLOCKS, j = j0 + jb;
      const int gm = m0 + row;
      uint2 packed = make_uint2(0, 0);
      int s = 0;
      if (gm < m && j < blocks) {
        const size_t r = (size_t)batch * m + gm;
        packed = *(const uint2*)(a_data + r * packed_row + (size_t)j * 8);
        s = scale_integer(a_scales[r * blocks + j]);
      }
      a_values[jb][row] = decode_block(packed);
      a_scale[jb][row] = s;
      for (int o = 0; o < operands; ++o) {
        const int gn = n0 + row;
        uint2 packed_b = make_uint2(0, 0);
        int sb = 0;
        if (gn < n && j < blocks) {
          const size_t r = (size_t)batch * n + gn;
          packed_b = *(const uint2*)(b_data[o] + r * packed_row + (size_t)j * 8);
          sb = scale_integer(b_scales_of[o][r * blocks + j]);
        }
        b_values[o][jb][row] = decode_block(packed_b);
        b_scale[o][jb][row] = sb;
      }
    }
    __syncthreads();
    const int staged = min(STAGE_BLOCKS, blocks - j0);
    for (int jb = 0; jb < staged; ++jb) {
      uint4 a[2], a_abs[2];
      int sa[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        a[r] = a_values[jb][ty + r * THREADS_Y];
        a_abs[r] = make_uint4(abs4(a[r].x), abs4(a[r].y), abs4(a[r].z), abs4(a[r].w));
        sa[r] = a_scale[jb][ty + r * THREADS_Y];
      }
#pragma unroll
      for (int o = 0; o < MAX_OPERANDS; ++o) {
        if (o >= operands) break;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const uint4 b = b_values[o][jb][tx + c * THREADS_X];
          const uint4 b_abs = make_uint4(abs4(b.x), abs4(b.y), abs4(b.z), abs4(b.w));
          const int sb = b_scale[o][jb][tx + c * THREADS_X];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int s = block_dot(a[r], b);
            const u32 u = block_magnitude_dot(a_abs[r], b_abs);
            DotStats& d = st[o][r][c];
            const bool nan = sa[r] == NAN_SCALE || sb == NAN_SCALE;
            // A NaN scale counts as 0: its block adds nothing and raises the maximum.
            const int s_a = nan ? 0 : sa[r], s_b = nan ? 0 : sb;
            const i64 term = (i64)(s * s_a) * (i64)s_b;
            const i64 block_abs = (i64)((int)u * s_a) * (i64)s_b;
            d.nan |= (sa[r] == NAN_SCALE) || (sb == NAN_SCALE);
            d.sum += term;
            d.prefix_max = max(d.prefix_max, d.sum);
            d.prefix_min = min(d.prefix_min, d.sum);
            d.abs_blocks += term < 0 ? -term : term;
            d.abs_terms += block_abs;
            d.max_block_abs = max(d.max_block_abs, block_abs);
            if (term == 0) {
              // The alignments of the scales as stored (0 for NaN), as the model's grid.
              const int z = scale_alignment(sa[r] == NAN_SCALE ? 0 : sa[r]) +
                            scale_alignment(sb == NAN_SCALE ? 0 : sb);
              d.raised_alignment = d.raised_blocks == 0 ? z : max(d.raised_alignment, z);
              d.raised_blocks += 1;
            }
          }
        }
      }
    }
    __syncthreads();
  }

  int any_unbounded = 0;
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int gm = m0 + ty + r * THREADS_Y, gn = n0 + tx + c * THREADS_X;
      if (gm >= m || gn >= n) continue;
      const size_t at = ((size_t)gm * n + gn) * batches + batch;
      store_element(st[0][r][c], st[1][r][c], blocks, problem, order, at, expected, lo_out,
                    hi_out, &any_unbounded);
    }
  if (any_unbounded) atomicOr(unbounded, 1);
}
