/*
 * The sm_80-class attention backward's shape (sdpa_bwd_mma.cuh), in one place for the kernels
 * and the capability rows that state it, by padded head dim DP: the dK / dV pass holds ROWS
 * keys and streams query tiles of STEP rows, the dQ pass holds ROWS query rows and streams key
 * tiles of STEP; a warp takes 16 of the ROWS, or, where SPLIT is 2, a pair of warps does, each
 * with half of the gradient's columns. Shared memory, 16-bit tiles of DP columns:
 *   dK / dV: K and V ROWS x DP, Q and dout 2 x STEP x DP each, LSE and D 2 x STEP floats each;
 *   dQ:      Q and dout ROWS x DP, K and V 2 x STEP x DP each;
 *   both, with SPLIT 2: each warp's two 16 x STEP score partials (f32).
 * Every DP fits the 99 KB a block may have on sm_86 / sm_89 (97 KB at DP 128, 72 KB at 256).
 * At DP 256 one warp's dK and dV rows would take 256 f32 registers a thread, so SPLIT is 2:
 * each warp of a pair computes its half of the score products' sums over the head dim (S and
 * dP) and the two trade them through shared memory; ROWS and STEP halve so that the tiles fit,
 * and two blocks share an SM.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_

#include <stddef.h>
#include <stdint.h>

#define OPSI_SDPA_BWD_MMA_D64_ROWS 64
#define OPSI_SDPA_BWD_MMA_D64_STEP 32
#define OPSI_SDPA_BWD_MMA_D64_PER_SM 3
#define OPSI_SDPA_BWD_MMA_D128_ROWS 64
#define OPSI_SDPA_BWD_MMA_D128_STEP 32
#define OPSI_SDPA_BWD_MMA_D128_PER_SM 2
#define OPSI_SDPA_BWD_MMA_D256_ROWS 32
#define OPSI_SDPA_BWD_MMA_D256_STEP 16
#define OPSI_SDPA_BWD_MMA_D256_PER_SM 2
/* the numbers above for a padded head dim of 64, 128 or 256 */
#define OPSI_SDPA_BWD_MMA_OF(DP, X)                                                                   \
  ((DP) > 128 ? OPSI_SDPA_BWD_MMA_D256_##X : (DP) > 64 ? OPSI_SDPA_BWD_MMA_D128_##X : OPSI_SDPA_BWD_MMA_D64_##X)
#define OPSI_SDPA_BWD_MMA_ROWS(DP) OPSI_SDPA_BWD_MMA_OF(DP, ROWS)
#define OPSI_SDPA_BWD_MMA_STEP(DP) OPSI_SDPA_BWD_MMA_OF(DP, STEP)
#define OPSI_SDPA_BWD_MMA_SPLIT(DP) ((DP) > 128 ? 2 : 1)
/* threads a block of either pass: ROWS / 16 row groups of 16, SPLIT warps each */
#define OPSI_SDPA_BWD_MMA_THREADS(DP) (OPSI_SDPA_BWD_MMA_ROWS(DP) / 16 * OPSI_SDPA_BWD_MMA_SPLIT(DP) * 32)

/* dynamic shared memory of the dK / dV and the dQ blocks, bytes */
#define OPSI_SDPA_BWD_MMA_PARTIALS(DP)                                                                \
  (OPSI_SDPA_BWD_MMA_SPLIT(DP) > 1 ? 2 * OPSI_SDPA_BWD_MMA_THREADS(DP) * (OPSI_SDPA_BWD_MMA_STEP(DP) / 2) * 4 \
                                   : 0)
#define OPSI_SDPA_BWD_MMA_KV_SMEM(DP)                                                                 \
  ((2 * OPSI_SDPA_BWD_MMA_ROWS(DP) + 4 * OPSI_SDPA_BWD_MMA_STEP(DP)) * (DP) * 2 +                      \
   4 * OPSI_SDPA_BWD_MMA_STEP(DP) * 4 + OPSI_SDPA_BWD_MMA_PARTIALS(DP))
#define OPSI_SDPA_BWD_MMA_Q_SMEM(DP) \
  ((2 * OPSI_SDPA_BWD_MMA_ROWS(DP) + 4 * OPSI_SDPA_BWD_MMA_STEP(DP)) * (DP) * 2 + OPSI_SDPA_BWD_MMA_PARTIALS(DP))

/* The workspace, for the rows and the launcher alike: D of every (query row, head), f32;
 * SIZE_MAX (which no caller has) where that does not fit. */
static inline size_t opsi_sdpa_bwd_mma_workspace(int64_t tokens_q, int64_t heads_q) {
  const double need = (double)tokens_q * (double)heads_q * 4.0;
  return need > 0x1p62 || need > (double)SIZE_MAX ? SIZE_MAX : (size_t)need;
}

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_SHAPE_H_ */
