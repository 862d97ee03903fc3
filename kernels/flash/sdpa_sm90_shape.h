/*
 * The Hopper attention kernels' shapes by padded head dim DP (64, 128, 256), in one place for
 * the kernels (sdpa_sm90.cuh's shape<DP>) and for the capability rows that state them:
 * BN key rows a tile, NC consumer warpgroups of 64 query rows (BM = 64 NC rows a work tile),
 * setmaxnreg's split of the block's registers (LOAD_REGS for the producer warpgroup, MMA_REGS
 * for each consumer one), and CLUSTER, the blocks of a cluster of the shape's _pair kernel
 * (2: each block loads half of every K / V tile into both by TMA multicast, halving the L2
 * traffic; 1: the shape has no pair kernel). Plain numbers: the rows print them.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_SHAPE_H_

/* at 64 three consumer warpgroups: the exponentials cost as much as both GEMMs there, and a
 * third warp a scheduler hides more of the softmax's latency (bench/RESULTS.md) */
#define OPSI_SDPA_SM90_D64_BN 128
#define OPSI_SDPA_SM90_D64_NC 3
#define OPSI_SDPA_SM90_D64_BM 192
#define OPSI_SDPA_SM90_D64_LOAD_REGS 32
#define OPSI_SDPA_SM90_D64_MMA_REGS 160
#define OPSI_SDPA_SM90_D64_CLUSTER 2
/* at 128 two: three would leave 160 registers, no more than S, P and O alone */
#define OPSI_SDPA_SM90_D128_BN 128
#define OPSI_SDPA_SM90_D128_NC 2
#define OPSI_SDPA_SM90_D128_BM 128
#define OPSI_SDPA_SM90_D128_LOAD_REGS 24
#define OPSI_SDPA_SM90_D128_MMA_REGS 240
#define OPSI_SDPA_SM90_D128_CLUSTER 2
/* at 256 key tiles of 64 (shared memory); no cluster */
#define OPSI_SDPA_SM90_D256_BN 64
#define OPSI_SDPA_SM90_D256_NC 2
#define OPSI_SDPA_SM90_D256_BM 128
#define OPSI_SDPA_SM90_D256_LOAD_REGS 24
#define OPSI_SDPA_SM90_D256_MMA_REGS 240
#define OPSI_SDPA_SM90_D256_CLUSTER 1

/* dynamic shared memory of a block, bytes: alignment slack, Q, two stages of K and V, and
 * ten mbarriers */
#define OPSI_SDPA_SM90_SMEM(BM, BN, DP) (1024 + ((BM) + 4 * (BN)) * (DP) * 2 + 80)

/* How a Hopper attention launch walks its work tiles, as the launcher reports it and the
 * rows' plan function predicts it. Uniform calls (every tile reads the same keys: no window
 * that cuts a key range, no varlen) run persistent; the _pair kernels run persistent in
 * clusters of two. */
#define OPSI_SDPA_SM90_PLAN_PERSISTENT "persistent: a block an SM walks the work tiles"
#define OPSI_SDPA_SM90_PLAN_PAIR \
  "persistent pairs: clusters of 2 blocks an SM pair, each K / V tile loaded once for both (TMA multicast)"
#define OPSI_SDPA_SM90_PLAN_TILE "a block a work tile, longest first"

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_SHAPE_H_ */
