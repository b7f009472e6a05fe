// SUPPORTS: M>=1 N>=1 K%256==0 L>=1
// ACCUMULATION: K split into two contiguous halves; each half's f32 accumulators receive it in
// increasing order, one wgmma k16 per scale block, from 0; then (first half) + (second half),
// one f32 add, round to nearest even.
//
// NVFP4 dual GEMM with SiLU, Hopper, split-K cluster pair (sm_90a): two CTAs (two SMs) cooperate
// on ONE 128 x 128 output tile, the other Hopper reading of Blackwell's "2SM". Compiled after
// common.cuh, hopper_async.cuh and warp_specialized.cu, whose producer, consumers and epilogue it
// reuses; what changes:
//   - grid = (2 ceil(N/128), ceil(M/128), L) in clusters of 2 along x: cluster CTA rank r runs
//     the whole warp-specialized pipeline on K half r of the tile (k-tiles [r K/256, (r+1) K/256));
//   - then the reduction through distributed shared memory, in a fixed order so the result is
//     reproducible bit for bit: both CTAs meet at a cluster barrier (their rings are drained),
//     rank 1's consumers write their f32 accumulators into rank 0's shared memory, a second
//     cluster barrier publishes them, and rank 0 adds them to its own (first half + second half)
//     and runs the epilogue.
// Why: at small M there are fewer 128 x 128 tiles than SMs (64 tiles at 256 x 4096 on 132 SMs),
// so half the GPU idles; splitting K doubles the CTAs. At M = 512 (128 tiles) it makes two
// waves instead of one and should lose.

constexpr int kSplits = 2;
// Rank 1's partial sums: per consumer thread 2 x 64 floats as 32 float4, chunk q of thread i at
// (q * 256 + i) * 16 bytes, so consecutive threads write consecutive 16 bytes.
constexpr int kPartialChunks = 2 * 64 / 4;
static_assert(kPartialChunks * kWsConsumerThreads * 16 <=
                  (int)(sizeof(WsStage) * kWsStages + sizeof(ActTile) * kWsActBuffers),
              "the partial sums fit in the drained ring and activation tiles (before the barriers)");

__device__ __forceinline__ void store_remote_f4(unsigned local_addr, unsigned cta, float a,
                                                float b, float c, float d) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "st.shared::cluster.v4.f32 [remote], {%2, %3, %4, %5};\n}\n"
      :: "r"(local_addr), "r"(cta), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

extern "C" __global__ void __cluster_dims__(kSplits, 1, 1) __launch_bounds__(kWsThreads, 1)
nvfp4_dual_gemm_splitk_pair(const unsigned char* a, const unsigned char* b1,
                            const unsigned char* b2, const unsigned char* sfa,
                            const unsigned char* sfb1, const unsigned char* sfb2,
                            unsigned short* c, int M, int N, int K, int L,
                            const __grid_constant__ TensorMap map_a,
                            const __grid_constant__ TensorMap map_b1,
                            const __grid_constant__ TensorMap map_b2) {
  WsShared& sh = ws_shared();
  const unsigned rank = cluster_cta_rank();
  const int tile_n = blockIdx.x / kSplits, tile_m = blockIdx.y, l = blockIdx.z;
  const int k_tiles = K / kWsBK / kSplits;

  if (threadIdx.x == 0) init_barriers(sh, kWsEmptyArrivals);
  __syncthreads();
  auto release = [&](int s) {
    if (threadIdx.x % 32 == 0) mbar_arrive(&sh.empty[s]);
  };

  // The reduction needs two cluster barriers that every thread of both CTAs takes part in; each
  // branch takes them itself, so the accumulators live only in the consumers' branch (keeping
  // them live across the producer's code costs the registers wgmma needs).
  if (threadIdx.x < 128) {
    producer_warpgroup(sh, &map_a, &map_b1, &map_b2, sfa, sfb1, sfb2, M, N, K, tile_m, tile_n,
                       tile_n, l, rank * k_tiles, k_tiles, -1);
    __syncwarp();
    cluster_sync();
    cluster_sync();
    return;
  }
  const int ctid = threadIdx.x - 128, consumer = ctid / 128;
  float acc1[64], acc2[64];
  consumer_warpgroups(sh, k_tiles, ctid, consumer, acc1, acc2, release);

  cluster_sync();  // both rings and activation tiles drained: rank 0's may be overwritten
  const unsigned partials = smem_addr(&sh.stage[0]);
  if (rank == 1) {
#pragma unroll
    for (int q = 0; q < kPartialChunks; ++q) {
      const float* src = q < kPartialChunks / 2 ? &acc1[4 * q] : &acc2[4 * q - 64];
      store_remote_f4(partials + (q * kWsConsumerThreads + ctid) * 16, 0, src[0], src[1],
                      src[2], src[3]);
    }
  }
  cluster_sync();  // rank 1's partial sums are in rank 0's shared memory
  if (rank == 0) {
    const float4* mine = reinterpret_cast<const float4*>(&sh.stage[0]);
#pragma unroll
    for (int q = 0; q < kPartialChunks; ++q) {
      const float4 p = mine[q * kWsConsumerThreads + ctid];
      float* dst = q < kPartialChunks / 2 ? &acc1[4 * q] : &acc2[4 * q - 64];
      dst[0] += p.x;  // first half + second half, in that order
      dst[1] += p.y;
      dst[2] += p.z;
      dst[3] += p.w;
    }
    store_tile(acc1, acc2, c, M, N, L, tile_m * kWsTileM, tile_n * kWsTileN, l, ctid, consumer);
  }
}
