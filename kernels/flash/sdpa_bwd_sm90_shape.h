/*
 * The Hopper attention backward's shape (sdpa_bwd_sm90.cuh), in one place for the kernels and
 * the capability rows that state it: a block holds BN keys of one (batch, KV head), 64 a
 * consumer warpgroup, and streams query tiles of BM rows through a ring of STAGES; setmaxnreg
 * gives the producer warpgroup LOAD_REGS registers a thread and each consumer MMA_REGS.
 * Shared memory, 16-bit tiles of DP columns as boxes of 64 (128-byte swizzle): K and V BN x DP,
 * Q and dout STAGES x BM x DP each, dS 2 x BM x BN, LSE and D 2 x BM floats each, and the
 * mbarriers (K / V full, a full and an empty a stage, 2 turn and 2 added).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

#define OPSI_SDPA_BWD_SM90_BN 128
#define OPSI_SDPA_BWD_SM90_BM 64
#define OPSI_SDPA_BWD_SM90_STAGES 2
#define OPSI_SDPA_BWD_SM90_LOAD_REGS 24
#define OPSI_SDPA_BWD_SM90_MMA_REGS 240

#define OPSI_SDPA_BWD_SM90_SMEM(DP)                                                                             \
  (1024 + (2 * OPSI_SDPA_BWD_SM90_BN + 2 * OPSI_SDPA_BWD_SM90_STAGES * OPSI_SDPA_BWD_SM90_BM) * (DP) * 2 +     \
   2 * OPSI_SDPA_BWD_SM90_BM * OPSI_SDPA_BWD_SM90_BN * 2 + 2 * 2 * OPSI_SDPA_BWD_SM90_BM * 4 +                      \
   8 * (5 + 2 * OPSI_SDPA_BWD_SM90_STAGES))

/* The workspace, for the rows and the launcher alike: D of every (query row, head), f32,
 * rounded up to 256 bytes, then dQ's f32 accumulators, DP columns a (query row, head); SIZE_MAX
 * (which no caller has) where that does not fit. dq_offset: where the accumulators start, for
 * a call whose workspace fits. */
static inline size_t opsi_sdpa_bwd_sm90_dq_offset(int64_t tokens_q, int64_t heads_q) {
  return ((size_t)tokens_q * (size_t)heads_q * 4 + 255) / 256 * 256;
}
static inline size_t opsi_sdpa_bwd_sm90_workspace(int64_t tokens_q, int64_t heads_q, int dp) {
  const double need = (double)tokens_q * (double)heads_q * (4.0 * dp + 4.0) + 256.0;
  if (need > 0x1p62 || need > (double)SIZE_MAX) return SIZE_MAX;
  return opsi_sdpa_bwd_sm90_dq_offset(tokens_q, heads_q) + (size_t)tokens_q * (size_t)heads_q * (size_t)dp * 4;
}

/* The deterministic kernels' turn counters, after the accumulators: an int32 a (query tile of
 * BM rows, head); a sequence's tiles are numbered from (its first packed row) / BM plus its
 * index, so that the tiles of neighbouring sequences never share one. */
static inline int64_t opsi_sdpa_bwd_sm90_turns(int64_t tokens_q, int64_t batch, int64_t heads_q) {
  return (tokens_q / OPSI_SDPA_BWD_SM90_BM + batch + 1) * heads_q;
}
static inline size_t opsi_sdpa_bwd_sm90_det_workspace(int64_t tokens_q, int64_t batch, int64_t heads_q, int dp) {
  const size_t base = opsi_sdpa_bwd_sm90_workspace(tokens_q, heads_q, dp);
  const double turns = ((double)tokens_q / OPSI_SDPA_BWD_SM90_BM + (double)batch + 1.0) * (double)heads_q * 4.0;
  if (base == SIZE_MAX || (double)base + turns > 0x1p62 || (double)base + turns > (double)SIZE_MAX) return SIZE_MAX;
  return base + (size_t)opsi_sdpa_bwd_sm90_turns(tokens_q, batch, heads_q) * 4;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_SHAPE_H_ */
