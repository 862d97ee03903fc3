/* ops_reduce's CUDA launchers: the validated, collapsed geometry -> one reduction kernel. */
#include <string.h>

#include "kernels/reduce/reduce_args.h"
#include "kernels/reduce/reduce_cuda.h"
#include "kernels/reduce/reduce_gpu.cuh"
#include "kernels/reduce/reduce_plan.h"

extern template void opsi::launch_reduce<float>(const opsi::reduce_geom &, int, int, cudaStream_t, int, int32_t *,
                                                int32_t *);
extern template void opsi::launch_reduce<__half>(const opsi::reduce_geom &, int, int, cudaStream_t, int, int32_t *,
                                                 int32_t *);
extern template void opsi::launch_reduce<__nv_bfloat16>(const opsi::reduce_geom &, int, int, cudaStream_t, int,
                                                        int32_t *, int32_t *);

namespace {

ops_status run(const opsi_launch *ctx, const void *argp, int kind, int vec16) {
  const opsi_reduce_args *r = static_cast<const opsi_reduce_args *>(argp);
  opsi::reduce_geom g;
  memset(&g, 0, sizeof g);
  g.x = r->x.data;
  g.y = r->y_data;
  g.y_dtype = r->y_dtype;
  g.op = r->op;
  g.outputs = r->out_count;
  g.reduced = r->red_count;
  g.kept_ndim = r->kept_ndim;
  g.red_ndim = r->red_ndim;
  memcpy(g.kept_shape, r->kept_shape, sizeof g.kept_shape);
  memcpy(g.kept_x, r->kept_x_strides, sizeof g.kept_x);
  memcpy(g.kept_y, r->kept_y_strides, sizeof g.kept_y);
  memcpy(g.red_shape, r->red_shape, sizeof g.red_shape);
  memcpy(g.red_x, r->red_x_strides, sizeof g.red_x);
  g.splits = kind == opsi::REDUCE_ROWS              ? opsi_reduce_row_splits(g.outputs, g.reduced)
             : kind == opsi::REDUCE_COLUMNS         ? opsi_reduce_column_splits(g.reduced, g.outputs)
             : kind == opsi::REDUCE_COLUMNS_CLUSTER ? OPSI_REDUCE_CLUSTER
                                                    : 1;
  g.chunk = (g.reduced + g.splits - 1) / g.splits;
  const int64_t align = kind == opsi::REDUCE_ROWS ? 8 : 1; /* row chunks stay whole vectors */
  g.chunk = (g.chunk + align - 1) / align * align;
  g.partial = static_cast<float *>(ctx->workspace);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  int32_t *grid = ctx->info->grid, *block = ctx->info->block;
  grid[1] = grid[2] = 1;
  OPSI_DISPATCH_FLOAT(r->x.dtype, T,
                      opsi::launch_reduce<T>(g, kind, vec16, stream, ctx->sm_count, grid, block));
  block[1] = block[2] = 1;
  return OPS_OK;
}

}  // namespace

extern "C" ops_status opsi_reduce_cuda_rows_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, opsi::REDUCE_ROWS, 1);
}
extern "C" ops_status opsi_reduce_cuda_rows(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, opsi::REDUCE_ROWS, 0);
}
extern "C" ops_status opsi_reduce_cuda_columns_vec16(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, opsi::REDUCE_COLUMNS, 1);
}
extern "C" ops_status opsi_reduce_cuda_columns(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, opsi::REDUCE_COLUMNS, 0);
}
extern "C" ops_status opsi_reduce_cuda_columns_cluster(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, opsi::REDUCE_COLUMNS_CLUSTER, 1);
}
extern "C" ops_status opsi_reduce_cuda_strided(const opsi_launch *ctx, const void *args) {
  return run(ctx, args, opsi::REDUCE_STRIDED, 0);
}
