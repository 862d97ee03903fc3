/*
 * The elementwise kernels: one interpreter of opsi_ew_gpu_program, in two access patterns.
 *   vec16:   every operand contiguous with y's shape and 16-byte aligned; each thread moves
 *            16-byte vectors (two per loop trip, both loaded before either is used), with
 *            streaming cache hints since every byte is touched once; the tail past the last
 *            whole vector is done element by element.
 *   strided: any strides and broadcasting; each thread walks y's collapsed index space and
 *            computes every operand's offset.
 * Values are f32 in registers; y is rounded once. Dropout draws Philox words per 4 logical
 * elements (kernels/common/philox.h), so its mask matches the CPU reference bit for bit.
 * Measured speed: bench/RESULTS.md (H100).
 */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_GPU_KERNELS_CUH_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_GPU_KERNELS_CUH_

#include "kernels/common/cuda_common.cuh"
#include "kernels/common/philox.h"
#include "kernels/elementwise/ew_gpu_program.h"
#include "opslib/ops.h"

namespace opsi {

__device__ __forceinline__ float binary_f(int32_t op, float a, float b) {
  switch (op) {
    case OPS_BINARY_ADD: return a + b;
    case OPS_BINARY_SUB: return a - b;
    case OPS_BINARY_MUL: return a * b;
    case OPS_BINARY_DIV: return a / b;
    case OPS_BINARY_MAX: return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b);
    default: return (a != a || b != b) ? __int_as_float(0x7fc00000) : fminf(a, b);
  }
}

/* The uniform in [0, 1) of logical element `index` of a dropout call. */
__device__ __forceinline__ float dropout_u(const opsi_ew_gpu_program &p, int64_t index) {
  const opsi_u32x4 w = opsi_dropout_bits(p.seed, p.offset, (uint64_t)index >> 2);
  return (float)(w.v[index & 3] >> 8) * 0x1p-24f;
}

/* The interpreter calls the pointwise functions instead of inlining them at every unrolled
 * element: one copy of tanhf / erff / expf / sinf keeps registers and code in check. */
static __device__ __noinline__ float act_call(int32_t fn, float x) { return act_f(fn, x); }

/* Runs the program on one element: x is its input, opv its operands, index its logical
 * (row-major) position. */
__device__ __forceinline__ float run_program(const opsi_ew_gpu_program &p, float v, const float *opv,
                                             int64_t index) {
  for (int s = 0; s < p.n_steps; ++s) {
    const opsi_gpu_step &st = p.steps[s];
    switch (st.kind) {
      case OPSI_STEP_UNARY: v = act_call(st.fn, v); break;
      case OPSI_STEP_BINARY: {
        /* constant indices only: a run-time index would move opv to local memory */
        const float w = st.operand == 0 ? opv[0] : st.operand == 1 ? opv[1] : st.operand == 2 ? opv[2] : opv[3];
        v = st.operand_first ? binary_f(st.fn, w, v) : binary_f(st.fn, v, w);
        break;
      }
      case OPSI_STEP_SCALE: v = st.a * v; break;
      case OPSI_STEP_SIN_AFFINE: v = sinf(fmaf(st.a, v, st.b)); break;
      default: v = dropout_u(p, index) >= st.a ? v * st.b : 0.0f; break; /* dropout */
    }
  }
  return v;
}

/* Program shapes with a kernel of their own: one step, inlined whole. */
enum { PS_GENERAL = 0, PS_SIN_AFFINE = 1, PS_SCALE = 2, PS_BINARY = 3, PS_UNARY = 4, PS_DROPOUT = 5 };

inline int program_shape(const opsi_ew_gpu_program &p) {
  if (p.n_steps != 1) return PS_GENERAL;
  switch (p.steps[0].kind) {
    case OPSI_STEP_SIN_AFFINE: return PS_SIN_AFFINE;
    case OPSI_STEP_SCALE: return PS_SCALE;
    case OPSI_STEP_BINARY: return p.steps[0].operand == 0 && !p.steps[0].operand_first ? PS_BINARY : PS_GENERAL;
    case OPSI_STEP_UNARY: return PS_UNARY;
    case OPSI_STEP_DROPOUT: return PS_DROPOUT;
    default: return PS_GENERAL;
  }
}

template <int PS>
__device__ __forceinline__ float run_shaped(const opsi_ew_gpu_program &p, float v, const float *opv, int64_t index) {
  if (PS == PS_SIN_AFFINE) return sinf(fmaf(p.steps[0].a, v, p.steps[0].b));
  if (PS == PS_SCALE) return p.steps[0].a * v;
  if (PS == PS_BINARY) return binary_f(p.steps[0].fn, v, opv[0]);
  if (PS == PS_UNARY) return act_f(p.steps[0].fn, v);
  return run_program(p, v, opv, index);
}

/* U vectors per thread per trip: all their loads are issued before any value is used. */
template <typename T, int PS, int U>
__device__ __forceinline__ void run_vectors(const opsi_ew_gpu_program &p, int n_ops, int64_t first, int64_t step,
                                            int count) {
  constexpr int N = vec16<T>::N;
  vec16<T> x[U], o[U][OPSI_CHAIN_MAX_OPERANDS];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (u >= count) break;
    const int64_t vi = first + u * step;
    x[u] = load16_stream(static_cast<const T *>(p.x) + vi * N);
#pragma unroll
    for (int k = 0; k < OPSI_CHAIN_MAX_OPERANDS; ++k) {
      if (k < n_ops) o[u][k] = load16_stream(static_cast<const T *>(p.operands[k]) + vi * N);
    }
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (u >= count) break;
    const int64_t vi = first + u * step;
    vec16<T> y;
    if (PS == PS_DROPOUT) { /* one Philox call per 4 elements: vi * N is a multiple of 4 */
      const float p_drop = p.steps[0].a, keep_scale = p.steps[0].b;
#pragma unroll
      for (int j0 = 0; j0 < N; j0 += 4) {
        const opsi_u32x4 w = opsi_dropout_bits(p.seed, p.offset, (uint64_t)(vi * N + j0) >> 2);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const float r = (float)(w.v[q] >> 8) * 0x1p-24f; /* dropout_u's uniform */
          y.v[j0 + q] = from_f<T>(r >= p_drop ? to_f(x[u].v[j0 + q]) * keep_scale : 0.0f);
        }
      }
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) {
        float opv[OPSI_CHAIN_MAX_OPERANDS];
#pragma unroll
        for (int k = 0; k < OPSI_CHAIN_MAX_OPERANDS; ++k) opv[k] = k < n_ops ? to_f(o[u][k].v[j]) : 0.0f;
        y.v[j] = from_f<T>(run_shaped<PS>(p, to_f(x[u].v[j]), opv, vi * N + j));
      }
    }
    store16_stream(static_cast<T *>(p.y) + vi * N, y);
  }
}

template <typename T, int PS>
__global__ void __launch_bounds__(256) ew_vec16_kernel(const opsi_ew_gpu_program p, int n_ops) {
  constexpr int N = vec16<T>::N, U = 2;
  const int64_t nvec = p.numel / N;
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nvec; i += U * stride) {
    const int64_t left = (nvec - 1 - i) / stride + 1;
    run_vectors<T, PS, U>(p, n_ops, i, stride, left < U ? (int)left : U);
  }
  /* the tail past the last whole vector */
  const int64_t e = nvec * N + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (e < p.numel && e < (nvec + 1) * N) {
    float opv[OPSI_CHAIN_MAX_OPERANDS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < n_ops; ++k) opv[k] = to_f(static_cast<const T *>(p.operands[k])[e]);
    static_cast<T *>(p.y)[e] = from_f<T>(run_program(p, to_f(static_cast<const T *>(p.x)[e]), opv, e));
  }
}

template <typename T>
__global__ void __launch_bounds__(256) ew_strided_kernel(const opsi_ew_gpu_program p, int n_ops) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < p.numel; idx += stride) {
    int64_t off[OPSI_EW_GPU_OPERANDS] = {0, 0, 0, 0, 0, 0};
    int64_t rest = idx;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const int64_t c = rest % p.shape[d];
      rest /= p.shape[d];
#pragma unroll
      for (int k = 0; k < OPSI_EW_GPU_OPERANDS; ++k) off[k] += c * p.stride[k][d];
    }
    float opv[OPSI_CHAIN_MAX_OPERANDS];
#pragma unroll
    for (int k = 0; k < OPSI_CHAIN_MAX_OPERANDS; ++k) {
      opv[k] = k < n_ops ? to_f(static_cast<const T *>(p.operands[k])[off[2 + k]]) : 0.0f;
    }
    static_cast<T *>(p.y)[off[0]] = from_f<T>(run_program(p, to_f(static_cast<const T *>(p.x)[off[1]]), opv, idx));
  }
}

/* Launches one of the two kernels for T on `stream`. */
template <typename T>
void launch_ew_program(const opsi_ew_gpu_program &p, int n_ops, int use_vec16, cudaStream_t stream, int sm_count,
                       int32_t *grid, int32_t *block) {
  constexpr int threads = 256;
  const int64_t items = use_vec16 ? (p.numel / vec16<T>::N + 1) / 2 + 1 : p.numel; /* 2 vectors a trip */
  const int blocks = grid_for(items, threads, sm_count, 8);
  if (use_vec16) {
    switch (program_shape(p)) {
      case PS_SIN_AFFINE: ew_vec16_kernel<T, PS_SIN_AFFINE><<<blocks, threads, 0, stream>>>(p, n_ops); break;
      case PS_SCALE: ew_vec16_kernel<T, PS_SCALE><<<blocks, threads, 0, stream>>>(p, n_ops); break;
      case PS_BINARY: ew_vec16_kernel<T, PS_BINARY><<<blocks, threads, 0, stream>>>(p, n_ops); break;
      case PS_UNARY: ew_vec16_kernel<T, PS_UNARY><<<blocks, threads, 0, stream>>>(p, n_ops); break;
      case PS_DROPOUT: ew_vec16_kernel<T, PS_DROPOUT><<<blocks, threads, 0, stream>>>(p, n_ops); break;
      default: ew_vec16_kernel<T, PS_GENERAL><<<blocks, threads, 0, stream>>>(p, n_ops); break;
    }
  } else {
    ew_strided_kernel<T><<<blocks, threads, 0, stream>>>(p, n_ops);
  }
  *grid = blocks;
  *block = threads;
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_GPU_KERNELS_CUH_ */
