/* CUDA launchers of ops_gemm (capability rows point at them; kernels/gemm/gemm_cuda_launch.cu). */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_CUDA_H_
#define OPSLIB_KERNELS_GEMM_GEMM_CUDA_H_

#include "core/launch.h"
#include "kernels/gemm/gemm_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the Hopper kernels' epilogue stores D, as the launcher reports it and the rows' plan
 * function predicts it: by TMA where D is 16-bit with unit column stride and 16-byte aligned
 * rows (every call those rows accept, whose operands are all 16-byte aligned and
 * contiguous, with a 16-bit D), else by the threads. */
#define OPSI_GEMM_SM90_PLAN_TMA_STORE "persistent; D stored by TMA from swizzled shared memory"
#define OPSI_GEMM_SM90_PLAN_THREAD_STORE "persistent; D stored by the threads"
/* The same where one consumer warpgroup computes a whole tile (opsi_gemm_sm90_wide). */
#define OPSI_GEMM_SM90_PLAN_WIDE " a 128-row tile a consumer warpgroup, the two in turn;"
#define OPSI_GEMM_SM90_PLAN_WIDE_TMA_STORE \
  "persistent," OPSI_GEMM_SM90_PLAN_WIDE " D stored by TMA from swizzled shared memory"
#define OPSI_GEMM_SM90_PLAN_WIDE_THREAD_STORE "persistent," OPSI_GEMM_SM90_PLAN_WIDE " D stored by the threads"
/* The same where M is at most 64: the first consumer warpgroup computes the one tile row's
 * live half, the second hands its stages back unread. */
#define OPSI_GEMM_SM90_PLAN_HALF " the first consumer warpgroup's 64 rows alone, the second idle;"
#define OPSI_GEMM_SM90_PLAN_HALF_TMA_STORE \
  "persistent," OPSI_GEMM_SM90_PLAN_HALF " D stored by TMA from swizzled shared memory"
#define OPSI_GEMM_SM90_PLAN_HALF_THREAD_STORE "persistent," OPSI_GEMM_SM90_PLAN_HALF " D stored by the threads"
/* The same launched in clusters of OPSI_GEMM_SM90_SPREAD_CLUSTER (opsi_gemm_sm90_spread_cluster;
 * the GPU suite holds each launch to the cluster size its plan names). */
#define OPSI_GEMM_SM90_PLAN_SPREAD "; blocks in clusters of 4, a partial wave spread over the GPCs"
/* The plan of an unsplit call of M rows, as the launcher reports it and the rows predict it
 * (cluster: opsi_gemm_sm90_spread_cluster's). */
static inline const char *opsi_gemm_sm90_unsplit_plan(int wide, int64_t m, int d_tma, int cluster) {
#define OPSI_GEMM_SM90_PLAN_OF(P) (cluster ? P OPSI_GEMM_SM90_PLAN_SPREAD : P)
  if (wide) return d_tma ? OPSI_GEMM_SM90_PLAN_OF(OPSI_GEMM_SM90_PLAN_WIDE_TMA_STORE)
                         : OPSI_GEMM_SM90_PLAN_OF(OPSI_GEMM_SM90_PLAN_WIDE_THREAD_STORE);
  if (m <= 64) return d_tma ? OPSI_GEMM_SM90_PLAN_OF(OPSI_GEMM_SM90_PLAN_HALF_TMA_STORE)
                            : OPSI_GEMM_SM90_PLAN_OF(OPSI_GEMM_SM90_PLAN_HALF_THREAD_STORE);
  return d_tma ? OPSI_GEMM_SM90_PLAN_OF(OPSI_GEMM_SM90_PLAN_TMA_STORE)
               : OPSI_GEMM_SM90_PLAN_OF(OPSI_GEMM_SM90_PLAN_THREAD_STORE);
#undef OPSI_GEMM_SM90_PLAN_OF
}

/* Hopper (sm_90a): TMA + wgmma, warp-specialized, persistent; f16 / bf16, A K-major:
 * opsi_gemm_cuda_sm90_128x256, _128x128, ... (gemm_kernels.h's lists). */
#define OPSI_GEMM_SM90_PROTO(ID, NAME, BN) \
  ops_status opsi_gemm_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args);
OPSI_GEMM_SM90_KERNELS(OPSI_GEMM_SM90_PROTO)
OPSI_GEMM_SM90_KMAJOR_KERNELS(OPSI_GEMM_SM90_PROTO)
OPSI_GEMM_SM90_SPLITK_KERNELS(OPSI_GEMM_SM90_PROTO)
#undef OPSI_GEMM_SM90_PROTO
/* Any SM >= 80, any strides: mma.sync (f16 / bf16) or strict f32 FMA. */
ops_status opsi_gemm_cuda_tiled(const opsi_launch *ctx, const void *args);
/* Any SM >= 80, A K-major, A and B 16-byte aligned: mma.sync fed by a cp.async pipeline;
 * f16 / bf16, or f32 through tf32. */
ops_status opsi_gemm_cuda_pipelined(const opsi_launch *ctx, const void *args);
/* Matrix-vector: N == 1 (A's rows) or M == 1 (B's columns), K unit-stride. */
ops_status opsi_gemm_cuda_gemv_n1(const opsi_launch *ctx, const void *args);
ops_status opsi_gemm_cuda_gemv_m1(const opsi_launch *ctx, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_GEMM_GEMM_CUDA_H_ */
