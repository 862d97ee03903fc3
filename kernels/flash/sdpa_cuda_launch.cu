/* The attention CUDA launchers: validated args (opsi_sdpa_args) -> sdpa_geom -> one kernel. */
#include <string.h>

#include <type_traits>

#include "kernels/common/launch_status.h"
#include "kernels/common/tma_host.h"
#include "kernels/flash/sdpa_args.h"
#include "kernels/flash/sdpa_bwd_cpu.h"
#include "kernels/flash/sdpa_bwd_mma.cuh"
#include "kernels/flash/sdpa_bwd_sm90.cuh"
#include "kernels/flash/sdpa_cuda.h"
#include "kernels/flash/sdpa_mma.cuh"
#include "kernels/flash/sdpa_sm90.cuh"
#include "kernels/flash/sdpa_split.cuh"
#include "opslib/ops.h"

/* The instantiations of sdpa_<family>_<dtype>_<name>.cu (sdpa_kernels.h's lists). */
#define OPSI_SDPA_MMA_EXTERN_T(ID, NAME, DP, T) extern OPSI_SDPA_MMA_TEMPLATE(T, DP)
#define OPSI_SDPA_MMA_EXTERN(ID, NAME, DP) \
  OPSI_SDPA_MMA_EXTERN_T(ID, NAME, DP, __nv_bfloat16) OPSI_SDPA_MMA_EXTERN_T(ID, NAME, DP, __half)
OPSI_SDPA_MMA_KERNELS(OPSI_SDPA_MMA_EXTERN)
#define OPSI_SDPA_SM90_EXTERN_T(ID, NAME, SHAPE, CL, T) extern OPSI_SDPA_SM90_TEMPLATE(T, SHAPE, CL)
#define OPSI_SDPA_SM90_EXTERN(ID, NAME, SHAPE, DP, CL) \
  OPSI_SDPA_SM90_EXTERN_T(ID, NAME, SHAPE, CL, __nv_bfloat16) OPSI_SDPA_SM90_EXTERN_T(ID, NAME, SHAPE, CL, __half)
OPSI_SDPA_SM90_KERNELS(OPSI_SDPA_SM90_EXTERN)
#define OPSI_SDPA_SPLIT_EXTERN_T(ID, NAME, DP, BM, T) extern OPSI_SDPA_SPLIT_TEMPLATE(T, DP, BM)
#define OPSI_SDPA_SPLIT_EXTERN(ID, NAME, DP, BM) \
  OPSI_SDPA_SPLIT_EXTERN_T(ID, NAME, DP, BM, __nv_bfloat16) OPSI_SDPA_SPLIT_EXTERN_T(ID, NAME, DP, BM, __half)
OPSI_SDPA_SPLIT_KERNELS(OPSI_SDPA_SPLIT_EXTERN)
#define OPSI_SDPA_BWD_MMA_EXTERN_T(ID, NAME, DP, T) extern OPSI_SDPA_BWD_MMA_TEMPLATE(T, DP)
#define OPSI_SDPA_BWD_MMA_EXTERN(ID, NAME, DP) \
  OPSI_SDPA_BWD_MMA_EXTERN_T(ID, NAME, DP, __nv_bfloat16) OPSI_SDPA_BWD_MMA_EXTERN_T(ID, NAME, DP, __half)
OPSI_SDPA_BWD_MMA_KERNELS(OPSI_SDPA_BWD_MMA_EXTERN)
#define OPSI_SDPA_BWD_SM90_EXTERN_T(ID, NAME, DP, T, DET) extern OPSI_SDPA_BWD_SM90_TEMPLATE(T, DP, DET)
#define OPSI_SDPA_BWD_SM90_EXTERN(ID, NAME, DP)                   \
  OPSI_SDPA_BWD_SM90_EXTERN_T(ID, NAME, DP, __nv_bfloat16, false) \
  OPSI_SDPA_BWD_SM90_EXTERN_T(ID, NAME, DP, __half, false)
OPSI_SDPA_BWD_SM90_KERNELS(OPSI_SDPA_BWD_SM90_EXTERN)
#define OPSI_SDPA_BWD_SM90_DET_EXTERN(ID, NAME, DP)              \
  OPSI_SDPA_BWD_SM90_EXTERN_T(ID, NAME, DP, __nv_bfloat16, true) \
  OPSI_SDPA_BWD_SM90_EXTERN_T(ID, NAME, DP, __half, true)
OPSI_SDPA_BWD_SM90_DET_KERNELS(OPSI_SDPA_BWD_SM90_DET_EXTERN)

namespace {

template <int DP> ops_status run_mma(const opsi_launch *ctx, const opsi_sdpa_args *a) {
  const opsi::sdpa_geom &g = a->geom;
  if (g.seqlen_q == 0 || g.heads_q == 0 || g.batch == 0) return OPS_OK;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  const cudaError_t e =
      a->q.dtype == OPS_DTYPE_BF16
          ? opsi::fa2::launch_sdpa_mma<__nv_bfloat16, DP>(g, stream, info->grid, info->block, &info->smem_bytes)
          : opsi::fa2::launch_sdpa_mma<__half, DP>(g, stream, info->grid, info->block, &info->smem_bytes);
  return opsi::launch_status(ctx, e);
}

/* The map of one [B, S, H, D] operand as (d, s, h, b), box (64, rows, 1, 1); a varlen view
 * (batch stride 0) as (d, t, h, 1): the kernel adds the sequence's start to s. */
ops_status encode_operand(const opsi_launch *ctx, CUtensorMap *map, const ops_tensor &t, bool varlen, int rows,
                          const char *what) {
  const int64_t dims[4] = {t.shape[3], t.shape[1], t.shape[2], varlen ? 1 : t.shape[0]};
  const int64_t strides[3] = {t.strides[1], t.strides[2], t.strides[0]};
  const uint32_t box[4] = {64, (uint32_t)rows, 1, 1};
  return opsi::map_status(ctx, opsi::encode_map_16bit(map, t.data, t.dtype, 4, dims, strides, box), what);
}

/* PAIR: the shape's _pair kernel (clusters of two sharing K / V), which its row sends only
 * uniform calls with an even number of query tiles a head; else one block a cluster. */
template <typename C, int CL> ops_status run_sm90(const opsi_launch *ctx, const opsi_sdpa_args *a) {
  constexpr bool PAIR = CL > 1;
  static_assert(CL == 1 || CL == C::CLUSTER, "a pair kernel exists only for shapes with CLUSTER 2");
  if (a->has_mask) { /* the rows do not claim OPSI_F_MASK: the dispatcher sends masks to sm_80's kernel */
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL, "the Hopper kernel got a mask tensor, which it does not read",
                              NULL, 0);
  }
  const opsi::sdpa_geom &g = a->geom;
  if (g.seqlen_q == 0 || g.heads_q == 0 || g.batch == 0) return OPS_OK;
  if (C::OS && !g.aligned) { /* the rows' align rule (16 bytes, every operand) keeps these away */
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL,
                              "the Hopper kernel got rows that are not 16-byte aligned, which its row excludes", NULL,
                              0);
  }
  /* Tiles from one [B, S, H, D] layout (no varlen, no KV cache): one block an SM walks them
   * (persistent: the next tile's Q and K / V load under the current one's keys), every other
   * pass in reverse (causal and windowed tiles differ in length). Otherwise a block a tile,
   * longest first, and the hardware balances them. */
  const int64_t tiles = opsi::fa3::sdpa_tiles<C::BM>(g);
  const bool uniform = a->uniform != 0;
  const bool persistent = a->persistent != 0;
  constexpr int cluster = CL;
  if (PAIR && (!uniform || opsi::fa3::sdpa_query_tiles<C::BM>(g) % 2 != 0)) {
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL,
                              "the pair kernel got a call its row excludes (a window, varlen, or an odd number "
                              "of query tiles a head)",
                              NULL, 0);
  }
  CUtensorMap mq, mk, mv;
  ops_status st = encode_operand(ctx, &mq, a->q, a->varlen, C::BM, "the tensor map of q");
  if (st == OPS_OK) st = encode_operand(ctx, &mk, a->k, a->varlen, C::BN / cluster, "the tensor map of k");
  if (st == OPS_OK) st = encode_operand(ctx, &mv, a->v, a->varlen, C::BN / cluster, "the tensor map of v");
  /* where the shape stages O: its stores' map, a box a consumer warp's 16 rows
   * (sdpa_sm90_epilogue.cuh) */
  CUtensorMap mo = {};
  if (st == OPS_OK && C::OS) st = encode_operand(ctx, &mo, a->o, a->varlen, 16, "the tensor map of o");
  if (st != OPS_OK) return st;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  const int64_t cap = persistent ? ctx->sm_count / cluster * cluster : 2147483647;
  const int grid = (int)(tiles < cap ? tiles : cap);
  info->cluster = cluster;
  const bool by_length =
      persistent && opsi_sdpa_sm90_by_length(g.window_left >= 0 || g.window_right >= 0, tiles, grid, g.batch,
                                             g.heads_q / g.group) != 0; /* as the kernel decides */
  info->plan = PAIR        ? OPSI_SDPA_SM90_PLAN_PAIR
               : by_length ? OPSI_SDPA_SM90_PLAN_BY_LENGTH
               : persistent ? OPSI_SDPA_SM90_PLAN_PERSISTENT
                            : OPSI_SDPA_SM90_PLAN_TILE;
  const cudaError_t e =
      a->q.dtype == OPS_DTYPE_BF16
          ? opsi::fa3::launch_sdpa_sm90<__nv_bfloat16, C, cluster>(mq, mk, mv, mo, g, grid, stream, info->grid,
                                                                    info->block, &info->smem_bytes)
          : opsi::fa3::launch_sdpa_sm90<__half, C, cluster>(mq, mk, mv, mo, g, grid, stream, info->grid,
                                                             info->block, &info->smem_bytes);
  return opsi::launch_status(ctx, e);
}

/* Split-KV: the part count from the call's shape and the device (sdpa_split_shape.h, as the
 * row's workspace and plan take it); the workspace holds the parts when there are several.
 * K and V by TMA where the kernel's code for sm_90a takes them so (opsi_sdpa_split_tma_box): maps
 * by encode_operand, a view without a batch stride (varlen) as one batch, which the kernel reads
 * at batch 0 (sdpa_split.cuh's tma_kv); a paged pool [pages, page_size, H, D] as (d, row in page,
 * h, page). */
template <int DP, int BM> ops_status run_split(const opsi_launch *ctx, const opsi_sdpa_args *a) {
  using C = opsi::split::cfg<__half, DP, BM>;
  const opsi::sdpa_geom &g = a->geom;
  if (g.seqlen_q == 0 || g.heads_q == 0 || g.batch == 0) return OPS_OK;
  if (a->has_mask || !g.aligned) { /* the rows claim neither a mask nor strided / unaligned rows */
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL,
                              "the split-KV kernel got a mask or rows that are not 16-byte aligned", NULL, 0);
  }
  const int64_t row_tiles = opsi_sdpa_split_row_tiles(g.seqlen_q, g.group, BM);
  int32_t wave = 0;
  const int32_t splits = opsi_sdpa_split_parts(ctx->sm, g.batch, g.heads_q / g.group, row_tiles, g.seqlen_k,
                                               ctx->sm_count, C::PER_SM, &wave);
  const int64_t tokens_q = a->varlen ? a->q.shape[1] : (int64_t)g.batch * g.seqlen_q;
  if (row_tiles * splits > 2147483647 || tokens_q * g.heads_q > 2147483647) {
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL, "the split-KV grid or its combine's exceeds 2^31 - 1 blocks",
                              NULL, 0);
  }
  const int clustered = opsi_sdpa_split_clustered(
      ctx->sm, opsi_sdpa_split_units(g.batch, g.heads_q / g.group, row_tiles), splits, ctx->sm_count, C::PER_SM);
  if (opsi_sdpa_split_workspace(splits, clustered, tokens_q, g.heads_q, g.dv) > ctx->workspace_bytes) {
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL, "the split-KV workspace is smaller than its row's", NULL, 0);
  }
  CUtensorMap mk, mv;
  memset(&mk, 0, sizeof mk), memset(&mv, 0, sizeof mv);
  /* no keys at all: nothing for TMA to load (and a map takes no extent of 0) */
  const bool kv_empty = ops_tensor_numel(&a->k) == 0 || ops_tensor_numel(&a->v) == 0;
  const int32_t box = kv_empty ? 0 : opsi_sdpa_split_tma_box(DP, BM, ctx->sm, a->paged ? a->page_size : 0);
  if (box > 0) {
    ops_status st = encode_operand(ctx, &mk, a->k, a->k.strides[0] == 0, box, "the tensor map of k");
    if (st == OPS_OK) st = encode_operand(ctx, &mv, a->v, a->v.strides[0] == 0, box, "the tensor map of v");
    if (st != OPS_OK) return st;
  }
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  info->plan = opsi_sdpa_split_plan(splits, clustered, wave);
  const cudaError_t e =
      a->q.dtype == OPS_DTYPE_BF16
          ? opsi::split::launch_sdpa_split<__nv_bfloat16, DP, BM>(g, splits, (int32_t)row_tiles, clustered,
                                                                  ctx->workspace, tokens_q, mk, mv, box, ctx->sm,
                                                                  stream, info->grid, info->block,
                                                                  &info->smem_bytes, &info->cluster)
          : opsi::split::launch_sdpa_split<__half, DP, BM>(g, splits, (int32_t)row_tiles, clustered,
                                                           ctx->workspace, tokens_q, mk, mv, box, ctx->sm, stream,
                                                           info->grid, info->block, &info->smem_bytes,
                                                           &info->cluster);
  return opsi::launch_status(ctx, e);
}

/* The backward: D into the workspace (its row's size), then the dK / dV and dQ passes. */
template <int DP> ops_status run_bwd_mma(const opsi_launch *ctx, const opsi_sdpa_bwd_args *ba) {
  opsi_sdpa_bwd_geom bg = ba->geom;
  if (bg.f.batch == 0 || bg.f.heads_q == 0) return OPS_OK;
  if (opsi_sdpa_bwd_mma_workspace(bg.rows, bg.f.heads_q) > ctx->workspace_bytes) {
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL, "the backward's workspace is smaller than its row's", NULL, 0);
  }
  bg.dsum = static_cast<float *>(ctx->workspace);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  const cudaError_t e =
      ba->fwd.q.dtype == OPS_DTYPE_BF16
          ? opsi::fa2bwd::launch_sdpa_bwd_mma<__nv_bfloat16, DP>(bg, ctx->sm_count, stream, info->grid, info->block,
                                                                 &info->smem_bytes)
          : opsi::fa2bwd::launch_sdpa_bwd_mma<__half, DP>(bg, ctx->sm_count, stream, info->grid, info->block,
                                                          &info->smem_bytes);
  return opsi::launch_status(ctx, e);
}

/* The Hopper backward: D and the zeroed dQ accumulators (DET: and turn counters) in the
 * workspace (its row's size), then the main pass and dQ's conversion. */
template <int DP, bool DET> ops_status run_bwd_sm90(const opsi_launch *ctx, const opsi_sdpa_bwd_args *ba) {
  using C = opsi::fa3bwd::cfg<DP>;
  opsi_sdpa_bwd_geom bg = ba->geom;
  const opsi_sdpa_args *a = &ba->fwd;
  if (bg.f.batch == 0 || bg.f.heads_q == 0) return OPS_OK;
  if (a->has_mask || !bg.aligned) { /* the rows claim neither a mask nor strided / unaligned rows */
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL,
                              "the Hopper backward got a mask or rows that are not 16-byte aligned", NULL, 0);
  }
  /* key tiles in parts where they fill too little of a wave (its row's plan and workspace say
   * the same) */
  const int64_t heads_kv = bg.f.heads_q / bg.f.group;
  const int64_t tiles = opsi_sdpa_bwd_sm90_key_tiles(bg.f.batch, heads_kv, bg.f.seqlen_k, DP);
  const int32_t parts =
      opsi_sdpa_bwd_sm90_parts(bg.f.batch, heads_kv, bg.f.seqlen_k, bg.f.group, bg.f.seqlen_q, DP, ctx->sm_count);
  /* the workspace before the parts' room: the accumulators (DET: and the turns) */
  const size_t base = DET ? opsi_sdpa_bwd_sm90_det_workspace(bg.rows, bg.f.batch, bg.f.heads_q, DP)
                          : opsi_sdpa_bwd_sm90_workspace(bg.rows, bg.f.heads_q, DP);
  if (opsi_sdpa_bwd_sm90_with_parts(base, tiles, parts, DP) > ctx->workspace_bytes) {
    return opsi_launch_failed(ctx, OPS_ERR_INTERNAL, "the backward's workspace is smaller than its row's", NULL, 0);
  }
  bg.dsum = static_cast<float *>(ctx->workspace);
  bg.dq_acc = reinterpret_cast<float *>(static_cast<char *>(ctx->workspace) +
                                        opsi_sdpa_bwd_sm90_dq_offset(bg.rows, bg.f.heads_q));
  bg.dq_cols = DP;
  if (DET) {
    bg.dq_turn = reinterpret_cast<int32_t *>(static_cast<char *>(ctx->workspace) +
                                             opsi_sdpa_bwd_sm90_workspace(bg.rows, bg.f.heads_q, DP));
    bg.dq_turns = opsi_sdpa_bwd_sm90_turns(bg.rows, bg.f.batch, bg.f.heads_q, DP);
  }
  bg.kv_parts = parts;
  if (parts > 1) { /* the parts' counters at base (DET: right after the turns) and sums */
    char *ws = static_cast<char *>(ctx->workspace);
    bg.kv_sums = reinterpret_cast<float *>(ws + opsi_sdpa_bwd_sm90_parts_sums_at(base, tiles));
    if (!DET) bg.dq_turn = reinterpret_cast<int32_t *>(ws + base), bg.dq_turns = tiles;
  }
  const opsi_sdpa_geom &g = bg.f;
  if (DET) {
    bg.walk_order = opsi_sdpa_bwd_sm90_walk_order(g.window_left, g.window_right, g.seqlen_q, g.seqlen_k,
                                                  g.group, DP, parts, tiles, ctx->sm_count);
    ctx->info->plan = opsi_sdpa_bwd_sm90_det_plan(bg.walk_order, parts);
  } else {
    ctx->info->plan =
        opsi_sdpa_bwd_sm90_plan(parts, opsi_sdpa_bwd_sm90_uneven(g.window_left, g.window_right, g.seqlen_q, g.seqlen_k));
  }
  CUtensorMap mq, mk, mv, mdo, mdq;
  /* an empty operand has no map (TMA takes no extent of 0): with no key there is no main pass
   * (dq is 0, dk and dv empty); with no query row the main pass loads no query tile (dk and
   * dv are 0) */
  const bool keys = a->k.shape[0] > 0 && a->k.shape[1] > 0, rows = bg.rows > 0;
  memset(&mq, 0, sizeof mq), memset(&mk, 0, sizeof mk), memset(&mv, 0, sizeof mv), memset(&mdo, 0, sizeof mdo);
  memset(&mdq, 0, sizeof mdq);
  ops_status st = OPS_OK;
  if (rows) { /* dQ's accumulators, (DP columns, heads, rows) f32, for the main pass's reductions */
    const int64_t dims[3] = {DP, bg.f.heads_q, bg.rows}, strides[2] = {DP, bg.f.heads_q * DP};
    const uint32_t box[3] = {32, 1, 64}; /* a consumer warpgroup's piece: 64 rows, two boxes of 32 columns */
    st = opsi::map_status(
        ctx, opsi::encode_map(&mdq, bg.dq_acc, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, 3, dims, strides, box),
        "the tensor map of the dq accumulators");
  }
  if (st == OPS_OK && rows) st = encode_operand(ctx, &mq, a->q, a->varlen, C::BM, "the tensor map of q");
  if (st == OPS_OK && keys) st = encode_operand(ctx, &mk, a->k, a->varlen, C::BN, "the tensor map of k");
  if (st == OPS_OK && keys) st = encode_operand(ctx, &mv, a->v, a->varlen, C::BN, "the tensor map of v");
  if (st == OPS_OK && rows) st = encode_operand(ctx, &mdo, ba->dout, a->varlen, C::BM, "the tensor map of dout");
  if (st != OPS_OK) return st;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  opsi_launch_info *info = ctx->info;
  int32_t ran = bg.walk_order;
  const cudaError_t e = a->q.dtype == OPS_DTYPE_BF16
                            ? opsi::fa3bwd::launch_sdpa_bwd_sm90<__nv_bfloat16, DP, DET>(
                                  mq, mk, mv, mdo, mdq, bg, keys, ctx->sm_count, stream, info->grid,
                                  info->block, &info->smem_bytes, &ran)
                            : opsi::fa3bwd::launch_sdpa_bwd_sm90<__half, DP, DET>(
                                  mq, mk, mv, mdo, mdq, bg, keys, ctx->sm_count, stream, info->grid,
                                  info->block, &info->smem_bytes, &ran);
  if (DET && ran != bg.walk_order) info->plan = opsi_sdpa_bwd_sm90_det_plan(ran, parts); /* round refused */
  return opsi::launch_status(ctx, e);
}

}  // namespace

#define OPSI_SDPA_BWD_SM90_LAUNCHER(ID, NAME, DP)                                                   \
  extern "C" ops_status opsi_sdpa_bwd_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_bwd_sm90<DP, false>(ctx, static_cast<const opsi_sdpa_bwd_args *>(args));             \
  }
OPSI_SDPA_BWD_SM90_KERNELS(OPSI_SDPA_BWD_SM90_LAUNCHER)
#define OPSI_SDPA_BWD_SM90_DET_LAUNCHER(ID, NAME, DP)                                                   \
  extern "C" ops_status opsi_sdpa_bwd_cuda_sm90_det_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_bwd_sm90<DP, true>(ctx, static_cast<const opsi_sdpa_bwd_args *>(args));                   \
  }
OPSI_SDPA_BWD_SM90_DET_KERNELS(OPSI_SDPA_BWD_SM90_DET_LAUNCHER)
#define OPSI_SDPA_BWD_MMA_LAUNCHER(ID, NAME, DP)                                                   \
  extern "C" ops_status opsi_sdpa_bwd_cuda_mma_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_bwd_mma<DP>(ctx, static_cast<const opsi_sdpa_bwd_args *>(args));                    \
  }
OPSI_SDPA_BWD_MMA_KERNELS(OPSI_SDPA_BWD_MMA_LAUNCHER)
#define OPSI_SDPA_SPLIT_LAUNCHER(ID, NAME, DP, BM)                                               \
  extern "C" ops_status opsi_sdpa_cuda_split_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_split<DP, BM>(ctx, static_cast<const opsi_sdpa_args *>(args));                    \
  }
OPSI_SDPA_SPLIT_KERNELS(OPSI_SDPA_SPLIT_LAUNCHER)
#define OPSI_SDPA_SM90_LAUNCHER(ID, NAME, SHAPE, DP, CL)                                         \
  extern "C" ops_status opsi_sdpa_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_sm90<OPSI_SDPA_SM90_CFG(SHAPE), CL>(ctx, static_cast<const opsi_sdpa_args *>(args)); \
  }
OPSI_SDPA_SM90_KERNELS(OPSI_SDPA_SM90_LAUNCHER)
#define OPSI_SDPA_MMA_LAUNCHER(ID, NAME, DP)                                                   \
  extern "C" ops_status opsi_sdpa_cuda_mma_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_mma<DP>(ctx, static_cast<const opsi_sdpa_args *>(args));                        \
  }
OPSI_SDPA_MMA_KERNELS(OPSI_SDPA_MMA_LAUNCHER)
