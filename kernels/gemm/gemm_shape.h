/*
 * The CUDA GEMM kernels' shapes, in one place for the kernels (gemm_sm90.cuh,
 * gemm_pipelined.cuh, gemm_tiled.cuh) and the capability rows that state them. Plain numbers:
 * the rows print them.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SHAPE_H_
#define OPSLIB_KERNELS_GEMM_GEMM_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

/* Hopper (gemm_sm90.cuh): tiles of BM x BN, K blocks of BK, a producer warpgroup and two
 * consumer warpgroups; STAGES K blocks in flight by BN. */
#define OPSI_GEMM_SM90_BM 128
#define OPSI_GEMM_SM90_BK 64
#define OPSI_GEMM_SM90_THREADS 384
#define OPSI_GEMM_SM90_LOAD_REGS 40
#define OPSI_GEMM_SM90_MMA_REGS 232
#define OPSI_GEMM_SM90_STAGES_256 4
#define OPSI_GEMM_SM90_STAGES_192 4
#define OPSI_GEMM_SM90_STAGES_128 6
#define OPSI_GEMM_SM90_STAGES_112 6
#define OPSI_GEMM_SM90_STAGES_96 6
#define OPSI_GEMM_SM90_STAGES_64 8
/* NAME##_BN of a tile width (256, 192, 128, 112, 96, else 64): the per-width constants below,
 * as the kernel takes them and the rows print them */
#define OPSI_GEMM_SM90_BY_WIDTH(NAME, BN)                                                          \
  ((BN) == 256   ? NAME##_256                                                                      \
   : (BN) == 192 ? NAME##_192                                                                      \
   : (BN) == 128 ? NAME##_128                                                                      \
   : (BN) == 112 ? NAME##_112                                                                      \
   : (BN) == 96  ? NAME##_96                                                                       \
                 : NAME##_64)
/* A width that is a multiple of 64 loads an N-major B as BN / 64 boxes of 64 x 64 and stores
 * D by TMA in 64 x 64 boxes; the others (112, 96: tile counts that fill the SMs where 64-wide
 * multiples leave a part of a wave idle) take B K-major only and store D by the threads. */
#define OPSI_GEMM_SM90_BOXED(BN) ((BN) % 64 == 0)
#define OPSI_GEMM_SM90_STAGES(BN) OPSI_GEMM_SM90_BY_WIDTH(OPSI_GEMM_SM90_STAGES, BN)
/* wgmma groups a consumer warpgroup leaves in flight when it hands a stage back: 0 (the
 * stage goes back as soon as its own group completes; the other warpgroup's group keeps the
 * tensor cores busy meanwhile) where a K block's group is long (BN >= 128), 1 (a K block
 * later) where it is short; 1 for every split call (IN_FLIGHT_SPLIT) */
#define OPSI_GEMM_SM90_IN_FLIGHT_256 0
#define OPSI_GEMM_SM90_IN_FLIGHT_192 0
#define OPSI_GEMM_SM90_IN_FLIGHT_128 0
#define OPSI_GEMM_SM90_IN_FLIGHT_112 0
#define OPSI_GEMM_SM90_IN_FLIGHT_96 0
#define OPSI_GEMM_SM90_IN_FLIGHT_64 1
#define OPSI_GEMM_SM90_IN_FLIGHT_SPLIT 1
#define OPSI_GEMM_SM90_IN_FLIGHT(BN) OPSI_GEMM_SM90_BY_WIDTH(OPSI_GEMM_SM90_IN_FLIGHT, BN)
/* One consumer warpgroup a tile (gemm_sm90_mma.cuh's mma_wide): where a tile's accumulators
 * fit one warpgroup's registers (BN <= WIDE_MAX_BN: two 64-row halves, BN floats a thread), the
 * call is unsplit and M is over 64 (else the tile's second half holds no rows, and the two
 * 64-row consumers run it, one handing its stages back unread). The two consumer warpgroups
 * then take a block's tiles in turn, one's epilogue under the other's mainloop. */
#define OPSI_GEMM_SM90_WIDE_MAX_BN 128
static inline int opsi_gemm_sm90_wide(int32_t bn, int64_t m, int32_t parts) {
  return bn <= OPSI_GEMM_SM90_WIDE_MAX_BN && parts == 1 && m > 64;
}
/* a consumer warpgroup's epilogue memory: two 64 x 64 16-bit TMA store buffers */
#define OPSI_GEMM_SM90_EPI_WG_BYTES (2 * 64 * 64 * 2)
/* dynamic shared memory: swizzle-atom slack, the stages (A BM x BK, B BN x BK, 16-bit), two
 * warpgroups' epilogue memory, a 16-bit column bias a warpgroup, full / empty mbarriers */
#define OPSI_GEMM_SM90_SMEM(BN)                                                                    \
  (1024 + OPSI_GEMM_SM90_STAGES(BN) * (OPSI_GEMM_SM90_BM + (BN)) * OPSI_GEMM_SM90_BK * 2 +        \
   2 * OPSI_GEMM_SM90_EPI_WG_BYTES + 2 * (BN) * 2 + 2 * OPSI_GEMM_SM90_STAGES(BN) * 8)

/* The L2 eviction priorities of a call's loads (the kernel's l2_hints: A's in bits 0-1, B's
 * in bits 2-3; 0 normal, 1 first, 2 last, sm90_async.cuh's l2_evict). A row of tiles reads
 * its rows of A once per column tile: where there are several, A's loads are kept (last).
 * B's loads go first where few tile rows read each B tile (their blocks run side by side in
 * tile order, so the last of them reads it before it goes) and no other batch reads it
 * (b_broadcast: one B for every batch). */
#define OPSI_GEMM_SM90_L2_B_FIRST_MAX_ROWS 2
static inline int32_t opsi_gemm_sm90_l2_hints(int64_t tiles_m, int64_t tiles_n, int b_broadcast) {
  const int32_t a = tiles_n > 1 ? 2 : 0, b = tiles_m <= OPSI_GEMM_SM90_L2_B_FIRST_MAX_ROWS && !b_broadcast ? 1 : 0;
  return a | b << 2;
}

/* Split-K on the Hopper kernel (the _splitk rows): where the output tiles fill too few SMs,
 * the K blocks of each tile are cut into `parts` ranges of kb_per_part blocks, one block a
 * (tile, range), the parts of a tile one thread block cluster. After its mainloop each block
 * puts its f32 partial rows in its shared memory, and each consumer warpgroup's rows are added
 * in rank order (distributed shared memory) and stored by one block, rank cw % parts (two
 * blocks share the work): no workspace, no second kernel, bitwise reproducible. A part
 * takes at least SPLITK_MIN_KBLOCKS K blocks; the part counts are powers of two up to
 * SPLITK_MAX (portable cluster sizes); the clusters fit one wave (opsi_gemm_splitk_parts). */
#define OPSI_GEMM_SPLITK_MAX 8
#define OPSI_GEMM_SPLITK_MIN_KBLOCKS 4
/* The split counts a split call may take (1 is no split: the unsplit rows run it), so that
 * explain and the launcher name them in static words. */
#define OPSI_GEMM_SPLITK_COUNTS(X) X(2) X(4) X(8)

/* Output tiles of a call (batch x tiles of 128 x BN); 0 for an empty one, INT64_MAX where
 * the count overflows (such a call is never split). */
static inline int64_t opsi_gemm_sm90_tiles(int64_t batch, int64_t m, int64_t n, int32_t bn) {
  if (batch <= 0 || m <= 0 || n <= 0) return 0;
  const int64_t tm = m / OPSI_GEMM_SM90_BM + (m % OPSI_GEMM_SM90_BM != 0), tn = n / bn + (n % bn != 0);
  int64_t t;
  if (__builtin_mul_overflow(tm, tn, &t) || __builtin_mul_overflow(t, batch, &t)) return INT64_MAX;
  return t;
}

/* The rows of A a stage holds: M rounded up to 8 (a swizzle atom) below a tile, else a tile.
 * A box no taller than A spares the copy engine the zero fill of rows past M, whose outputs
 * are never stored. */
static inline int32_t opsi_gemm_sm90_a_rows(int64_t m) {
  return m >= OPSI_GEMM_SM90_BM ? OPSI_GEMM_SM90_BM : (int32_t)((m + 7) / 8 * 8);
}

/* The parts of a call: the most, among 2, 4 and 8, whose clusters are all resident at once
 * with at least SPLITK_MIN_KBLOCKS K blocks a part (every part non-empty), else 1. One block
 * an SM: clusters of 2 (an SM pair) fill sm_count SMs; clusters of 4 or 8 must share a GPC,
 * whose SM counts leave some SMs out (H100, 132 SMs: 66 clusters of 2, 30 of 4, 15 of 8
 * resident), so their blocks may take CLUSTER_FILL of sm_count. A tile's parts stream its K
 * range at once and the reduction costs less than the K blocks it spares, so the most parts
 * that fit win (bench/RESULTS.md, issue 26's grid). */
#define OPSI_GEMM_SPLITK_CLUSTER_FILL 0.9
static inline int32_t opsi_gemm_splitk_parts(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t bn,
                                             int64_t sm_count) {
  const int64_t tiles = opsi_gemm_sm90_tiles(batch, m, n, bn);
  if (tiles <= 0 || k <= 0 || sm_count <= 0 || tiles > sm_count / 2 || k > ((int64_t)1 << 40)) return 1;
  const int64_t kblocks = k / OPSI_GEMM_SM90_BK + (k % OPSI_GEMM_SM90_BK != 0);
  int32_t best = 1;
  for (int32_t p = 2; p <= OPSI_GEMM_SPLITK_MAX; p *= 2) {
    const int64_t per = (kblocks + p - 1) / p;
    if (per < OPSI_GEMM_SPLITK_MIN_KBLOCKS) break;
    if ((double)(tiles * p) > (p == 2 ? 1.0 : OPSI_GEMM_SPLITK_CLUSTER_FILL) * (double)sm_count) break;
    if ((kblocks + per - 1) / per == p) best = p; /* else a part would be empty */
  }
  return best;
}

/* The blocks of a launch of `units` work units (tiles x parts): one a unit where the call is
 * split (its clusters fit one wave) or the units are fewer than the SMs, else one an SM, each
 * walking units in turn. The launcher launches it and the rows' plans predict from it. */
static inline int64_t opsi_gemm_sm90_grid(int64_t units, int32_t parts, int64_t sm_count) {
  return parts > 1 || units < sm_count ? units : sm_count;
}

/* Unsplit calls whose blocks fill half a wave or more but not all of it launch in clusters
 * of SPREAD_CLUSTER blocks, where the grid is a multiple of it and no larger than such
 * clusters keep resident (SPLITK_CLUSTER_FILL of the SMs): the hardware places a cluster's
 * blocks on one GPC, so the partial wave is spread over the GPCs a cluster at a time rather
 * than left to the block scheduler. The kernel uses no cluster feature there (no multicast,
 * no distributed shared memory). 0: the call runs without clusters. */
#define OPSI_GEMM_SM90_SPREAD_CLUSTER 4
static inline int32_t opsi_gemm_sm90_spread_cluster(int64_t grid, int32_t parts, int64_t sm_count) {
  const int ok = parts == 1 && grid % OPSI_GEMM_SM90_SPREAD_CLUSTER == 0 && 2 * grid >= sm_count &&
                 (double)grid <= OPSI_GEMM_SPLITK_CLUSTER_FILL * (double)sm_count;
  return ok ? OPSI_GEMM_SM90_SPREAD_CLUSTER : 0;
}

/* The plan of a split count, in static words (explain, the profiler). */
static inline const char *opsi_gemm_splitk_plan(int32_t parts) {
  switch (parts) {
#define OPSI_GEMM_SPLITK_CASE(N) \
  case N: return "K split in " #N " parts, a cluster of " #N " a tile";
    OPSI_GEMM_SPLITK_COUNTS(OPSI_GEMM_SPLITK_CASE)
#undef OPSI_GEMM_SPLITK_CASE
    default: return "K split (unlisted count)";
  }
}

/* cp.async pipelined (gemm_pipelined.cuh): tiles of 128 x 128, STAGES steps of 64 bytes of K a
 * row, rows padded by 16 bytes; 8 warps */
#define OPSI_GEMM_CP_BM 128
#define OPSI_GEMM_CP_BN 128
#define OPSI_GEMM_CP_STAGES 4
#define OPSI_GEMM_CP_THREADS 256
#define OPSI_GEMM_CP_ROW_BYTES 64
#define OPSI_GEMM_CP_PAD_BYTES 16
#define OPSI_GEMM_CP_SMEM \
  (OPSI_GEMM_CP_STAGES * (OPSI_GEMM_CP_BM + OPSI_GEMM_CP_BN) * (OPSI_GEMM_CP_ROW_BYTES + OPSI_GEMM_CP_PAD_BYTES))

/* register-staged (gemm_tiled.cuh), two K tiles in static shared memory: mma.sync 128 x 128 x
 * 32 (16-bit, rows padded by 8 elements), f32 FMA 64 x 64 x 16 (rows padded by 1 word) */
#define OPSI_GEMM_MMA_BM 128
#define OPSI_GEMM_MMA_BN 128
#define OPSI_GEMM_MMA_BK 32
#define OPSI_GEMM_MMA_THREADS 256
#define OPSI_GEMM_MMA_SMEM (2 * (OPSI_GEMM_MMA_BM + OPSI_GEMM_MMA_BN) * (OPSI_GEMM_MMA_BK + 8) * 2)
#define OPSI_GEMM_FFMA_BM 64
#define OPSI_GEMM_FFMA_BN 64
#define OPSI_GEMM_FFMA_BK 16
#define OPSI_GEMM_FFMA_THREADS 256
#define OPSI_GEMM_FFMA_SMEM (2 * (OPSI_GEMM_FFMA_BM + OPSI_GEMM_FFMA_BN) * (OPSI_GEMM_FFMA_BK + 1) * 4)

#endif /* OPSLIB_KERNELS_GEMM_GEMM_SHAPE_H_ */
