/*
 * The row kernels: LayerNorm, RMSNorm and softmax over the last axis, forward and backward,
 * computing in f32 whatever the storage dtype. The work layout is rows_plan.h's.
 *
 * Register variants (rows that fit on chip): a group of `tpr` threads per row (a warp, or
 * up to 1024 threads), `rpb` rows per block; each thread holds its `vpt` vectors of the
 * row in registers (16-byte loads when the rows are aligned, else one element per load),
 * so the row is read once and written once. The block variant holds 16-bit rows as loaded
 * (64 bytes a thread), the others hold floats (see held_raw). Group reductions: butterfly
 * shuffles within warps, then the group's warps through shared memory, in a fixed order.
 *   LayerNorm: mean and centred M2 in one reduction (group_mean_m2: sums of deviations
 *              squared about thread, warp and row means; no cancellation).
 *   Softmax:   max, then the sum of exp(z - max); float rows keep the exponentials for the
 *              output, raw rows compute them again.
 *   Backward:  sum(g), sum(g xhat) (softmax: sum(dy y)) from registers, then dx; dweight and
 *              dbias accumulate per thread over the rows its group walks and are written as
 *              one partial row per group, summed in group order by a column kernel.
 * Split variant (forward, any row length): a row cut into slices of OPSI_ROWS_SLICE, one
 * block each; a stats kernel writes per-slice partials (mean and M2, sum of squares, or max
 * and sum of exp), an apply kernel merges its row's partials in slice order and writes.
 * Stream variant (backward, any row length): a block per row reads the row twice.
 * Every order is fixed: results are bitwise reproducible run to run; no atomics.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_GPU_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_GPU_CUH_

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
 * instead of the two of mean-then-variance: on the H100 (one run of a build holding all three
 * behind a switch) 99.2 / 99.5 / 101.7 us at 16384x4096 / 65536x1024 / 4096x16384 bf16,
 * against 100.1 / 100.3 / 105.0 for the two reductions and 111.4 / 102.5 / 110.2 for Chan's
 * (count, mean, M2) merge at every butterfly step (a division and three shuffles a step). */
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

/* ---- forward, register variants --------------------------------------------------- */

/* How a thread holds its share of a row between the passes. RAW: the 16-byte vectors as
 * loaded (16-bit rows of the block variant): half the registers of floats, so twice the
 * bytes per thread, and more rows per SM, are in flight; softmax then computes each
 * exponential twice. Otherwise floats (f32 rows, the scalar rows, and the warp variant,
 * whose rows are short enough): x + residual summed at load, softmax keeps exp(z - max). */
template <typename T, int VEC, int MAXT>
constexpr bool held_raw() {
  return VEC > 1 && sizeof(T) < 4 && MAXT > 256;
}
template <int VEC> struct held_floats {
  float v[VEC];
};
template <typename T, int VEC, bool RAW>
using held_t = typename std::conditional<RAW, vec16<T>, held_floats<VEC>>::type;

template <typename T, int VEC, bool RAW>
__device__ __forceinline__ held_t<T, VEC, RAW> load_held(const T *p, int64_t vi, int64_t stride) {
  held_t<T, VEC, RAW> h;
  if constexpr (RAW) h = load16(p + vi * VEC);
  else load_vec<T, VEC>(p, vi, stride, h.v);
  return h;
}

/* Element j of a held vector, in f32. RAW conversions are opaque (volatile) instructions at
 * each use: otherwise the compiler keeps all the converted floats live across the
 * reductions, the very register cost that holding bytes avoids. */
template <typename T, int VEC, bool RAW>
__device__ __forceinline__ float held_f(const held_t<T, VEC, RAW> &h, int j) {
  if constexpr (!RAW) {
    return h.v[j];
  } else {
    const uint32_t w = reinterpret_cast<const uint32_t *>(h.v)[j >> 1];
    float f;
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
      if (j & 1) asm volatile("and.b32 %0, %1, 0xFFFF0000;" : "=f"(f) : "r"(w));
      else asm volatile("shl.b32 %0, %1, 16;" : "=f"(f) : "r"(w));
    } else {
      if (j & 1) asm volatile("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f32.f16 %0, hi;}" : "=f"(f) : "r"(w));
      else asm volatile("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f32.f16 %0, lo;}" : "=f"(f) : "r"(w));
    }
    return f;
  }
}

/* MAXT 256 (the warp variant): at least 3 blocks per SM, or ptxas spends registers until
 * only 2 fit (16 warps: too few loads in flight to cover DRAM latency). The block variant
 * keeps 64 registers: capped at 40 (3 blocks of 512), its 16-bit rows spilled and ran at
 * 50-60% of copy instead of 86-95% (H100, 2026-11-22). RES: the call has a residual; raw
 * rows hold it beside x and re-add the two in f32 at each pass, float rows add it at load. */
template <typename T, int VEC, int MAXV, int MAXT, bool RES>
__global__ void __launch_bounds__(MAXT, MAXT <= 256 ? 3 : 1) row_forward_kernel(const row_geom g) {
  __shared__ float smem[192]; /* two halves: 32 floats (group_reduce_tree) or 96 (group_mean_m2) */
  int parity = 0;
  const int tpr = g.cfg.tpr, lane = threadIdx.x % tpr;
  const int nvec = (int)(g.cols / VEC); /* register variants: cols <= 16384 */
  const float inv_n = 1.0f / (float)g.cols;
  for (int64_t row0 = (int64_t)blockIdx.x * g.cfg.rpb; row0 < g.rows; row0 += (int64_t)gridDim.x * g.cfg.rpb) {
    const int64_t row = row0 + threadIdx.x / tpr;
    const bool active = row < g.rows;
    bool valid[MAXV];
#pragma unroll
    for (int k = 0; k < MAXV; ++k) valid[k] = active && k < g.cfg.vpt && lane + k * tpr < nvec;
    constexpr bool RAW = held_raw<T, VEC, MAXT>();
    constexpr bool RES_HELD = RES && RAW; /* raw rows hold the residual beside x */
    held_t<T, VEC, RAW> xv[MAXV], rv[RES_HELD ? MAXV : 1];
    const T *x = active ? static_cast<const T *>(g.x) + row_off(g, row, T_X) : nullptr;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (valid[k]) xv[k] = load_held<T, VEC, RAW>(x, lane + k * tpr, g.col[T_X]);
    }
    if constexpr (RES) {
      const T *r = active ? static_cast<const T *>(g.res) + row_off(g, row, T_RES) : nullptr;
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (!valid[k]) continue;
        if constexpr (RES_HELD) {
          rv[k] = load_held<T, VEC, RAW>(r, lane + k * tpr, g.col[T_RES]);
        } else {
          float rk[VEC];
          load_vec<T, VEC>(r, lane + k * tpr, g.col[T_RES], rk);
#pragma unroll
          for (int j = 0; j < VEC; ++j) xv[k].v[j] += rk[j];
        }
      }
    }
    /* element j of held vector k, in f32 (x + residual) */
    auto val = [&](int k, int j) {
      float v = held_f<T, VEC, RAW>(xv[k], j);
      if constexpr (RES_HELD) v += held_f<T, VEC, RAW>(rv[k], j);
      return v;
    };
    float mean = 0.0f, rstd = 0.0f, inv_s = 0.0f, m = -INFINITY;
    if (g.op == ROW_SOFTMAX) {
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (!valid[k]) continue;
#pragma unroll
        for (int j = 0; j < VEC; ++j) m = fmaxf(m, g.scale * val(k, j));
      }
      m = group_reduce_tree<true>(m, tpr, smem, parity);
      float s = 0.0f;
      if (m != -INFINITY) {
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
          if (!valid[k]) continue;
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const float e = __expf(g.scale * val(k, j) - m);
            if constexpr (!RAW) xv[k].v[j] = e; /* kept for the output */
            s += e;
          }
        }
      }
      s = group_reduce_tree<false>(s, tpr, smem, parity);
      inv_s = s > 0.0f ? 1.0f / s : 0.0f; /* an all -inf row: 0, never NaN */
    } else {
      /* LayerNorm: the thread's mean first (RMSNorm: 0), then its sum of squares about it */
      float acc = 0.0f, n = 0.0f, sum = 0.0f;
      if (g.op == ROW_LN) {
#pragma unroll
        for (int k = 0; k < MAXV; ++k) {
          if (!valid[k]) continue;
          n += (float)VEC;
#pragma unroll
          for (int j = 0; j < VEC; ++j) sum += val(k, j);
        }
        mean = n > 0.0f ? sum / n : 0.0f;
      }
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (!valid[k]) continue;
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc += (val(k, j) - mean) * (val(k, j) - mean);
      }
      if (g.op == ROW_LN) {
        float m2 = 0.0f;
        group_mean_m2(n, sum, mean, acc, inv_n, tpr, smem, parity, mean, m2);
        rstd = rsqrtf(m2 * inv_n + g.eps);
      } else {
        rstd = rsqrtf(group_reduce_tree<false>(acc, tpr, smem, parity) * inv_n + g.eps);
      }
    }
    if (!active) continue;
    T *y = static_cast<T *>(g.y) + row_off(g, row, T_Y);
    T *ro = RES && g.res_out ? static_cast<T *>(g.res_out) + row_off(g, row, T_RES_OUT) : nullptr;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (!valid[k]) continue;
      const int vi = lane + k * tpr;
      float v[VEC], out[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = val(k, j);
      if (ro != nullptr) store_vec<T, VEC>(ro, vi, g.col[T_RES_OUT], v);
      if (g.op == ROW_SOFTMAX) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float e = RAW ? __expf(g.scale * v[j] - m) : v[j]; /* float rows hold exp already */
          out[j] = m == -INFINITY ? 0.0f : e * inv_s;
        }
      } else {
        norm_out<T, VEC>(g, vi, v, mean, rstd, out);
      }
      store_vec<T, VEC>(y, vi, g.col[T_Y], out);
    }
    if (lane == 0 && g.op != ROW_SOFTMAX) {
      if (g.mean != nullptr) g.mean[row_off(g, row, T_MEAN)] = mean;
      if (g.rstd != nullptr) g.rstd[row_off(g, row, T_RSTD)] = rstd;
    }
  }
}

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

/* Staged variant (LayerNorm / RMSNorm backward, 16-bit rows of 16-byte vectors, up to
 * OPSI_ROWS_STAGED_MAX_COLS): at most one block of 1024 threads an SM walks row batches
 * b, b + gridDim.x, ... (rpb rows of tpr threads each). Each thread copies its own vectors of
 * dy and x into its own slots of STAGES shared-memory stages by cp.async, STAGES batches
 * ahead (the row's statistics one batch ahead into registers; the weight row once a block into
 * shared memory when it fits), so DRAM keeps streaming the next rows while a row reduces
 * (the register variant has nothing of its block in flight across its barriers). No thread
 * reads another's slots: the stages need no barrier. A row is read from shared memory twice
 * (sums, then dx), holding only dweight / dbias partials (32 floats) in registers. Partials:
 * the block's groups fold theirs through shared memory in group order into one partial row a
 * block (ws[b * cols + c], dbias after the dweight rows), folded by row_partials_kernel. */
template <typename T, int STAGES>
__global__ void __launch_bounds__(OPSI_ROWS_STAGED_THREADS, 1) row_backward_staged_kernel(const row_geom g) {
  constexpr int VEC = 8, MAXV = OPSI_ROWS_STAGED_HELD / VEC;
  extern __shared__ __align__(16) unsigned char staged[];
  __shared__ float smem[128];
  const int tpr = g.cfg.tpr, vpt = g.cfg.vpt, lane = threadIdx.x % tpr;
  const int nthr = OPSI_ROWS_STAGED_THREADS;
  const int nvec = (int)(g.cols / VEC);
  const uint32_t step = gridDim.x * (uint32_t)g.cfg.rpb, nrows = (uint32_t)g.rows; /* rows < 2^31 */
  const float inv_n = 1.0f / (float)g.cols;
  const bool ln = g.op == ROW_LN;
  /* slot q of stage s: q < MAXV dy vectors, then MAXV x vectors (compile-time offsets:
     runtime ones cost the registers the partials need) */
  auto vslot = [&](int s, int q) {
    return reinterpret_cast<uint4 *>(staged + s * OPSI_ROWS_STAGED_STAGE_BYTES) + q * nthr + threadIdx.x;
  };
  /* The weight row, read twice a row by every group: copied once into shared memory when it
     fits (from L1 it missed: the stages leave L1 ~28 KB, and a 16384-wide bf16 row is 32 KB,
     its loads the kernel's long-scoreboard stalls). */
  const int wsize = g.w_dtype == OPS_DTYPE_F32 ? 4 : 2;
  const bool w_staged = g.cols * wsize <= OPSI_ROWS_STAGED_W_BYTES;
  unsigned char *wsm = staged + STAGES * OPSI_ROWS_STAGED_STAGE_BYTES;
  if (w_staged) {
    for (int i = threadIdx.x; i < (int)(g.cols * wsize / 16); i += nthr) {
      reinterpret_cast<uint4 *>(wsm)[i] = __ldg(static_cast<const uint4 *>(g.w) + i);
    }
    __syncthreads();
  }
  auto weight = [&](int vi, float *w) {
    if (!w_staged) {
      load_param<T, VEC>(g.w, vi, 1, g.w_dtype, w);
    } else if (wsize == 4) {
      const float4 *q = reinterpret_cast<const float4 *>(wsm) + 2 * vi;
      const float4 a = q[0], b = q[1];
      w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    } else {
      vec16<T> v;
      *reinterpret_cast<uint4 *>(&v) = reinterpret_cast<const uint4 *>(wsm)[vi];
#pragma unroll
      for (int j = 0; j < VEC; ++j) w[j] = to_f(v.v[j]);
    }
  };
  /* the row's statistics, loaded one batch ahead into registers */
  auto stats = [&](uint32_t row0, float &mean, float &rstd) {
    const uint32_t row = row0 + threadIdx.x / tpr;
    mean = row < nrows && ln ? __ldg(g.mean + row_off<uint32_t>(g, row, T_MEAN)) : 0.0f;
    rstd = row < nrows ? __ldg(g.rstd + row_off<uint32_t>(g, row, T_RSTD)) : 0.0f;
  };
  auto issue = [&](uint32_t row0, int s) {
    const uint32_t row = row0 + threadIdx.x / tpr;
    if (row < nrows) {
      const T *dy = static_cast<const T *>(g.dy) + row_off<uint32_t>(g, row, T_DY);
      const T *x = static_cast<const T *>(g.x) + row_off<uint32_t>(g, row, T_X);
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        const int vi = lane + k * tpr;
        if (k >= vpt || vi >= nvec) continue;
        cp_async16(vslot(s, k), dy + (int64_t)vi * VEC, 16);
        cp_async16(vslot(s, MAXV + k), x + (int64_t)vi * VEC, 16);
      }
    }
    cp_commit(); /* empty groups too: one group per batch keeps wait_group's count */
  };
  /* one 16-byte shared load a vector (element-wise reads compiled to 8 loads of 2 bytes) */
  auto held = [&](int s, int q) {
    vec16<T> v;
    *reinterpret_cast<uint4 *>(&v) = *vslot(s, q);
    return v;
  };
  float pdw[MAXV][VEC], pdb[MAXV][VEC];
#pragma unroll
  for (int k = 0; k < MAXV; ++k) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) pdw[k][j] = pdb[k][j] = 0.0f;
  }
  const uint32_t first = blockIdx.x * (uint32_t)g.cfg.rpb;
#pragma unroll 1
  for (int s = 0; s < STAGES; ++s) issue(first + s * step, s);
  int s = 0, parity = 0;
  float mean, rstd;
  stats(first, mean, rstd);
  for (uint32_t row0 = first; row0 < nrows; row0 += step) {
    float next_mean, next_rstd;
    stats(row0 + step, next_mean, next_rstd);
    cp_wait<STAGES - 1>(); /* this thread's copies of batch row0 have landed */
    const uint32_t row = row0 + threadIdx.x / tpr;
    const bool active = row < nrows;
    auto valid = [&](int k) { return active && k < vpt && lane + k * tpr < nvec; };
    float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (!valid(k)) continue;
      float w[VEC];
      weight(lane + k * tpr, w);
      const vec16<T> dyv = held(s, k), xv = held(s, MAXV + k);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float dy = to_f(dyv.v[j]), xhat = (to_f(xv.v[j]) - mean) * rstd, gj = dy * w[j];
        pdw[k][j] += dy * xhat, pdb[k][j] += dy;
        s1 += gj, s2 += gj * xhat;
      }
    }
    group_sum2_tree(s1, s2, tpr, smem, parity); /* RMSNorm: s1 unused */
    if (active) {
      const float m1 = ln ? s1 * inv_n : 0.0f, m2 = s2 * inv_n;
      T *dx = static_cast<T *>(g.y) + row_off<uint32_t>(g, row, T_Y);
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (!valid(k)) continue;
        float w[VEC], out[VEC];
        weight(lane + k * tpr, w);
        const vec16<T> dyv = held(s, k), xv = held(s, MAXV + k);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float xhat = (to_f(xv.v[j]) - mean) * rstd;
          out[j] = rstd * (to_f(dyv.v[j]) * w[j] - m1 - xhat * m2);
        }
        store_vec<T, VEC>(dx, lane + k * tpr, 1, out);
      }
    }
    issue(row0 + STAGES * step, s); /* this thread's reads of stage s are done (their values stored) */
    s = s + 1 == STAGES ? 0 : s + 1;
    mean = next_mean, rstd = next_rstd;
  }
  cp_wait<0>();
  if (g.ws == nullptr || (g.dw == nullptr && g.db == nullptr)) return;
  /* one partial row a block: its groups' partials folded in group order (stage 0 reused) */
  const int rpb = g.cfg.rpb, gib = threadIdx.x / tpr;
  float *fold = reinterpret_cast<float *>(staged);
  for (int out = 0; out < 2; ++out) {
    if ((out == 0 ? g.dw : g.db) == nullptr) continue;
    float *part = g.ws + ((out == 1 && g.dw != nullptr ? gridDim.x : 0) + blockIdx.x) * g.cols;
    if (rpb == 1) {
#pragma unroll
      for (int k = 0; k < MAXV; ++k) {
        if (k < vpt && lane + k * tpr < nvec) store_f32<VEC>(part, lane + k * tpr, out == 0 ? pdw[k] : pdb[k]);
      }
      continue;
    }
    __syncthreads(); /* every thread is past its last read of the stages (or the previous fold) */
#pragma unroll
    for (int k = 0; k < MAXV; ++k) {
      if (k < vpt && lane + k * tpr < nvec) store_f32<VEC>(fold + gib * g.cols, lane + k * tpr, out == 0 ? pdw[k] : pdb[k]);
    }
    __syncthreads();
    for (int64_t c = threadIdx.x; c < g.cols; c += nthr) {
      float acc = fold[c];
      for (int q = 1; q < rpb; ++q) acc += fold[q * g.cols + c];
      part[c] = acc;
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

/* ---- launch ------------------------------------------------------------------------ */

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
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
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

#endif /* OPSLIB_KERNELS_NORM_ROWS_GPU_CUH_ */
