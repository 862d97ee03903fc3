/* CUDA launchers of ops_sdpa (capability rows point at them; kernels/flash/sdpa_cuda_launch.cu). */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_CUDA_H_
#define OPSLIB_KERNELS_FLASH_SDPA_CUDA_H_

#include "core/launch.h"
#include "kernels/flash/sdpa_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Any SM >= 80: mma.sync + cp.async (FlashAttention-2 structure), f16 / bf16, q's and v's
 * head dims up to DP: opsi_sdpa_cuda_mma_d64, _d128, _d256. */
#define OPSI_SDPA_MMA_PROTO(ID, NAME, DP) ops_status opsi_sdpa_cuda_mma_##NAME(const opsi_launch *ctx, const void *args);
OPSI_SDPA_MMA_KERNELS(OPSI_SDPA_MMA_PROTO)
#undef OPSI_SDPA_MMA_PROTO
/* Hopper (sm_90a): TMA + wgmma, warp-specialized; f16 / bf16, q's and v's head dims up to DP,
 * unit-stride rows with 16-byte aligned base and strides (positive): opsi_sdpa_cuda_sm90_d64,
 * _d64_m128 (128-row work tiles), _d128, _d256, and at 64 and 128 the _pair kernels in
 * clusters of two that share each K / V tile (uniform calls: no window, no varlen, an even
 * number of query tiles a head). */
#define OPSI_SDPA_SM90_PROTO(ID, NAME, SHAPE, DP, CL) \
  ops_status opsi_sdpa_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args);
OPSI_SDPA_SM90_KERNELS(OPSI_SDPA_SM90_PROTO)
#undef OPSI_SDPA_SM90_PROTO

/* Any SM >= 80: split-KV with packed GQA rows (decode, short query blocks, KV caches, paged
 * or not), f16 / bf16, head dims up to DP, BM packed rows a block, 16-byte aligned unit-stride
 * rows: opsi_sdpa_cuda_split_d64_m16, ... _d256_m64. */
#define OPSI_SDPA_SPLIT_PROTO(ID, NAME, DP, BM) \
  ops_status opsi_sdpa_cuda_split_##NAME(const opsi_launch *ctx, const void *args);
OPSI_SDPA_SPLIT_KERNELS(OPSI_SDPA_SPLIT_PROTO)
#undef OPSI_SDPA_SPLIT_PROTO

/* ops_sdpa_backward, any SM >= 80: mma.sync + cp.async, a dK / dV pass over key tiles and a dQ
 * pass over query tiles (no atomics), f16 / bf16, q's and v's head dims up to DP:
 * opsi_sdpa_bwd_cuda_mma_d64, _d128. */
#define OPSI_SDPA_BWD_MMA_PROTO(ID, NAME, DP) \
  ops_status opsi_sdpa_bwd_cuda_mma_##NAME(const opsi_launch *ctx, const void *args);
OPSI_SDPA_BWD_MMA_KERNELS(OPSI_SDPA_BWD_MMA_PROTO)
#undef OPSI_SDPA_BWD_MMA_PROTO

/* ops_sdpa_backward, Hopper (sm_90a): TMA + wgmma, warp-specialized, one pass over key tiles
 * with dQ summed by f32 atomics (not deterministic; _det_: in a fixed order, deterministic),
 * f16 / bf16, head dims up to DP, unit-stride rows with 16-byte aligned base and strides:
 * opsi_sdpa_bwd_cuda_sm90_d64, _d128, opsi_sdpa_bwd_cuda_sm90_det_d64, _d128. */
#define OPSI_SDPA_BWD_SM90_PROTO(ID, NAME, DP) \
  ops_status opsi_sdpa_bwd_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args);
OPSI_SDPA_BWD_SM90_KERNELS(OPSI_SDPA_BWD_SM90_PROTO)
#undef OPSI_SDPA_BWD_SM90_PROTO
#define OPSI_SDPA_BWD_SM90_DET_PROTO(ID, NAME, DP) \
  ops_status opsi_sdpa_bwd_cuda_sm90_det_##NAME(const opsi_launch *ctx, const void *args);
OPSI_SDPA_BWD_SM90_DET_KERNELS(OPSI_SDPA_BWD_SM90_DET_PROTO)
#undef OPSI_SDPA_BWD_SM90_DET_PROTO

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_FLASH_SDPA_CUDA_H_ */
