/*
 * The sm_80-class attention backward's shape (sdpa_bwd_mma.cuh), in one place for the kernels
 * and the capability rows that state it: warps of 16 rows; the dK / dV pass holds ROWS keys
 * and streams query tiles of STEP rows, the dQ pass holds ROWS query rows and streams key
 * tiles of STEP. Shared memory, 16-bit tiles of DP columns:
 *   dK / dV: K and V ROWS x DP, Q and dout 2 x STEP x DP each, LSE and D 2 x STEP floats each;
 *   dQ:      Q and dout ROWS x DP, K and V 2 x STEP x DP each;
 *   both, with the columns split (SPLIT 2): each warp's two 16 x STEP score partials (f32).
 * 97 KB or less for DP <= 128, which fits the 99 KB a block may have on sm_86 / sm_89; at DP
 * 256, 161 KB and 160 KB (sm_80 and sm_90 give a block up to 163 KB).
 * SPLIT: the warps a row group of 16 (keys, or query rows). At DP 256 one warp's dK and dV (or
 * dQ) rows would take 256 (128) f32 registers a thread, so two warps share 16 rows, each with
 * half of the columns of the gradients; each computes its half of the score products' sums over
 * the head dim (S and dP) and the two trade them through shared memory.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

#define OPSI_SDPA_BWD_MMA_ROWS 64
#define OPSI_SDPA_BWD_MMA_STEP 32
#define OPSI_SDPA_BWD_MMA_D64_PER_SM 3
#define OPSI_SDPA_BWD_MMA_D128_PER_SM 2
#define OPSI_SDPA_BWD_MMA_D256_PER_SM 1
#define OPSI_SDPA_BWD_MMA_SPLIT(DP) ((DP) > 128 ? 2 : 1)
/* threads a block of either pass: 4 row groups of 16 rows, SPLIT warps each */
#define OPSI_SDPA_BWD_MMA_THREADS(DP) (128 * OPSI_SDPA_BWD_MMA_SPLIT(DP))

/* dynamic shared memory of the dK / dV and the dQ blocks, bytes */
#define OPSI_SDPA_BWD_MMA_PARTIALS(DP) \
  (OPSI_SDPA_BWD_MMA_SPLIT(DP) > 1 ? 2 * OPSI_SDPA_BWD_MMA_THREADS(DP) * (OPSI_SDPA_BWD_MMA_STEP / 2) * 4 : 0)
#define OPSI_SDPA_BWD_MMA_KV_SMEM(DP)                                                                 \
  ((2 * OPSI_SDPA_BWD_MMA_ROWS + 4 * OPSI_SDPA_BWD_MMA_STEP) * (DP) * 2 + 4 * OPSI_SDPA_BWD_MMA_STEP * 4 + \
   OPSI_SDPA_BWD_MMA_PARTIALS(DP))
#define OPSI_SDPA_BWD_MMA_Q_SMEM(DP) \
  ((2 * OPSI_SDPA_BWD_MMA_ROWS + 4 * OPSI_SDPA_BWD_MMA_STEP) * (DP) * 2 + OPSI_SDPA_BWD_MMA_PARTIALS(DP))

/* The workspace, for the rows and the launcher alike: D of every (query row, head), f32;
 * SIZE_MAX (which no caller has) where that does not fit. */
static inline size_t opsi_sdpa_bwd_mma_workspace(int64_t tokens_q, int64_t heads_q) {
  const double need = (double)tokens_q * (double)heads_q * 4.0;
  return need > 0x1p62 || need > (double)SIZE_MAX ? SIZE_MAX : (size_t)need;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_ */
