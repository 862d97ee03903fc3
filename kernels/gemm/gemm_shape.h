/*
 * The CUDA GEMM kernels' shapes, in one place for the kernels (gemm_sm90.cuh,
 * gemm_pipelined.cuh, gemm_tiled.cuh) and the capability rows that state them. Plain numbers:
 * the rows print them.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SHAPE_H_
#define OPSLIB_KERNELS_GEMM_GEMM_SHAPE_H_

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
