/*
 * The row kernels' backward stream variant (any row length): blocks walk the rows, each read
 * twice.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_STREAM_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_STREAM_CUH_

#include "kernels/norm/rows_common.cuh"

namespace opsi {

enum { STREAM_UNROLL = 2 };

/* Stream variant (any row length): gridDim.x blocks walk rows b, b + gridDim.x, ...; each
 * row is read twice, sums then dx (the second read mostly from L2: a block's current row is
 * all it touches). dweight / dbias: block b owns the partial rows ws[b * cols + c] and
 * ws[(gridDim.x + b) * cols + c], which every thread updates for its own columns row after
 * row (no other thread touches them: a fixed order, no atomics). VEC > 1: 16-byte loads. */
template <typename T, int VEC>
__global__ void __launch_bounds__(OPSI_ROWS_STREAM_THREADS) row_backward_stream_kernel(const row_geom g) {
  __shared__ float smem[64];
  const bool norm = g.op != ROW_SOFTMAX;
  const bool want_dw = norm && g.ws != nullptr && g.dw != nullptr;
  const bool want_db = norm && g.ws != nullptr && g.db != nullptr;
  float *pw = want_dw ? g.ws + blockIdx.x * g.cols : nullptr;
  float *pb = want_db ? g.ws + ((want_dw ? gridDim.x : 0) + blockIdx.x) * g.cols : nullptr;
  const int64_t nv = g.cols / VEC;
  const float inv_n = 1.0f / (float)g.cols;
  bool first = true;
  for (int64_t row = blockIdx.x; row < g.rows; row += gridDim.x) {
    const T *dy = static_cast<const T *>(g.dy) + row_off(g, row, T_DY);
    const T *x = static_cast<const T *>(g.x) + row_off(g, row, T_X);
    const float mean = g.op == ROW_LN ? g.mean[row_off(g, row, T_MEAN)] : 0.0f;
    const float rstd = norm ? g.rstd[row_off(g, row, T_RSTD)] : 0.0f;
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll 4
    for (int64_t vi = threadIdx.x; vi < nv; vi += blockDim.x) {
      float d[VEC], xv[VEC];
      load_vec<T, VEC>(dy, vi, g.col[T_DY], d);
      load_vec<T, VEC>(x, vi, g.col[T_X], xv);
      if (norm) {
        float w[VEC];
        load_param<T, VEC>(g.w, vi, g.w_stride, g.w_dtype, w);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float gj = d[j] * w[j];
          s1 += gj;
          s2 += gj * (xv[j] - mean) * rstd;
        }
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) s1 += d[j] * xv[j];
      }
    }
    if (norm) group_sum2(s1, s2, (int)blockDim.x, smem);
    else s1 = group_reduce<false>(s1, (int)blockDim.x, smem);
    const float m1 = g.op == ROW_LN ? s1 * inv_n : 0.0f, m2 = s2 * inv_n;
    T *dx = static_cast<T *>(g.y) + row_off(g, row, T_Y);
    /* every load of STREAM_UNROLL vectors first, then the math and the stores: the compiler
       cannot move a load above a store that might alias it */
    for (int64_t v0 = threadIdx.x; v0 < nv; v0 += STREAM_UNROLL * (int64_t)blockDim.x) {
      float d[STREAM_UNROLL][VEC], xv[STREAM_UNROLL][VEC], w[STREAM_UNROLL][VEC];
      float pdw[STREAM_UNROLL][VEC], pdb[STREAM_UNROLL][VEC];
#pragma unroll
      for (int u = 0; u < STREAM_UNROLL; ++u) {
        const int64_t vi = v0 + u * (int64_t)blockDim.x;
        if (vi >= nv) continue;
        load_vec<T, VEC>(dy, vi, g.col[T_DY], d[u]);
        load_vec<T, VEC>(x, vi, g.col[T_X], xv[u]);
        if (norm) load_param<T, VEC>(g.w, vi, g.w_stride, g.w_dtype, w[u]);
        if (want_dw && !first) load_f32<VEC>(pw, vi, pdw[u]);
        if (want_db && !first) load_f32<VEC>(pb, vi, pdb[u]);
      }
#pragma unroll
      for (int u = 0; u < STREAM_UNROLL; ++u) {
        const int64_t vi = v0 + u * (int64_t)blockDim.x;
        if (vi >= nv) continue;
        float o[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          if (norm) {
            const float xhat = (xv[u][j] - mean) * rstd;
            o[j] = rstd * (d[u][j] * w[u][j] - m1 - xhat * m2);
            pdw[u][j] = first ? d[u][j] * xhat : pdw[u][j] + d[u][j] * xhat;
            pdb[u][j] = first ? d[u][j] : pdb[u][j] + d[u][j];
          } else {
            o[j] = g.scale * xv[u][j] * (d[u][j] - s1);
          }
        }
        store_vec<T, VEC>(dx, vi, g.col[T_Y], o); /* after the reads: dx may be dy */
        if (want_dw) store_f32<VEC>(pw, vi, pdw[u]);
        if (want_db) store_f32<VEC>(pb, vi, pdb[u]);
      }
    }
    first = false;
  }
  if (first) { /* a block without rows: its partial rows are zeros */
    for (int64_t c = threadIdx.x; c < g.cols; c += blockDim.x) {
      if (want_dw) pw[c] = 0.0f;
      if (want_db) pb[c] = 0.0f;
    }
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_STREAM_CUH_ */
