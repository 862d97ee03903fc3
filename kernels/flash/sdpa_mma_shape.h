/*
 * The sm_80-class attention kernels' shapes by padded head dim DP (64, 128, 256), in one place
 * for the kernel (sdpa_mma.cuh's cfg) and the capability rows that state them: BM query rows
 * a block (16 a warp: WARPS = BM / 16), BN key rows a tile, PER_SM blocks an SM (the rows'
 * cost model). Shared memory: Q BM x DP and two stages of K and V, BN x DP each, 16-bit,
 * (BM + 4 BN) DP 2 bytes: 96 KB or less for every DP, which fits the 99 KB a block may have on
 * sm_86 / sm_89. Plain numbers: the rows print them.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_MMA_SHAPE_H_
#define OPSLIB_KERNELS_FLASH_SDPA_MMA_SHAPE_H_

#define OPSI_SDPA_MMA_D64_BM 128
#define OPSI_SDPA_MMA_D64_BN 64
#define OPSI_SDPA_MMA_D64_WARPS 8
#define OPSI_SDPA_MMA_D64_PER_SM 2
#define OPSI_SDPA_MMA_D128_BM 128
#define OPSI_SDPA_MMA_D128_BN 64
#define OPSI_SDPA_MMA_D128_WARPS 8
#define OPSI_SDPA_MMA_D128_PER_SM 1
#define OPSI_SDPA_MMA_D256_BM 64
#define OPSI_SDPA_MMA_D256_BN 32
#define OPSI_SDPA_MMA_D256_WARPS 4
#define OPSI_SDPA_MMA_D256_PER_SM 1

/* dynamic shared memory of a block, bytes */
#define OPSI_SDPA_MMA_SMEM(BM, BN, DP) (((BM) + 4 * (BN)) * (DP) * 2)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_MMA_SHAPE_H_ */
