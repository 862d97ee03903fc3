/*
 * The sm_80-class attention forward (every SM >= 80): the FlashAttention-2 structure.
 *
 * A block owns BM query rows of one (batch, head); each warp 16 of them. Key / value tiles
 * of BN rows (64; 32 for DP 256) stream through shared memory (K and V double-buffered,
 * cp.async copies of 16 bytes with zero-filled tails; element loads when the operands are not
 * 16-byte aligned), each tile's rows XOR-swizzled in 16-byte chunks (ldmatrix conflict-free):
 *
 *   copy Q and K[t0]
 *   tile t:  copy V[t]; wait for K[t]; barrier
 *            S = Q K[t]^T (mma.sync m16n8k16, Q and K fragments by ldmatrix); copy K[t + 1]
 *            mask (only tiles that cross a sequence end, a window edge, or with a mask);
 *            online softmax in registers (exp2, the scale folded into log2(e));
 *            wait for V[t]; barrier; O += P V[t] (P from the score registers, V by
 *            ldmatrix.trans)
 *   O / sum, staged through the warp's own Q rows, stored 16 bytes a thread; LSE.
 *
 * DP is the head dim padded to 64, 128 or 256 (q's and v's head dims up to DP; the padding
 * is zero-filled and its mma steps skipped). Blocks take query tiles last first (the most
 * keys under a causal mask start first). Keys a block cannot see (causal, window) are
 * never loaded; a query that sees no key gets O = 0 and LSE = -inf.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_MMA_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_MMA_CUH_

#include "kernels/common/launch_status.h"
#include "kernels/common/mma_sync.cuh"
#include "kernels/flash/sdpa_gpu.cuh"
#include "kernels/flash/sdpa_mma_shape.h"

namespace opsi {
namespace fa2 {

/* The shape a head dim runs: sdpa_mma_shape.h (the capability rows state the same numbers). */
template <int DP> struct shape_of;
#define OPSI_SDPA_MMA_SHAPE(D)                                                                             \
  template <> struct shape_of<D> {                                                                          \
    static constexpr int BM = OPSI_SDPA_MMA_D##D##_BM, BN = OPSI_SDPA_MMA_D##D##_BN;                        \
    static constexpr int WARPS = OPSI_SDPA_MMA_D##D##_WARPS;                                                \
  };
OPSI_SDPA_MMA_SHAPE(64)
OPSI_SDPA_MMA_SHAPE(128)
OPSI_SDPA_MMA_SHAPE(256)
#undef OPSI_SDPA_MMA_SHAPE

template <typename T, int DP> struct cfg {
  static constexpr int BM = shape_of<DP>::BM;
  static constexpr int BN = shape_of<DP>::BN;
  static constexpr int WARPS = shape_of<DP>::WARPS;
  static constexpr int THREADS = WARPS * 32;
  static constexpr int SMEM_BYTES = OPSI_SDPA_MMA_SMEM(BM, BN, DP);
  static_assert(WARPS == BM / 16, "16 query rows a warp");
  static_assert(sizeof(T) == 2, "16-bit operands");
  static_assert(SMEM_BYTES <= 99 * 1024, "fits a block's shared memory on sm_86 / sm_89");
};

/* Element (r, c) of a shared tile of DP-element rows: the 16-byte chunks of row r are
 * XOR-swizzled by r % 8, so that ldmatrix's 8 row addresses (one chunk column) fall in 8
 * distinct bank groups without padding. */
template <int DP> __device__ __forceinline__ int swz(int r, int c) {
  return r * DP + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}

/* Rows [row0, row0 + ROWS) x DP columns of one head into a swizzled shared tile; rows past
 * `rows` and columns past `cols` read as zero. */
template <typename T, int ROWS, int DP, int THREADS>
__device__ __forceinline__ void load_rows(T *sm, const T *src, int64_t s_row, int64_t s_col, int rows, int cols,
                                          int row0, bool aligned) {
  if (aligned) {
    constexpr int PER_ROW = DP / 8, COPIES = ROWS * PER_ROW / THREADS;
#pragma unroll
    for (int e = 0; e < COPIES; ++e) {
      const int idx = threadIdx.x + e * THREADS, r = idx / PER_ROW, c = (idx % PER_ROW) * 8;
      const int bytes = row0 + r < rows ? valid_bytes(c, cols, sizeof(T)) : 0;
      cp_async16(sm + swz<DP>(r, c), bytes > 0 ? src + (int64_t)(row0 + r) * s_row + c : src, bytes);
    }
  } else {
#pragma unroll 4
    for (int idx = threadIdx.x; idx < ROWS * DP; idx += THREADS) {
      const int r = idx / DP, c = idx % DP;
      sm[swz<DP>(r, c)] = row0 + r < rows && c < cols ? src[(int64_t)(row0 + r) * s_row + c * s_col] : from_f<T>(0.0f);
    }
  }
}

/* The A fragments of a warp's own 16 rows of a swizzled tile (rows 16 warp ..), k16 step kk. */
template <int DP, typename T> __device__ __forceinline__ auto own_rows_frag(const T *tile, int warp, int lane) {
  return [=](int kk, uint32_t(&a)[4]) {
    ldmatrix_x4(a, &tile[swz<DP>(warp * 16 + lane % 16, kk * 16 + (lane / 16) * 8)]);
  };
}

/* S = Q K^T for one warp's 16 query rows over NK keys: qfrag(kk, qa) gives the warp's Q
 * fragment of k16 step kk; the keys are rows k_row0 .. k_row0 + NK - 1 of the swizzled K tile
 * kb; the first kd k16 steps are not head-dim padding (FULL: kd is DP / 16, and the steps are
 * one straight run the compiler may interleave). sc in the m16n8 accumulator layout. KS k16
 * steps from kk0 (a part of the head dim: the sum over those columns alone). */
template <typename T, int DP, int NK, bool FULL = false, int KS = DP / 16, typename QFrag>
__device__ __forceinline__ void warp_qk(float (&sc)[NK / 8][4], QFrag &&qfrag, const T *kb, int k_row0, int kd,
                                        int lane, int kk0 = 0) {
#pragma unroll
  for (int n = 0; n < NK / 8; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const int kk = kk0 + ks;
    if (!FULL && kk >= kd) break;
    uint32_t qa[4];
    qfrag(kk, qa);
#pragma unroll
    for (int nj = 0; nj < NK / 16; ++nj) {
      uint32_t r[4];
      ldmatrix_x4(r, &kb[swz<DP>(k_row0 + nj * 16 + (lane / 16) * 8 + lane % 8, kk * 16 + ((lane / 8) % 2) * 8)]);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_name<T>::mma(sc[2 * nj], qa, b0);
      mma_name<T>::mma(sc[2 * nj + 1], qa, b1);
    }
  }
}

/* P's A fragment of k16 step kt: the probabilities of keys 16 kt .. 16 kt + 15 (two m16n8
 * score fragments) rounded to T. */
template <typename T, int NB>
__device__ __forceinline__ void p_frag(const float (&sc)[NB][4], int kt, uint32_t (&pa)[4]) {
  pa[0] = pack2<T>(sc[2 * kt][0], sc[2 * kt][1]), pa[1] = pack2<T>(sc[2 * kt][2], sc[2 * kt][3]);
  pa[2] = pack2<T>(sc[2 * kt + 1][0], sc[2 * kt + 1][1]), pa[3] = pack2<T>(sc[2 * kt + 1][2], sc[2 * kt + 1][3]);
}

/* O += P V for one warp: P is the probabilities in sc (the score fragments of each 16 keys
 * are P's A fragment) of keys v_row0 .. v_row0 + NK - 1, rows of the swizzled V tile vb; the
 * first kdv k16 steps of Dv are not padding (FULL: kdv is DP / 16). o holds CW columns of the
 * output from column 16 dj0 (CW < DP: a part of them). */
template <typename T, int DP, int NK, bool FULL = false, int CW = DP>
__device__ __forceinline__ void warp_pv(float (&o)[CW / 8][4], const float (&sc)[NK / 8][4], const T *vb, int v_row0,
                                        int kdv, int lane, int dj0 = 0) {
#pragma unroll
  for (int kt = 0; kt < NK / 16; ++kt) {
    uint32_t pa[4];
    p_frag<T>(sc, kt, pa);
#pragma unroll
    for (int dj = 0; dj < CW / 16; ++dj) {
      if (!FULL && dj0 + dj >= kdv) break;
      uint32_t r[4];
      ldmatrix_x4_trans(r, &vb[swz<DP>(v_row0 + kt * 16 + ((lane / 8) % 2) * 8 + lane % 8,
                                       (dj0 + dj) * 16 + (lane / 16) * 8)]);
      const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_name<T>::mma(o[2 * dj], pa, b0);
      mma_name<T>::mma(o[2 * dj + 1], pa, b1);
    }
  }
}

/* A warp's 16 accumulator rows (m16n8 layout; the thread's two rows times mul[0] and
 * mul[1]) out to rows 0 .. rows - 1 (rows <= 16) of dst (row stride s_row, column stride
 * s_col), columns 0 .. cols - 1: staged as T through the warp's own 16 rows of a swizzled tile
 * (`so`, whose columns c0 .. c0 + CW - 1 no other warp reads), then 16 bytes a thread where
 * the rows are aligned. acc holds CW columns from column c0 (CW < DP: a part of the rows). */
template <typename T, int DP, int CW = DP>
__device__ __forceinline__ void warp_store_rows(T *so, const float (&acc)[CW / 8][4], const float (&mul)[2], T *dst,
                                                int64_t s_row, int64_t s_col, int rows, int cols, bool aligned,
                                                int lane, int c0 = 0) {
  __syncwarp();
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = lane / 4 + hr * 8;
#pragma unroll
    for (int n = 0; n < CW / 8; ++n) {
      *reinterpret_cast<uint32_t *>(&so[swz<DP>(r, c0 + n * 8 + (lane % 4) * 2)]) =
          pack2<T>(acc[n][2 * hr] * mul[hr], acc[n][2 * hr + 1] * mul[hr]);
    }
  }
  __syncwarp();
  const int c_end = min(cols, c0 + CW);
  if (aligned) {
    for (int idx = lane; idx < 16 * (CW / 8); idx += 32) {
      const int r = idx / (CW / 8), c = c0 + (idx % (CW / 8)) * 8;
      if (r >= rows || c >= c_end) continue;
      T *p = dst + (int64_t)r * s_row + c;
      if (c + 8 <= c_end) {
        *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(&so[swz<DP>(r, c)]);
      } else {
        for (int e = 0; e < c_end - c; ++e) p[e] = so[swz<DP>(r, c + e)];
      }
    }
  } else {
    const int w = c_end - c0;
    for (int idx = lane; idx < 16 * w; idx += 32) {
      const int r = idx / w, c = c0 + idx % w;
      if (r < rows) dst[(int64_t)r * s_row + c * s_col] = so[swz<DP>(r, c)];
    }
  }
}

template <typename T, int DP>
__global__ void __launch_bounds__(cfg<T, DP>::THREADS) sdpa_mma_kernel(const sdpa_geom g) {
  using C = cfg<T, DP>;
  constexpr int BM = C::BM, BN = C::BN, THREADS = C::THREADS;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sq = reinterpret_cast<T *>(smem_raw);
  T *sk = sq + BM * DP;    /* 2 x BN rows */
  T *sv = sk + 2 * BN * DP; /* 2 x BN rows */

  const int b = blockIdx.z, h = blockIdx.y, hk = h / g.group;
  const sdpa_seq s = sdpa_sequence(g, b);
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;
  if (m0 >= s.sq) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int i_lo = m0, i_hi = min(m0 + BM, s.sq) - 1;
  int t_begin, t_end;
  sdpa_key_tiles(g, s, i_lo, i_hi, BN, &t_begin, &t_end);

  const T *qp = sdpa_head_rows<T>(g.q, b, s.q0, h);
  const T *kp = sdpa_head_rows<T>(g.k, b, s.k0, hk), *vp = sdpa_head_rows<T>(g.v, b, s.k0, hk);
  const bool aligned = g.aligned != 0;

  load_rows<T, BM, DP, THREADS>(sq, qp, g.q.ss, g.q.sd, s.sq, g.d, m0, aligned);
  if (t_begin < t_end) load_rows<T, BN, DP, THREADS>(sk, kp, g.k.ss, g.k.sd, s.sk, g.d, t_begin * BN, aligned);
  cp_commit();

  const int kd = (g.d + 15) / 16, kdv = (g.dv + 15) / 16; /* mma k16 steps that are not padding */
  float o[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  const int r_in = warp * 16 + lane / 4; /* this thread's rows: r_in and r_in + 8 of the tile */

  for (int t = t_begin; t < t_end; ++t) {
    const int buf = (t - t_begin) & 1;
    T *kb = sk + buf * BN * DP, *vb = sv + buf * BN * DP;
    load_rows<T, BN, DP, THREADS>(vb, vp, g.v.ss, g.v.sd, s.sk, g.dv, t * BN, aligned);
    cp_commit();
    cp_wait<1>();
    __syncthreads();

    float sc[BN / 8][4];
    warp_qk<T, DP, BN>(sc, own_rows_frag<DP>(sq, warp, lane), kb, 0, kd, lane);
    if (t + 1 < t_end) {
      load_rows<T, BN, DP, THREADS>(sk + (buf ^ 1) * BN * DP, kp, g.k.ss, g.k.sd, s.sk, g.d, (t + 1) * BN,
                                    aligned);
    }
    cp_commit();

    /* scores -> probabilities (exp2f), O rescaled by the rows' new max */
    float rs[2];
    sdpa_online_softmax<true, false>(g, s, b, h, i_lo, i_hi, m0 + r_in, t * BN, lane, sc, row_max, row_sum, rs,
                                    [](float x) { return exp2f(x); });
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) o[n][0] *= rs[0], o[n][1] *= rs[0], o[n][2] *= rs[1], o[n][3] *= rs[1];

    cp_wait<1>();
    __syncthreads();
    warp_pv<T, DP, BN>(o, sc, vb, 0, kdv, lane); /* O += P V */
  }
  cp_wait<0>();
  __syncthreads(); /* every copy into Q's rows has landed (with no key tile, nothing waited yet) */

  /* O / sum through this warp's own Q rows (no other warp reads them) */
  float inv[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    inv[hr] = sdpa_finish_row(g, s, b, h, m0 + warp * 16 + lane / 4 + hr * 8, row_max[hr], row_sum[hr], lane);
  }
  T *op = static_cast<T *>(const_cast<void *>(g.o.p)) + b * g.o.sb + s.q0 * g.o.ss + h * g.o.sh;
  warp_store_rows<T, DP>(sq + warp * 16 * DP, o, inv, op + (int64_t)(m0 + warp * 16) * g.o.ss, g.o.ss, g.o.sd,
                         min(16, s.sq - (m0 + warp * 16)), g.dv, aligned, lane);
}

/* Host side: grid (query tiles, Hq, batch); the rows bound Hq and batch to the grid limits. */
template <typename T, int DP>
cudaError_t launch_sdpa_mma(const sdpa_geom &g, cudaStream_t stream, int32_t *grid, int32_t *block,
                            int32_t *smem_bytes) {
  using C = cfg<T, DP>;
  const auto kernel = sdpa_mma_kernel<T, DP>;
  const cudaError_t e = smem_optin(kernel, C::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  const dim3 gr((unsigned)((g.seqlen_q + C::BM - 1) / C::BM), (unsigned)g.heads_q, (unsigned)g.batch);
  kernel<<<gr, C::THREADS, C::SMEM_BYTES, stream>>>(g);
  grid[0] = (int32_t)gr.x, grid[1] = (int32_t)gr.y, grid[2] = (int32_t)gr.z;
  block[0] = C::THREADS, block[1] = block[2] = 1;
  *smem_bytes = C::SMEM_BYTES;
  return cudaGetLastError();
}

}  // namespace fa2
}  // namespace opsi

/* One instantiation (the kernel sources, sdpa_kernels.h's lists); `extern` before it declares it. */
#define OPSI_SDPA_MMA_TEMPLATE(T, DP)                                                                        \
  template cudaError_t opsi::fa2::launch_sdpa_mma<T, DP>(const opsi::sdpa_geom &, cudaStream_t, int32_t *, \
                                                         int32_t *, int32_t *);
#define OPSI_SDPA_MMA_INSTANTIATE(T, DP) OPSI_SDPA_MMA_TEMPLATE(T, DP)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_MMA_CUH_ */
