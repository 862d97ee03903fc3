/*
 * The Hopper attention kernels' shapes, in one place for the kernels (sdpa_sm90_cfg.cuh's
 * OPSI_SDPA_SM90_CFG(SHAPE)) and for the capability rows that state them, each field named
 * OPSI_SDPA_SM90_<SHAPE>_<FIELD>: DP the padded head dim (64, 128, 256), BN key rows a tile,
 * NC consumer warpgroups of 64 query rows (BM = 64 NC rows a work tile), setmaxnreg's split of
 * the block's registers (LOAD_REGS for the producer warpgroup, MMA_REGS for each consumer
 * one), and CLUSTER, the blocks of a cluster of the shape's _pair kernel (2: each block loads
 * half of every K / V tile into both by TMA multicast, halving the L2 traffic; 1: the shape
 * has no pair kernel), QS, the Q buffers (2: the next work tile's Q loads while the current
 * one's keys still run; 1 where shared memory has no room for a second), and OS, how O leaves
 * (1: each consumer warp stages its 16 rows in shared memory and stores them by TMA, so that
 * it goes on to its next tile while the copy engine writes; 0: straight from registers, where
 * shared memory has no room for the staging tiles or the consumers' registers none for the
 * staged epilogue). Plain numbers: the rows print them.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_SHAPE_H_

#include <stdint.h>

/* at 64 three consumer warpgroups: the exponentials cost as much as both GEMMs there, and a
 * third warp a scheduler hides more of the softmax's latency (bench/RESULTS.md); O from
 * registers (the consumers' 160 registers spill with the staged epilogue) */
#define OPSI_SDPA_SM90_D64_DP 64
#define OPSI_SDPA_SM90_D64_BN 128
#define OPSI_SDPA_SM90_D64_NC 3
#define OPSI_SDPA_SM90_D64_BM 192
#define OPSI_SDPA_SM90_D64_LOAD_REGS 32
#define OPSI_SDPA_SM90_D64_MMA_REGS 160
#define OPSI_SDPA_SM90_D64_CLUSTER 2
#define OPSI_SDPA_SM90_D64_QS 2
#define OPSI_SDPA_SM90_D64_OS 0
/* at 64 also two consumer warpgroups, work tiles of 128 rows: for calls whose query tiles are
 * few or short (causal, short sequences), where 192-row tiles pad more rows and fill fewer SMs */
#define OPSI_SDPA_SM90_D64_M128_DP 64
#define OPSI_SDPA_SM90_D64_M128_BN 128
#define OPSI_SDPA_SM90_D64_M128_NC 2
#define OPSI_SDPA_SM90_D64_M128_BM 128
#define OPSI_SDPA_SM90_D64_M128_LOAD_REGS 24
#define OPSI_SDPA_SM90_D64_M128_MMA_REGS 240
#define OPSI_SDPA_SM90_D64_M128_CLUSTER 1
#define OPSI_SDPA_SM90_D64_M128_QS 2
#define OPSI_SDPA_SM90_D64_M128_OS 1
/* at 128 two: three would leave 160 registers, no more than S, P and O alone */
#define OPSI_SDPA_SM90_D128_DP 128
#define OPSI_SDPA_SM90_D128_BN 128
#define OPSI_SDPA_SM90_D128_NC 2
#define OPSI_SDPA_SM90_D128_BM 128
#define OPSI_SDPA_SM90_D128_LOAD_REGS 24
#define OPSI_SDPA_SM90_D128_MMA_REGS 240
#define OPSI_SDPA_SM90_D128_CLUSTER 2
#define OPSI_SDPA_SM90_D128_QS 2
#define OPSI_SDPA_SM90_D128_OS 1
/* at 256 key tiles of 64 and one Q buffer (shared memory); no cluster; O from registers (no
 * room to stage it) */
#define OPSI_SDPA_SM90_D256_DP 256
#define OPSI_SDPA_SM90_D256_BN 64
#define OPSI_SDPA_SM90_D256_NC 2
#define OPSI_SDPA_SM90_D256_BM 128
#define OPSI_SDPA_SM90_D256_LOAD_REGS 24
#define OPSI_SDPA_SM90_D256_MMA_REGS 240
#define OPSI_SDPA_SM90_D256_CLUSTER 1
#define OPSI_SDPA_SM90_D256_QS 1
#define OPSI_SDPA_SM90_D256_OS 0

/* dynamic shared memory of a block, bytes: alignment slack, QS Q tiles, two stages of K and
 * V, OS x BM rows of O's staging tiles, and the mbarriers (full / empty for each Q buffer and
 * each stage of K and of V) */
#define OPSI_SDPA_SM90_SMEM(BM, BN, DP, QS, OS) \
  (1024 + (((QS) + (OS)) * (BM) + 4 * (BN)) * (DP) * 2 + 8 * (2 * (QS) + 8))

/* How a Hopper attention launch walks its work tiles, as the launcher reports it and the
 * rows' plan function predicts it. Calls whose tiles all come from one [B, S, H, D] layout (no
 * varlen, no KV cache) run persistent, causal and windowed ones too: a block an SM, every
 * other pass over the tiles in reverse, so that a block that drew long tiles in one pass
 * draws short ones in the next; causal and windowed tiles in order of length over all heads
 * where the grid has room for 4 tiles of each KV head at once (opsi_sdpa_sm90_by_length), else
 * head by head. The _pair kernels (uniform calls: every tile reads the same keys) run
 * persistent in clusters of two. Varlen and cache calls: a block a tile, longest first,
 * balanced by the hardware. */
#define OPSI_SDPA_SM90_PLAN_PERSISTENT \
  "persistent: a block an SM walks the work tiles, every other pass in reverse"
#define OPSI_SDPA_SM90_PLAN_BY_LENGTH                                                                  \
  "persistent: a block an SM walks the work tiles longest first over all heads, every other pass in " \
  "reverse"
#define OPSI_SDPA_SM90_PLAN_PAIR \
  "persistent pairs: clusters of 2 blocks an SM pair, each K / V tile loaded once for both (TMA multicast)"
#define OPSI_SDPA_SM90_PLAN_TILE "a block a work tile, longest first"

#if defined(__CUDACC__)
#define OPSI_SDPA_SM90_FN __host__ __device__ __forceinline__
#else
#define OPSI_SDPA_SM90_FN static inline
#endif

/* Whether a persistent grid of `grid` blocks over `tiles` work tiles walks them by length
 * (sdpa_sm90_sched.cuh): causal or windowed tiles (a window side that cuts keys), more tiles
 * than blocks, and at least 4 blocks a KV head of the call, so that each KV head's K / V
 * still serves several tiles at once from L2. */
OPSI_SDPA_SM90_FN int opsi_sdpa_sm90_by_length(int windowed, int64_t tiles, int64_t grid, int64_t batch,
                                               int64_t heads_kv) {
  return windowed && tiles > grid && 4 * batch * heads_kv <= grid;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_SHAPE_H_ */
