/*
 * The sm_80-class GEMM: mma.sync fed by a cp.async multistage pipeline (any SM >= 80; on the
 * H100 it serves what the Hopper kernels do not, e.g. when pinned, and it is the A100 path).
 *
 * A CTA of 8 warps computes a 128 x 128 tile of D; each warp 64 x 32 (2 x 4 warps). K moves
 * in steps of 64 bytes of each row (32 f16 / bf16 elements, 16 f32): STAGES of them are in
 * flight as cp.async copies straight from global to shared memory (16 bytes a copy, the tail
 * of a row or of the matrix zero-filled by the copy's source size), one barrier a step:
 *
 *   prologue: copy steps 0 .. STAGES-2, one commit group each
 *   step kt:  wait until step kt's group has landed; barrier (every warp is past step kt-1,
 *             whose stage the next copy reuses); copy step kt + STAGES - 1; multiply step kt.
 *
 * A is K-major ([M, K] rows, 16-byte aligned). B is K-major (B^T rows, as nn.Linear's weight)
 * or N-major ([K, N] rows). Shared rows are padded by 16 bytes so that ldmatrix's 8 row
 * addresses fall in distinct bank groups.
 *   f16 / bf16: mma.sync m16n8k16, fragments by ldmatrix (.trans for an N-major B).
 *   f32 (allowed tf32 only): mma.sync m16n8k8 tf32; fragments by ldmatrix (32-bit elements
 *     as pairs of 16-bit ones: the same byte layout) or, for an N-major B, by 32-bit loads;
 *     each element rounded to tf32 (cvt.rna) before the multiply.
 * The epilogue is the element one of the portable kernels (gemm_store_pair).
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_PIPELINED_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_PIPELINED_CUH_

#include "kernels/common/launch_status.h"
#include "kernels/gemm/gemm_shape.h"
#include "kernels/gemm/gemm_tiled.cuh"

namespace opsi {
namespace cpk {

enum {
  BM = OPSI_GEMM_CP_BM,
  BN = OPSI_GEMM_CP_BN,
  STAGES = OPSI_GEMM_CP_STAGES,
  THREADS = OPSI_GEMM_CP_THREADS,
  ROW_BYTES = OPSI_GEMM_CP_ROW_BYTES,
  PAD_BYTES = OPSI_GEMM_CP_PAD_BYTES
};

template <typename T> struct cfg {
  static constexpr int VEC = 16 / sizeof(T);          /* elements a 16-byte copy */
  static constexpr int KT = ROW_BYTES / sizeof(T);    /* K elements a step */
  static constexpr int KP = KT + PAD_BYTES / sizeof(T); /* pitch of K-major rows */
  static constexpr int NP = BN + 8;                    /* pitch of an N-major B's rows */
  static constexpr int A_BYTES = BM * KP * (int)sizeof(T);
  static constexpr int B_BYTES = BN * KP * (int)sizeof(T); /* >= KT * NP * sizeof(T) */
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES;
  static_assert(KT * NP * (int)sizeof(T) <= B_BYTES, "an N-major B tile fits its stage");
  static_assert(SMEM_BYTES == OPSI_GEMM_CP_SMEM, "the rows' shared memory (gemm_shape.h)");
};

/* Copies a ROWS x COLS tile at (row0, col0) of src (element (r, c) at r * s_row + c) into sm
 * (rows of PITCH elements); past `rows` or `cols` it is zero-filled. A and a K-major B are
 * copied as [rows, K] tiles, an N-major B as a [K, N] tile. */
template <typename T, int ROWS, int COLS, int PITCH>
__device__ __forceinline__ void copy_tile(T *sm, const T *src, int64_t s_row, int64_t rows, int64_t cols,
                                          int64_t row0, int64_t col0) {
  constexpr int VEC = cfg<T>::VEC, PER_ROW = COLS / VEC, COPIES = ROWS * PER_ROW / THREADS;
#pragma unroll
  for (int e = 0; e < COPIES; ++e) {
    const int idx = threadIdx.x + e * THREADS, r = idx / PER_ROW, c = (idx % PER_ROW) * VEC;
    const int64_t gr = row0 + r, gc = col0 + c;
    const int bytes = gr < rows ? valid_bytes(gc, cols, sizeof(T)) : 0;
    cp_async16(sm + r * PITCH + c, bytes > 0 ? src + gr * s_row + gc : src, bytes);
  }
}

__device__ __forceinline__ uint32_t to_tf32(uint32_t x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
  return r;
}

/* The warp's 64 x 32 block of one K step of the stage (ks: 16-bit k16 or tf32 k8 steps; both
 * are 32 bytes of each row, so the fragment addresses are the same in bytes). */
template <typename T, bool B_MN>
__device__ __forceinline__ void multiply_step(const T *sa, const T *sb, int ks, int wm, int wn, int lane,
                                              float (&acc)[4][4][4]) {
  using C = cfg<T>;
  constexpr int E16 = 16 / sizeof(T); /* elements in 16 bytes */
  uint32_t af[4][4], bf[4][2];
#pragma unroll
  for (int mi = 0; mi < 4; ++mi) {
    ldmatrix_x4(af[mi], &sa[(wm * 64 + mi * 16 + lane % 16) * C::KP + ks * 2 * E16 + (lane / 16) * E16]);
  }
  if constexpr (!B_MN) {
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      uint32_t r[4];
      ldmatrix_x4(r, &sb[(wn * 32 + nj * 16 + (lane / 16) * 8 + lane % 8) * C::KP + ks * 2 * E16 + ((lane / 8) % 2) * E16]);
      bf[nj * 2][0] = r[0], bf[nj * 2][1] = r[1], bf[nj * 2 + 1][0] = r[2], bf[nj * 2 + 1][1] = r[3];
    }
  } else if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int nj = 0; nj < 2; ++nj) {
      uint32_t r[4];
      ldmatrix_x4_trans(r, &sb[(ks * 16 + ((lane / 8) % 2) * 8 + lane % 8) * C::NP + wn * 32 + nj * 16 + (lane / 16) * 8]);
      bf[nj * 2][0] = r[0], bf[nj * 2][1] = r[1], bf[nj * 2 + 1][0] = r[2], bf[nj * 2 + 1][1] = r[3];
    }
  } else {
    const uint32_t *w = reinterpret_cast<const uint32_t *>(sb);
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) {
      const int col = wn * 32 + ni * 8 + lane / 4, k = ks * 8 + lane % 4;
      bf[ni][0] = w[k * C::NP + col], bf[ni][1] = w[(k + 4) * C::NP + col];
    }
  }
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) af[i][j] = to_tf32(af[i][j]);
      bf[i][0] = to_tf32(bf[i][0]), bf[i][1] = to_tf32(bf[i][1]);
    }
  }
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni) mma_name<T>::mma(acc[mi][ni], af[mi], bf[ni]);
}

/* Grid: (tiles_m, tiles_n, batch); dynamic shared memory cfg<T>::SMEM_BYTES. */
template <typename T, bool B_MN>
__global__ void __launch_bounds__(THREADS) gemm_cp_kernel(const gemm_geom g) {
  using C = cfg<T>;
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t bt = blockIdx.z;
  const int64_t m0 = (int64_t)blockIdx.x * BM, n0 = (int64_t)blockIdx.y * BN;
  const T *a = static_cast<const T *>(g.a.p) + bt * g.a.sb;
  const T *b = static_cast<const T *>(g.b.p) + bt * g.b.sb;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / 4, wn = warp % 4;
  const int ktiles = (int)((g.k + C::KT - 1) / C::KT);

  auto copy_step = [&](int kt) {
    T *sa = reinterpret_cast<T *>(smem + (kt % STAGES) * C::STAGE_BYTES);
    T *sb = reinterpret_cast<T *>(smem + (kt % STAGES) * C::STAGE_BYTES + C::A_BYTES);
    const int64_t k0 = (int64_t)kt * C::KT;
    copy_tile<T, BM, C::KT, C::KP>(sa, a, g.a.sr, g.m, g.k, m0, k0);
    if constexpr (B_MN) copy_tile<T, C::KT, BN, C::NP>(sb, b, g.b.sr, g.k, g.n, k0, n0);
    else copy_tile<T, BN, C::KT, C::KP>(sb, b, g.b.sc, g.n, g.k, n0, k0);
  };

  float acc[4][4][4] = {};

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < ktiles) copy_step(s);
    cp_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_wait<STAGES - 2>();
    __syncthreads();
    if (kt + STAGES - 1 < ktiles) copy_step(kt + STAGES - 1);
    cp_commit();
    const T *sa = reinterpret_cast<const T *>(smem + (kt % STAGES) * C::STAGE_BYTES);
    const T *sb = reinterpret_cast<const T *>(smem + (kt % STAGES) * C::STAGE_BYTES + C::A_BYTES);
#pragma unroll
    for (int ks = 0; ks < C::KT / mma_name<T>::K; ++ks) multiply_step<T, B_MN>(sa, sb, ks, wm, wn, lane, acc);
  }
  cp_wait<0>();
  store_warp_tiles(g, bt, m0, n0, wm, wn, lane, acc);
}

/* Host side: one launch over (tiles_m, tiles_n, batch); the dispatcher's row bounds N and
 * batch to the grid's limits. */
template <typename T, bool B_MN>
cudaError_t launch_gemm_cp(const gemm_geom &g, cudaStream_t stream, int32_t *grid, int32_t *block,
                           int32_t *smem_bytes) {
  const auto kernel = gemm_cp_kernel<T, B_MN>;
  const cudaError_t e = smem_optin(kernel, cfg<T>::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  const dim3 gr((unsigned)((g.m + BM - 1) / BM), (unsigned)((g.n + BN - 1) / BN), (unsigned)g.batch);
  kernel<<<gr, THREADS, cfg<T>::SMEM_BYTES, stream>>>(g);
  grid[0] = (int32_t)gr.x, grid[1] = (int32_t)gr.y, grid[2] = (int32_t)gr.z;
  block[0] = THREADS, block[1] = block[2] = 1;
  *smem_bytes = cfg<T>::SMEM_BYTES;
  return cudaGetLastError();
}

}  // namespace cpk
}  // namespace opsi

#define OPSI_GEMM_CP_INSTANTIATE(T, B_MN)                                                               \
  template cudaError_t opsi::cpk::launch_gemm_cp<T, B_MN>(const opsi::gemm_geom &, cudaStream_t, int32_t *, \
                                                          int32_t *, int32_t *);

#endif /* OPSLIB_KERNELS_GEMM_GEMM_PIPELINED_CUH_ */
