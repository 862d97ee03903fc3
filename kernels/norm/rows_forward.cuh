/*
 * The row kernels' forward register variants: a group of `tpr` threads per row (a warp, or up
 * to 1024 threads), `rpb` rows per block; each thread holds its `vpt` vectors of the row in
 * registers (16-byte loads when the rows are aligned, else one element per load), so the row
 * is read once and written once. The block variant holds 16-bit rows as loaded (64 bytes a
 * thread), the others hold floats (held_raw).
 *   LayerNorm: mean and centred M2 in one reduction (group_mean_m2: sums of deviations
 *              squared about thread, warp and row means; no cancellation).
 *   Softmax:   max, then the sum of exp(z - max); float rows keep the exponentials for the
 *              output, raw rows compute them again.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_FORWARD_CUH_
#define OPSLIB_KERNELS_NORM_ROWS_FORWARD_CUH_

#include "kernels/norm/rows_common.cuh"

namespace opsi {

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
 * keeps 64 registers: capped at 40 (3 blocks of 512), its 16-bit rows spill (bench/RESULTS.md
 * has the cost). RES: the call has a residual; raw
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

}  // namespace opsi

#endif /* OPSLIB_KERNELS_NORM_ROWS_FORWARD_CUH_ */
