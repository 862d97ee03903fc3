/*
 * The sm_80-class attention backward's shape (sdpa_bwd_mma.cuh), in one place for the kernels
 * and the capability rows that state it: 4 warps of 16 rows; the dK / dV pass holds ROWS keys
 * and streams query tiles of STEP rows, the dQ pass holds ROWS query rows and streams key
 * tiles of STEP. Shared memory, 16-bit tiles of DP columns:
 *   dK / dV: K and V ROWS x DP, Q and dout 2 x STEP x DP each, LSE and D 2 x STEP floats each;
 *   dQ:      Q and dout ROWS x DP, K and V 2 x STEP x DP each.
 * 97 KB or less for DP <= 128, which fits the 99 KB a block may have on sm_86 / sm_89.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

#define OPSI_SDPA_BWD_MMA_ROWS 64
#define OPSI_SDPA_BWD_MMA_STEP 32
#define OPSI_SDPA_BWD_MMA_THREADS 128
#define OPSI_SDPA_BWD_MMA_D64_PER_SM 3
#define OPSI_SDPA_BWD_MMA_D128_PER_SM 2

/* dynamic shared memory of the dK / dV and the dQ blocks, bytes */
#define OPSI_SDPA_BWD_MMA_KV_SMEM(DP) \
  ((2 * OPSI_SDPA_BWD_MMA_ROWS + 4 * OPSI_SDPA_BWD_MMA_STEP) * (DP) * 2 + 4 * OPSI_SDPA_BWD_MMA_STEP * 4)
#define OPSI_SDPA_BWD_MMA_Q_SMEM(DP) ((2 * OPSI_SDPA_BWD_MMA_ROWS + 4 * OPSI_SDPA_BWD_MMA_STEP) * (DP) * 2)

/* The workspace, for the rows and the launcher alike: D of every (query row, head), f32;
 * SIZE_MAX (which no caller has) where that does not fit. */
static inline size_t opsi_sdpa_bwd_mma_workspace(int64_t tokens_q, int64_t heads_q) {
  const double need = (double)tokens_q * (double)heads_q * 4.0;
  return need > 0x1p62 || need > (double)SIZE_MAX ? SIZE_MAX : (size_t)need;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_ */
