/* CUDA launchers of ops_sdpa (capability rows point at them; kernels/flash/sdpa_cuda_launch.cu). */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_CUDA_H_
#define OPSLIB_KERNELS_FLASH_SDPA_CUDA_H_

#include "kernels/common/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Any SM >= 80: mma.sync + cp.async (FlashAttention-2 structure), f16 / bf16, q's and v's
 * head dims up to 64, 128 or 256. */
ops_status opsi_sdpa_cuda_mma_d64(const opsi_launch *ctx, const void *args);
ops_status opsi_sdpa_cuda_mma_d128(const opsi_launch *ctx, const void *args);
ops_status opsi_sdpa_cuda_mma_d256(const opsi_launch *ctx, const void *args);
/* Hopper (sm_90a): TMA + wgmma, warp-specialized; f16 / bf16, q's and v's head dims up to
 * 64, 128 or 256, unit-stride rows with 16-byte aligned base and strides (positive). */
ops_status opsi_sdpa_cuda_sm90_d64(const opsi_launch *ctx, const void *args);
ops_status opsi_sdpa_cuda_sm90_d128(const opsi_launch *ctx, const void *args);
ops_status opsi_sdpa_cuda_sm90_d256(const opsi_launch *ctx, const void *args);
/* The same kernels at 64 and 128 in clusters of two that share each K / V tile (TMA
 * multicast): uniform calls (no window, no varlen) with an even number of query tiles a head. */
ops_status opsi_sdpa_cuda_sm90_d64_pair(const opsi_launch *ctx, const void *args);
ops_status opsi_sdpa_cuda_sm90_d128_pair(const opsi_launch *ctx, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_FLASH_SDPA_CUDA_H_ */
