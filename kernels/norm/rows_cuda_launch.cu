/* The row-wise ops' CUDA launchers: validated args -> row_geom (rows_common.cuh) -> one variant (rows_launch.cuh). */
#include <string.h>

#include "kernels/norm/rows_args.h"
#include "kernels/norm/rows_cuda.h"
#include "kernels/norm/rows_launch.cuh"
#include "opslib/ops.h"

#define OPSI_ROWS_EXTERN(T)                                                                                  \
  extern template void opsi::launch_rows_forward<T>(const opsi::row_geom &, int, int, cudaStream_t, int,      \
                                                    int32_t *, int32_t *);                                   \
  extern template void opsi::launch_rows_backward<T>(const opsi::row_geom &, int, int, cudaStream_t, int,     \
                                                     int32_t *, int32_t *);
OPSI_ROWS_EXTERN(float)
OPSI_ROWS_EXTERN(__half)
OPSI_ROWS_EXTERN(__nv_bfloat16)
#undef OPSI_ROWS_EXTERN

namespace {

/* The leading axes with extents of 1 dropped and neighbours merged where every row tensor
 * steps through them as through one axis: fewer divisions per row offset. */
void set_rows(opsi::row_geom *g, const opsi_rows_args *a, const ops_tensor *const *t) {
  int nd = 0;
  for (int d = 0; d < a->lead_ndim; ++d) {
    const int64_t n = a->lead_shape[d];
    if (n == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; merge && k < opsi::T_COUNT; ++k) {
      merge = t[k] == nullptr || t[k]->strides[d] * n == g->lead[k][nd - 1];
    }
    if (merge) {
      g->lead_shape[nd - 1] *= n;
      for (int k = 0; k < opsi::T_COUNT; ++k) g->lead[k][nd - 1] = t[k] ? t[k]->strides[d] : 0;
    } else {
      g->lead_shape[nd] = n;
      for (int k = 0; k < opsi::T_COUNT; ++k) g->lead[k][nd] = t[k] ? t[k]->strides[d] : 0;
      ++nd;
    }
  }
  g->lead_ndim = nd;
  for (int k = 0; k < opsi::T_COUNT; ++k) {
    g->col[k] = t[k] != nullptr && k != opsi::T_MEAN && k != opsi::T_RSTD ? t[k]->strides[t[k]->ndim - 1] : 0;
  }
}

ops_status run(const opsi_launch *ctx, const void *argp, int variant, int vec16) {
  const opsi_rows_args *a = static_cast<const opsi_rows_args *>(argp);
  opsi::row_geom g;
  memset(&g, 0, sizeof g);
  const bool bwd = a->backward != 0;
  g.op = a->op == OPS_OP_SOFTMAX || a->op == OPS_OP_SOFTMAX_BACKWARD ? opsi::ROW_SOFTMAX
         : a->rms                                                     ? opsi::ROW_RMS
                                                                      : opsi::ROW_LN;
  g.rows = a->rows;
  g.cols = a->cols;
  const ops_tensor *t[opsi::T_COUNT] = {
      &a->x,
      a->has_residual ? &a->residual : nullptr,
      &a->y,
      a->has_residual_out ? &a->residual_out : nullptr,
      bwd ? &a->dy : nullptr,
      a->has_mean_out ? &a->mean_out : nullptr,
      a->has_rstd_out ? &a->rstd_out : nullptr,
  };
  set_rows(&g, a, t);
  g.x = a->x.data;
  g.y = a->y.data;
  g.res = t[opsi::T_RES] ? t[opsi::T_RES]->data : nullptr;
  g.res_out = t[opsi::T_RES_OUT] ? t[opsi::T_RES_OUT]->data : nullptr;
  g.dy = bwd ? a->dy.data : nullptr;
  g.mean = t[opsi::T_MEAN] ? static_cast<float *>(t[opsi::T_MEAN]->data) : nullptr;
  g.rstd = t[opsi::T_RSTD] ? static_cast<float *>(t[opsi::T_RSTD]->data) : nullptr;
  g.dtype = a->x.dtype;
  if (g.op != opsi::ROW_SOFTMAX) {
    g.w = a->weight.data;
    g.w_dtype = a->weight.dtype;
    g.w_stride = a->weight.strides[0];
    if (a->has_bias) g.b = a->bias.data, g.b_stride = a->bias.strides[0];
  }
  if (a->has_dweight) g.dw = a->dweight.data, g.dw_dtype = a->dweight.dtype, g.dw_stride = a->dweight.strides[0];
  if (a->has_dbias) g.db = a->dbias.data, g.db_dtype = a->dbias.dtype, g.db_stride = a->dbias.strides[0];
  g.eps = (float)a->eps;
  g.scale = (float)a->scale;
  const int vec = vec16 ? (g.dtype == OPS_DTYPE_F32 ? 4 : 8) : 1;
  const bool partials = bwd && g.op != opsi::ROW_SOFTMAX && (g.dw != nullptr || g.db != nullptr);
  /* the 16-byte block variant holds 64 bytes of x a thread, or 16 elements of x and as many
     of the residual (rows_launch.cuh's launch_rows_forward sizes its kernels alike) */
  int held = variant == OPSI_ROWS_WARP      ? OPSI_ROWS_WARP_HELD
             : vec16 && g.res == nullptr ? OPSI_ROWS_FWD_VEC16_BYTES / (int)ops_dtype_size((ops_dtype)g.dtype)
                                         : OPSI_ROWS_FWD_HELD;
  if (bwd) held = g.op == opsi::ROW_SOFTMAX ? OPSI_ROWS_SM_BWD_HELD : OPSI_ROWS_NORM_BWD_HELD;
  if (variant == OPSI_ROWS_STAGED) held = OPSI_ROWS_STAGED_HELD;
  g.cfg = opsi_rows_plan(variant, held, partials, g.rows, g.cols, vec);
  g.ws = static_cast<float *>(ctx->workspace);

  cudaStream_t stream = (cudaStream_t)ctx->stream;
  int32_t *grid = ctx->info->grid, *block = ctx->info->block;
  grid[1] = grid[2] = block[1] = block[2] = 1;
  if (bwd) {
    OPSI_DISPATCH_FLOAT(g.dtype, T,
                        opsi::launch_rows_backward<T>(g, variant, vec16, stream, ctx->sm_count, grid, block));
  } else {
    OPSI_DISPATCH_FLOAT(g.dtype, T,
                        opsi::launch_rows_forward<T>(g, variant, vec16, stream, ctx->sm_count, grid, block));
  }
  return OPS_OK;
}

}  // namespace

extern "C" ops_status opsi_rows_cuda_warp_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_WARP, 1);
}
extern "C" ops_status opsi_rows_cuda_block_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_BLOCK, 1);
}
extern "C" ops_status opsi_rows_cuda_block(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_BLOCK, 0);
}
extern "C" ops_status opsi_rows_cuda_split(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_SPLIT, 0);
}
extern "C" ops_status opsi_rows_cuda_split_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_SPLIT, 1);
}
extern "C" ops_status opsi_rows_cuda_bwd_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_BLOCK, 1);
}
extern "C" ops_status opsi_rows_cuda_bwd_block(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_BLOCK, 0);
}
extern "C" ops_status opsi_rows_cuda_bwd_stream(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_STREAM, 0);
}
extern "C" ops_status opsi_rows_cuda_bwd_stream_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_STREAM, 1);
}
extern "C" ops_status opsi_rows_cuda_bwd_staged(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, OPSI_ROWS_STAGED, 1);
}
