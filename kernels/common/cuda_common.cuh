/*
 * Device helpers every CUDA kernel family shares: dtype conversion to and from float,
 * 16-byte vectors (one load or store instruction per thread per access), warp and block
 * reductions, and the dtype dispatch of the launchers. Kernels compute in f32 whatever
 * their storage dtype, and round once when storing.
 */
#ifndef OPSLIB_KERNELS_COMMON_CUDA_COMMON_CUH_
#define OPSLIB_KERNELS_COMMON_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "opslib/ops.h"
#include "opslib/tensor.h"

namespace opsi {

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* Two floats rounded to a 16-bit pair (the first in the low half) as one 32-bit register: an
 * mma operand, a stmatrix fragment, a paired store. */
template <typename T> __device__ __forceinline__ uint32_t pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t pack2<__half>(float a, float b) {
  const __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<const uint32_t *>(&h);
}
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<const uint32_t *>(&h);
}

/* Element `i` of a tensor whose dtype is only known at run time (weights that may be f32
 * or the input's dtype). */
__device__ __forceinline__ float load_any(const void *p, int64_t i, int32_t dtype) {
  switch (dtype) {
    case OPS_DTYPE_F16: return __half2float(static_cast<const __half *>(p)[i]);
    case OPS_DTYPE_BF16: return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
    default: return static_cast<const float *>(p)[i];
  }
}

/* The ops_act functions in f32 (kernels/common/pointwise.h has them in double for the CPU):
 * elementwise unary ops and the GEMM epilogue. */
__device__ __forceinline__ float act_f(int32_t fn, float x) {
  switch (fn) {
    case OPS_ACT_NONE: return x;
    case OPS_ACT_RELU: return x > 0.0f ? x : (x == x ? 0.0f : x);
    case OPS_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
    case OPS_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    case OPS_ACT_SILU: return x / (1.0f + expf(-x));
    case OPS_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case OPS_ACT_TANH: return tanhf(x);
    case OPS_ACT_EXP: return expf(x);
    case OPS_ACT_NEG: return -x;
    case OPS_ACT_ABS: return fabsf(x);
    default: return sinf(x);
  }
}

/* 16 bytes of T: the unit of every vectorized access. */
template <typename T> struct alignas(16) vec16 {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

template <typename T> __device__ __forceinline__ vec16<T> load16(const T *p) {
  vec16<T> r;
  *reinterpret_cast<uint4 *>(&r) = __ldg(reinterpret_cast<const uint4 *>(p));
  return r;
}

template <typename T> __device__ __forceinline__ vec16<T> load16_stream(const T *p) {
  vec16<T> r; /* read once: do not keep in L1 */
  *reinterpret_cast<uint4 *>(&r) = __ldcs(reinterpret_cast<const uint4 *>(p));
  return r;
}

template <typename T> __device__ __forceinline__ void store16(T *p, const vec16<T> &v) {
  *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(&v);
}

template <typename T> __device__ __forceinline__ void store16_stream(T *p, const vec16<T> &v) {
  __stcs(reinterpret_cast<uint4 *>(p), *reinterpret_cast<const uint4 *>(&v));
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

/* Partial rows p[k * cols + c], k < parts, folded per column in a fixed order by a block of
 * FOLD_WARPS warps over FOLD_COLS columns (column c = blockIdx.x * FOLD_COLS + lane): warp w
 * folds rows w, w + FOLD_WARPS, ..., then the warps' results are folded in warp order. Every
 * thread of the block calls it (it holds a barrier); the result is the column's in warp 0. */
enum { FOLD_COLS = 32, FOLD_WARPS = 8 };
template <typename Combine>
__device__ __forceinline__ float fold_partial_rows(const float *p, int64_t parts, int64_t cols, int64_t c,
                                                   float identity, Combine combine, float (*sm)[FOLD_COLS]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc = identity;
  if (c < cols) {
    for (int64_t k = warp; k < parts; k += FOLD_WARPS) acc = combine(acc, p[k * cols + c]);
  }
  sm[warp][lane] = acc;
  __syncthreads();
  if (warp == 0) {
    for (int w = 1; w < FOLD_WARPS; ++w) acc = combine(acc, sm[w][lane]);
  }
  return acc;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

/* Blocks for a grid-stride kernel over `work_items`: one item per thread, at most enough
 * blocks to fill each of `sm_count` SMs `per_sm` times. */
inline int grid_for(int64_t work_items, int threads, int sm_count, int per_sm) {
  const int64_t want = (work_items + threads - 1) / threads;
  const int64_t cap = (int64_t)(sm_count > 0 ? sm_count : 132) * per_sm;
  return (int)(want < 1 ? 1 : want < cap ? want : cap);
}

}  // namespace opsi

/* Runs BODY with T bound to the storage type of DTYPE (f32, f16 or bf16). */
#define OPSI_DISPATCH_FLOAT(DTYPE, T, ...)           \
  switch (DTYPE) {                                   \
    case OPS_DTYPE_F16: {                            \
      using T = __half;                              \
      __VA_ARGS__;                                   \
      break;                                         \
    }                                                \
    case OPS_DTYPE_BF16: {                           \
      using T = __nv_bfloat16;                       \
      __VA_ARGS__;                                   \
      break;                                         \
    }                                                \
    default: {                                       \
      using T = float;                               \
      __VA_ARGS__;                                   \
      break;                                         \
    }                                                \
  }

#endif /* OPSLIB_KERNELS_COMMON_CUDA_COMMON_CUH_ */
