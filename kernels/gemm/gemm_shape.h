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
#define OPSI_GEMM_SM90_STAGES_128 6
#define OPSI_GEMM_SM90_STAGES(BN) ((BN) == 256 ? OPSI_GEMM_SM90_STAGES_256 : OPSI_GEMM_SM90_STAGES_128)
/* a consumer warpgroup's epilogue memory: two 64 x 64 16-bit TMA store buffers */
#define OPSI_GEMM_SM90_EPI_WG_BYTES (2 * 64 * 64 * 2)
/* dynamic shared memory: swizzle-atom slack, the stages (A BM x BK, B BN x BK, 16-bit), two
 * warpgroups' epilogue memory, a 16-bit column bias a warpgroup, full / empty mbarriers */
#define OPSI_GEMM_SM90_SMEM(BN)                                                                    \
  (1024 + OPSI_GEMM_SM90_STAGES(BN) * (OPSI_GEMM_SM90_BM + (BN)) * OPSI_GEMM_SM90_BK * 2 +        \
   2 * OPSI_GEMM_SM90_EPI_WG_BYTES + 2 * (BN) * 2 + 2 * OPSI_GEMM_SM90_STAGES(BN) * 8)

/* Split-K on the Hopper kernel (the _splitk rows): where the output tiles fill too few SMs,
 * the K blocks of each tile are cut into `parts` ranges of kb_per_part blocks, one block a
 * (tile, range), the parts of a tile one thread block cluster. After its mainloop each block
 * but the cluster's first puts its f32 partial tile in its shared memory; the first adds them
 * in rank order (distributed shared memory) and runs the epilogue: no workspace, no second
 * kernel, bitwise reproducible. A part takes at least SPLITK_MIN_KBLOCKS K blocks; the part
 * counts are powers of two up to SPLITK_MAX (portable cluster sizes that tile a GPC); the
 * blocks fit one wave of the device's SMs (one an SM). */
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

/* The parts of a call: the count, among those whose blocks (tiles x parts) fit one wave of
 * sm_count with at least SPLITK_MIN_KBLOCKS K blocks a part, with the least estimated time:
 * the longest part's K blocks, each at the bandwidth an SM gets when all the blocks stream at
 * once (at most a single SM's) or the math of a K block, whichever is longer, plus the first
 * block's reduction (a live tile half's partials over distributed shared memory, and the
 * cluster barriers). Ties take fewer parts. The constants are the H100's
 * (bench/RESULTS.md). */
static inline int32_t opsi_gemm_splitk_parts(int64_t batch, int64_t m, int64_t n, int64_t k, int32_t bn,
                                             int64_t sm_count) {
  const int64_t tiles = opsi_gemm_sm90_tiles(batch, m, n, bn);
  if (tiles <= 0 || k <= 0 || sm_count <= 0 || tiles > sm_count / 2 || k > ((int64_t)1 << 40)) return 1;
  const int64_t kblocks = k / OPSI_GEMM_SM90_BK + (k % OPSI_GEMM_SM90_BK != 0);
  const double dram = 2.8e6, per_sm = 6.0e4, dsmem = 1.0e5, math_us = 0.42, sync_us = 1.0; /* bytes / us; us */
  const int32_t rows = opsi_gemm_sm90_a_rows(m);
  const double kb_bytes = (double)(rows + bn) * OPSI_GEMM_SM90_BK * 2.0;
  const double partial = (double)(rows > 64 ? 128 : 64) * bn * 4.0;
  int32_t best = 1;
  double best_us = 0.0;
  for (int32_t p = 1; p <= OPSI_GEMM_SPLITK_MAX; p *= 2) {
    const int64_t per = (kblocks + p - 1) / p;
    if (p > 1 && (per < OPSI_GEMM_SPLITK_MIN_KBLOCKS || tiles * p > sm_count)) break;
    if ((kblocks + per - 1) / per != p) continue; /* a part would be empty */
    const double blocks = (double)(tiles * p), bw = dram / blocks < per_sm ? dram / blocks : per_sm;
    const double kb_us = kb_bytes / bw > math_us ? kb_bytes / bw : math_us;
    const double us = (double)per * kb_us + (p > 1 ? sync_us + (double)(p - 1) * partial / dsmem : 0.0);
    if (p == 1 || us < best_us) best = p, best_us = us;
  }
  return best;
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
