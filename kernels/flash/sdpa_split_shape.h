/*
 * The split-KV attention kernels' shapes (sdpa_split.cuh), in one place for the kernels, their
 * launcher and the capability rows, with the split count that the rows' workspace and plan
 * and the launcher all take from it.
 *
 * A block is 4 warps over one KV head: its query rows are the packed rows (query row i, query head
 * g of the KV head's group) -> i * group + g, BM of them, so that K and V are read once for every
 * query head that shares them. _m16 kernels: BM 16, the 4 warps split each key tile (16 keys a
 * warp) and merge at the end; _m64: BM 64, a warp 16 rows over every key. Key tiles of BN rows
 * stream through a STAGES-deep cp.async (or TMA) ring (K and V a stage). Shared memory: the ring
 * STAGES x 2 x BN x DP (16-bit), Q BM x DP, the paged rows' K and V offsets of the next two tiles
 * 2 x 2 x BN int64 (where TMA loads the tiles: a K and a V barrier a stage there instead), and the
 * merge's row statistics 2 x 64 floats. Q's fragments live in registers where DP <= 128; the _m64
 * kernels' Q rows then sit in the K half of the ring's last stage, which is first filled after
 * every warp has taken Q (BM <= BN; 16 KB apart would cost a block an SM), and the ring starts
 * with STAGES - 1 tiles in flight; elsewhere Q has its own rows after the ring and every stage is
 * in flight from the start (a part of two tiles waits for one round trip, not two). The merge's
 * f32 partial outputs (64 rows of DP + 8 floats) reuse the ring. On sm_90a the _m64 kernel with DP
 * 128 is one warpgroup whose wgmma takes Q (and P) from registers and K and V from shared memory,
 * laid out in 128-byte swizzle atoms (64 columns of 16-bit values, rows 128 bytes apart, 16-byte
 * chunks XOR row % 8; a DP-wide tile of R rows is DP / 64 atoms R x 128 bytes apart); elsewhere
 * mma.sync, the tiles' chunks XOR-swizzled by row % 8.
 * PER_SM: resident blocks an SM by shared memory on sm_90 (228 KB) and by registers (the
 * kernels' launch bounds hold them to it), for the cost model and the split count.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SPLIT_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_SPLIT_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

#define OPSI_SDPA_SPLIT_WARPS 4
#define OPSI_SDPA_SPLIT_BN 64
#define OPSI_SDPA_SPLIT_D64_M16_STAGES 4
#define OPSI_SDPA_SPLIT_D64_M64_STAGES 4
#define OPSI_SDPA_SPLIT_D128_M16_STAGES 2
#define OPSI_SDPA_SPLIT_D128_M64_STAGES 3
#define OPSI_SDPA_SPLIT_D256_M16_STAGES 2
#define OPSI_SDPA_SPLIT_D256_M64_STAGES 2
#define OPSI_SDPA_SPLIT_D64_M16_PER_SM 3
#define OPSI_SDPA_SPLIT_D64_M64_PER_SM 3
#define OPSI_SDPA_SPLIT_D128_M16_PER_SM 3
#define OPSI_SDPA_SPLIT_D128_M64_PER_SM 2
#define OPSI_SDPA_SPLIT_D256_M16_PER_SM 1
#define OPSI_SDPA_SPLIT_D256_M64_PER_SM 1
/* SM range: DP 64 and 128 fit the 99 KB a block may have on sm_86 / sm_89; DP 256 (136 KB
 * and 160 KB) runs on sm_90 */
#define OPSI_SDPA_SPLIT_D64_SM_MIN 80
#define OPSI_SDPA_SPLIT_D128_SM_MIN 80
#define OPSI_SDPA_SPLIT_D256_SM_MIN 90

/* Q's fragments stay in registers across key tiles; _m64's Q rows in the ring's last stage */
#define OPSI_SDPA_SPLIT_HOIST_Q(DP) ((DP) <= 128)
#define OPSI_SDPA_SPLIT_Q_IN_RING(DP, BM) (OPSI_SDPA_SPLIT_HOIST_Q(DP) && (BM) > 16)
/* the _m64 kernel's math on sm_90a for head dims up to 128: one warpgroup's wgmma */
#define OPSI_SDPA_SPLIT_WGMMA(DP, BM) ((BM) == 64 && (DP) == 128)
/* Rows of a TMA box of K / V for the _d128_m64 kernel on sm_90a (0: cp.async): a tile's 64 rows
 * in one box where the cache is contiguous; paged, the largest power of two <= 64 that divides
 * the page size, so that no box crosses a page, taken where it is a multiple of 8 (a box starts
 * on a swizzle atom's first row; at most 8 boxes, 32 copies a tile, one a lane of warp 0 where
 * it issues a tile alone). */
static inline int32_t opsi_sdpa_split_tma_box(int dp, int bm, int32_t sm, int64_t page_size) {
  if (!OPSI_SDPA_SPLIT_WGMMA(dp, bm) || sm < 90) return 0;
  if (page_size <= 0) return 64;
  const int64_t low = page_size & -page_size;
  return low >= 64 ? 64 : low >= 8 ? (int32_t)low : 0;
}
/* dynamic shared memory of a block, bytes */
#define OPSI_SDPA_SPLIT_SMEM(BM, BN, DP, STAGES)                                                          \
  (((OPSI_SDPA_SPLIT_Q_IN_RING(DP, BM) ? 0 : (BM)) + 2 * (STAGES) * (BN)) * (DP) * 2 + 2 * 2 * (BN) * 8 + \
   2 * 64 * 4)

/* A split has at least MIN_TILES key tiles; the counts a call may take (so that explain and
 * the launcher name them in static words): 1, 2, 3, 4, 6, 8, ... 96, 128. */
#define OPSI_SDPA_SPLIT_MIN_TILES 2
#define OPSI_SDPA_SPLIT_COUNTS(X) \
  X(1) X(2) X(3) X(4) X(6) X(8) X(12) X(16) X(24) X(32) X(48) X(64) X(96) X(128)

/* Parts each sequence's keys are split into, from the listed counts with at least MIN_TILES of
 * the key_tiles each: the fewest parts whose blocks (units x parts: batch x KV heads x row tiles
 * x parts) fill the waves of the device's block slots (sm_count * per_sm) to within a fraction
 * OPSI_SDPA_SPLIT_WAVE_SLACK of the best count's fill (512 blocks on 396 slots take two waves,
 * 65% full; in three parts, four waves 97% full). */
#define OPSI_SDPA_SPLIT_WAVE_SLACK 0.05
static inline double opsi_sdpa_split_fill(int64_t blocks, int64_t slots) {
  return (double)blocks / (double)(((blocks + slots - 1) / slots) * slots);
}
/* The i-th listed count, ascending; 0 past the last */
static inline int32_t opsi_sdpa_split_listed(size_t i) {
  static const int32_t counts[] = {
#define OPSI_SDPA_SPLIT_ENTRY(N) N,
      OPSI_SDPA_SPLIT_COUNTS(OPSI_SDPA_SPLIT_ENTRY)
#undef OPSI_SDPA_SPLIT_ENTRY
  };
  return i < sizeof counts / sizeof counts[0] ? counts[i] : 0;
}
static inline int32_t opsi_sdpa_split_count(int64_t units, int64_t key_tiles, int64_t sm_count, int32_t per_sm) {
  const int64_t slots = sm_count * per_sm, most = key_tiles / OPSI_SDPA_SPLIT_MIN_TILES;
  if (units <= 0 || slots <= 0) return 1;
  double best = 0.0;
  int32_t c;
  for (size_t i = 0; (c = opsi_sdpa_split_listed(i)) > 0; ++i) {
    if (c > 1 && c > most) break;
    const double f = opsi_sdpa_split_fill(units * c, slots);
    if (f > best) best = f;
  }
  for (size_t i = 0; (c = opsi_sdpa_split_listed(i)) > 0; ++i) {
    if (opsi_sdpa_split_fill(units * c, slots) >= best * (1.0 - OPSI_SDPA_SPLIT_WAVE_SLACK)) return c;
  }
  return 1;
}

/* Row tiles of a call: its packed rows (seqlen_q query rows x `group` query heads a KV head)
 * over BM a tile. */
static inline int64_t opsi_sdpa_split_row_tiles(int64_t seqlen_q, int64_t group, int32_t bm) {
  return (seqlen_q * group + bm - 1) / bm;
}

/* The blocks of a call without a split: batch x KV heads x row tiles */
static inline int64_t opsi_sdpa_split_units(int64_t batch, int64_t heads_kv, int64_t row_tiles) {
  return batch * heads_kv * row_tiles;
}

/* How the parts are merged. On sm_90, 2 to CLUSTER_MAX parts may run as one thread block
 * cluster a row tile (rank = part): each block leaves its normalized partial rows and their LSE
 * in its shared memory, and the cluster's blocks fold every part's rows over distributed shared
 * memory in part order (no workspace, one launch). Otherwise each part writes its rows and LSE
 * to the workspace and sdpa_split_combine folds them in part order (a second launch).
 * A cluster's blocks are resident together on the SMs of one GPC, so fewer blocks in clusters
 * fit on the device at once than its slots (H100, 396 slots: 372 in clusters of 3 or 6, 360 of
 * 8): a grid is clustered only where it fits CLUSTER_FILL of the slots, a single wave. Past
 * that, a second wave of clusters costs more than the combine (bench/RESULTS.md). */
#define OPSI_SDPA_SPLIT_CLUSTER_MAX 8
#define OPSI_SDPA_SPLIT_CLUSTER_FILL 0.9
static inline int opsi_sdpa_split_clustered(int32_t sm, int64_t units, int32_t parts, int64_t sm_count,
                                            int32_t per_sm) {
  return sm >= 90 && parts > 1 && parts <= OPSI_SDPA_SPLIT_CLUSTER_MAX &&
         (double)(units * parts) <= OPSI_SDPA_SPLIT_CLUSTER_FILL * (double)(sm_count * per_sm);
}

/* The parts of a call: opsi_sdpa_split_count over its units and its key tiles (seqlen_k: the
 * longest sequence, or the cache's capacity), the wave's count (in *wave where wave is not
 * NULL). Where that count is one a cluster holds but its blocks are more than clusters keep
 * resident, the largest listed count that fits is taken instead if its parts hold at most
 * CLUSTER_TRADE times the key tiles: on the H100 a third more key tiles a part costs the GPU
 * about what the combine does, and the call is then one launch without a workspace. A count
 * past CLUSTER_MAX keeps the combine (bench/RESULTS.md). */
#define OPSI_SDPA_SPLIT_CLUSTER_TRADE (4.0 / 3.0)
static inline int32_t opsi_sdpa_split_parts(int32_t sm, int64_t batch, int64_t heads_kv, int64_t row_tiles,
                                            int64_t seqlen_k, int64_t sm_count, int32_t per_sm, int32_t *wave) {
  const int64_t units = opsi_sdpa_split_units(batch, heads_kv, row_tiles);
  const int64_t key_tiles = (seqlen_k + OPSI_SDPA_SPLIT_BN - 1) / OPSI_SDPA_SPLIT_BN;
  const int32_t parts = opsi_sdpa_split_count(units, key_tiles, sm_count, per_sm);
  if (wave != NULL) *wave = parts;
  if (parts <= 1 || parts > OPSI_SDPA_SPLIT_CLUSTER_MAX ||
      opsi_sdpa_split_clustered(sm, units, parts, sm_count, per_sm))
    return parts;
  int32_t fit = 0, c; /* the largest listed count under parts that runs as clusters */
  for (size_t i = 0; (c = opsi_sdpa_split_listed(i)) > 0 && c < parts; ++i) {
    if (c > 1 && opsi_sdpa_split_clustered(sm, units, c, sm_count, per_sm)) fit = c;
  }
  const double most = OPSI_SDPA_SPLIT_CLUSTER_TRADE * (double)((key_tiles + parts - 1) / parts);
  return fit > 0 && (double)((key_tiles + fit - 1) / fit) <= most ? fit : parts;
}

/* The plan of a split count, in static words (explain, the profiler); wave: the wave's count
 * (opsi_sdpa_split_parts), which a cluster's smaller count replaced where they differ. */
static inline const char *opsi_sdpa_split_plan(int32_t splits, int clustered, int32_t wave) {
  switch (splits) {
#define OPSI_SDPA_SPLIT_CASE(N)                                                                         \
  case N:                                                                                               \
    return N == 1                     ? "keys in one part (no combine)"                                 \
           : clustered && wave != N ? "keys split in " #N " parts, merged in a cluster (the wave's "     \
                                      "count would need the combine)"                                   \
           : clustered              ? "keys split in " #N " parts, merged in a cluster"                 \
                                    : "keys split in " #N " parts + combine";
    OPSI_SDPA_SPLIT_COUNTS(OPSI_SDPA_SPLIT_CASE)
#undef OPSI_SDPA_SPLIT_CASE
    default: return "keys split (unlisted count)";
  }
}

/* Workspace of a split call merged by the combine: each part's LSE [splits, tokens_q, Hq] f32,
 * then (at a 16-byte offset) its output [splits, tokens_q, Hq, round_up(Dv, 4)] f32; none with
 * one part or a cluster merge. */
static inline size_t opsi_sdpa_split_lse_bytes(int64_t splits, int64_t tokens_q, int64_t hq) {
  return ((size_t)(splits * tokens_q * hq) * 4 + 15) / 16 * 16;
}
static inline size_t opsi_sdpa_split_workspace(int64_t splits, int clustered, int64_t tokens_q, int64_t hq,
                                               int64_t dv) {
  if (splits <= 1 || clustered) return 0;
  return opsi_sdpa_split_lse_bytes(splits, tokens_q, hq) + (size_t)(splits * tokens_q * hq * ((dv + 3) / 4 * 4)) * 4;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SPLIT_SHAPE_H_ */
