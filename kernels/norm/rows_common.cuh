/*
 * What every row kernel shares: the call as the kernels see it (row_geom: rows, their
 * tensors' strides, parameters, the plan of rows_plan.h), a row's offset in each tensor,
 * stores of any dtype, the group reductions (butterfly shuffles within warps, then the
 * group's warps through shared memory, in a fixed order) and the vector loads and stores.
 * The strategies build on it: rows_forward.cuh (register variants), rows_split.cuh (a row
 * cut into slices), rows_backward.cuh (register backward and the partial fold),
 * rows_stream.cuh and rows_staged.cuh (backward of long rows); rows_launch.cuh picks one.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_COMMON_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_COMMON_CUH_

#include <type_traits>

#include "kernels/common/cuda_common.cuh"
#include "kernels/common/mma_sync.cuh"
#include "kernels/norm/rows_plan.h"

namespace opsi {

enum { ROW_LN = 0, ROW_RMS = 1, ROW_SOFTMAX = 2 };
/* The row tensors: each has leading strides and (all but the statistics) a last-axis stride. */
enum { T_X = 0, T_RES, T_Y, T_RES_OUT, T_DY, T_MEAN, T_RSTD, T_COUNT };

struct row_geom {
  int32_t op;
  int64_t rows, cols;
  int32_t lead_ndim;
  int64_t lead_shape[OPS_MAX_DIMS];
  int64_t lead[T_COUNT][OPS_MAX_DIMS]; /* leading strides per tensor, in elements */
  int64_t col[T_COUNT];                /* last-axis strides */
  const void *x, *res, *dy;            /* backward: x is softmax's y */
  void *y, *res_out;                   /* backward: y receives dx */
  float *mean, *rstd;                  /* forward: outputs (may be NULL); backward: inputs */
  const void *w, *b;
  int32_t dtype, w_dtype;              /* b has w's dtype */
  int64_t w_stride, b_stride;
  void *dw, *db;
  int32_t dw_dtype, db_dtype;
  int64_t dw_stride, db_stride;
  float eps, scale;
  opsi_rows_config cfg;
  float *ws;
};

/* Row `row`'s offset in tensor t. The outermost index needs no division (row < rows), so
 * the usual case, leading axes that merged into one, is a single multiply: a 64-bit
 * division per row and tensor costs more instructions than the row's elements. I: the index
 * type of the divisions; uint32_t where rows < 2^31 (the staged kernel): 32-bit divisions are
 * inline instructions, the 64-bit ones calls whose register saves a kernel held to 64
 * registers cannot afford (it spilled). */
template <typename I>
__device__ __forceinline__ int64_t row_off(const row_geom &g, I row, int t) {
  int64_t off = 0;
  for (int d = g.lead_ndim - 1; d > 0; --d) {
    off += (int64_t)(row % (I)g.lead_shape[d]) * g.lead[t][d];
    row /= (I)g.lead_shape[d];
  }
  return g.lead_ndim > 0 ? off + (int64_t)row * g.lead[t][0] : 0;
}

__device__ __forceinline__ void store_any(void *p, int64_t i, int32_t dtype, float v) {
  switch (dtype) {
    case OPS_DTYPE_F16: static_cast<__half *>(p)[i] = __float2half_rn(v); break;
    case OPS_DTYPE_BF16: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float *>(p)[i] = v; break;
  }
}

/* The sum (or max) over the `tpr` threads of this thread's row group, in a fixed order;
 * every thread of the block calls it (it holds barriers when groups span warps). */
template <bool MAX>
__device__ __forceinline__ float group_reduce(float v, int tpr, float *smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xFFFFFFFFu, v, o);
    v = MAX ? fmaxf(v, u) : v + u;
  }
  if (tpr <= 32) return v;
  __syncthreads(); /* the previous reduction's readers are done with smem */
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  const int wpg = tpr >> 5, first = (threadIdx.x / tpr) * wpg;
  float r = smem[first];
  for (int w = 1; w < wpg; ++w) r = MAX ? fmaxf(r, smem[first + w]) : r + smem[first + w];
  return r;
}

/* Two sums over the group in one reduction (one barrier phase instead of two), each added
 * in group_reduce's order, so the results are bitwise those of two group_reduce calls.
 * smem: 64 floats. */
__device__ __forceinline__ void group_sum2(float &a, float &b, int tpr, float *smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xFFFFFFFFu, a, o);
    b += __shfl_xor_sync(0xFFFFFFFFu, b, o);
  }
  if (tpr <= 32) return;
  __syncthreads(); /* the previous reduction's readers are done with smem */
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = a, smem[32 + (threadIdx.x >> 5)] = b;
  __syncthreads();
  const int wpg = tpr >> 5, first = (threadIdx.x / tpr) * wpg;
  a = smem[first], b = smem[32 + first];
  for (int w = 1; w < wpg; ++w) a += smem[first + w], b += smem[32 + first + w];
}

/* group_reduce with group_sum2_tree's cross-warp step: the warps' partials by a butterfly
 * (not every thread adding them all in turn) and one barrier, `parity` (toggled here) picking
 * the half of smem (64 floats) a reduction uses. The forward register kernels' reduction. */
template <bool MAX>
__device__ __forceinline__ float group_reduce_tree(float v, int tpr, float *smem, int &parity) {
  v = MAX ? warp_max(v) : warp_sum(v);
  if (tpr <= 32) return v;
  float *half = smem + 32 * parity;
  parity ^= 1;
  if ((threadIdx.x & 31) == 0) half[threadIdx.x >> 5] = v;
  __syncthreads();
  const int wpg = tpr >> 5, first = (threadIdx.x / tpr) * wpg, l = threadIdx.x & 31;
  v = l < wpg ? half[first + l] : MAX ? -INFINITY : 0.0f;
  return MAX ? warp_max(v) : warp_sum(v);
}

/* LayerNorm's statistics over the group, all by sums (xor butterflies add the same pairs on
 * every lane: every lane ends with the same bits) and one barrier. In: the thread's element
 * count n, sum s, mean m = s / n and M2 q about m (two passes over its registers). A warp
 * sums n and s, takes its mean mw and sums q + n (m - mw)^2, its M2 about mw; the group then
 * sums the warps' s through shared memory (192 floats, `parity` picking the half) into the
 * mean, and their M2 + n_w (m_w - mean)^2 into the row's M2. Deviations are squared before
 * they are added (no cancellation, unlike a sum of squares), and one barrier phase a row
 * instead of the two of mean-then-variance, and cheaper than Chan's (count, mean, M2) merge
 * at every butterfly step (a division and three shuffles a step); bench/RESULTS.md has the
 * comparison. */
__device__ __forceinline__ void group_mean_m2(float n, float s, float m, float q, float inv_n, int tpr,
                                              float *smem, int &parity, float &mean, float &m2) {
  float nw = n, sw = s;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    nw += __shfl_xor_sync(0xFFFFFFFFu, nw, o);
    sw += __shfl_xor_sync(0xFFFFFFFFu, sw, o);
  }
  const float mw = nw > 0.0f ? sw / nw : 0.0f;
  const float qw = warp_sum(q + n * (m - mw) * (m - mw));
  if (tpr <= 32) {
    mean = mw, m2 = qw;
    return;
  }
  float *half = smem + 96 * parity;
  parity ^= 1;
  const int l = threadIdx.x & 31;
  if (l == 0) {
    const int w = threadIdx.x >> 5;
    half[w] = nw, half[32 + w] = sw, half[64 + w] = qw;
  }
  __syncthreads();
  const int wpg = tpr >> 5, first = (threadIdx.x / tpr) * wpg;
  const float n2 = l < wpg ? half[first + l] : 0.0f;
  const float s2 = l < wpg ? half[32 + first + l] : 0.0f;
  const float q2 = l < wpg ? half[64 + first + l] : 0.0f;
  mean = warp_sum(s2) * inv_n;
  const float m2w = n2 > 0.0f ? s2 / n2 : 0.0f; /* warp l's mw, bit for bit */
  m2 = warp_sum(q2 + n2 * (m2w - mean) * (m2w - mean));
}

/* Two sums over the group for the staged kernel: the warps' partials summed by a butterfly
 * across a warp instead of each thread adding all of them in turn (a 1024-thread row: 2 loads
 * and 10 shuffles a thread, not 64 loads and adds), and one barrier a reduction: `parity`
 * (toggled here, as in group_reduce_tree) alternates the halves of smem (128 floats), and a
 * thread can only write a half again after the next reduction's barrier, which every reader
 * of it has passed. Fixed order: every lane ends with the same bits (xor butterflies add the
 * same pairs), run after run. */
__device__ __forceinline__ void group_sum2_tree(float &a, float &b, int tpr, float *smem, int &parity) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xFFFFFFFFu, a, o);
    b += __shfl_xor_sync(0xFFFFFFFFu, b, o);
  }
  parity ^= 1; /* the next call takes the other half */
  if (tpr <= 32) return;
  float *half = smem + 64 * (parity ^ 1);
  if ((threadIdx.x & 31) == 0) half[threadIdx.x >> 5] = a, half[32 + (threadIdx.x >> 5)] = b;
  __syncthreads();
  const int wpg = tpr >> 5, first = (threadIdx.x / tpr) * wpg, l = threadIdx.x & 31;
  a = l < wpg ? half[first + l] : 0.0f;
  b = l < wpg ? half[32 + first + l] : 0.0f;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xFFFFFFFFu, a, o);
    b += __shfl_xor_sync(0xFFFFFFFFu, b, o);
  }
}

/* Loads vector `vi` (VEC elements) of a row into out[]: one 16-byte load when VEC > 1. */
template <typename T, int VEC>
__device__ __forceinline__ void load_vec(const T *p, int64_t vi, int64_t stride, float *out) {
  if (VEC > 1) {
    const vec16<T> v = load16(p + vi * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = to_f(v.v[j]);
  } else {
    out[0] = to_f(p[vi * stride]);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T *p, int64_t vi, int64_t stride, const float *in) {
  if (VEC > 1) {
    vec16<T> v;
#pragma unroll
    for (int j = 0; j < VEC; ++j) v.v[j] = from_f<T>(in[j]);
    store16(p + vi * VEC, v);
  } else {
    p[vi * stride] = from_f<T>(in[0]);
  }
}

/* Vector `vi` of a weight-like [N] tensor of dtype f32 or T: 16-byte loads when VEC > 1
 * (the vec16 rows need unit stride and 16-byte alignment of every operand). */
template <typename T, int VEC>
__device__ __forceinline__ void load_param(const void *p, int64_t vi, int64_t stride, int32_t dtype, float *out) {
  if (VEC > 1) {
    if (dtype == OPS_DTYPE_F32) {
      const float4 *q = reinterpret_cast<const float4 *>(static_cast<const float *>(p) + vi * VEC);
#pragma unroll
      for (int h = 0; h < VEC / 4; ++h) {
        const float4 f = __ldg(q + h);
        out[4 * h] = f.x, out[4 * h + 1] = f.y, out[4 * h + 2] = f.z, out[4 * h + 3] = f.w;
      }
    } else {
      load_vec<T, VEC>(static_cast<const T *>(p), vi, 1, out);
    }
  } else {
    out[0] = load_any(p, vi * stride, dtype);
  }
}

/* The normalized output of vector `vi`: (v - mean) rstd w (+ b), w and b of the weight's dtype. */
template <typename T, int VEC>
__device__ __forceinline__ void norm_out(const row_geom &g, int64_t vi, const float *v, float mean, float rstd,
                                         float *out) {
  float w[VEC], b[VEC];
  load_param<T, VEC>(g.w, vi, g.w_stride, g.w_dtype, w);
  if (g.b != nullptr) {
    load_param<T, VEC>(g.b, vi, g.b_stride, g.w_dtype, b);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) b[j] = 0.0f;
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = (v[j] - mean) * rstd * w[j] + b[j];
}


/* VEC floats at p + vi * VEC: 16-byte accesses when VEC is a multiple of 4. */
template <int VEC>
__device__ __forceinline__ void load_f32(const float *p, int64_t vi, float *out) {
  if (VEC % 4 == 0) {
#pragma unroll
    for (int h = 0; h < VEC / 4; ++h) {
      const float4 f = reinterpret_cast<const float4 *>(p + vi * VEC)[h];
      out[4 * h] = f.x, out[4 * h + 1] = f.y, out[4 * h + 2] = f.z, out[4 * h + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = p[vi * VEC + j];
  }
}

template <int VEC>
__device__ __forceinline__ void store_f32(float *p, int64_t vi, const float *in) {
  if (VEC % 4 == 0) {
#pragma unroll
    for (int h = 0; h < VEC / 4; ++h) {
      reinterpret_cast<float4 *>(p + vi * VEC)[h] = make_float4(in[4 * h], in[4 * h + 1], in[4 * h + 2], in[4 * h + 3]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) p[vi * VEC + j] = in[j];
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_COMMON_CUH_ */
