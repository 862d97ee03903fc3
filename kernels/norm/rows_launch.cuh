/*
 * The row kernels' host side: one forward and one backward launch template a dtype, which pick
 * the variant rows_plan.c chose and size its grid. rows_gpu_{fwd,bwd}_<dtype>.cu instantiate
 * them (one dtype and direction a file, so that the builds run in parallel);
 * rows_cuda_launch.cu turns a call's args into a row_geom and calls them. The variants
 * themselves: rows_forward.cuh, rows_split.cuh, rows_backward.cuh, rows_stream.cuh,
 * rows_staged.cuh (shared pieces in rows_common.cuh).
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_LAUNCH_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_LAUNCH_CUH_

#include "kernels/common/launch_status.h"
#include "kernels/norm/rows_backward.cuh"
#include "kernels/norm/rows_common.cuh"
#include "kernels/norm/rows_forward.cuh"
#include "kernels/norm/rows_split.cuh"
#include "kernels/norm/rows_staged.cuh"
#include "kernels/norm/rows_stream.cuh"

namespace opsi {

inline unsigned rows_grid_cap(const row_geom &g, int sm_count) {
  const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 132) * 32;
  return (unsigned)(g.cfg.blocks < cap ? g.cfg.blocks : cap);
}

/* One forward variant (rows_gpu_fwd_<dtype>.cu instantiates it per dtype). */
template <typename T>
void launch_rows_forward(const row_geom &g, int variant, int vec16, cudaStream_t stream, int sm_count, int32_t *grid,
                         int32_t *block) {
  constexpr int V = 16 / sizeof(T);
  const int threads = g.cfg.tpr * g.cfg.rpb;
  const unsigned capped = rows_grid_cap(g, sm_count);
  *block = threads, *grid = (int32_t)capped;
  if (variant == OPSI_ROWS_SPLIT) {
    if (vec16) {
      row_split_stats_kernel<T, V><<<(unsigned)g.cfg.blocks, 256, 0, stream>>>(g);
      row_split_apply_kernel<T, V><<<(unsigned)g.cfg.blocks, 256, 0, stream>>>(g);
    } else {
      row_split_stats_kernel<T, 1><<<(unsigned)g.cfg.blocks, 256, 0, stream>>>(g);
      row_split_apply_kernel<T, 1><<<(unsigned)g.cfg.blocks, 256, 0, stream>>>(g);
    }
    *grid = (int32_t)g.cfg.blocks, *block = 256;
  } else if (variant == OPSI_ROWS_WARP) {
    if (g.res) row_forward_kernel<T, V, OPSI_ROWS_WARP_HELD / V, 256, true><<<capped, threads, 0, stream>>>(g);
    else row_forward_kernel<T, V, OPSI_ROWS_WARP_HELD / V, 256, false><<<capped, threads, 0, stream>>>(g);
  } else if (vec16) {
    constexpr int NV = OPSI_ROWS_FWD_VEC16_BYTES / 16;
    constexpr int NV_RES = sizeof(T) == 4 ? NV : NV / 2; /* x and the residual: 64 bytes in all */
    if (g.res) row_forward_kernel<T, V, NV_RES, 1024, true><<<capped, threads, 0, stream>>>(g);
    else row_forward_kernel<T, V, NV, 1024, false><<<capped, threads, 0, stream>>>(g);
  } else {
    if (g.res) row_forward_kernel<T, 1, OPSI_ROWS_FWD_HELD, 1024, true><<<capped, threads, 0, stream>>>(g);
    else row_forward_kernel<T, 1, OPSI_ROWS_FWD_HELD, 1024, false><<<capped, threads, 0, stream>>>(g);
  }
}

/* The staged backward: 3 stages (sm_90), a block an SM at most. */
template <typename T>
void launch_rows_backward_staged(const row_geom &g, cudaStream_t stream, int sm_count, int32_t *grid,
                                 int32_t *block) {
  constexpr int bytes = OPSI_ROWS_STAGED_SMEM;
  const int64_t cap = sm_count > 0 ? sm_count : 1;
  const unsigned blocks = (unsigned)(g.cfg.blocks < cap ? g.cfg.blocks : cap);
  auto kernel = row_backward_staged_kernel<T, OPSI_ROWS_STAGED_STAGES>;
  smem_optin(kernel, bytes);
  kernel<<<blocks, OPSI_ROWS_STAGED_THREADS, bytes, stream>>>(g);
  *grid = (int32_t)blocks, *block = OPSI_ROWS_STAGED_THREADS;
}

/* One backward variant (rows_gpu_bwd_<dtype>.cu). */
template <typename T>
void launch_rows_backward(const row_geom &g, int variant, int vec16, cudaStream_t stream, int sm_count,
                          int32_t *grid, int32_t *block) {
  constexpr int V = 16 / sizeof(T);
  const int threads = g.cfg.tpr * g.cfg.rpb;
  const unsigned capped = rows_grid_cap(g, sm_count);
  const bool partials = g.op != ROW_SOFTMAX && (g.dw != nullptr || g.db != nullptr);
  const unsigned partial_blocks = (unsigned)((g.cols + FOLD_COLS - 1) / FOLD_COLS);
  *block = threads, *grid = (int32_t)capped;
  if (variant == OPSI_ROWS_STAGED) {
    if constexpr (sizeof(T) == 2) {
      launch_rows_backward_staged<T>(g, stream, sm_count, grid, block);
      if (partials) row_partials_kernel<T><<<partial_blocks, FOLD_WARPS * 32, 0, stream>>>(g, *grid);
    }
  } else if (variant == OPSI_ROWS_STREAM) {
    const unsigned blocks = (unsigned)g.cfg.blocks;
    if (vec16) row_backward_stream_kernel<T, V><<<blocks, OPSI_ROWS_STREAM_THREADS, 0, stream>>>(g);
    else row_backward_stream_kernel<T, 1><<<blocks, OPSI_ROWS_STREAM_THREADS, 0, stream>>>(g);
    if (partials) row_partials_kernel<T><<<partial_blocks, FOLD_WARPS * 32, 0, stream>>>(g, g.cfg.groups);
    *grid = (int32_t)blocks, *block = OPSI_ROWS_STREAM_THREADS;
  } else if (g.op == ROW_SOFTMAX) {
    if (vec16) row_backward_kernel<T, V, OPSI_ROWS_SM_BWD_HELD / V, false><<<capped, threads, 0, stream>>>(g);
    else row_backward_kernel<T, 1, OPSI_ROWS_SM_BWD_HELD, false><<<capped, threads, 0, stream>>>(g);
  } else {
    /* with partials the grid is exactly the plan's blocks: each group owns a partial row */
    const unsigned blocks = partials ? (unsigned)g.cfg.blocks : capped;
    constexpr int NV = OPSI_ROWS_NORM_BWD_HELD / V > 0 ? OPSI_ROWS_NORM_BWD_HELD / V : 1;
    if (vec16) row_backward_kernel<T, V, NV, true><<<blocks, threads, 0, stream>>>(g);
    else row_backward_kernel<T, 1, OPSI_ROWS_NORM_BWD_HELD, true><<<blocks, threads, 0, stream>>>(g);
    if (partials) row_partials_kernel<T><<<partial_blocks, FOLD_WARPS * 32, 0, stream>>>(g, g.cfg.groups);
    *grid = (int32_t)blocks;
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_LAUNCH_CUH_ */
