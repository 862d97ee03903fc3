/*
 * What every CUDA GEMM kernel shares: the call as the kernels see it (gemm_geom: pointers
 * and element strides of each 3-D operand, the epilogue's scalars), the epilogue of one
 * output element, the store of a pair of neighbouring columns, and the persistent tile
 * order.
 *
 * Epilogue, as the CPU reference (kernels/gemm/gemm_cpu.c) computes it, in f32:
 *   v = alpha * acc; v += beta * C[i, j] (when C is given); v += bias[i, j]; v = act(v);
 *   v += residual[i, j]; D[i, j] = round(v).
 * C, bias and residual are 3-D views broadcast to D (stride 0 along a broadcast axis), in
 * D's dtype; C and residual may be D itself: each is read at (i, j) by the thread that
 * writes D there, just before it does.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_GPU_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_GPU_CUH_

#include "kernels/common/cuda_common.cuh"

namespace opsi {

/* A 3-D operand: element (b, r, c) lives at p + b * sb + r * sr + c * sc. */
struct gemm_view {
  const void *p;
  int64_t sb, sr, sc;
};

struct gemm_geom {
  int64_t batch, m, n, k;
  gemm_view a, b;         /* [batch, M, K], [batch, K, N] */
  gemm_view d;            /* [batch, M, N], written */
  gemm_view c, bias, res; /* p == nullptr when absent */
  float alpha, beta;
  int32_t act;     /* ops_act */
  int32_t d_dtype; /* ops_dtype of D (and of C, bias, residual) */
  int32_t plain;   /* alpha 1, no C, bias, activation or residual: D = acc */
};

__device__ __forceinline__ int64_t view_off(const gemm_view &v, int64_t b, int64_t r, int64_t c) {
  return b * v.sb + r * v.sr + c * v.sc;
}

/* The epilogue of output (bt, i, j) from its f32 accumulator. */
__device__ __forceinline__ float gemm_epilogue(const gemm_geom &g, int64_t bt, int64_t i, int64_t j, float acc) {
  float v = g.alpha * acc;
  if (g.c.p != nullptr) v += g.beta * load_any(g.c.p, view_off(g.c, bt, i, j), g.d_dtype);
  if (g.bias.p != nullptr) v += load_any(g.bias.p, view_off(g.bias, bt, i, j), g.d_dtype);
  v = act_f(g.act, v);
  if (g.res.p != nullptr) v += load_any(g.res.p, view_off(g.res, bt, i, j), g.d_dtype);
  return v;
}

__device__ __forceinline__ void store_any(void *p, int64_t i, int32_t dtype, float v) {
  switch (dtype) {
    case OPS_DTYPE_F16: static_cast<__half *>(p)[i] = __float2half_rn(v); break;
    case OPS_DTYPE_BF16: static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float *>(p)[i] = v; break;
  }
}

/* Two neighbouring outputs in one store (p aligned to twice the element size). */
template <typename O> __device__ __forceinline__ void store2(O *p, float a, float b);
template <> __device__ __forceinline__ void store2<float>(float *p, float a, float b) {
  *reinterpret_cast<float2 *>(p) = make_float2(a, b);
}
template <> __device__ __forceinline__ void store2<__half>(__half *p, float a, float b) {
  *reinterpret_cast<__half2 *>(p) = __floats2half2_rn(a, b);
}
template <> __device__ __forceinline__ void store2<__nv_bfloat16>(__nv_bfloat16 *p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(a, b);
}

/* Outputs (bt, i, j) and (bt, i, j + 1) from accumulators v0, v1; j + 1 may be past N. One
 * 4-byte (8-byte for f32) store when the pair is whole, D's columns are unit-stride and the
 * pair's address is aligned to its size; element stores otherwise. PLAIN: the caller only
 * passes plain calls (g.plain), and the element epilogue is not compiled in. */
template <bool PLAIN = false>
__device__ __forceinline__ void gemm_store_pair(const gemm_geom &g, int64_t bt, int64_t i, int64_t j, float v0,
                                                float v1) {
  if (i >= g.m || j >= g.n) return;
  const bool pair = j + 1 < g.n;
  if (!PLAIN && !g.plain) {
    v0 = gemm_epilogue(g, bt, i, j, v0);
    if (pair) v1 = gemm_epilogue(g, bt, i, j + 1, v1);
  }
  const int64_t off = view_off(g.d, bt, i, j);
  void *d = const_cast<void *>(g.d.p);
  const size_t elem = g.d_dtype == OPS_DTYPE_F32 ? 4 : 2;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(d) + (uintptr_t)off * elem;
  if (pair && g.d.sc == 1 && addr % (2 * elem) == 0) {
    switch (g.d_dtype) {
      case OPS_DTYPE_BF16: store2(reinterpret_cast<__nv_bfloat16 *>(addr), v0, v1); return;
      case OPS_DTYPE_F16: store2(reinterpret_cast<__half *>(addr), v0, v1); return;
      default: store2(reinterpret_cast<float *>(addr), v0, v1); return;
    }
  }
  store_any(d, off, g.d_dtype, v0);
  if (pair) store_any(d, off + g.d.sc, g.d_dtype, v1);
}

/* Persistent tile order: tile t of batch * tiles_m * tiles_n -> (bt, tm, tn), batch
 * outermost, then groups of GROUP_M tile rows walked column by column, so that the CTAs
 * running at once share A panels and B panels in L2. */
struct tile_order {
  int32_t tiles_m, tiles_n;
  int64_t tiles; /* batch * tiles_m * tiles_n */
  static constexpr int GROUP_M = 8;

  __device__ __forceinline__ void decode(int64_t t, int64_t *bt, int32_t *tm, int32_t *tn) const {
    const int64_t per_batch = (int64_t)tiles_m * tiles_n;
    *bt = t / per_batch;
    const int32_t r = (int32_t)(t - *bt * per_batch);
    const int32_t group_tiles = GROUP_M * tiles_n;
    const int32_t group = r / group_tiles, first_m = group * GROUP_M;
    const int32_t rows = min(tiles_m - first_m, (int32_t)GROUP_M);
    const int32_t in_group = r - group * group_tiles;
    *tm = first_m + in_group % rows;
    *tn = in_group / rows;
  }
};

}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMM_GPU_CUH_ */
