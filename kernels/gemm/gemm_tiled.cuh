/*
 * The portable GEMM kernels (sm_80 and later): any strides, any M, N, K, any alignment.
 *
 * Both stage a BM x BK tile of A and a BK x BN tile of B through registers into shared
 * memory, double-buffered (the next tile's global loads are in flight while the current one
 * is multiplied; one barrier per K step). Each operand is read in the order its memory runs:
 *   K-contiguous rows, 16-byte aligned: 16-byte vectors along K;
 *   M- (N-) contiguous:                 consecutive threads walk M (N), element loads;
 *   anything else:                      element loads, consecutive threads walk K.
 * Out-of-range elements read as zero; stores are bounded (gemm_store_pair).
 *
 *   gemm_mma (f16 / bf16): 128 x 128 x 32 tiles, 8 warps of 64 x 32, ldmatrix from padded
 *     K-major shared rows (conflict-free) and mma.sync m16n8k16 with f32 accumulators.
 *   gemm_ffma (f32, strict): 64 x 64 x 16 tiles, 256 threads of 4 x 4 outputs, f32 FMA.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_TILED_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_TILED_CUH_

#include "kernels/common/mma_sync.cuh"
#include "kernels/gemm/gemm_gpu.cuh"
#include "kernels/gemm/gemm_shape.h"

namespace opsi {

/* How an operand's tile is read: see the file comment. */
enum { READ_K_VEC = 0, READ_MN = 1, READ_K = 2 };

/* The read mode of a [rows, K] view whose element (r, k) is at r * s_r + k * s_k. */
inline int tile_read_mode(int64_t s_r, int64_t s_k, int64_t k, uintptr_t base, int64_t s_b, size_t elem) {
  const int64_t vec = 16 / (int64_t)elem;
  if ((s_k == 1 || k == 1) && s_r % vec == 0 && s_b % vec == 0 && base % 16 == 0) return READ_K_VEC;
  if (s_r == 1) return READ_MN;
  return READ_K;
}

/* One operand of a tile kernel, as a [rows, K] view of one batch entry: A is [M, K]; B is
 * read as B^T, [N, K]. */
template <typename T> struct tile_src {
  const T *p;
  int64_t s_r, s_k, rows, k;
  int mode;
};

/* ROWS x KT tile at (row0, k0) -> regs, per thread E = ROWS * KT / THREADS elements. */
template <typename T, int ROWS, int KT, int THREADS> struct tile_loader {
  static constexpr int E = ROWS * KT / THREADS;
  static constexpr int VEC = 16 / sizeof(T);
  static_assert(E % VEC == 0 || sizeof(T) == 4, "whole vectors a thread");
  T v[E];

  __device__ __forceinline__ void load(const tile_src<T> &s, int64_t row0, int64_t k0) {
    const int tid = threadIdx.x;
    if (s.mode == READ_K_VEC && E % VEC == 0) {
#pragma unroll
      for (int e = 0; e < E / VEC; ++e) {
        const int idx = tid + e * THREADS; /* vector index: KT / VEC vectors a row */
        const int r = idx / (KT / VEC), kc = (idx % (KT / VEC)) * VEC;
        const int64_t gr = row0 + r, gk = k0 + kc;
        if (gr < s.rows && gk + VEC <= s.k) {
          *reinterpret_cast<uint4 *>(&v[e * VEC]) = __ldg(reinterpret_cast<const uint4 *>(s.p + gr * s.s_r + gk));
        } else {
#pragma unroll
          for (int i = 0; i < VEC; ++i) {
            v[e * VEC + i] = gr < s.rows && gk + i < s.k ? s.p[gr * s.s_r + (gk + i) * s.s_k] : from_f<T>(0.0f);
          }
        }
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int idx = tid + e * THREADS;
        int r, kk;
        if (s.mode == READ_MN) r = idx % ROWS, kk = idx / ROWS;
        else r = idx / KT, kk = idx % KT;
        const int64_t gr = row0 + r, gk = k0 + kk;
        v[e] = gr < s.rows && gk < s.k ? s.p[gr * s.s_r + gk * s.s_k] : from_f<T>(0.0f);
      }
    }
  }

  /* regs -> shared tile sm[r * PITCH + k] */
  template <int PITCH> __device__ __forceinline__ void store(T *sm, int mode) const {
    const int tid = threadIdx.x;
    if (mode == READ_K_VEC && E % VEC == 0) {
#pragma unroll
      for (int e = 0; e < E / VEC; ++e) {
        const int idx = tid + e * THREADS;
        const int r = idx / (KT / VEC), kc = (idx % (KT / VEC)) * VEC;
        *reinterpret_cast<uint4 *>(sm + r * PITCH + kc) = *reinterpret_cast<const uint4 *>(&v[e * VEC]);
      }
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int idx = tid + e * THREADS;
        int r, kk;
        if (mode == READ_MN) r = idx % ROWS, kk = idx / ROWS;
        else r = idx / KT, kk = idx % KT;
        sm[r * PITCH + kk] = v[e];
      }
    }
  }
};

template <typename T>
__device__ __forceinline__ void tile_sources(const gemm_geom &g, int64_t bt, const int32_t (&modes)[2], tile_src<T> *a,
                                             tile_src<T> *b) {
  *a = {static_cast<const T *>(g.a.p) + bt * g.a.sb, g.a.sr, g.a.sc, g.m, g.k, modes[0]};
  *b = {static_cast<const T *>(g.b.p) + bt * g.b.sb, g.b.sc, g.b.sr, g.n, g.k, modes[1]};
}

/* The K loop both tile kernels share: A's BM x BK and B^T's BN x BK tile of K step kt are in
 * sa[kt & 1] / sb[kt & 1] (rows of PITCH elements) when multiply(sa_tile, sb_tile) runs, while
 * step kt + 1's global loads are in flight; one barrier a step. */
template <typename T, int BM, int BN, int BK, int PITCH, int THREADS, typename Multiply>
__device__ __forceinline__ void staged_k_loop(const gemm_geom &g, const tile_src<T> &A, const tile_src<T> &B,
                                              int64_t m0, int64_t n0, T (*sa)[BM * PITCH], T (*sb)[BN * PITCH],
                                              Multiply multiply) {
  tile_loader<T, BM, BK, THREADS> la;
  tile_loader<T, BN, BK, THREADS> lb;
  const int ktiles = (int)((g.k + BK - 1) / BK);
  if (ktiles > 0) {
    la.load(A, m0, 0);
    lb.load(B, n0, 0);
    la.template store<PITCH>(sa[0], A.mode);
    lb.template store<PITCH>(sb[0], B.mode);
  }
  __syncthreads();
  for (int kt = 0; kt < ktiles; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < ktiles) {
      la.load(A, m0, (int64_t)(kt + 1) * BK);
      lb.load(B, n0, (int64_t)(kt + 1) * BK);
    }
    multiply(sa[cur], sb[cur]);
    if (kt + 1 < ktiles) {
      la.template store<PITCH>(sa[cur ^ 1], A.mode);
      lb.template store<PITCH>(sb[cur ^ 1], B.mode);
    }
    __syncthreads();
  }
}

/* ---- f16 / bf16: mma.sync ---- */

namespace mma {
enum { BM = OPSI_GEMM_MMA_BM, BN = OPSI_GEMM_MMA_BN, BK = OPSI_GEMM_MMA_BK, PITCH = BK + 8, THREADS = OPSI_GEMM_MMA_THREADS };
static_assert(2 * (BM + BN) * PITCH * 2 == OPSI_GEMM_MMA_SMEM, "the rows' shared memory (gemm_shape.h)");
}

/* The epilogue of the mma.sync kernels' 2 x 4 warps of 64 x 32 outputs (m16n8 fragments):
 * warp (wm, wn) holds rows m0 + wm * 64 + mi * 16 + lane / 4 (+ 8) and columns n0 + wn * 32
 * + ni * 8 + (lane % 4) * 2 (+ 1). */
__device__ __forceinline__ void store_warp_tiles(const gemm_geom &g, int64_t bt, int64_t m0, int64_t n0, int wm,
                                                 int wn, int lane, const float (&acc)[4][4][4]) {
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t i = m0 + wm * 64 + mi * 16 + lane / 4 + h * 8;
        const int64_t j = n0 + wn * 32 + ni * 8 + (lane % 4) * 2;
        gemm_store_pair(g, bt, i, j, acc[mi][ni][h * 2], acc[mi][ni][h * 2 + 1]);
      }
}

/* Grid: (tiles_m, tiles_n, batch). */
template <typename T>
__global__ void __launch_bounds__(mma::THREADS) gemm_mma_kernel(const gemm_geom g, const int32_t modes_a,
                                                                 const int32_t modes_b) {
  using namespace mma;
  __shared__ __align__(16) T sa[2][BM * PITCH];
  __shared__ __align__(16) T sb[2][BN * PITCH];
  const int64_t bt = blockIdx.z;
  const int64_t m0 = (int64_t)blockIdx.x * BM, n0 = (int64_t)blockIdx.y * BN;
  const int32_t modes[2] = {modes_a, modes_b};
  tile_src<T> A, B;
  tile_sources<T>(g, bt, modes, &A, &B);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4; /* warp tile: rows wm * 64, columns wn * 32 */

  float acc[4][4][4] = {};
  staged_k_loop<T, BM, BN, BK, PITCH, THREADS>(g, A, B, m0, n0, sa, sb, [&](const T *ta, const T *tb) {
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi) {
        ldmatrix_x4(af[mi], &ta[(wm * 64 + mi * 16 + lane % 16) * PITCH + ks * 16 + (lane / 16) * 8]);
      }
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        uint32_t r[4];
        ldmatrix_x4(r, &tb[(wn * 32 + nj * 16 + (lane / 16) * 8 + lane % 8) * PITCH + ks * 16 +
                           ((lane / 8) % 2) * 8]);
        bf[nj * 2][0] = r[0], bf[nj * 2][1] = r[1], bf[nj * 2 + 1][0] = r[2], bf[nj * 2 + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) mma_name<T>::mma(acc[mi][ni], af[mi], bf[ni]);
    }
  });
  store_warp_tiles(g, bt, m0, n0, wm, wn, lane, acc);
}

/* ---- f32: strict FFMA ---- */

namespace ffma {
enum { BM = OPSI_GEMM_FFMA_BM, BN = OPSI_GEMM_FFMA_BN, BK = OPSI_GEMM_FFMA_BK, PITCH = BK + 1, THREADS = OPSI_GEMM_FFMA_THREADS };
static_assert(2 * (BM + BN) * PITCH * 4 == OPSI_GEMM_FFMA_SMEM, "the rows' shared memory (gemm_shape.h)");
}

/* Grid: (tiles_m, tiles_n, batch). Thread (ty, tx) of 16 x 16 owns rows ty + 16 r, columns
 * tx + 16 c (r, c < 4): shared reads broadcast along a warp's rows and stride 1 along its
 * columns. */
template <typename T>
__global__ void __launch_bounds__(ffma::THREADS) gemm_ffma_kernel(const gemm_geom g, const int32_t modes_a,
                                                                  const int32_t modes_b) {
  static_assert(sizeof(T) == 4, "the FFMA kernel is the f32 one");
  using namespace ffma;
  __shared__ T sa[2][BM * PITCH];
  __shared__ T sb[2][BN * PITCH];
  const int64_t bt = blockIdx.z;
  const int64_t m0 = (int64_t)blockIdx.x * BM, n0 = (int64_t)blockIdx.y * BN;
  const int32_t modes[2] = {modes_a == READ_K_VEC ? READ_K : modes_a, modes_b == READ_K_VEC ? READ_K : modes_b};
  tile_src<T> A, B;
  tile_sources<T>(g, bt, modes, &A, &B);
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float acc[4][4];
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.0f;

  staged_k_loop<T, BM, BN, BK, PITCH, THREADS>(g, A, B, m0, n0, sa, sb, [&](const T *ta, const T *tb) {
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float av[4], bv[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) av[r] = ta[(ty + 16 * r) * PITCH + kk];
#pragma unroll
      for (int c = 0; c < 4; ++c) bv[c] = tb[(tx + 16 * c) * PITCH + kk];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
    }
  });
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t i = m0 + ty + 16 * r, j = n0 + tx + 16 * c;
      if (i < g.m && j < g.n) {
        const float v = g.plain ? acc[r][c] : gemm_epilogue(g, bt, i, j, acc[r][c]);
        store_any(const_cast<void *>(g.d.p), view_off(g.d, bt, i, j), g.d_dtype, v);
      }
    }
}

/* Host side: one launch over (tiles_m, tiles_n, batch); the dispatcher's rows bound N and
 * batch to the grid's limits. */
template <typename T>
cudaError_t launch_gemm_tiled(const gemm_geom &g, int mode_a, int mode_b, cudaStream_t stream, int32_t *grid,
                              int32_t *block) {
  const bool f32 = sizeof(T) == 4;
  const int bm = f32 ? (int)ffma::BM : (int)mma::BM, bn = f32 ? (int)ffma::BN : (int)mma::BN;
  const dim3 gr((unsigned)((g.m + bm - 1) / bm), (unsigned)((g.n + bn - 1) / bn), (unsigned)g.batch);
  if constexpr (sizeof(T) == 4) {
    gemm_ffma_kernel<T><<<gr, ffma::THREADS, 0, stream>>>(g, mode_a, mode_b);
  } else {
    gemm_mma_kernel<T><<<gr, mma::THREADS, 0, stream>>>(g, mode_a, mode_b);
  }
  grid[0] = (int32_t)gr.x, grid[1] = (int32_t)gr.y, grid[2] = (int32_t)gr.z;
  block[0] = f32 ? (int)ffma::THREADS : (int)mma::THREADS, block[1] = block[2] = 1;
  return cudaGetLastError();
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMM_TILED_CUH_ */
