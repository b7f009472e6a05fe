// The reference kernel with its block dots on the tensor cores: the same statistics as the f64
// kernel (exact_reference_f64_kernel.cu), the same element (`store_element`). Appended to
// exact_reference_kernel.cu's source, whose formats, bounds and element it uses, and compiled as
// a module of its own (sm_80 PTX: mma.sync with s8 operands), one kernel per K order.
//
// Why the dots are exact. Values are e2m1 in half units, integers |v| <= 12, so int8. A
// 16-element block's dot s and its magnitude dot u (|a| . |b|) are one m16n8k16 s8 MMA each,
// accumulated in s32 from zero: |s|, u <= 16 * 144 = 2304. The operands are decoded once per
// case into int8 half units (`nvfp4_oracle_mma_decode`), not once per output, and a block whose
// scale is 0 or NaN is decoded as zeros: its term is 0 (a NaN scale counts as 0, as the integer
// kernel counts it), so that a term is 0 exactly where s is 0, and the zero blocks are counted
// from s alone.
//
// Why the scaled statistics are exact. With S_b < 2^18 (a UE4M3 scale in units of 2^-9),
// x = s * S_b is below 2304 * 229376 < 2^30 in magnitude, so 2^31 + x is in [0, 2^32) and the
// 64-bit integer 0x4330000080000000 + x (one 32 x 32 -> 64-bit multiply-add) is the bit pattern
// of the f64 2^52 + 2^31 + x. fma(2^52 + 2^31 + x, S_a, -(2^52 + 2^31) * S_a) is x * S_a exactly:
// the fma's product and sum are exact inside it, the true result s * S_a * S_b is an integer
// below 2^48, so its one rounding changes nothing; -(2^52 + 2^31) * S_a is exact (2 bits times 4
// bits of significand). A block's term costs two instructions, no conversion (those run at a
// quarter of the f64 rate). The magnitude terms are summed in 64-bit integers: u * S_b < 2^30,
// times S_a < 2^48, a sum of at most 65,536 of them below 2^64. The term's statistics are kept
// in f64 as the f64 kernel keeps them, with its proof: every partial value of every statistic is
// at most the partial sum of the magnitude terms (abs_terms); while that stays below 2^53 every
// f64 add is exact, and abs_terms only grows, so a final abs_terms below 2^53 proves the
// element exact. An element where it is not sets *inexact, and the host runs the integer kernel
// for the launch instead.
//
// This is the only file of the reference that fuses a multiply-add: the module is compiled
// with --fmad=false like the others, so the element's interval arithmetic (store_element) is
// not contracted; the fma above is written out, and exact by the argument above.
//
// Where the time goes. A warp's MMAs are a few instructions for 128 outputs a B operand; what
// is left per output and block is the statistics, about 16 instructions: the term (a 64-bit
// multiply-add and an fma), the sum and the magnitude sum of the terms (two f64 adds), the
// magnitude term (two integer multiply-adds), the prefix's maximum and minimum (two compares,
// four selects; none for K order "any"), and the zero blocks' count and alignment.

// A CTA is 16 warps, each one 16 x 8 output tile of one B operand: a GEMM's CTA covers 64 x 32
// outputs, a dual GEMM's 32 x 32 (eight warps a B operand). One operand a warp keeps a thread's
// statistics to four elements (48 registers), under the 128 that 16 warps an SM leave.
#define MMA_TILE_M 64          // A rows per CTA for one B operand; half for two
#define MMA_TILE_N 32          // B rows per CTA
#define MMA_WARPS 16
#define MMA_THREADS (MMA_WARPS * 32)
#define MMA_STAGE_BLOCKS 4     // K blocks staged per step, double-buffered
// A staged row: its blocks' int8 values, padded by 16 bytes so that the eight rows a fragment
// load reads start in different banks (20 words apart).
#define MMA_ROW_BYTES (MMA_STAGE_BLOCKS * 16 + 16)
#define MMA_MAGIC 4503601774854144.0  // 2^52 + 2^31
#define MMA_MAGIC_BITS 0x4330000080000000LL  // its bits
#define MMA_EXACT_LIMIT (1ULL << 53)
#define MMA_INT_MIN (-2147483647 - 1)

// ---- the decode, once per operand ----------------------------------------------------------

// One (row, block) a thread: its 16 values as int8 half units (zeros where the scale is 0 or
// NaN), and the row's NaN flag (the caller zeroes `nan_rows`; every writer writes 1).
extern "C" __global__ void nvfp4_oracle_mma_decode(const u8* data, const u8* scales,
                                                   unsigned long long units, int blocks,
                                                   uint4* values, int* nan_rows) {
  const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= units) return;
  const uint2 packed = *(const uint2*)(data + i * 8);
  const int s = scale_integer(scales[i]);
  if (s == NAN_SCALE) nan_rows[i / blocks] = 1;
  values[i] = s > 0 ? decode_block(packed) : make_uint4(0, 0, 0, 0);
}

// ---- the tile --------------------------------------------------------------------------------

typedef unsigned long long u64;

struct MmaStats {
  double sum, prefix_max, prefix_min, abs_blocks;
  u64 abs_terms, max_block_abs;
  u32 raised_blocks;
  int raised_alignment;
};

// What a block of the A side brings to every product: S_a, -(2^52 + 2^31) * S_a.
struct MmaRowScale {
  double scale, offset;
};

__device__ __forceinline__ void mma_s8(int (&d)[4], u32 a0, u32 a1, u32 b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, "
      "{%7,%7,%7,%7};\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(b), "r"(0));
}

__device__ __forceinline__ void cp_async_16(void* shared, const void* global, bool inside) {
  const u32 to = (u32)__cvta_generic_to_shared(shared);
  // A source size of 0 fills the 16 bytes with zeros and reads nothing.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(global),
               "r"(inside ? 16 : 0));
}

// One block of one element: its dot s, magnitude dot u, the A side's scale (f64 and integer),
// the B side's integer scale, the A side's scale alignment and the B side's.
template <int ORDER>
__device__ __forceinline__ void add_block(MmaStats& d, int s, int u, MmaRowScale a, int sa,
                                          int sb, int align_a, int align_b) {
  // The f64 2^52 + 2^31 + s * S_b is one 64-bit multiply-add of its bits (2^31 + s * S_b is in
  // [0, 2^32): no carry into the high word); the fma takes it to s * S_b * S_a exactly.
  const double term = __fma_rn(__longlong_as_double((i64)s * sb + MMA_MAGIC_BITS), a.scale,
                               a.offset);
  // The magnitude term in 64-bit integers: u * S_b < 2^30, times S_a < 2^48.
  const u64 block_abs = (u64)(u32)(u * sb) * (u32)sa;
  d.sum += term;
  // Compares and selects: no value is a NaN (see the f64 kernel).
  if (ORDER != ORDER_ANY) {
    d.prefix_max = d.sum > d.prefix_max ? d.sum : d.prefix_max;
    d.prefix_min = d.sum < d.prefix_min ? d.sum : d.prefix_min;
  }
  d.abs_blocks += fabs(term);
  d.abs_terms += block_abs;
  if (ORDER == ORDER_PER_PRODUCT)
    d.max_block_abs = block_abs > d.max_block_abs ? block_abs : d.max_block_abs;
  // A zero block: counted, and the largest sum of its scales' alignments kept. Predicated in
  // place (one compare, two predicated instructions): selects and copies cost two more.
  asm("{\n"
      "  .reg .pred zero;\n"
      "  setp.eq.s32 zero, %2, 0;\n"
      "  @zero add.u32 %0, %0, 1;\n"
      "  @zero max.s32 %1, %1, %3;\n"
      "}\n"
      : "+r"(d.raised_blocks), "+r"(d.raised_alignment)
      : "r"(s), "r"(align_a + align_b));
}

struct MmaStage {
  u8 a_values[MMA_TILE_M * MMA_ROW_BYTES];
  u8 b_values[MAX_OPERANDS][MMA_TILE_N * MMA_ROW_BYTES];
  MmaRowScale a_scale[MMA_STAGE_BLOCKS][MMA_TILE_M];
  int2 a_integer[MMA_STAGE_BLOCKS][MMA_TILE_M];  // S_a, its alignment
  int2 b_scale[MAX_OPERANDS][MMA_STAGE_BLOCKS][MMA_TILE_N];  // S_b, its alignment
};

// What a dual GEMM's second operand's warp hands the first's for an element: x2's interval
// and value (store_element's x2 and v2), and whether x2 is NaN.
struct MmaSecond {
  double lo, hi, value;
  int kind, nan;
};

// The stages while K is walked; the second operand's elements after.
union MmaShared {
  MmaStage stages[2];
  MmaSecond second[MMA_TILE_M / 2][MMA_TILE_N];
};

// The operands as the kernel reads them: decoded values, the scale bytes, the rows' NaN flags.
struct MmaOperand {
  const uint4* values;
  const u8* scales;
  const int* nan_rows;
};

// What a thread stages: one (row, block) of A or of a B operand.
struct MmaUnit {
  int side;  // 0: A, 1 + o: B operand o, -1: none
  int row, jb;
  size_t global_row;
  bool row_inside;
};

__device__ __forceinline__ MmaUnit mma_unit(int t, int operands, int tile_m, int m, int n,
                                            int m0, int n0, int batch) {
  MmaUnit u;
  const int a_units = tile_m * MMA_STAGE_BLOCKS, b_units = MMA_TILE_N * MMA_STAGE_BLOCKS;
  if (t < a_units) {
    u.side = 0;
    u.row = t / MMA_STAGE_BLOCKS;
    u.row_inside = m0 + u.row < m;
    u.global_row = (size_t)batch * m + m0 + u.row;
  } else if (t < a_units + operands * b_units) {
    u.side = 1 + (t - a_units) / b_units;
    u.row = (t - a_units) % b_units / MMA_STAGE_BLOCKS;
    u.row_inside = n0 + u.row < n;
    u.global_row = (size_t)batch * n + n0 + u.row;
  } else {
    u.side = -1;
    u.row = 0;
    u.row_inside = false;
    u.global_row = 0;
  }
  u.jb = t % MMA_STAGE_BLOCKS;
  return u;
}

// Starts the copy of the unit's values for the step at block j0, and returns its scale byte
// (0 outside), read now so that its latency passes under the current step's work.
__device__ __forceinline__ u32 mma_stage_values(const MmaUnit& u, const MmaOperand& a,
                                                const MmaOperand& b1, const MmaOperand& b2,
                                                MmaStage& stage, int j0, int blocks) {
  if (u.side < 0) return 0;
  const int j = j0 + u.jb;
  const bool inside = u.row_inside && j < blocks;
  const MmaOperand& op = u.side == 0 ? a : (u.side == 1 ? b1 : b2);
  const size_t at = inside ? u.global_row * blocks + j : 0;
  u8* to = u.side == 0 ? stage.a_values : stage.b_values[u.side - 1];
  cp_async_16(to + u.row * MMA_ROW_BYTES + u.jb * 16, op.values + at, inside);
  asm volatile("cp.async.commit_group;\n" ::);
  return inside ? op.scales[at] : 0u;
}

// Writes the unit's scale in the forms the products read (a NaN scale as 0, as decoded).
__device__ __forceinline__ void mma_stage_scale(const MmaUnit& u, MmaStage& stage, u32 byte) {
  if (u.side < 0) return;
  int s = scale_integer(byte);
  if (s == NAN_SCALE) s = 0;
  if (u.side == 0) {
    const double scale = (double)s;
    stage.a_scale[u.jb][u.row] = MmaRowScale{scale, -MMA_MAGIC * scale};
    stage.a_integer[u.jb][u.row] = make_int2(s, scale_alignment(s));
  } else {
    stage.b_scale[u.side - 1][u.jb][u.row] = make_int2(s, scale_alignment(s));
  }
}

// One element's statistics as the integer kernel has them (nan from the rows' flags).
__device__ __forceinline__ DotStats mma_exact(const MmaStats& d, bool nan, int* any_inexact) {
  // Not below 2^53: not proven exact (and the conversions below could be wrong).
  if (d.abs_terms >= MMA_EXACT_LIMIT) *any_inexact = 1;
  DotStats x;
  x.sum = __double2ll_rz(d.sum);
  x.prefix_max = __double2ll_rz(d.prefix_max);
  x.prefix_min = __double2ll_rz(d.prefix_min);
  x.abs_blocks = __double2ll_rz(d.abs_blocks);
  x.abs_terms = (i64)d.abs_terms;
  x.max_block_abs = (i64)d.max_block_abs;
  x.raised_blocks = d.raised_blocks;
  x.raised_alignment = d.raised_blocks == 0 ? 0 : d.raised_alignment;
  x.nan = nan;
  return x;
}

// store_element's dual GEMM with x2's interval and value computed by another warp: the same
// functions on the same values, so the same bits.
__device__ void store_dual_element(const DotStats& x1s, const MmaSecond& x2s, int blocks,
                                   int order, size_t at, u16* expected, u16* lo_out,
                                   u16* hi_out, int* any_unbounded) {
  u16 e, lo, hi;
  const Range x1 = accumulator_range(x1s, blocks, order);
  Range x2;
  x2.lo = x2s.lo;
  x2.hi = x2s.hi;
  x2.kind = x2s.kind;
  interval_bits(silu_mul_range(x1, x2), &lo, &hi, any_unbounded);
  if (x1s.nan || x2s.nan) {
    e = FP16_NAN;
  } else {
    const double v1 = (double)sum_to_f32(x1s.sum);
    e = fp16_from_f64_rne(silu(v1) * x2s.value);
  }
  expected[at] = e;
  lo_out[at] = lo;
  hi_out[at] = hi;
}

// Block jb of the stage for a thread's four elements: rows r0, r0 + 8 and columns c0, c0 + 1
// of the tile, B operand op (whose fragment row is b_row).
template <int ORDER>
__device__ __forceinline__ void mma_block(MmaStats (&st)[4], const MmaStage& stage, int jb, int op,
                                          int r0, int b_row, int c0, int quad) {
  const u8* a_at = stage.a_values + jb * 16 + 4 * quad;
  const u32 a0 = *(const u32*)(a_at + r0 * MMA_ROW_BYTES);
  const u32 a1 = *(const u32*)(a_at + (r0 + 8) * MMA_ROW_BYTES);
  const u32 b = *(const u32*)(stage.b_values[op] + b_row * MMA_ROW_BYTES + jb * 16 + 4 * quad);
  int s[4], u[4];
  mma_s8(s, a0, a1, b);
  mma_s8(u, __vabs4(a0), __vabs4(a1), __vabs4(b));
  const MmaRowScale sa[2] = {stage.a_scale[jb][r0], stage.a_scale[jb][r0 + 8]};
  const int2 ia[2] = {stage.a_integer[jb][r0], stage.a_integer[jb][r0 + 8]};
  const int2 sb[2] = {stage.b_scale[op][jb][c0], stage.b_scale[op][jb][c0 + 1]};
  // Accumulator e: row r0 + 8 * (e / 2), column c0 + e % 2.
#pragma unroll
  for (int e = 0; e < 4; ++e)
    add_block<ORDER>(st[e], s[e], u[e], sa[e / 2], ia[e / 2].x, sb[e % 2].x, ia[e / 2].y,
                     sb[e % 2].y);
}

template <int ORDER>
__device__ __forceinline__ void exact_reference_mma(MmaOperand a, MmaOperand b1, MmaOperand b2,
                                                    int m, int n, int blocks, int batches,
                                                    int first_batch, int problem, u16* expected,
                                                    u16* lo_out, u16* hi_out, int* unbounded,
                                                    int* inexact) {
  __shared__ __align__(16) MmaShared shared;
  const int operands = problem == PROBLEM_DUAL_GEMM ? 2 : 1;
  const int tile_m = MMA_TILE_M / operands, warps_m = tile_m / 16;
  const int m0 = blockIdx.y * tile_m, n0 = blockIdx.x * MMA_TILE_N;
  const int batch = first_batch + blockIdx.z;
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int group = lane / 4, quad = lane % 4;
  // This warp's B operand and tile; this thread's outputs: rows r0, r0 + 8, columns c0, c0 + 1.
  const int op = warp / (MMA_WARPS / operands), warp_in_op = warp % (MMA_WARPS / operands);
  const int r0 = (warp_in_op % warps_m) * 16 + group;
  const int b_row = (warp_in_op / warps_m) * 8 + group;
  const int c0 = (warp_in_op / warps_m) * 8 + 2 * quad;
  const MmaUnit unit = mma_unit(t, operands, tile_m, m, n, m0, n0, batch);

  MmaStats st[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    st[e].sum = st[e].prefix_max = st[e].prefix_min = st[e].abs_blocks = 0.0;
    st[e].abs_terms = st[e].max_block_abs = 0;
    st[e].raised_blocks = 0;
    st[e].raised_alignment = MMA_INT_MIN;
  }

  u32 byte = mma_stage_values(unit, a, b1, b2, shared.stages[0], 0, blocks);
  mma_stage_scale(unit, shared.stages[0], byte);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();
  for (int j0 = 0, buffer = 0; j0 < blocks; j0 += MMA_STAGE_BLOCKS, buffer ^= 1) {
    const bool more = j0 + MMA_STAGE_BLOCKS < blocks;
    if (more)
      byte = mma_stage_values(unit, a, b1, b2, shared.stages[buffer ^ 1], j0 + MMA_STAGE_BLOCKS,
                              blocks);
    const MmaStage& stage = shared.stages[buffer];
    const int staged = min(MMA_STAGE_BLOCKS, blocks - j0);
    // A whole step unrolled (its addresses constants), a short last one not.
    if (staged == MMA_STAGE_BLOCKS) {
#pragma unroll
      for (int jb = 0; jb < MMA_STAGE_BLOCKS; ++jb)
        mma_block<ORDER>(st, stage, jb, op, r0, b_row, c0, quad);
    } else {
      for (int jb = 0; jb < staged; ++jb) mma_block<ORDER>(st, stage, jb, op, r0, b_row, c0, quad);
    }
    if (more) mma_stage_scale(unit, shared.stages[buffer ^ 1], byte);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
  }

  int any_unbounded = 0, any_inexact = 0;
  const MmaOperand& b_op = op == 0 ? b1 : b2;
  // The second operand's warps hand x2 over (the stages are no longer read: the loop's last
  // barrier has passed).
  if (op == 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + 8 * (e / 2), col = c0 + e % 2;
      const int gm = min(m0 + row, m - 1), gn = min(n0 + col, n - 1);
      const bool nan = a.nan_rows[(size_t)batch * m + gm] || b2.nan_rows[(size_t)batch * n + gn];
      const DotStats x2s = mma_exact(st[e], nan, &any_inexact);
      const Range x2 = accumulator_range(x2s, blocks, ORDER);
      shared.second[row][col] = MmaSecond{x2.lo, x2.hi, (double)sum_to_f32(x2s.sum), x2.kind, nan};
    }
  }
  if (operands > 1) __syncthreads();
  if (op == 0) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = r0 + 8 * (e / 2), col = c0 + e % 2;
      const int gm = m0 + row, gn = n0 + col;
      if (gm >= m || gn >= n) continue;
      const bool nan = a.nan_rows[(size_t)batch * m + gm] || b_op.nan_rows[(size_t)batch * n + gn];
      const DotStats x1s = mma_exact(st[e], nan, &any_inexact);
      const size_t at = ((size_t)gm * n + gn) * batches + batch;
      if (operands > 1)
        store_dual_element(x1s, shared.second[row][col], blocks, ORDER, at, expected, lo_out,
                           hi_out, &any_unbounded);
      else
        store_element(x1s, x1s, blocks, problem, ORDER, at, expected, lo_out, hi_out,
                      &any_unbounded);
    }
  }
  if (any_unbounded) atomicOr(unbounded, 1);
  if (any_inexact) atomicOr(inexact, 1);
}

// One kernel per K order. Each operand is its decoded values, its scale bytes and its rows'
// NaN flags (`nvfp4_oracle_mma_decode`); the rest are the f64 kernel's arguments.
#define EXACT_REFERENCE_MMA(name, order)                                                          \
  extern "C" __global__ void __launch_bounds__(MMA_THREADS, 1)                                   \
      name(const uint4* a_values, const u8* a_scales, const int* a_nan, const uint4* b1_values,  \
           const u8* b1_scales, const int* b1_nan, const uint4* b2_values, const u8* b2_scales,  \
           const int* b2_nan, int m, int n, int blocks, int batches, int first_batch,            \
           int problem, u16* expected, u16* lo_out, u16* hi_out, int* unbounded,                 \
           int* inexact) {                                                                        \
    exact_reference_mma<order>(MmaOperand{a_values, a_scales, a_nan},                            \
                               MmaOperand{b1_values, b1_scales, b1_nan},                         \
                               MmaOperand{b2_values, b2_scales, b2_nan}, m, n, blocks, batches,  \
                               first_batch, problem, expected, lo_out, hi_out, unbounded,        \
                               inexact);                                                          \
  }

EXACT_REFERENCE_MMA(nvfp4_oracle_exact_reference_mma_contiguous, ORDER_CONTIGUOUS)
EXACT_REFERENCE_MMA(nvfp4_oracle_exact_reference_mma_any, ORDER_ANY)
EXACT_REFERENCE_MMA(nvfp4_oracle_exact_reference_mma_per_product, ORDER_PER_PRODUCT)
