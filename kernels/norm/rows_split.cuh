/*
 * The row kernels' forward split variant (any row length): a row cut into slices of
 * OPSI_ROWS_SLICE, one block each; a stats kernel writes per-slice partials (mean and M2, sum
 * of squares, or max and sum of exp), an apply kernel merges its row's partials in slice order
 * and writes.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_SPLIT_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_SPLIT_CUH_

#include "kernels/norm/rows_common.cuh"

namespace opsi {

/* ---- forward, split variant -------------------------------------------------------- */

/* (max, sum of exp(z - max)) pairs: merge b into a. */
__device__ __forceinline__ void merge_ms(float &m, float &s, float m2, float s2) {
  const float mm = fmaxf(m, m2);
  if (mm == -INFINITY) return; /* both empty (or all -inf) */
  s = s * __expf(m - mm) + s2 * __expf(m2 - mm);
  m = mm;
}

/* (count, mean, M2) pairs merged with Chan's formula: b into a. */
__device__ __forceinline__ void merge_welford(float &n, float &mean, float &m2, float n2, float mean2, float m22) {
  const float nn = n + n2;
  if (n2 == 0.0f) return;
  const float d = mean2 - mean;
  mean += d * (n2 / nn);
  m2 += m22 + d * d * (n * (n2 / nn));
  n = nn;
}

/* Vector `vi` of the row (VEC elements at stride 1, or one element at the row's stride):
 * x, plus the residual when there is one. */
template <typename T, int VEC>
__device__ __forceinline__ void row_values(const row_geom &g, const T *x, const T *r, int64_t vi, float *v) {
  load_vec<T, VEC>(x, vi, g.col[T_X], v);
  if (r != nullptr) {
    float rv[VEC];
    load_vec<T, VEC>(r, vi, g.col[T_RES], rv);
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] += rv[j];
  }
}

/* Block (row, slice): the slice's statistics into ws[(row * slices + slice) * 2 + {0, 1}]:
 * LayerNorm (mean, M2); RMSNorm (-, sum of squares); softmax (max, sum of exp). VEC > 1:
 * 16-byte loads (unit stride, aligned rows; the slice is a whole number of vectors). */
template <typename T, int VEC>
__global__ void __launch_bounds__(256) row_split_stats_kernel(const row_geom g) {
  __shared__ float sa[8], sb[8];
  const int64_t slices = g.cfg.slices, row = blockIdx.x / slices, slice = blockIdx.x % slices;
  const int64_t lo = slice * OPSI_ROWS_SLICE, hi = min(g.cols, lo + OPSI_ROWS_SLICE);
  const T *x = static_cast<const T *>(g.x) + row_off(g, row, T_X);
  const T *r = g.res ? static_cast<const T *>(g.res) + row_off(g, row, T_RES) : nullptr;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t vlo = lo / VEC, vhi = hi / VEC;
  float a, b;
  if (g.op == ROW_SOFTMAX) {
    float m = -INFINITY, s = 0.0f;
#pragma unroll 4
    for (int64_t vi = vlo + threadIdx.x; vi < vhi; vi += blockDim.x) {
      float z[VEC];
      row_values<T, VEC>(g, x, r, vi, z);
      float zm = -INFINITY;
#pragma unroll
      for (int j = 0; j < VEC; ++j) z[j] *= g.scale, zm = fmaxf(zm, z[j]);
      if (zm == -INFINITY) continue; /* nothing but -inf */
      if (zm > m) {
        s = m == -INFINITY ? 0.0f : s * __expf(m - zm);
        m = zm;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) s += __expf(z[j] - m);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      merge_ms(m, s, __shfl_xor_sync(0xFFFFFFFFu, m, o), __shfl_xor_sync(0xFFFFFFFFu, s, o));
    }
    m = __shfl_sync(0xFFFFFFFFu, m, 0), s = __shfl_sync(0xFFFFFFFFu, s, 0); /* lane 0's order */
    if (lane == 0) sa[warp] = m, sb[warp] = s;
    __syncthreads();
    if (threadIdx.x != 0) return;
    a = sa[0], b = sb[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) merge_ms(a, b, sa[w], sb[w]);
  } else {
    /* sums shifted by the slice's first value: a stable variance without a division per element */
    float first[VEC];
    row_values<T, VEC>(g, x, r, vlo, first);
    const float shift = g.op == ROW_LN ? first[0] : 0.0f;
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll 4
    for (int64_t vi = vlo + threadIdx.x; vi < vhi; vi += blockDim.x) {
      float v[VEC];
      row_values<T, VEC>(g, x, r, vi, v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float d = v[j] - shift;
        s1 += d;
        s2 += d * d;
      }
    }
    s1 = warp_sum(s1), s2 = warp_sum(s2);
    if (lane == 0) sa[warp] = s1, sb[warp] = s2;
    __syncthreads();
    if (threadIdx.x != 0) return;
    s1 = sa[0], s2 = sb[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) s1 += sa[w], s2 += sb[w];
    const float n = (float)(hi - lo);
    a = shift + s1 / n;                                      /* mean */
    b = g.op == ROW_LN ? fmaxf(s2 - s1 * s1 / n, 0.0f) : s2; /* M2, or the sum of squares */
  }
  g.ws[(row * slices + slice) * 2] = a;
  g.ws[(row * slices + slice) * 2 + 1] = b;
}

/* Block (row, slice): merges the row's partials in slice order, then writes the slice. */
template <typename T, int VEC>
__global__ void __launch_bounds__(256) row_split_apply_kernel(const row_geom g) {
  const int64_t slices = g.cfg.slices, row = blockIdx.x / slices, slice = blockIdx.x % slices;
  float n = 0.0f, a = g.op == ROW_SOFTMAX ? -INFINITY : 0.0f, b = 0.0f;
  for (int64_t s = 0; s < slices; ++s) {
    const float pa = g.ws[(row * slices + s) * 2], pb = g.ws[(row * slices + s) * 2 + 1];
    const float cnt = (float)(min(g.cols, (s + 1) * OPSI_ROWS_SLICE) - s * OPSI_ROWS_SLICE);
    if (g.op == ROW_LN) merge_welford(n, a, b, cnt, pa, pb);
    else if (g.op == ROW_RMS) b += pb;
    else merge_ms(a, b, pa, pb);
  }
  const float mean = g.op == ROW_LN ? a : 0.0f;
  const float rstd = g.op == ROW_SOFTMAX ? 0.0f : rsqrtf(b / (float)g.cols + g.eps);
  const float inv_s = g.op == ROW_SOFTMAX && b > 0.0f ? 1.0f / b : 0.0f;
  const int64_t lo = slice * OPSI_ROWS_SLICE, hi = min(g.cols, lo + OPSI_ROWS_SLICE);
  const T *x = static_cast<const T *>(g.x) + row_off(g, row, T_X);
  const T *r = g.res ? static_cast<const T *>(g.res) + row_off(g, row, T_RES) : nullptr;
  T *y = static_cast<T *>(g.y) + row_off(g, row, T_Y);
  T *ro = g.res_out ? static_cast<T *>(g.res_out) + row_off(g, row, T_RES_OUT) : nullptr;
#pragma unroll 4
  for (int64_t vi = lo / VEC + threadIdx.x; vi < hi / VEC; vi += blockDim.x) {
    float v[VEC], o[VEC];
    row_values<T, VEC>(g, x, r, vi, v);
    if (g.op == ROW_SOFTMAX) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) o[j] = a == -INFINITY ? 0.0f : __expf(g.scale * v[j] - a) * inv_s;
    } else {
      norm_out<T, VEC>(g, vi, v, mean, rstd, o);
    }
    if (ro != nullptr) store_vec<T, VEC>(ro, vi, g.col[T_RES_OUT], v); /* after every read of x, r */
    store_vec<T, VEC>(y, vi, g.col[T_Y], o);
  }
  if (slice == 0 && threadIdx.x == 0 && g.op != ROW_SOFTMAX) {
    if (g.mean != nullptr) g.mean[row_off(g, row, T_MEAN)] = mean;
    if (g.rstd != nullptr) g.rstd[row_off(g, row, T_RSTD)] = rstd;
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_SPLIT_CUH_ */
