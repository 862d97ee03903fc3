/* The attention CUDA launchers: validated args (opsi_sdpa_args) -> sdpa_geom -> one kernel. */
#include <string.h>

#include <type_traits>

#include "kernels/common/tma_host.h"
#include "kernels/flash/sdpa_args.h"
#include "kernels/flash/sdpa_cuda.h"
#include "kernels/flash/sdpa_mma.cuh"
#include "kernels/flash/sdpa_sm90.cuh"
#include "opslib/ops.h"

/* runtime/error.h, which this target does not see: sets the thread's error message. */
extern "C" ops_status opsi_fail(ops_status status, const char *fmt, ...);

#define OPSI_SDPA_MMA_EXTERN(T, DP)                                                                                 \
  extern template cudaError_t opsi::fa2::launch_sdpa_mma<T, DP>(const opsi::sdpa_geom &, cudaStream_t, int32_t *, \
                                                                int32_t *, int32_t *);
OPSI_SDPA_MMA_EXTERN(__nv_bfloat16, 64)
OPSI_SDPA_MMA_EXTERN(__nv_bfloat16, 128)
OPSI_SDPA_MMA_EXTERN(__nv_bfloat16, 256)
OPSI_SDPA_MMA_EXTERN(__half, 64)
OPSI_SDPA_MMA_EXTERN(__half, 128)
OPSI_SDPA_MMA_EXTERN(__half, 256)
#undef OPSI_SDPA_MMA_EXTERN

#define OPSI_SDPA_SM90_EXTERN(T, DP, CL)                                                                   \
  extern template cudaError_t opsi::fa3::launch_sdpa_sm90<T, DP, CL>(                                      \
      const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const opsi::sdpa_geom &, int,          \
      cudaStream_t, int32_t *, int32_t *, int32_t *);
OPSI_SDPA_SM90_EXTERN(__nv_bfloat16, 64, 1)
OPSI_SDPA_SM90_EXTERN(__nv_bfloat16, 64, 2)
OPSI_SDPA_SM90_EXTERN(__nv_bfloat16, 128, 1)
OPSI_SDPA_SM90_EXTERN(__nv_bfloat16, 128, 2)
OPSI_SDPA_SM90_EXTERN(__nv_bfloat16, 256, 1)
OPSI_SDPA_SM90_EXTERN(__half, 64, 1)
OPSI_SDPA_SM90_EXTERN(__half, 64, 2)
OPSI_SDPA_SM90_EXTERN(__half, 128, 1)
OPSI_SDPA_SM90_EXTERN(__half, 128, 2)
OPSI_SDPA_SM90_EXTERN(__half, 256, 1)
#undef OPSI_SDPA_SM90_EXTERN

namespace {

opsi::sdpa_view view_of(const ops_tensor &t) {
  return {t.data, t.strides[0], t.strides[1], t.strides[2], t.strides[3]};
}

/* Unit-stride rows whose base and every stride are 16-byte aligned (batch stride included:
 * varlen's is 0): the cp.async path. */
bool rows_aligned(const ops_tensor &t) {
  const int64_t elem = (int64_t)ops_dtype_size((ops_dtype)t.dtype);
  if (t.shape[3] > 1 && t.strides[3] != 1) return false;
  if ((uintptr_t)t.data % 16 != 0) return false;
  for (int i = 0; i < 3; ++i) {
    if (t.shape[i] > 1 && (t.strides[i] * elem) % 16 != 0) return false;
  }
  return true;
}

opsi::sdpa_geom geom_of(const opsi_sdpa_args *a) {
  opsi::sdpa_geom g;
  memset(&g, 0, sizeof g);
  g.q = view_of(a->q), g.k = view_of(a->k), g.v = view_of(a->v), g.o = view_of(a->o);
  if (a->has_lse) {
    g.lse = static_cast<float *>(a->lse.data);
    g.lb = a->lse.strides[0], g.lh = a->lse.strides[1], g.ls = a->lse.strides[2];
  }
  if (a->has_mask) {
    g.mask = a->mask.data;
    g.mb = a->mask.strides[0], g.mh = a->mask.strides[1], g.mi = a->mask.strides[2], g.mj = a->mask.strides[3];
    g.mask_dtype = a->mask.dtype;
  }
  if (a->varlen) {
    g.cu_q = a->cu_seqlens_q, g.cu_k = a->cu_seqlens_k;
    g.cu_sq = a->cu_stride_q, g.cu_sk = a->cu_stride_k;
  }
  g.batch = (int32_t)a->batch, g.heads_q = (int32_t)a->heads_q;
  g.group = (int32_t)(a->heads_q / a->heads_kv);
  g.seqlen_q = (int32_t)a->seqlen_q, g.seqlen_k = (int32_t)a->seqlen_k;
  g.d = (int32_t)a->head_dim, g.dv = (int32_t)a->head_dim_v;
  g.scale_log2 = (float)(a->scale * 1.4426950408889634);
  /* a window side wider than every key leaves nothing out: unbounded, which also keeps the
   * kernels' int sums of window edges in range */
  g.window_left = a->window_left >= a->seqlen_k ? -1 : (int32_t)a->window_left;
  g.window_right = a->window_right >= a->seqlen_q ? -1 : (int32_t)a->window_right;
  g.aligned = rows_aligned(a->q) && rows_aligned(a->k) && rows_aligned(a->v) && rows_aligned(a->o);
  return g;
}

ops_status cuda_status(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return OPS_OK;
  return opsi_fail(OPS_ERR_CUDA, "ops_sdpa: %s: %s", what, cudaGetErrorString(e));
}

template <int DP> ops_status run_mma(const opsi_launch *ctx, const opsi_sdpa_args *a) {
  const opsi::sdpa_geom g = geom_of(a);
  if (g.seqlen_q == 0 || g.heads_q == 0 || g.batch == 0) return OPS_OK;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  const cudaError_t e =
      a->q.dtype == OPS_DTYPE_BF16
          ? opsi::fa2::launch_sdpa_mma<__nv_bfloat16, DP>(g, stream, info->grid, info->block, &info->smem_bytes)
          : opsi::fa2::launch_sdpa_mma<__half, DP>(g, stream, info->grid, info->block, &info->smem_bytes);
  return cuda_status(e, "launch");
}

/* The map of one [B, S, H, D] operand as (d, s, h, b), box (64, rows, 1, 1); a varlen view
 * (batch stride 0) as (d, t, h, 1): the kernel adds the sequence's start to s. */
ops_status encode_operand(CUtensorMap *map, const ops_tensor &t, bool varlen, int rows, const char *what) {
  const int64_t dims[4] = {t.shape[3], t.shape[1], t.shape[2], varlen ? 1 : t.shape[0]};
  const int64_t strides[3] = {t.strides[1], t.strides[2], t.strides[0]};
  const uint32_t box[4] = {64, (uint32_t)rows, 1, 1};
  const CUresult r = opsi::encode_map_16bit(map, t.data, t.dtype, 4, dims, strides, box);
  if (r == CUDA_ERROR_NOT_FOUND) {
    return opsi_fail(OPS_ERR_CUDA, "ops_sdpa: %s: the driver has no cuTensorMapEncodeTiled", what);
  }
  if (r != CUDA_SUCCESS) {
    return opsi_fail(OPS_ERR_CUDA, "ops_sdpa: cuTensorMapEncodeTiled for %s failed (CUresult %d)", what, (int)r);
  }
  return OPS_OK;
}

/* PAIR: the shape's _pair kernel (clusters of two sharing K / V), which its row sends only
 * uniform calls with an even number of query tiles a head; else one block a cluster. */
template <int DP, bool PAIR> ops_status run_sm90(const opsi_launch *ctx, const opsi_sdpa_args *a) {
  using C = opsi::fa3::shape<DP>;
  static_assert(!PAIR || C::CLUSTER == 2, "a pair kernel exists only for shapes with CLUSTER 2");
  if (a->has_mask) { /* the rows do not claim OPSI_F_MASK: the dispatcher sends masks to sm_80's kernel */
    return opsi_fail(OPS_ERR_INTERNAL, "ops_sdpa: the Hopper kernel got a mask tensor, which it does not read");
  }
  const opsi::sdpa_geom g = geom_of(a);
  if (g.seqlen_q == 0 || g.heads_q == 0 || g.batch == 0) return OPS_OK;
  /* Every work tile costs the same without a window (causal is one) or varlen: one block an
   * SM walks them (persistent; the next tile's Q and K / V load under the current one's
   * end). Otherwise a block a tile, longest first, and the hardware balances them. */
  const int64_t tiles = opsi::fa3::sdpa_tiles<C::BM>(g);
  const bool uniform = g.window_left < 0 && g.window_right < 0 && g.cu_q == nullptr;
  constexpr int cluster = PAIR ? 2 : 1;
  if (PAIR && (!uniform || opsi::fa3::sdpa_query_tiles<C::BM>(g) % 2 != 0)) {
    return opsi_fail(OPS_ERR_INTERNAL, "ops_sdpa: the pair kernel got a call its row excludes (a window, "
                                       "varlen, or an odd number of query tiles a head)");
  }
  CUtensorMap mq, mk, mv;
  ops_status st = encode_operand(&mq, a->q, a->varlen, C::BM, "q");
  if (st == OPS_OK) st = encode_operand(&mk, a->k, a->varlen, C::BN / cluster, "k");
  if (st == OPS_OK) st = encode_operand(&mv, a->v, a->varlen, C::BN / cluster, "v");
  if (st != OPS_OK) return st;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  const int64_t cap = uniform ? ctx->sm_count / cluster * cluster : 2147483647;
  const int grid = (int)(tiles < cap ? tiles : cap);
  info->plan = PAIR ? OPSI_SDPA_SM90_PLAN_PAIR : uniform ? OPSI_SDPA_SM90_PLAN_PERSISTENT : OPSI_SDPA_SM90_PLAN_TILE;
  const cudaError_t e =
      a->q.dtype == OPS_DTYPE_BF16
          ? opsi::fa3::launch_sdpa_sm90<__nv_bfloat16, DP, cluster>(mq, mk, mv, g, grid, stream, info->grid,
                                                                    info->block, &info->smem_bytes)
          : opsi::fa3::launch_sdpa_sm90<__half, DP, cluster>(mq, mk, mv, g, grid, stream, info->grid,
                                                             info->block, &info->smem_bytes);
  return cuda_status(e, "launch");
}

}  // namespace

extern "C" ops_status opsi_sdpa_cuda_sm90_d64(const opsi_launch *ctx, const void *args) {
  return run_sm90<64, false>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_sm90_d128(const opsi_launch *ctx, const void *args) {
  return run_sm90<128, false>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_sm90_d256(const opsi_launch *ctx, const void *args) {
  return run_sm90<256, false>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_sm90_d64_pair(const opsi_launch *ctx, const void *args) {
  return run_sm90<64, true>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_sm90_d128_pair(const opsi_launch *ctx, const void *args) {
  return run_sm90<128, true>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_mma_d64(const opsi_launch *ctx, const void *args) {
  return run_mma<64>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_mma_d128(const opsi_launch *ctx, const void *args) {
  return run_mma<128>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
extern "C" ops_status opsi_sdpa_cuda_mma_d256(const opsi_launch *ctx, const void *args) {
  return run_mma<256>(ctx, static_cast<const opsi_sdpa_args *>(args));
}
