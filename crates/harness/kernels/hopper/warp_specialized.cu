// SUPPORTS: M>=1 N>=1 K%128==0 L>=1
// ACCUMULATION: K increasing from 0, one wgmma k16 per 16-element scale block (both GEMMs),
// accumulators start at 0.
//
// NVFP4 dual GEMM with SiLU, Hopper, warp-specialized (sm_90a). Compiled after common.cuh and
// hopper_async.cuh.
//
// The GEMMs are computed transposed, C^T = B @ A^T, so that the big operand (B1, B2: the weights,
// N rows) is wgmma's A operand, which may come from registers, and the small one (A: the
// activations, M rows) is wgmma's B operand, read from shared memory:
//   - one CTA per output tile of 128 weight rows (n) x 128 activation rows (m), grid =
//     (ceil(N/128), ceil(M/128), L); 3 warpgroups = 384 threads;
//   - warpgroup 0, the producer: one thread issues TMA copies (tensor maps made on the host) of
//     the packed FP4 rows of A, B1, B2 and bulk copies of their scale atoms into a kStages-deep
//     shared-memory ring; each stage has a "full" mbarrier (TMA bytes arrive) and an "empty" one
//     (every consumer warp has finished reading); setmaxnreg gives its registers away;
//   - warpgroups 1 and 2, the consumers, each own 64 weight rows of both GEMMs (2 x 64 x 128 f32
//     accumulators = 128 registers per thread, hence setmaxnreg 232):
//       - per 16-k scale block, each warp decodes its weight rows straight into wgmma A
//         fragments and issues one m64n128k16 per GEMM;
//       - while those run, the 256 consumer threads decode a piece of the NEXT stage's
//         activation tile (FP4 x scale, exact in fp16, see common.cuh) into a fp16 tile in
//         wgmma's shared-memory layout, and the next block's weight fragments;
//       - after each stage: fence to the async proxy, named barrier of the consumers, release.
//     (Tried on the H100: the producer warpgroup's three idle warps decoding the activation
//     tiles instead, through their own mbarriers: 190 us instead of 160 at 512x4096x7168; 96
//     threads cannot keep up.)
//   - epilogue: fp16(silu(x1) * x2) evaluated in f64 (common.cuh), guarded scalar stores.
// Padding rows (>= M or N) are zero-filled by TMA; their scales may be anything (even NaN) but
// only reach outputs that are never stored: row n of B only meets output column n.

constexpr int kWsTileN = 128;        // weight rows per CTA (wgmma M: 2 consumers x 64)
constexpr int kWsTileM = 128;        // activation rows per CTA (wgmma N)
constexpr int kWsBK = 128;           // k per stage
constexpr int kWsStages = 4;         // shared-memory ring depth
constexpr int kWsActBuffers = 2;     // decoded fp16 activation tiles (see consume_stage)
constexpr int kWsThreads = 384;      // producer warpgroup + 2 consumer warpgroups
constexpr int kWsConsumerThreads = 256;
constexpr int kWsConsumerWarps = kWsConsumerThreads / 32;
constexpr int kWsProducerRegs = 40;
constexpr int kWsConsumerRegs = 232;
constexpr int kWsRowBytes = kWsBK / 2;                  // packed FP4 bytes per row per stage
constexpr int kWsScaleBytes = kWsBK / kAtomK * kAtomBytes;  // one operand's scales per stage
constexpr int kWsSteps = kWsBK / 16;                    // wgmma k16 steps per stage
constexpr int kWsEmptyArrivals = kWsConsumerWarps;  // a slot is free when every consumer is done
constexpr int kActBarrier = 1;       // named barrier id of the consumers (0 is __syncthreads)

static_assert(kWsTileN == 128 && kWsTileM == 128, "one scale atom row block per tile");
static_assert(kWsBK % kAtomK == 0, "a stage holds whole scale atoms");

struct WsStage {
  alignas(128) unsigned char a[kWsTileM * kWsRowBytes];  // [row][64 B], as TMA writes it
  alignas(128) unsigned char b1[kWsTileN * kWsRowBytes];
  alignas(128) unsigned char b2[kWsTileN * kWsRowBytes];
  alignas(128) unsigned char sfa[kWsScaleBytes];         // raw atoms, as in global memory
  alignas(128) unsigned char sfb1[kWsScaleBytes];
  alignas(128) unsigned char sfb2[kWsScaleBytes];
};
constexpr unsigned kWsStageTxBytes = 3 * kWsTileN * kWsRowBytes + 3 * kWsScaleBytes;

// The decoded activation tile, wgmma's B operand, K-major in the 128-byte swizzle layout: two
// column blocks of 64 k (16 KiB each: 128 rows of 128 bytes), in each row the 16-byte chunk c
// (8 k) stored at chunk position c ^ (row % 8), which spreads both our decode stores and the
// tensor cores' reads over all banks. Inside each 16-element scale block j the k are permuted:
// chunk 2j holds the block's even k (0, 2, .., 14), chunk 2j + 1 its odd k, and the weight
// fragments follow the same permutation (see decode_weight_fragment); that is what lets both
// use decode_fp4_pair_hi.
constexpr int kActColumnBytes = kWsTileM * 128;   // one 64-k column block
constexpr unsigned kActAtomBytes = 8 * 128;       // 8 rows x 128 B: wgmma's "stride" offset
struct alignas(1024) ActTile {
  unsigned char bytes[kWsTileM * kWsBK * 2];
};

// Byte offset of row r's 16-byte chunk c (k 8c .. 8c+7 of the stage, hardware order).
__device__ __forceinline__ int act_chunk_offset(int r, int c) {
  return (c / 8) * kActColumnBytes + r * 128 + (((c % 8) ^ (r % 8)) * 16);
}

struct WsShared {
  WsStage stage[kWsStages];
  ActTile act[kWsActBuffers];
  unsigned long long full[kWsStages];
  unsigned long long empty[kWsStages];
};

// What the launcher allocates (WS_SHARED_BYTES in src/gpu/variants.rs): the ring, the
// activation tiles and the barriers, plus 1 KiB of alignment slack (see ws_shared).
static_assert(sizeof(WsShared) + 1024 <= 4 * (3 * 8192 + 3 * 1024) + 2 * 32768 + 1024 + 1024,
              "keep WS_SHARED_BYTES in src/gpu/variants.rs in step");

// Scale byte of tile row r (0..127), stage scale column j (0..kWsBK/16-1).
__device__ __forceinline__ int stage_scale_offset(int r, int j) {
  return (j / 4) * kAtomBytes + atom_offset(r, j % 4);
}

// One chunk of a stage's activation tile, FP4 -> fp16 in the tile's layout: chunk c is row r's
// 16-element block j; its even k go to 16-byte chunk 2j, its odd k to 2j + 1. Consecutive c are
// consecutive rows, whose swizzled 16-byte stores hit 8 different bank groups. Each consumer
// thread decodes one chunk every other MMA step of the previous stage.
constexpr int kActChunks = kWsTileM * (kWsBK / 16);
constexpr int kActChunksPerThread = kActChunks / kWsConsumerThreads;
static_assert(kActChunksPerThread * 2 == kWsSteps, "one activation chunk every other MMA step");

__device__ __forceinline__ void decode_activation_chunk(const WsStage& st, ActTile& act, int c) {
  const int r = c % kWsTileM, j = c / kWsTileM;
  const uint2 w = *reinterpret_cast<const uint2*>(st.a + r * kWsRowBytes + j * 8);
  const unsigned sc = scale_to_f16x2(st.sfa[stage_scale_offset(r, j)]);
  uint4 even, odd;  // k 0,2 | 4,6 | 8,10 | 12,14  and  k 1,3 | 5,7 | 9,11 | 13,15
  even.x = decode_fp4_pair_hi(w.x << 4, sc);
  even.y = decode_fp4_pair_hi(w.x >> 12, sc);
  even.z = decode_fp4_pair_hi(w.y << 4, sc);
  even.w = decode_fp4_pair_hi(w.y >> 12, sc);
  odd.x = decode_fp4_pair_hi(w.x, sc);
  odd.y = decode_fp4_pair_hi(w.x >> 16, sc);
  odd.z = decode_fp4_pair_hi(w.y, sc);
  odd.w = decode_fp4_pair_hi(w.y >> 16, sc);
  *reinterpret_cast<uint4*>(act.bytes + act_chunk_offset(r, 2 * j)) = even;
  *reinterpret_cast<uint4*>(act.bytes + act_chunk_offset(r, 2 * j + 1)) = odd;
}

// One weight row's scales for a whole stage: the 4 scale columns of each of its kWsBK / 64
// atoms are 4 consecutive bytes (see common.cuh), so two loads per row and stage.
struct RowScales {
  unsigned word[kWsBK / kAtomK];
};

__device__ __forceinline__ RowScales load_row_scales(const unsigned char* scales, int row) {
  RowScales rs;
#pragma unroll
  for (int a = 0; a < kWsBK / kAtomK; ++a)
    rs.word[a] = *reinterpret_cast<const unsigned*>(scales + a * kAtomBytes + atom_offset(row, 0));
  return rs;
}

// The wgmma A fragment (the m16n8k16 A layout, per warp 16 rows) of weight rows r and r + 8 for
// scale block j. The fragment's k slots {2t, 2t+1} and {2t+8, 2t+9} of lane t hold, in the
// activation tile's permutation, the block's k {4t, 4t+2} and {4t+1, 4t+3}: the four codes in
// the lane's 16 bits at byte 2t of the block. Regs: {row r}, {row r+8}, {row r}, {row r+8}.
__device__ __forceinline__ void decode_weight_fragment(const unsigned char* rows,
                                                       const RowScales (&sc)[2], int r, int j,
                                                       int t, unsigned (&frag)[4]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = r + 8 * h;
    const unsigned s2 = scale_from_word_to_f16x2(sc[h].word[j / 4], j % 4);
    const unsigned x =
        *reinterpret_cast<const unsigned short*>(rows + row * kWsRowBytes + j * 8 + 2 * t);
#ifdef EXP_NO_WEIGHT_DECODE
    frag[h] = x ^ s2; frag[h + 2] = x;
#else
    frag[h] = decode_fp4_pair_hi(x << 4, s2);  // k 4t, 4t+2
    frag[h + 2] = decode_fp4_pair_hi(x, s2);   // k 4t+1, 4t+3
#endif
  }
}

// Makes a fully decoded activation tile visible to both consumer warpgroups' wgmmas.
__device__ __forceinline__ void publish_activation_tile() {
  fence_proxy_async_shared();
  named_barrier_sync(kActBarrier, kWsConsumerThreads);
}

// One consumer warpgroup's MMAs on one stage, whose activation tile `act` is already decoded;
// meanwhile, if `next` is given, this thread's share of the next stage's activation tile is
// decoded into `next_act`, a chunk every other MMA step. Two MMA steps are kept in flight, so
// the weight fragments rotate through three register sets: the step in flight, the step being
// issued, the step being decoded. Returns when the stage's shared memory and `act` are no longer
// read (every wgmma has completed). Why two activation buffers are enough: both warpgroups meet
// at the named barrier after each stage, so when anyone writes a buffer again (two stages
// later) nobody reads it any more.
__device__ __forceinline__ void consume_stage(const WsStage& st, const ActTile& act,
                                              const WsStage* next, ActTile& next_act, int ctid,
                                              int consumer, float (&acc1)[64],
                                              float (&acc2)[64]) {
  constexpr int kSets = 3;
  const int warp = (ctid / 32) % 4, lane = ctid % 32;
  const int r = consumer * 64 + warp * 16 + lane / 4;  // this lane's first weight row
  const int t = lane % 4;
  const RowScales s1[2] = {load_row_scales(st.sfb1, r), load_row_scales(st.sfb1, r + 8)};
  const RowScales s2[2] = {load_row_scales(st.sfb2, r), load_row_scales(st.sfb2, r + 8)};
  unsigned f1[kSets][4], f2[kSets][4];
  decode_weight_fragment(st.b1, s1, r, 0, t, f1[0]);
  decode_weight_fragment(st.b2, s2, r, 0, t, f2[0]);
#pragma unroll
  for (int j = 0; j < kWsSteps; ++j) {
    const unsigned long long desc = wgmma_desc_swizzle128(
        act.bytes + (j / 4) * kActColumnBytes + (j % 4) * 32, kActAtomBytes);
    wgmma_fence();
    wgmma_m64n128k16_rs(acc1, f1[j % kSets], desc);
    wgmma_m64n128k16_rs(acc2, f2[j % kSets], desc);
    wgmma_commit();
    // While the tensor cores work: the next fragments (their register set was last read by
    // step j - 2, complete since the previous wait), a piece of the next activation tile.
    if (j + 1 < kWsSteps) {
      decode_weight_fragment(st.b1, s1, r, j + 1, t, f1[(j + 1) % kSets]);
      decode_weight_fragment(st.b2, s2, r, j + 1, t, f2[(j + 1) % kSets]);
    }
    if (next != nullptr && j % 2 == 0)
      decode_activation_chunk(*next, next_act, ctid + (j / 2) * kWsConsumerThreads);
    wgmma_wait<1>();  // step j - 1 is complete; step j may still run
    if (j > 0) {
      keep_live(f1[(j - 1) % kSets]);
      keep_live(f2[(j - 1) % kSets]);
    }
  }
  wgmma_wait<0>();
  keep_live(f1[(kWsSteps - 1) % kSets]);
  keep_live(f2[(kWsSteps - 1) % kSets]);
  keep_live(acc1);
  keep_live(acc2);
}

// The consumers' main loop, shared by the warp-specialized and cluster-pair kernels;
// `release(s)` tells the stage slot's producer(s) this warp no longer reads slot s.
template <typename Release>
__device__ __forceinline__ void consumer_main_loop(WsShared& sh, int k_tiles, int ctid,
                                                   int consumer, float (&acc1)[64],
                                                   float (&acc2)[64], Release release) {
  mbar_wait(&sh.full[0], 0);
#pragma unroll 1
  for (int i = 0; i < kActChunksPerThread; ++i)
    decode_activation_chunk(sh.stage[0], sh.act[0], ctid + i * kWsConsumerThreads);
  publish_activation_tile();
#pragma unroll 1
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % kWsStages, next_s = (kt + 1) % kWsStages;
    const bool has_next = kt + 1 < k_tiles;
    if (has_next) mbar_wait(&sh.full[next_s], ((kt + 1) / kWsStages) & 1);
    consume_stage(sh.stage[s], sh.act[kt % kWsActBuffers], has_next ? &sh.stage[next_s] : nullptr,
                  sh.act[(kt + 1) % kWsActBuffers], ctid, consumer, acc1, acc2);
    __syncwarp();
    release(s);
    if (has_next) publish_activation_tile();
  }
}

// Barrier initialisation (thread 0), before any TMA or arrival; `empty_arrivals` counts the
// readers of a stage slot (the consumer warps of every CTA that writes into it).
__device__ __forceinline__ void init_barriers(WsShared& sh, unsigned empty_arrivals) {
  for (int s = 0; s < kWsStages; ++s) {
    mbar_init(&sh.full[s], 1);
    mbar_init(&sh.empty[s], empty_arrivals);
  }
  fence_mbarrier_init();
}

// Epilogue of one consumer warpgroup. Accumulator fragment of m64n128: element i of lane
// (g = lane/4, t = lane%4) in warp w is row 16w + g + 8*((i%4)/2), column 8*(i/4) + 2t + i%2.
__device__ __forceinline__ void store_tile(const float (&acc1)[64], const float (&acc2)[64],
                                           unsigned short* c, int M, int N, int L, int m0,
                                           int n0, int l, int ctid, int consumer) {
  const int warp = (ctid / 32) % 4, lane = ctid % 32;
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    const int n = n0 + consumer * 64 + warp * 16 + lane / 4 + 8 * ((i % 4) / 2);
    const int m = m0 + 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
    if (m < M && n < N) c[((long long)m * N + n) * L + l] = silu_mul_f16(acc1[i], acc2[i]);
  }
}

// Where a tile's scale atoms start: operand rows [128 row_block, +128) of batch l.
__device__ __forceinline__ const unsigned char* tile_scales(const unsigned char* sf, int l,
                                                            int rest_rows, int row_block,
                                                            int rest_k) {
  return sf + ((long long)l * rest_rows + row_block) * rest_k * kAtomBytes;
}

// The producer warpgroup of the three wgmma kernels: gives its registers away, and one thread
// loads k-tiles kt_begin .. kt_begin + k_tiles - 1 of output tile (tile_m, tile_n) into the
// ring (B scales from row block sf_tile_n). With `pair_rank` >= 0 (a 2-CTA cluster sharing the
// activation rows) this CTA loads only activation rows [64 rank, 64 rank + 64) and multicasts
// them to both CTAs; the map's box must then be 64 rows high.
__device__ __forceinline__ void producer_warpgroup(
    WsShared& sh, const TensorMap* map_a, const TensorMap* map_b1, const TensorMap* map_b2,
    const unsigned char* sfa, const unsigned char* sfb1, const unsigned char* sfb2, int M, int N,
    int K, int tile_m, int tile_n, int sf_tile_n, int l, int kt_begin, int k_tiles,
    int pair_rank) {
  setmaxnreg_dec<kWsProducerRegs>();
  if (threadIdx.x != 0) return;
  const int rest_k = K / kAtomK, rest_m = (M + 127) / 128, rest_n = (N + 127) / 128;
  const unsigned char* sfa_t = tile_scales(sfa, l, rest_m, tile_m, rest_k);
  const unsigned char* sfb1_t = tile_scales(sfb1, l, rest_n, sf_tile_n, rest_k);
  const unsigned char* sfb2_t = tile_scales(sfb2, l, rest_n, sf_tile_n, rest_k);
  const int a_row = tile_m * kWsTileM, b_row = tile_n * kWsTileN;
  prefetch_tensor_map(map_a);
  prefetch_tensor_map(map_b1);
  prefetch_tensor_map(map_b2);
  for (int i = 0; i < k_tiles; ++i) {
    const int s = i % kWsStages, kt = kt_begin + i;
    mbar_wait(&sh.empty[s], ((i / kWsStages) & 1) ^ 1);  // every reader released slot s
    WsStage& st = sh.stage[s];
    // In a pair the full barrier counts both halves of A: ours and the one our peer multicasts.
    mbar_arrive_expect_tx(&sh.full[s], kWsStageTxBytes);
    const int x = kt * kWsRowBytes;
    if (pair_rank < 0) {
      tma_load_3d(st.a, map_a, x, a_row, l, &sh.full[s]);
    } else {
      const int half = kWsTileM / 2;
      tma_load_3d_multicast(st.a + pair_rank * half * kWsRowBytes, map_a, x,
                            a_row + pair_rank * half, l, &sh.full[s], (unsigned short)0x3);
    }
    tma_load_3d(st.b1, map_b1, x, b_row, l, &sh.full[s]);
    tma_load_3d(st.b2, map_b2, x, b_row, l, &sh.full[s]);
    const long long sf = (long long)kt * kWsScaleBytes;
    bulk_load(st.sfa, sfa_t + sf, kWsScaleBytes, &sh.full[s]);
    bulk_load(st.sfb1, sfb1_t + sf, kWsScaleBytes, &sh.full[s]);
    bulk_load(st.sfb2, sfb2_t + sf, kWsScaleBytes, &sh.full[s]);
  }
}

// The consumer warpgroups of the three wgmma kernels up to the epilogue: registers taken,
// accumulators zeroed, k_tiles stages accumulated; `release(s)` frees stage slot s.
template <typename Release>
__device__ __forceinline__ void consumer_warpgroups(WsShared& sh, int k_tiles, int ctid,
                                                    int consumer, float (&acc1)[64],
                                                    float (&acc2)[64], Release release) {
  setmaxnreg_inc<kWsConsumerRegs>();
#pragma unroll
  for (int i = 0; i < 64; ++i) acc1[i] = acc2[i] = 0.0f;
  consumer_main_loop(sh, k_tiles, ctid, consumer, acc1, acc2, release);
}

// The dynamic shared memory, aligned up to 1 KiB by hand (the launcher adds 1 KiB for it): TMA
// destinations need 128-byte alignment, and the declared alignment of extern shared memory is
// not a promise about its address.
__device__ __forceinline__ WsShared& ws_shared() {
  extern __shared__ __align__(16) unsigned char ws_smem_raw[];
  const unsigned misalign = smem_addr(ws_smem_raw) % 1024;
  return *reinterpret_cast<WsShared*>(ws_smem_raw + (misalign ? 1024 - misalign : 0));
}

extern "C" __global__ void __launch_bounds__(kWsThreads, 1)
nvfp4_dual_gemm_warp_specialized(const unsigned char* a, const unsigned char* b1,
                                 const unsigned char* b2, const unsigned char* sfa,
                                 const unsigned char* sfb1, const unsigned char* sfb2,
                                 unsigned short* c, int M, int N, int K, int L,
                                 const __grid_constant__ TensorMap map_a,
                                 const __grid_constant__ TensorMap map_b1,
                                 const __grid_constant__ TensorMap map_b2) {
  WsShared& sh = ws_shared();
  const int tile_n = blockIdx.x, tile_m = blockIdx.y, l = blockIdx.z;
  const int k_tiles = K / kWsBK;

  if (threadIdx.x == 0) init_barriers(sh, kWsEmptyArrivals);
  __syncthreads();
  auto release = [&](int s) {
    if (threadIdx.x % 32 == 0) mbar_arrive(&sh.empty[s]);
  };

  if (threadIdx.x < 128) {
    producer_warpgroup(sh, &map_a, &map_b1, &map_b2, sfa, sfb1, sfb2, M, N, K, tile_m, tile_n,
                       tile_n, l, 0, k_tiles, -1);
  } else {
    const int ctid = threadIdx.x - 128, consumer = ctid / 128;
    float acc1[64], acc2[64];
    consumer_warpgroups(sh, k_tiles, ctid, consumer, acc1, acc2, release);
    store_tile(acc1, acc2, c, M, N, L, tile_m * kWsTileM, tile_n * kWsTileN, l, ctid, consumer);
  }
}
