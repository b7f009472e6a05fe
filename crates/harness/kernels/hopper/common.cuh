// Shared device code of the Hopper NVFP4 kernels (kernels/hopper/*.cu are each compiled as this
// file followed by the kernel's own file; NVRTC is given no include path).
//
// Formats (docs/problem.md): A, B1, B2 are packed e2m1, two per byte, low nibble = even k, each row
// K/2 contiguous bytes, batches after each other; one UE4M3 scale per 16 consecutive k, in the
// blocked layout below; C is fp16 [M][N][L] with L fastest. fp16 is handled as unsigned short
// bits and every special instruction is inline PTX, so no CUDA header is needed.

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// 16-byte async copy; src_bytes = 0 zero-fills the destination without reading src.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(smem_addr(dst)), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}

// e2m1 magnitude code (0..7) -> high byte of its fp16 bits (low byte is always 0):
// 0, 0.5, 1, 1.5 | 2, 3, 4, 6  ->  0x00 0x38 0x3C 0x3E | 0x40 0x42 0x44 0x46.
constexpr unsigned kE2m1HiLo = 0x3E3C3800u;
constexpr unsigned kE2m1HiHi = 0x46444240u;

// One packed byte (two e2m1, low nibble = even k) times its block scale {s, s} -> two fp16 in
// one register, even k in the low half (the MMA fragment order). Exact: e2m1 * e4m3 has at most
// 6 significant bits and lies in [2^-10, 2688], inside fp16's normal range.
__device__ __forceinline__ unsigned decode_fp4x2(unsigned byte, unsigned scale2) {
  // prmt picks byte 0 (0x00) for the low bytes and the LUT bytes for the high bytes.
  const unsigned sel = ((byte & 0x7u) << 4) | ((byte & 0x70u) << 8);
  unsigned h2;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(h2) : "r"(kE2m1HiLo), "r"(kE2m1HiHi), "r"(sel));
  h2 |= ((byte & 0x8u) << 12) | ((byte & 0x80u) << 24);  // the two sign bits
  unsigned out;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(h2), "r"(scale2));
  return out;
}

// Two e2m1 codes, the nibbles at bits 4-7 and 12-15 of x (the other bits are ignored), times
// their block scale {s, s} -> two fp16 (bits 4-7 in the low half). Five instructions where
// decode_fp4x2 needs about ten: the magnitudes come from one prmt through the same table, and
// the signs from a second prmt in sign-replicate mode (selector msb set: the byte becomes its
// own msb repeated), because each nibble's sign is its byte's msb. The kernels that use it
// choose which codes share a register so that this layout comes for free (a permutation of k
// inside a 16-element block, the same for both operands, which no MMA step can see: each step
// sums its 16 products as a set).
__device__ __forceinline__ unsigned decode_fp4_pair_hi(unsigned x, unsigned scale2) {
  unsigned mag, sgn;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(mag) : "r"(kE2m1HiLo), "r"(kE2m1HiHi), "r"(x & 0x7070u));
  asm("prmt.b32 %0, %1, 0, 0x9080;" : "=r"(sgn) : "r"(x));
  const unsigned h2 = mag | (sgn & 0x80008000u);
  unsigned out;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(h2), "r"(scale2));
  return out;
}

// UE4M3 scale byte -> {s, s} as fp16x2. The sign bit is dropped; 0x7F stays NaN.
__device__ __forceinline__ unsigned scale_to_f16x2(unsigned s) {
  const unsigned short two = (unsigned short)((s | (s << 8)) & 0x7F7Fu);
  unsigned out;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(two));
  return out;
}

// The blocked ("permuted") scale layout: for row i, scale column j, batch l the byte is at
//   ((l*rest_mn + i/128)*rest_k + j/4)*512 + (i%32)*16 + ((i%128)/32)*4 + j%4,
// so a 128-row tile's scales for 64 consecutive k are one contiguous 512-byte atom, and the
// atoms of consecutive k-tiles are adjacent.
constexpr int kAtomRows = 128;
constexpr int kAtomK = 64;
constexpr int kAtomBytes = 512;

// Byte `which` (0..3) of four packed UE4M3 scales -> {s, s} as fp16x2, the sign dropped: one
// prmt puts the byte in both halves, so a row's four scale columns of an atom need one load.
__device__ __forceinline__ unsigned scale_from_word_to_f16x2(unsigned word, unsigned which) {
  unsigned two;
  asm("prmt.b32 %0, %1, 0, %2;" : "=r"(two) : "r"(word), "r"(which * 0x11u));
  const unsigned short bytes = (unsigned short)(two & 0x7F7Fu);
  unsigned out;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(out) : "h"(bytes));
  return out;
}

// Byte offset of row r (0..127), scale column kb (0..3) inside a 512-byte atom.
__device__ __forceinline__ int atom_offset(int r, int kb) {
  return (r % 32) * 16 + (r / 32) * 4 + kb;
}

// D += A * B, m16n8k16, fp16 inputs, f32 accumulators.
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// fp16(silu(x1) * x2): evaluated in f64 and rounded once, see the header.
__device__ __forceinline__ unsigned short silu_mul_f16(float x1, float x2) {
  const double x = x1;
  const double v = x / (1.0 + exp(-x)) * (double)x2;
  unsigned short h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(v));
  return h;
}
