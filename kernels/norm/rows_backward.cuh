/*
 * The row kernels' backward register variant and the fold of dweight / dbias partials that
 * every backward variant ends with: sum(g), sum(g xhat) (softmax: sum(dy y)) from registers,
 * then dx; dweight and dbias accumulate per thread over the rows its group walks and are
 * written as one partial row per group, summed in group order by row_partials_kernel. Every
 * order is fixed: bitwise reproducible run to run; no atomics.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_BACKWARD_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_BACKWARD_CUH_

#include "kernels/norm/rows_common.cuh"

namespace opsi {

/* ---- backward -------------------------------------------------------------------- */

/* Register variant. The grid's row groups (gridDim.x * rpb of them) walk rows g, g + groups,
 * ...; with PARTIALS, group g's dweight / dbias partials go to ws[g * cols + c] and
 * ws[(groups + g) * cols + c]. Norms hold g = dy * w and xhat; softmax holds dy and y. */
template <typename T, int VEC, int MAXV, bool PARTIALS>
__global__ void __launch_bounds__(1024) row_backward_kernel(const row_geom g) {
  __shared__ float smem[64];
  const int tpr = g.cfg.tpr, lane = threadIdx.x % tpr;
  const int nvec = (int)(g.cols / VEC);
  const int64_t groups = (int64_t)gridDim.x * g.cfg.rpb;
  const int64_t gi = (int64_t)blockIdx.x * g.cfg.rpb + threadIdx.x / tpr;
  const float inv_n = 1.0f / (float)g.cols;
  const bool norm = g.op != ROW_SOFTMAX;
  float pdw[PARTIALS ? MAXV : 1][VEC], pdb[PARTIALS ? MAXV : 1][VEC];
  if (PARTIALS) {
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) pdw[k][j] = pdb[k][j] = 0.0f;
    }
  }
  /* the block's groups take the same number of trips (its first group's), for the barriers */
  for (int64_t row0 = (int64_t)blockIdx.x * g.cfg.rpb; row0 < g.rows; row0 += groups) {
    const int64_t row = row0 + threadIdx.x / tpr;
    const bool active = row < g.rows;
    bool valid[MAXV];
#pragma unroll
    for (int k = 0; k < MAXV; ++k) valid[k] = active && k < g.cfg.vpt && lane + k * tpr < nvec;
    float a[MAXV][VEC], h[MAXV][VEC]; /* norms: g, xhat; softmax: dy, y */
    const T *dyp = active ? static_cast<const T *>(g.dy) + row_off(g, row, T_DY) : nullptr;
    const T *xp = active ? static_cast<const T *>(g.x) + row_off(g, row, T_X) : nullptr;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (!valid[k]) continue;
      load_vec<T, VEC>(dyp, lane + k * tpr, g.col[T_DY], a[k]);
      load_vec<T, VEC>(xp, lane + k * tpr, g.col[T_X], h[k]);
    }
    const float mean = active && g.op == ROW_LN ? g.mean[row_off(g, row, T_MEAN)] : 0.0f;
    const float rstd = active && norm ? g.rstd[row_off(g, row, T_RSTD)] : 0.0f;
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (!valid[k]) continue;
      if (norm) {
        float w[VEC];
        load_param<T, VEC>(g.w, lane + k * tpr, g.w_stride, g.w_dtype, w);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float xhat = (h[k][j] - mean) * rstd, dy = a[k][j];
          if (PARTIALS) pdw[k][j] += dy * xhat, pdb[k][j] += dy;
          h[k][j] = xhat;
          a[k][j] = dy * w[j];
          s1 += a[k][j];
          s2 += a[k][j] * xhat;
        }
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) s1 += a[k][j] * h[k][j];
      }
    }
    if (g.op == ROW_LN) group_sum2(s1, s2, tpr, smem);
    else if (norm) s2 = group_reduce<false>(s2, tpr, smem);
    else s1 = group_reduce<false>(s1, tpr, smem);
    if (!active) continue;
    const float m1 = g.op == ROW_LN ? s1 * inv_n : 0.0f, m2 = s2 * inv_n;
    T *dx = static_cast<T *>(g.y) + row_off(g, row, T_Y);
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (!valid[k]) continue;
      float out[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        out[j] = norm ? rstd * (a[k][j] - m1 - h[k][j] * m2) : g.scale * h[k][j] * (a[k][j] - s1);
      }
      store_vec<T, VEC>(dx, lane + k * tpr, g.col[T_Y], out);
    }
  }
  if (!PARTIALS || gi >= groups || g.ws == nullptr) return;
  const bool want_dw = g.dw != nullptr, want_db = g.db != nullptr;
  float *pw = g.ws + gi * g.cols;
  float *pb = g.ws + ((want_dw ? groups : 0) + gi) * g.cols;
#pragma unroll
  for (int k = 0; k < MAXV; ++k) {
    const int vi = lane + k * tpr;
    if (k >= g.cfg.vpt || vi >= nvec) continue;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (want_dw) pw[vi * VEC + j] = pdw[k][j];
      if (want_db) pb[vi * VEC + j] = pdb[k][j];
    }
  }
}


/* dweight / dbias = their `parts` partial rows summed in a fixed order (fold_partial_rows:
 * a block per FOLD_COLS columns). */
template <typename T>
__global__ void __launch_bounds__(FOLD_WARPS * 32) row_partials_kernel(const row_geom g, int64_t parts) {
  __shared__ float sw[FOLD_WARPS][FOLD_COLS], sb[FOLD_WARPS][FOLD_COLS];
  const int64_t c = (int64_t)blockIdx.x * FOLD_COLS + (threadIdx.x & 31);
  const bool want_dw = g.dw != nullptr, want_db = g.db != nullptr;
  const auto add = [](float a, float b) { return a + b; };
  const float dw = fold_partial_rows(g.ws, want_dw ? parts : 0, g.cols, c, 0.0f, add, sw);
  const float db = fold_partial_rows(g.ws + (want_dw ? parts : 0) * g.cols, want_db ? parts : 0, g.cols, c, 0.0f,
                                     add, sb);
  if (threadIdx.x >= 32 || c >= g.cols) return;
  if (want_dw) store_any(g.dw, c * g.dw_stride, g.dw_dtype, dw);
  if (want_db) store_any(g.db, c * g.db_stride, g.db_dtype, db);
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_BACKWARD_CUH_ */
