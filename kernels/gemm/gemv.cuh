/*
 * GEMV: a GEMM with one output column (N == 1: D[i] = A[i, :] . B[:, 0]) or one output row
 * (M == 1: D[j] = A[0, :] . B[:, j], B read as the rows of B^T). Either way a matrix with
 * unit-stride K rows times a vector: memory-bound, one pass over the matrix.
 *
 * A warp per matrix row (rows grid-strided over the warps): 16-byte loads along K, 4 in
 * flight a lane before the first is used, the vector read through L1 (every warp of the
 * block reads it); then a warp sum and the epilogue by lane 0. Rows that are not 16-byte
 * aligned, or a strided vector, take the element loop (still coalesced along K).
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMV_CUH_
#define OPSLIB_KERNELS_GEMM_GEMV_CUH_

#include "kernels/gemm/gemm_gpu.cuh"

namespace opsi {

enum { GEMV_THREADS = 256, GEMV_UNROLL = 4 };

/* The matrix-vector view of a call: rows x k matrix (row r at mat + r * s_row, K unit
 * stride), vector at vec + k * s_vec, output of row r at (i, j) = by_rows ? (r, 0) : (0, r).
 * Batch strides: mat_sb, vec_sb. vec16: rows and vector allow 16-byte loads. */
struct gemv_view {
  const void *mat, *vec;
  int64_t rows, s_row, s_vec, mat_sb, vec_sb;
  int32_t by_rows;
  int32_t vec16;
};

template <typename T>
__global__ void __launch_bounds__(GEMV_THREADS) gemv_kernel(const gemm_geom g, const gemv_view v) {
  const int lane = threadIdx.x % 32;
  const int64_t bt = blockIdx.y;
  const int64_t warps = (int64_t)gridDim.x * (GEMV_THREADS / 32);
  const T *mat = static_cast<const T *>(v.mat) + bt * v.mat_sb;
  const T *vec = static_cast<const T *>(v.vec) + bt * v.vec_sb;
  constexpr int VEC = 16 / sizeof(T);
  for (int64_t r = (int64_t)blockIdx.x * (GEMV_THREADS / 32) + threadIdx.x / 32; r < v.rows; r += warps) {
    const T *row = mat + r * v.s_row;
    float acc = 0.0f;
    int64_t k = 0;
    if (v.vec16) {
      constexpr int STEP = 32 * VEC;
      for (; k + GEMV_UNROLL * STEP <= g.k; k += GEMV_UNROLL * STEP) {
        vec16<T> m[GEMV_UNROLL], x[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u) m[u] = load16_stream(row + k + u * STEP + lane * VEC);
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u) x[u] = load16(vec + k + u * STEP + lane * VEC);
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; ++u)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc = fmaf(to_f(m[u].v[e]), to_f(x[u].v[e]), acc);
      }
      for (; k + STEP <= g.k; k += STEP) {
        const vec16<T> m = load16_stream(row + k + lane * VEC), x = load16(vec + k + lane * VEC);
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc = fmaf(to_f(m.v[e]), to_f(x.v[e]), acc);
      }
    }
    for (k += lane; k < g.k; k += 32) acc = fmaf(to_f(row[k]), to_f(vec[k * v.s_vec]), acc);
    acc = warp_sum(acc);
    if (lane == 0) {
      const int64_t i = v.by_rows ? r : 0, j = v.by_rows ? 0 : r;
      store_any(const_cast<void *>(g.d.p), view_off(g.d, bt, i, j), g.d_dtype, gemm_epilogue(g, bt, i, j, acc));
    }
  }
}

/* Host side: enough warps to keep every SM's memory pipe full, a row per warp at a time. */
template <typename T>
cudaError_t launch_gemv(const gemm_geom &g, const gemv_view &v, int sm_count, cudaStream_t stream, int32_t *grid,
                        int32_t *block) {
  constexpr int WARPS = GEMV_THREADS / 32;
  int64_t blocks = (v.rows + WARPS - 1) / WARPS;
  const int64_t cap = (int64_t)sm_count * 8;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  const dim3 gr((unsigned)blocks, (unsigned)g.batch, 1);
  gemv_kernel<T><<<gr, GEMV_THREADS, 0, stream>>>(g, v);
  grid[0] = (int32_t)gr.x, grid[1] = (int32_t)gr.y, grid[2] = 1;
  block[0] = GEMV_THREADS, block[1] = block[2] = 1;
  return cudaGetLastError();
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMV_CUH_ */
