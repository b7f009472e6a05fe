// SUPPORTS: M>=1 N>=1 K%128==0 L>=1
// ACCUMULATION: as warp_specialized.cu: K increasing from 0, one wgmma k16 per scale block.
//
// NVFP4 dual GEMM with SiLU, Hopper, cluster pair (sm_90a): the Hopper analogue of Blackwell's
// "2SM" kernels. Compiled after common.cuh, hopper_async.cuh and warp_specialized.cu, whose
// consumer warpgroups, stage layout and epilogue it reuses unchanged; what changes is loading:
//   - a cluster of 2 CTAs (__cluster_dims__) computes one 256-wide tile: both CTAs take the same
//     128 activation rows and 128 weight rows each (grid.x is rounded up to even; a CTA past N
//     computes zeros and stores nothing);
//   - the activation tile is shared: CTA rank r loads activation rows [64r, 64r + 64) with one
//     TMA multicast that lands in BOTH CTAs' shared memory and signals both CTAs' "full"
//     barriers, so each activation byte is read from memory once per pair, not twice;
//   - because a CTA's stage slot is written by its peer too, a slot is free only when the
//     consumers of both CTAs have released it: each consumer warp arrives on the "empty"
//     barrier of both CTAs (distributed shared memory), which counts 16 arrivals;
//   - cluster-wide barriers after the barrier initialisation (no multicast may signal a barrier
//     that does not exist yet) and before exit (no CTA may leave while its peer still writes).
// The prediction: on these shapes activation bytes are ~6% of the traffic (M <= 512 rows vs
// 2N = 8192 weight rows), so halving them should change little; what the pair could buy on
// Blackwell (one MMA spanning two SMs' tensor memory) has no Hopper equivalent.

constexpr int kPairCtas = 2;
constexpr int kPairEmptyArrivals = kPairCtas * kWsEmptyArrivals;

extern "C" __global__ void __cluster_dims__(kPairCtas, 1, 1) __launch_bounds__(kWsThreads, 1)
nvfp4_dual_gemm_cluster_pair(const unsigned char* a, const unsigned char* b1,
                             const unsigned char* b2, const unsigned char* sfa,
                             const unsigned char* sfb1, const unsigned char* sfb2,
                             unsigned short* c, int M, int N, int K, int L,
                             const __grid_constant__ TensorMap map_a,  // box: 64 rows
                             const __grid_constant__ TensorMap map_b1,
                             const __grid_constant__ TensorMap map_b2) {
  WsShared& sh = ws_shared();
  const int tile_n = blockIdx.x, tile_m = blockIdx.y, l = blockIdx.z;
  const unsigned rank = cluster_cta_rank();
  const int k_tiles = K / kWsBK, rest_n = (N + 127) / 128;

  if (threadIdx.x == 0) init_barriers(sh, kPairEmptyArrivals);
  cluster_sync();
  // A slot of either CTA may be written by both (multicast): release it in both.
  auto release = [&](int s) {
    if (threadIdx.x % 32 == 0)
      for (unsigned cta = 0; cta < kPairCtas; ++cta) mbar_arrive_cluster(&sh.empty[s], cta);
  };

  if (threadIdx.x < 128) {
    // A CTA past N has no scale atoms of its own: it reads the last real ones (valid memory,
    // results never stored).
    producer_warpgroup(sh, &map_a, &map_b1, &map_b2, sfa, sfb1, sfb2, M, N, K, tile_m, tile_n,
                       min(tile_n, rest_n - 1), l, 0, k_tiles, (int)rank);
  } else {  // consumer warpgroups: as in the warp-specialized kernel
    const int ctid = threadIdx.x - 128, consumer = ctid / 128;
    float acc1[64], acc2[64];
    consumer_warpgroups(sh, k_tiles, ctid, consumer, acc1, acc2, release);
    store_tile(acc1, acc2, c, M, N, L, tile_m * kWsTileM, tile_n * kWsTileN, l, ctid, consumer);
  }
  cluster_sync();
}
