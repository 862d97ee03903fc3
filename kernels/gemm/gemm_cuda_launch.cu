/* The GEMM CUDA launchers: validated args (opsi_gemm_args) -> gemm_geom -> one kernel. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <string.h>

#include "kernels/common/launch_status.h"
#include "kernels/common/tma_host.h"
#include "kernels/gemm/gemm_args.h"
#include "kernels/gemm/gemm_cuda.h"
#include "kernels/gemm/gemm_pipelined.cuh"
#include "kernels/gemm/gemm_shape.h"
#include "kernels/gemm/gemm_sm90.cuh"
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/gemm/gemv.cuh"
#include "opslib/ops.h"

#define GEMM_TRY(expr)                   \
  do {                                   \
    const ops_status gemm_st_ = (expr);  \
    if (gemm_st_ != OPS_OK) return gemm_st_; \
  } while (0)

#define OPSI_GEMM_EXTERN(T)                                                                                      \
  extern template cudaError_t opsi::launch_gemm_tiled<T>(const opsi::gemm_geom &, int, int, cudaStream_t,         \
                                                          int32_t *, int32_t *);                                 \
  extern template cudaError_t opsi::launch_gemv<T>(const opsi::gemm_geom &, const opsi::gemv_view &, int,         \
                                                    cudaStream_t, int32_t *, int32_t *);
OPSI_GEMM_EXTERN(float)
OPSI_GEMM_EXTERN(__half)
OPSI_GEMM_EXTERN(__nv_bfloat16)
#undef OPSI_GEMM_EXTERN

#define OPSI_CP_EXTERN(T, B_MN)                                                                           \
  extern template cudaError_t opsi::cpk::launch_gemm_cp<T, B_MN>(const opsi::gemm_geom &, cudaStream_t, int32_t *, \
                                                                 int32_t *, int32_t *);
OPSI_CP_EXTERN(__nv_bfloat16, false)
OPSI_CP_EXTERN(__nv_bfloat16, true)
OPSI_CP_EXTERN(__half, false)
OPSI_CP_EXTERN(__half, true)
OPSI_CP_EXTERN(float, false)
OPSI_CP_EXTERN(float, true)
#undef OPSI_CP_EXTERN

/* gemm_sm90_<dtype>_<BN>_<layout>[_plain].cu (gemm_kernels.h's lists) */
#define OPSI_SM90_EXTERN_P(T, BN, B_MN) \
  extern OPSI_GEMM_SM90_TEMPLATE(T, BN, B_MN, false) extern OPSI_GEMM_SM90_TEMPLATE(T, BN, B_MN, true)
#define OPSI_SM90_EXTERN_B(ID, NAME, BN, T) OPSI_SM90_EXTERN_P(T, BN, false) OPSI_SM90_EXTERN_P(T, BN, true)
#define OPSI_SM90_EXTERN(ID, NAME, BN) \
  OPSI_SM90_EXTERN_B(ID, NAME, BN, __nv_bfloat16) OPSI_SM90_EXTERN_B(ID, NAME, BN, __half)
OPSI_GEMM_SM90_KERNELS(OPSI_SM90_EXTERN)
#define OPSI_SM90_KMAJOR_EXTERN(ID, NAME, BN) \
  OPSI_SM90_EXTERN_P(__nv_bfloat16, BN, false) OPSI_SM90_EXTERN_P(__half, BN, false)
OPSI_GEMM_SM90_KMAJOR_KERNELS(OPSI_SM90_KMAJOR_EXTERN)

namespace {

opsi::gemm_view view_of(const ops_tensor &t) { return {t.data, t.strides[0], t.strides[1], t.strides[2]}; }

opsi::gemm_geom geom_of(const opsi_gemm_args *a) {
  opsi::gemm_geom g;
  memset(&g, 0, sizeof g);
  g.batch = a->batch, g.m = a->m, g.n = a->n, g.k = a->k;
  g.a = view_of(a->a);
  g.b = view_of(a->b);
  g.d = view_of(a->d);
  if (a->has_c) g.c = view_of(a->c);
  if (a->has_bias) g.bias = view_of(a->bias);
  if (a->has_residual) g.res = view_of(a->residual);
  g.alpha = (float)a->alpha;
  g.beta = (float)a->beta;
  g.act = a->activation;
  g.d_dtype = a->d.dtype;
  g.plain = g.alpha == 1.0f && !a->has_c && !a->has_bias && !a->has_residual && a->activation == OPS_ACT_NONE;
  return g;
}

/* Absent, or unit column stride with every pair of columns (2c, 2c + 1) aligned for one
 * access: the Hopper kernel's register epilogue reads and writes it in pairs. */
bool pair_view(const opsi::gemm_view &v, int64_t batch, int32_t dtype) {
  if (v.p == nullptr) return true;
  const size_t elem = ops_dtype_size((ops_dtype)dtype);
  return v.sc == 1 && v.sr % 2 == 0 && (batch == 1 || v.sb % 2 == 0) && (uintptr_t)v.p % (2 * elem) == 0;
}

/* B is read N-major when its N axis, not its K axis, is the unit-stride one (with K == 1 both
 * may be: a [1, N] row is then one N-major row, whatever its K stride). */
bool b_n_major(const opsi::gemm_geom &g) { return g.b.sr != 1 && g.b.sc == 1; }

/* ---- Hopper ---- */

/* A 3-D map over (inner, outer, batch) of a 16-bit operand, box (64, box_outer, 1), 128-byte
 * swizzle, zeros past the edges (TMA stores write nothing there). A broadcast batch is an
 * axis of extent 1. */
CUresult map_3d(CUtensorMap *map, const void *base, int32_t dtype, int64_t inner, int64_t outer, int64_t s_outer,
                int64_t batch, int64_t s_batch, int box_outer) {
  const int64_t dims[3] = {inner, outer, s_batch != 0 ? batch : 1}, strides[2] = {s_outer, s_batch};
  const uint32_t box[3] = {64, (uint32_t)box_outer, 1};
  return opsi::encode_map_16bit(map, base, dtype, 3, dims, strides, box);
}

/* map_3d for operand `what`, a failure as the call's error. */
ops_status encode_map(const opsi_launch *ctx, CUtensorMap *map, const void *base, int32_t dtype, int64_t inner,
                      int64_t outer, int64_t s_outer, int64_t batch, int64_t s_batch, int box_outer,
                      const char *what) {
  return opsi::map_status(ctx, map_3d(map, base, dtype, inner, outer, s_outer, batch, s_batch, box_outer), what);
}

/* D's store map (box 64 x 64 x 1) when the Hopper epilogue can store D by TMA: 16-bit, unit
 * column stride, 16-byte aligned base and positive row / batch strides. A D that cannot is
 * stored by the threads instead (returns false; no error). */
bool encode_store_map(CUtensorMap *map, const opsi_gemm_args *a, const opsi::gemm_geom &g) {
  if (!opsi_gemm_sm90_d_tma(a)) return false;
  return map_3d(map, g.d.p, g.d_dtype, g.n, g.m, g.d.sr, g.batch, g.batch > 1 ? g.d.sb : 0, 64) == CUDA_SUCCESS;
}

/* split: the _splitk row, whose K split comes from the shape and the device
 * (opsi_gemm_splitk_parts). */
template <int BN> ops_status run_sm90(const opsi_launch *ctx, const opsi_gemm_args *a, bool split) {
  const opsi::gemm_geom g = geom_of(a);
  const bool b_mn = b_n_major(g);
  CUtensorMap ma, mb, md;
  const int32_t a_rows = opsi_gemm_sm90_a_rows(g.m);
  GEMM_TRY(encode_map(ctx, &ma, g.a.p, a->a.dtype, g.k, g.m, g.a.sr, g.batch, g.a.sb, a_rows, "the tensor map of a"));
  if (b_mn) {
    GEMM_TRY(encode_map(ctx, &mb, g.b.p, a->b.dtype, g.n, g.k, g.b.sr, g.batch, g.b.sb, 64, "the tensor map of b"));
  } else {
    GEMM_TRY(encode_map(ctx, &mb, g.b.p, a->b.dtype, g.k, g.n, g.b.sc, g.batch, g.b.sb, BN, "the tensor map of b"));
  }
  memset(&md, 0, sizeof md);
  opsi::tile_order order;
  order.tiles_m = (int32_t)((g.m + opsi::sm90::BM - 1) / opsi::sm90::BM);
  order.tiles_n = (int32_t)((g.n + BN - 1) / BN);
  order.tiles = g.batch * order.tiles_m * order.tiles_n;
  opsi::sm90::k_split ks;
  ks.parts = split ? opsi_gemm_splitk_parts(g.batch, g.m, g.n, g.k, BN, ctx->sm_count) : 1;
  const int64_t kblocks = (g.k + opsi::sm90::BK - 1) / opsi::sm90::BK;
  ks.kb_per_part = (int32_t)((kblocks + ks.parts - 1) / ks.parts);
  ks.a_bytes = a_rows * opsi::sm90::BK * 2;
  const int d_tma = OPSI_GEMM_SM90_BOXED(BN) && encode_store_map(&md, a, g) ? 1 : 0;
  const int wide = opsi_gemm_sm90_wide(BN, g.m, ks.parts);
  const int grid = (int)opsi_gemm_sm90_grid(order.tiles * ks.parts, ks.parts, ctx->sm_count);
  const int cluster = opsi_gemm_sm90_spread_cluster(grid, ks.parts, ctx->sm_count);
  const int pairs = (pair_view(g.d, g.batch, g.d_dtype) ? 1 : 0) |
                    (pair_view(g.c, g.batch, g.d_dtype) && pair_view(g.res, g.batch, g.d_dtype) &&
                             (g.bias.sc == 0 || pair_view(g.bias, g.batch, g.d_dtype))
                         ? 2
                         : 0);
  const int a_batched = g.batch > 1 && g.a.sb != 0, b_batched = g.batch > 1 && g.b.sb != 0;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  cudaError_t e;
  const int l2_hints = opsi_gemm_sm90_l2_hints(order.tiles_m, order.tiles_n, g.batch > 1 && !b_batched);
  /* a call without an epilogue runs the plain instantiation (gemm_sm90_kernel's PLAIN) */
#define OPSI_SM90_LAUNCH_P(T, B_MN, PLAIN)                                                                   \
  opsi::sm90::launch_gemm_sm90<T, BN, B_MN, PLAIN>(ma, mb, md, g, order, ks, a_batched, b_batched, pairs, d_tma, \
                                                   wide, l2_hints, grid, cluster, stream)
#define OPSI_SM90_LAUNCH(T, B_MN) (g.plain ? OPSI_SM90_LAUNCH_P(T, B_MN, true) : OPSI_SM90_LAUNCH_P(T, B_MN, false))
  if constexpr (!OPSI_GEMM_SM90_BOXED(BN)) { /* B K-major: the rows take no other */
    e = a->a.dtype == OPS_DTYPE_BF16 ? OPSI_SM90_LAUNCH(__nv_bfloat16, false) : OPSI_SM90_LAUNCH(__half, false);
  } else if (a->a.dtype == OPS_DTYPE_BF16) {
    e = b_mn ? OPSI_SM90_LAUNCH(__nv_bfloat16, true) : OPSI_SM90_LAUNCH(__nv_bfloat16, false);
  } else {
    e = b_mn ? OPSI_SM90_LAUNCH(__half, true) : OPSI_SM90_LAUNCH(__half, false);
  }
#undef OPSI_SM90_LAUNCH
#undef OPSI_SM90_LAUNCH_P
  int32_t *gr = ctx->info->grid, *bl = ctx->info->block;
  gr[0] = grid, gr[1] = gr[2] = 1;
  bl[0] = opsi::sm90::THREADS, bl[1] = bl[2] = 1;
  ctx->info->smem_bytes = opsi::sm90::cfg<BN>::SMEM_BYTES;
  ctx->info->cluster = ks.parts > 1 ? ks.parts : cluster;
  ctx->info->plan =
      ks.parts > 1 ? opsi_gemm_splitk_plan(ks.parts) : opsi_gemm_sm90_unsplit_plan(wide, g.m, d_tma, cluster);
  return opsi::launch_status(ctx, e);
}

/* ---- portable ---- */

ops_status run_tiled(const opsi_launch *ctx, const opsi_gemm_args *a) {
  const opsi::gemm_geom g = geom_of(a);
  const size_t elem = ops_dtype_size((ops_dtype)a->a.dtype);
  const int mode_a = opsi::tile_read_mode(g.a.sr, g.a.sc, g.k, (uintptr_t)g.a.p, g.a.sb, elem);
  const int mode_b = opsi::tile_read_mode(g.b.sc, g.b.sr, g.k, (uintptr_t)g.b.p, g.b.sb, elem);
  cudaError_t e = cudaSuccess;
  OPSI_DISPATCH_FLOAT(a->a.dtype, T,
                      e = opsi::launch_gemm_tiled<T>(g, mode_a, mode_b, (cudaStream_t)ctx->stream, ctx->info->grid,
                                                     ctx->info->block));
  /* static shared memory, which the kernels declare in these sizes (gemm_tiled.cuh) */
  ctx->info->smem_bytes = a->a.dtype == OPS_DTYPE_F32 ? OPSI_GEMM_FFMA_SMEM : OPSI_GEMM_MMA_SMEM;
  return opsi::launch_status(ctx, e);
}

template <typename T>
cudaError_t launch_cp(const opsi::gemm_geom &g, cudaStream_t stream, opsi_launch_info *info) {
  return b_n_major(g) ? opsi::cpk::launch_gemm_cp<T, true>(g, stream, info->grid, info->block, &info->smem_bytes)
                      : opsi::cpk::launch_gemm_cp<T, false>(g, stream, info->grid, info->block, &info->smem_bytes);
}

/* The cp.async pipelined kernels: mma.sync f16 / bf16, or tf32 for f32 (its row needs the
 * handle's OPS_MATH_ALLOW_TF32). */
ops_status run_pipelined(const opsi_launch *ctx, const opsi_gemm_args *a) {
  const opsi::gemm_geom g = geom_of(a);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  cudaError_t e;
  switch (a->a.dtype) {
    case OPS_DTYPE_BF16: e = launch_cp<__nv_bfloat16>(g, stream, ctx->info); break;
    case OPS_DTYPE_F16: e = launch_cp<__half>(g, stream, ctx->info); break;
    default: e = launch_cp<float>(g, stream, ctx->info); break;
  }
  return opsi::launch_status(ctx, e);
}

/* by_rows: N == 1, the matrix is A; else M == 1, the matrix is B^T. */
ops_status run_gemv(const opsi_launch *ctx, const opsi_gemm_args *a, int by_rows) {
  const opsi::gemm_geom g = geom_of(a);
  opsi::gemv_view v;
  memset(&v, 0, sizeof v);
  v.by_rows = by_rows;
  if (by_rows) {
    v.mat = g.a.p, v.rows = g.m, v.s_row = g.a.sr, v.mat_sb = g.a.sb;
    v.vec = g.b.p, v.s_vec = g.b.sr, v.vec_sb = g.b.sb;
  } else {
    v.mat = g.b.p, v.rows = g.n, v.s_row = g.b.sc, v.mat_sb = g.b.sb;
    v.vec = g.a.p, v.s_vec = g.a.sc, v.vec_sb = g.a.sb;
  }
  const int64_t vec = 16 / (int64_t)ops_dtype_size((ops_dtype)a->a.dtype);
  v.vec16 = v.s_vec == 1 && v.s_row % vec == 0 && v.mat_sb % vec == 0 && v.vec_sb % vec == 0 &&
            (uintptr_t)v.mat % 16 == 0 && (uintptr_t)v.vec % 16 == 0;
  cudaError_t e = cudaSuccess;
  OPSI_DISPATCH_FLOAT(a->a.dtype, T,
                      e = opsi::launch_gemv<T>(g, v, ctx->sm_count, (cudaStream_t)ctx->stream, ctx->info->grid,
                                               ctx->info->block));
  return opsi::launch_status(ctx, e);
}

}  // namespace

#define OPSI_SM90_LAUNCHER(ID, NAME, BN)                                                      \
  extern "C" ops_status opsi_gemm_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_sm90<BN>(ctx, static_cast<const opsi_gemm_args *>(args), false);                \
  }
OPSI_GEMM_SM90_KERNELS(OPSI_SM90_LAUNCHER)
OPSI_GEMM_SM90_KMAJOR_KERNELS(OPSI_SM90_LAUNCHER)
#undef OPSI_SM90_LAUNCHER
#define OPSI_SM90_LAUNCHER(ID, NAME, BN)                                                      \
  extern "C" ops_status opsi_gemm_cuda_sm90_##NAME(const opsi_launch *ctx, const void *args) { \
    return run_sm90<BN>(ctx, static_cast<const opsi_gemm_args *>(args), true);                 \
  }
OPSI_GEMM_SM90_SPLITK_KERNELS(OPSI_SM90_LAUNCHER)
extern "C" ops_status opsi_gemm_cuda_tiled(const opsi_launch *ctx, const void *args) {
  return run_tiled(ctx, static_cast<const opsi_gemm_args *>(args));
}
extern "C" ops_status opsi_gemm_cuda_gemv_n1(const opsi_launch *ctx, const void *args) {
  return run_gemv(ctx, static_cast<const opsi_gemm_args *>(args), 1);
}
extern "C" ops_status opsi_gemm_cuda_gemv_m1(const opsi_launch *ctx, const void *args) {
  return run_gemv(ctx, static_cast<const opsi_gemm_args *>(args), 0);
}
extern "C" ops_status opsi_gemm_cuda_pipelined(const opsi_launch *ctx, const void *args) {
  return run_pipelined(ctx, static_cast<const opsi_gemm_args *>(args));
}
