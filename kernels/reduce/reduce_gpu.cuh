/*
 * The reduction kernels (sum / mean / max / min in f32, any input dtype):
 *   rows:    the reduced elements are one unit-stride run per output; a warp (runs of up to
 *            8192) or a 256-thread block per output, 16-byte loads four deep when aligned;
 *            few long rows are cut into chunks across blocks (partials, then a combine).
 *   columns: x is [R, K] with the K outputs unit-stride; each thread owns 16 bytes of
 *            columns and walks a chunk of rows; chunks combine in order in a second pass.
 *            On sm_90 (wide, tall views) one kernel: a cluster of 4 blocks per band of 32
 *            vectors of columns, folded through distributed shared memory.
 *   strided: anything else; a block per output walks the collapsed reduced index space.
 * Every combine has a fixed order: results are bitwise reproducible; no atomics.
 * Max / min propagate NaN. An empty reduction gives the identity (mean: 0 / 0 = NaN).
 */
#ifndef OPSLIB_KERNELS_REDUCE_REDUCE_GPU_CUH_
#define OPSLIB_KERNELS_REDUCE_REDUCE_GPU_CUH_

#include <cooperative_groups.h>
#include <type_traits>

#include "kernels/common/cuda_common.cuh"
#include "opslib/ops.h"

namespace opsi {

struct reduce_geom {
  const void *x;
  void *y;
  int32_t y_dtype;
  int32_t op;
  float *partial;     /* workspace: [outputs, splits] (rows) or [splits, K] (columns) */
  int64_t outputs;
  int64_t reduced;    /* elements per output */
  int64_t splits;
  int64_t chunk;      /* reduced elements per split */
  int32_t kept_ndim;
  int64_t kept_shape[OPS_MAX_DIMS];
  int64_t kept_x[OPS_MAX_DIMS];
  int64_t kept_y[OPS_MAX_DIMS];
  int32_t red_ndim;
  int64_t red_shape[OPS_MAX_DIMS];
  int64_t red_x[OPS_MAX_DIMS];
};

__device__ __forceinline__ float red_identity(int32_t op) {
  return op == OPS_REDUCE_MAX ? -INFINITY : op == OPS_REDUCE_MIN ? INFINITY : 0.0f;
}

__device__ __forceinline__ float red_combine(int32_t op, float a, float b) {
  if (op == OPS_REDUCE_SUM || op == OPS_REDUCE_MEAN) return a + b;
  if (a != a || b != b) return __int_as_float(0x7fc00000);
  return op == OPS_REDUCE_MAX ? fmaxf(a, b) : fminf(a, b);
}

__device__ __forceinline__ float warp_reduce(int32_t op, float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = red_combine(op, v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}

/* All 256 threads of the block; the result in every thread. */
__device__ __forceinline__ float block_reduce256(int32_t op, float v) {
  __shared__ float part[8];
  v = warp_reduce(op, v);
  __syncthreads(); /* part[] may still be read by a previous call */
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
  __syncthreads();
  v = part[0];
#pragma unroll
  for (int w = 1; w < 8; ++w) v = red_combine(op, v, part[w]);
  return v;
}

__device__ __forceinline__ void store_output(const reduce_geom &g, int64_t out, float acc) {
  if (g.op == OPS_REDUCE_MEAN) acc = acc / (float)g.reduced;
  int64_t off = 0, rest = out;
  for (int d = g.kept_ndim - 1; d >= 0; --d) {
    off += (rest % g.kept_shape[d]) * g.kept_y[d];
    rest /= g.kept_shape[d];
  }
  switch (g.y_dtype) {
    case OPS_DTYPE_F16: static_cast<__half *>(g.y)[off] = __float2half_rn(acc); break;
    case OPS_DTYPE_BF16: static_cast<__nv_bfloat16 *>(g.y)[off] = __float2bfloat16_rn(acc); break;
    default: static_cast<float *>(g.y)[off] = acc; break;
  }
}

__device__ __forceinline__ int64_t kept_x_offset(const reduce_geom &g, int64_t out) {
  int64_t off = 0;
  for (int d = g.kept_ndim - 1; d >= 0; --d) {
    off += (out % g.kept_shape[d]) * g.kept_x[d];
    out /= g.kept_shape[d];
  }
  return off;
}

/* G threads per output (32 or 256): the rows kernel. */
template <typename T, int VEC, int G>
__global__ void __launch_bounds__(256) reduce_rows_kernel(const reduce_geom g) {
  constexpr int GROUPS = 256 / G;
  const int lane = threadIdx.x % G;
  const int64_t tasks = g.outputs * g.splits;
  for (int64_t task = (int64_t)blockIdx.x * GROUPS + threadIdx.x / G; task < tasks; task += (int64_t)gridDim.x * GROUPS) {
    const int64_t out = task / g.splits, part = task % g.splits;
    const T *row = static_cast<const T *>(g.x) + kept_x_offset(g, out);
    const int64_t lo = part * g.chunk, hi = min(g.reduced, lo + g.chunk);
    float acc = red_identity(g.op);
    if (VEC > 1) {
      const int64_t vlo = lo / VEC, vhi = hi / VEC; /* chunks and runs are multiples of VEC */
      int64_t v = vlo + lane;
      for (; v + 3 * G < vhi; v += 4 * G) { /* four 16-byte loads in flight */
        vec16<T> a = load16_stream(row + v * VEC), b = load16_stream(row + (v + G) * VEC);
        vec16<T> c = load16_stream(row + (v + 2 * G) * VEC), d = load16_stream(row + (v + 3 * G) * VEC);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          acc = red_combine(g.op, acc, red_combine(g.op, red_combine(g.op, to_f(a.v[j]), to_f(b.v[j])),
                                                   red_combine(g.op, to_f(c.v[j]), to_f(d.v[j]))));
        }
      }
      for (; v < vhi; v += G) {
        const vec16<T> a = load16_stream(row + v * VEC);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc = red_combine(g.op, acc, to_f(a.v[j]));
      }
    } else {
      for (int64_t i = lo + lane; i < hi; i += G) acc = red_combine(g.op, acc, to_f(row[i]));
    }
    acc = G == 32 ? warp_reduce(g.op, acc) : block_reduce256(g.op, acc);
    if (lane == 0) {
      if (g.splits == 1) {
        store_output(g, out, acc);
      } else {
        g.partial[out * g.splits + part] = acc;
      }
    }
  }
}

/* Combines the split partials of each output in a fixed order, many loads in flight.
 * Columns ([splits, outputs]): fold_partial_rows, a block per FOLD_COLS outputs. Rows
 * ([outputs, splits]): a warp per output, lane l takes splits l, l + 32, ..., then a
 * butterfly. */
static __global__ void __launch_bounds__(FOLD_WARPS * 32) reduce_partials_kernel(const reduce_geom g, int columns) {
  __shared__ float sm[FOLD_WARPS][FOLD_COLS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (columns) {
    const int64_t out = (int64_t)blockIdx.x * FOLD_COLS + lane;
    const float acc = fold_partial_rows(g.partial, g.splits, g.outputs, out, red_identity(g.op),
                                        [&](float a, float b) { return red_combine(g.op, a, b); }, sm);
    if (warp == 0 && out < g.outputs) store_output(g, out, acc);
  } else {
    const int64_t out = (int64_t)blockIdx.x * FOLD_WARPS + warp;
    if (out >= g.outputs) return;
    float acc = red_identity(g.op);
    for (int64_t s = lane; s < g.splits; s += 32) acc = red_combine(g.op, acc, g.partial[out * g.splits + s]);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc = red_combine(g.op, acc, __shfl_xor_sync(0xFFFFFFFFu, acc, o));
    if (lane == 0) store_output(g, out, acc);
  }
}

/* Folds rows lo, lo + step, ... (< hi) of the VEC columns at x into acc[], in row order: 16
 * rows in flight a thread (the column walk is pure latency), then the last < 16 rows 8 loads
 * at a time. SUM: the op is sum / mean, else the NaN-propagating max / min; a template
 * constant of the walk (a runtime op in the loop cost the registers of both). */
template <typename T, int VEC, bool SUM>
__device__ __forceinline__ void column_walk(const T *x, int64_t rs, int64_t lo, int64_t hi, int64_t step, int32_t op,
                                            float (&acc)[VEC]) {
  const auto comb = [&](float a, float b) { return SUM ? a + b : red_combine(op, a, b); };
  constexpr int DEEP = 16;
  int64_t r = lo;
  for (; r + (DEEP - 1) * step < hi; r += DEEP * step) {
    vec16<T> a[DEEP];
#pragma unroll
    for (int k = 0; k < DEEP; ++k) a[k] = load16_stream(x + (r + k * step) * rs);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float t = to_f(a[0].v[j]);
#pragma unroll
      for (int k = 1; k < DEEP; ++k) t = comb(t, to_f(a[k].v[j]));
      acc[j] = comb(acc[j], t);
    }
  }
  for (; r < hi; r += 8 * step) {
    vec16<T> a[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (r + k * step < hi) a[k] = load16_stream(x + (r + k * step) * rs);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (r + k * step >= hi) break;
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = comb(acc[j], to_f(a[k].v[j]));
    }
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void column_walk_op(const T *x, int64_t rs, int64_t lo, int64_t hi, int64_t step,
                                               int32_t op, float (&acc)[VEC]) {
  if (op == OPS_REDUCE_SUM || op == OPS_REDUCE_MEAN) {
    column_walk<T, VEC, true>(x, rs, lo, hi, step, op, acc);
  } else {
    column_walk<T, VEC, false>(x, rs, lo, hi, step, op, acc);
  }
}

/* Each thread: VEC adjacent columns over one chunk of rows (column_walk). 2 blocks of 256 an
 * SM, one wave, 16 rows in flight a thread (the best of the shapes bench/RESULTS.md compares).
 * The chunks' partials go to the workspace, folded by a second kernel. */
template <typename T, int VEC>
__global__ void __launch_bounds__(256, 2) reduce_columns_kernel(const reduce_geom g) {
  const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
  if (c >= g.outputs) return;
  const int64_t part = blockIdx.y, lo = part * g.chunk, hi = min(g.reduced, lo + g.chunk);
  const int64_t rs = g.red_ndim > 0 ? g.red_x[0] : 0;
  const T *x = static_cast<const T *>(g.x) + c;
  float acc[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc[j] = red_identity(g.op);
  if (VEC == 1) {
    for (int64_t r = lo; r < hi; ++r) acc[0] = red_combine(g.op, acc[0], to_f(x[r * rs]));
  } else {
    column_walk_op<T, VEC>(x, rs, lo, hi, 1, g.op, acc);
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (c + j >= g.outputs) break;
    if (g.splits == 1) {
      store_output(g, c + j, acc[j]);
    } else {
      g.partial[part * g.outputs + c + j] = acc[j];
    }
  }
}

/* Columns in one kernel (sm_90, thread block clusters): a block owns a band of 32 x VEC
 * columns (a warp across: 512 contiguous bytes of a row) and its 8 warps are row lanes; the
 * OPSI_REDUCE_CLUSTER blocks of a cluster take consecutive quarters of the rows. Warp l walks
 * rows l, l + 8, ... of its quarter (column_walk); the block's warps are folded in warp order
 * through shared memory; block rank 0 folds the cluster's band sums in rank order, reading the
 * other blocks' shared memory (DSMEM), and writes the outputs: no workspace, no second kernel
 * (whose launch and latency-bound fold the two-kernel path pays), no atomics. A warp across
 * the band and 4 blocks a cluster: bench/RESULTS.md compares the alternatives. Launched with
 * the cluster shape at run time: the sm_80 build of this file has an empty body, and the row
 * is never chosen below sm_90. */
template <typename T, int VEC>
__global__ void __launch_bounds__(256, 2) reduce_columns_cluster_kernel(const reduce_geom g) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int WIDTH = 32 * VEC, LANES = 8;
  __shared__ __align__(16) float warp_acc[LANES * WIDTH];
  __shared__ float band[WIDTH];
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int t = threadIdx.x, warp = t >> 5;
  const int64_t c = (int64_t)blockIdx.x * WIDTH + (t & 31) * VEC;
  const int64_t lo = blockIdx.y * g.chunk, hi = min(g.reduced, lo + g.chunk);
  float acc[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) acc[j] = red_identity(g.op);
  if (c < g.outputs) {
    const int64_t rs = g.red_ndim > 0 ? g.red_x[0] : 0;
    column_walk_op<T, VEC>(static_cast<const T *>(g.x) + c, rs, lo + warp, hi, LANES, g.op, acc);
  }
#pragma unroll
  for (int j = 0; j < VEC; j += 4) { /* warp w's sums at w * WIDTH + column */
    *reinterpret_cast<float4 *>(&warp_acc[t * VEC + j]) = make_float4(acc[j], acc[j + 1], acc[j + 2], acc[j + 3]);
  }
  __syncthreads();
  if (t < WIDTH) {
    float s = warp_acc[t];
#pragma unroll
    for (int w = 1; w < LANES; ++w) s = red_combine(g.op, s, warp_acc[w * WIDTH + t]);
    band[t] = s;
  }
  cluster.sync(); /* every block's band is written and visible to the cluster */
  if (cluster.block_rank() == 0 && t < WIDTH) {
    float s = band[t];
    for (unsigned q = 1; q < cluster.num_blocks(); ++q) s = red_combine(g.op, s, cluster.map_shared_rank(band, q)[t]);
    const int64_t col = (int64_t)blockIdx.x * WIDTH + t;
    if (col < g.outputs) store_output(g, col, s);
  }
  cluster.sync(); /* the other blocks' shared memory stays alive until rank 0 has read it */
#endif
}

/* A block per output; threads walk the reduced index space. */
template <typename T>
__global__ void __launch_bounds__(256) reduce_strided_kernel(const reduce_geom g) {
  for (int64_t out = blockIdx.x; out < g.outputs; out += gridDim.x) {
    const T *x = static_cast<const T *>(g.x) + kept_x_offset(g, out);
    float acc = red_identity(g.op);
    for (int64_t i = threadIdx.x; i < g.reduced; i += blockDim.x) {
      int64_t off = 0, rest = i;
      for (int d = g.red_ndim - 1; d >= 0; --d) {
        off += (rest % g.red_shape[d]) * g.red_x[d];
        rest /= g.red_shape[d];
      }
      acc = red_combine(g.op, acc, to_f(x[off]));
    }
    acc = block_reduce256(g.op, acc);
    if (threadIdx.x == 0) store_output(g, out, acc);
  }
}

enum { REDUCE_ROWS = 0, REDUCE_COLUMNS = 1, REDUCE_STRIDED = 2, REDUCE_COLUMNS_CLUSTER = 3 };

/* Launches `kind` for T (vec16: 16-byte loads); returns grid and block for the profiler. */
template <typename T>
void launch_reduce(const reduce_geom &g, int kind, int vec16, cudaStream_t stream, int sm_count, int32_t *grid,
                   int32_t *block) {
  constexpr int V = 16 / sizeof(T);
  const int cap = (sm_count > 0 ? sm_count : 132) * 8;
  if (kind == REDUCE_ROWS) {
    const int g_threads = (g.splits == 1 && g.reduced <= 8192) ? 32 : 256;
    const int64_t tasks = g.outputs * g.splits;
    const int64_t want = g_threads == 32 ? (tasks + 7) / 8 : tasks;
    const int blocks = (int)(want < cap ? want : cap);
    if (g_threads == 32) {
      if (vec16) reduce_rows_kernel<T, V, 32><<<blocks, 256, 0, stream>>>(g);
      else reduce_rows_kernel<T, 1, 32><<<blocks, 256, 0, stream>>>(g);
    } else {
      if (vec16) reduce_rows_kernel<T, V, 256><<<blocks, 256, 0, stream>>>(g);
      else reduce_rows_kernel<T, 1, 256><<<blocks, 256, 0, stream>>>(g);
    }
    grid[0] = blocks;
  } else if (kind == REDUCE_COLUMNS) {
    const int per = vec16 ? V : 1;
    const dim3 blocks((unsigned)((g.outputs + 256 * per - 1) / (256 * per)), (unsigned)g.splits);
    if (vec16) reduce_columns_kernel<T, V><<<blocks, 256, 0, stream>>>(g);
    else reduce_columns_kernel<T, 1><<<blocks, 256, 0, stream>>>(g);
    grid[0] = (int32_t)blocks.x, grid[1] = (int32_t)blocks.y;
  } else if (kind == REDUCE_COLUMNS_CLUSTER) {
    const dim3 blocks((unsigned)((g.outputs + 32 * V - 1) / (32 * V)), (unsigned)g.splits);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1, attr[0].val.clusterDim.y = (unsigned)g.splits, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = blocks, cfg.blockDim = dim3(256), cfg.stream = stream, cfg.attrs = attr, cfg.numAttrs = 1;
    cudaLaunchKernelEx(&cfg, reduce_columns_cluster_kernel<T, V>, g);
    grid[0] = (int32_t)blocks.x, grid[1] = (int32_t)blocks.y;
  } else {
    const int blocks = (int)(g.outputs < cap ? g.outputs : cap);
    reduce_strided_kernel<T><<<blocks, 256, 0, stream>>>(g);
    grid[0] = blocks;
  }
  *block = 256;
  if (g.splits > 1 && kind != REDUCE_COLUMNS_CLUSTER) {
    const int64_t per = kind == REDUCE_COLUMNS ? FOLD_COLS : FOLD_WARPS;
    reduce_partials_kernel<<<(unsigned)((g.outputs + per - 1) / per), FOLD_WARPS * 32, 0, stream>>>(
        g, kind == REDUCE_COLUMNS);
  }
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_REDUCE_REDUCE_GPU_CUH_ */
