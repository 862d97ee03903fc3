/*
 * The sm_80-class attention backward (every SM >= 80): three launches, no atomics, so the
 * gradients are bitwise the same from run to run.
 *
 *   dsum:  D = rowsum(dout * o) of every (query row, head), f32, into the workspace.
 *   dk/dv: a block owns BN keys of one (batch, KV head), a warp 16 of them as the rows of its
 *          mma tiles. For each query head of the group and each query tile of BM rows that
 *          sees those keys (Q, dout, their LSE and D one tile ahead through cp.async):
 *            S^T = K Q^T, P^T = exp2(S^T scale log2(e) - LSE log2(e))   (masked tiles only)
 *            dP^T = V dout^T, dS^T = P^T (dP^T - D)
 *            dV += P^T dout, dK += dS^T Q                              (registers, f32)
 *          then dK times the scale and dV stored once: a GQA group's sum stays in the block.
 *   dq:    a block owns BM query rows of one (batch, head), a warp 16. For each key tile it
 *          sees (K and V double-buffered): S = Q K^T, P, dP = dout V^T, dS = P (dP - D),
 *          dQ += dS K; then dQ times the scale.
 * P and dS enter the mma as T (f16 / bf16), as the forward's P does. Both passes recompute
 * P: seven products where a pass that adds dQ with atomics does five. Tiles are the forward's
 * swizzled rows (sdpa_mma.cuh): the products are its warp_qk / warp_pv with the operands'
 * roles chosen per product. A row whose LSE is -inf (it saw no key) and the rows past a
 * sequence's end take an LSE of +inf, so that their P is 0.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_CUH_

#include "kernels/common/launch_status.h"
#include "kernels/flash/sdpa_bwd_mma_shape.h"
#include "kernels/flash/sdpa_mma.cuh"

namespace opsi {
namespace fa2bwd {

using sdpa_bwd_geom = ::opsi_sdpa_bwd_geom;
using fa2::load_rows;
using fa2::swz;

/* ROWS: the keys (dK / dV pass) or query rows (dQ pass) a block holds in GROUPS groups of 16,
 * a warp a group or, where SPLIT is 2, a pair of warps each with CW of the DP columns
 * (sdpa_bwd_mma_shape.h); STEP: the rows of the tiles it streams (query tiles, key tiles).
 * Q_MIN_BLOCKS: the dQ blocks an SM whose registers the compiler keeps room for. */
template <int DP> struct cfg {
  static constexpr int ROWS = OPSI_SDPA_BWD_MMA_ROWS(DP), STEP = OPSI_SDPA_BWD_MMA_STEP(DP), GROUPS = ROWS / 16;
  static constexpr int SPLIT = OPSI_SDPA_BWD_MMA_SPLIT(DP), THREADS = OPSI_SDPA_BWD_MMA_THREADS(DP);
  static constexpr int CW = DP / SPLIT;
  static constexpr int KV_SMEM = OPSI_SDPA_BWD_MMA_KV_SMEM(DP), Q_SMEM = OPSI_SDPA_BWD_MMA_Q_SMEM(DP);
  static constexpr int Q_MIN_BLOCKS = SPLIT > 1 ? 2 : 3;
  static_assert(GROUPS * SPLIT == THREADS / 32 && STEP % 16 == 0 && ROWS % 16 == 0,
                "16 rows a warp (a warp pair); whole k16 steps");
  static_assert((GROUPS & (GROUPS - 1)) == 0, "a warp's partner differs in the bit above its group");
  static_assert(KV_SMEM <= 99 * 1024 && Q_SMEM <= 99 * 1024, "fits a block's shared memory on sm_86 / sm_89");
  /* warp w's 16 rows (16 rw ..) and its first column (c0) */
  static __device__ __forceinline__ int rw(int w) { return SPLIT > 1 ? w % GROUPS : w; }
  static __device__ __forceinline__ int c0(int w) { return SPLIT > 1 ? (w / GROUPS) * CW : 0; }
};

/* The LSE of query row i (within the sequence) as stored, +inf past the sequence's end; and an
 * LSE in the log2 domain, +inf for a row that saw no key (-inf), which makes its probabilities
 * 0. lse_log2 is the two in one. */
__device__ __forceinline__ float lse_raw(const sdpa_geom &g, const sdpa_seq &s, int b, int h, int i) {
  return i < s.sq ? g.lse[b * g.lb + h * g.lh + (s.q0 + i) * g.ls] : INFINITY;
}
__device__ __forceinline__ float lse_to_log2(float l) { return l == -INFINITY ? INFINITY : l * 1.4426950408889634f; }
__device__ __forceinline__ float lse_log2(const sdpa_geom &g, const sdpa_seq &s, int b, int h, int i) {
  return lse_to_log2(lse_raw(g, s, b, h, i));
}

__device__ __forceinline__ float dsum_at(const sdpa_bwd_geom &bg, const sdpa_seq &s, int b, int h, int i) {
  return i < s.sq ? bg.dsum[(b * bg.dsum_sb + s.q0 + i) * bg.f.heads_q + h] : 0.0f;
}

/* Scores of one tile -> probabilities, in place. The tile's accumulator rows are keys
 * (KEY_ROWS, the dK / dV pass) or queries; element (n, e) of the thread is row row0 + lane / 4
 * + (e / 2) 8, column col0 + 8 n + 2 (lane % 4) + e % 2. lse2(n, e): its query's LSE, log2.
 * `unmasked`: every (query, key) of the tile is visible and there is no mask tensor. */
template <bool KEY_ROWS, int NB, typename Lse>
__device__ __forceinline__ void probabilities(const sdpa_geom &g, const sdpa_seq &s, int b, int h, bool unmasked,
                                              int row0, int col0, int lane, float (&sc)[NB][4], Lse &&lse2) {
  if (unmasked) {
#pragma unroll
    for (int n = 0; n < NB; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[n][e] = exp2f(fmaf(sc[n][e], g.scale_log2, -lse2(n, e)));
    return;
  }
  const int64_t diag = (int64_t)s.sk - s.sq;
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = row0 + lane / 4 + (e / 2) * 8, c = col0 + n * 8 + (lane % 4) * 2 + e % 2;
      const int i = KEY_ROWS ? c : r, j = KEY_ROWS ? r : c;
      bool seen = i < s.sq && j < s.sk;
      if (g.window_left >= 0 && j < i + diag - g.window_left) seen = false;
      if (g.window_right >= 0 && j > i + diag + g.window_right) seen = false;
      float x = -INFINITY;
      if (seen) {
        x = sc[n][e] * g.scale_log2;
        if (g.mask != nullptr) {
          x += 1.4426950408889634f *
               load_any(g.mask, b * g.mb + h * g.mh + (int64_t)i * g.mi + (int64_t)j * g.mj, g.mask_dtype);
        }
      }
      sc[n][e] = exp2f(x - lse2(n, e));
    }
}

/* dS = P (dP - D), in dp; d(n, e): the element's query's D. */
template <int NB, typename Dsum>
__device__ __forceinline__ void score_grads(float (&dp)[NB][4], const float (&p)[NB][4], Dsum &&d) {
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[n][e] = p[n][e] * (dp[n][e] - d(n, e));
}

/* A warp a query row, grid-stride over x, for the launches around the main passes; grid y
 * cuts a row's heads into runs of bg.row_heads (one run of every head, or several where the rows
 * alone are too few to fill the SMs: row_heads), the block's run heads [h0, h1); `runs` false:
 * every head (a kernel launched only where the run is every head). The row's batch and
 * position within it (varlen: batch 0, the packed row). */
struct bwd_row {
  int64_t b, i;
  int h0, h1;
  __device__ __forceinline__ bwd_row(const sdpa_bwd_geom &bg, int64_t row, bool runs = true)
      : b(bg.dsum_sb > 0 ? row / bg.dsum_sb : 0), i(bg.dsum_sb > 0 ? row % bg.dsum_sb : row),
        h0(runs ? (int)blockIdx.y * bg.row_heads : 0),
        h1(runs ? min(bg.f.heads_q, h0 + bg.row_heads) : bg.f.heads_q) {}
};
/* Heads a warp step covers where a lane takes 8 columns of a head: DP / 8 lanes a head; 0 for a
 * head dim that is no power of two from 8 to 256 (the lanes of a head must be a power of two
 * that divides the warp). */
__host__ __device__ __forceinline__ int heads_a_step(int dp) { return dp >= 8 && dp <= 256 && (dp & (dp - 1)) == 0 ? 256 / dp : 0; }
/* Heads a warp step of D's fast path covers (aligned rows, dv a power of two), 0 where it
 * takes a head at a time: for its kernel and its launch's runs alike. */
__host__ __device__ __forceinline__ int dsum_heads_a_step(const sdpa_bwd_geom &bg) {
  return bg.aligned ? heads_a_step(bg.f.dv) : 0;
}
/* Steps of a walk over a row's heads whose loads are in flight at once (head_steps' U). */
enum { ROW_STEPS = 4 };
/* The fast paths' walk over heads [h0, h1) of a row: `per` heads a step (a lane takes head
 * h + lane / (32 / per)), U steps' loads (load(h, live) -> V) in flight before their uses
 * (use(h, live, const V &)); every lane takes every step, so that a use may sum over a head's
 * lanes. */
template <int U, typename Load, typename Use>
__device__ __forceinline__ void head_steps(int h0, int h1, int per, int lane, Load load, Use use) {
  using V = decltype(load(0, false));
  const int hl = lane / (32 / per);
  for (int h = h0; h < h1; h += U * per) {
    V x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) x[u] = load(h + u * per + hl, h + u * per + hl < h1);
#pragma unroll
    for (int u = 0; u < U; ++u) use(h + u * per + hl, h + u * per + hl < h1, x[u]);
  }
}
/* The sum over the lanes of a head (lanes: a power of two; xor partners stay within it). */
__device__ __forceinline__ float head_sum(float v, int lanes) {
  for (int o = lanes / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

/* D = rowsum(dout * o), a warp a query row's run of heads (bwd_row; !RUNS: every head, the
 * launch of calls whose rows fill the SMs, with the registers for 3 blocks an SM); the run's dQ
 * accumulators zeroed where the call has them, and the turn counters. Aligned rows whose dv is
 * a power of two: a lane reads 16 bytes of o and dout of one head a step, four steps' loads in
 * flight before their sums; else a head at a time, the lanes over its columns (16 bytes a lane
 * where the rows are aligned and dv is a multiple of 8). */
template <typename T, bool RUNS>
__global__ void __launch_bounds__(256, RUNS ? 2 : 3) sdpa_bwd_dsum_kernel(const sdpa_bwd_geom bg) {
  const sdpa_geom &g = bg.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;"); /* Hopper's main pass may launch (it waits) */
#endif
  constexpr int U = ROW_STEPS;
  const int lane = threadIdx.x % 32, heads = g.heads_q;
  const int per = dsum_heads_a_step(bg), lanes = per > 0 ? 32 / per : 32;
  for (int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32; row < bg.rows; row += (int64_t)gridDim.x * 8) {
    const bwd_row r(bg, row, RUNS);
    const T *po = static_cast<const T *>(g.o.p) + r.b * g.o.sb + r.i * g.o.ss;
    const T *pd = static_cast<const T *>(bg.dout.p) + r.b * bg.dout.sb + r.i * bg.dout.ss;
    float *drow = bg.dsum + row * heads;
    if (per > 0) {
      const int c = (lane % lanes) * 8;
      struct pair {
        vec16<T> o, d;
      };
      head_steps<U>(
          r.h0, r.h1, per, lane,
          [&](int h, bool live) {
            return live ? pair{load16(po + h * g.o.sh + c), load16(pd + h * bg.dout.sh + c)} : pair{};
          },
          [&](int h, bool live, const pair &x) {
            float acc = 0.0f;
#pragma unroll
            for (int e = 0; e < 8; ++e) acc = fmaf(to_f(x.o.v[e]), to_f(x.d.v[e]), acc);
            acc = head_sum(acc, lanes);
            if (live && c == 0) drow[h] = acc;
          });
    } else {
      for (int h = r.h0; h < r.h1; ++h) {
        float acc = 0.0f;
        if (bg.aligned && g.dv % 8 == 0) {
          for (int c = lane * 8; c < g.dv; c += 256) {
            const vec16<T> x = load16(po + h * g.o.sh + c), y = load16(pd + h * bg.dout.sh + c);
#pragma unroll
            for (int e = 0; e < 8; ++e) acc = fmaf(to_f(x.v[e]), to_f(y.v[e]), acc);
          }
        } else {
          for (int c = lane; c < g.dv; c += 32) {
            acc = fmaf(to_f(po[h * g.o.sh + c * g.o.sd]), to_f(pd[h * bg.dout.sh + c * bg.dout.sd]), acc);
          }
        }
        acc = warp_sum(acc);
        if (lane == 0) drow[h] = acc;
      }
    }
    if (bg.dq_acc != nullptr) { /* the run's heads of the row, contiguous; dq_cols a multiple of 4 */
      float4 *z = reinterpret_cast<float4 *>(bg.dq_acc + (row * heads + r.h0) * bg.dq_cols);
      for (int c = lane; c < (r.h1 - r.h0) * bg.dq_cols / 4; c += 32) z[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  const int64_t t0 = ((int64_t)blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = t0; i < bg.dq_turns; i += (int64_t)gridDim.x * gridDim.y * blockDim.x) bg.dq_turn[i] = 0;
}

/* The heads of a run (bwd_row) of the launches around the main passes: every head of a row
 * where the rows give each SM ROW_WARPS_AN_SM warps; else runs of `step` heads (the heads of a
 * warp's loads in flight) times the most doublings that still give as many (row, run) warps, or
 * one step. */
enum { ROW_WARPS_AN_SM = 48 };
inline int32_t row_heads(int64_t rows, int heads, int step, int sm_count) {
  const int64_t want = (int64_t)sm_count * ROW_WARPS_AN_SM;
  if (step < 1 || heads <= step || rows >= want || (heads + step - 1) / step > 65535) return heads > 0 ? heads : 1;
  int32_t run = step;
  while ((int64_t)run * 2 < heads && rows * ((heads + run * 2 - 1) / (run * 2)) >= want) run *= 2;
  return run;
}
/* bg for such a launch whose fast path covers `per` heads a warp step (0: none, a head at a
 * time): row_heads with a step of ROW_STEPS such steps, or of one head */
inline sdpa_bwd_geom in_runs(const sdpa_bwd_geom &bg, int per, int sm_count) {
  sdpa_bwd_geom kg = bg;
  kg.row_heads = row_heads(bg.rows, bg.f.heads_q, per > 0 ? ROW_STEPS * per : 1, sm_count);
  return kg;
}
/* The grid of those launches: x blocks of 8 warps over the rows, y the runs of a row's heads;
 * at most 16 blocks an SM. */
inline dim3 row_blocks(const sdpa_bwd_geom &bg, int sm_count) {
  const int64_t runs = (bg.f.heads_q + bg.row_heads - 1) / bg.row_heads;
  const int64_t want = (bg.rows + 7) / 8, cap = (int64_t)sm_count * 16 / runs;
  return dim3((unsigned)(want < cap ? want : cap > 0 ? cap : 1), (unsigned)runs);
}
template <typename T> void launch_dsum(const sdpa_bwd_geom &bg, int sm_count, cudaStream_t stream) {
  if (bg.rows <= 0 || bg.f.heads_q <= 0) return;
  const sdpa_bwd_geom kg = in_runs(bg, dsum_heads_a_step(bg), sm_count);
  if (kg.row_heads < bg.f.heads_q) sdpa_bwd_dsum_kernel<T, true><<<row_blocks(kg, sm_count), 256, 0, stream>>>(kg);
  else sdpa_bwd_dsum_kernel<T, false><<<row_blocks(kg, sm_count), 256, 0, stream>>>(kg);
}

/* With the columns split (SPLIT 2), a warp's part of S^T's or dP^T's sum over the head dim, x
 * (the m16n8 layout), plus its partner's (the warp with the same rows and the other columns:
 * warp ^ GROUPS), through xb (a float4 of each thread's, [warp][STEP / 8][lane]): both warps
 * then hold the same sums (each adds the other's part to its own: the two additions are one,
 * bitwise). The pair meets on named barrier 1 + its row group. */
template <int GROUPS, int NB>
__device__ __forceinline__ void pair_sum(float (&x)[NB][4], float4 *xb, int warp, int lane) {
  float4 *mine = xb + warp * NB * 32 + lane;
#pragma unroll
  for (int n = 0; n < NB; ++n) mine[n * 32] = make_float4(x[n][0], x[n][1], x[n][2], x[n][3]);
  asm volatile("bar.sync %0, 64;" ::"r"(1 + warp % GROUPS) : "memory");
  const float4 *theirs = xb + (warp ^ GROUPS) * NB * 32 + lane;
#pragma unroll
  for (int n = 0; n < NB; ++n) {
    const float4 v = theirs[n * 32];
    x[n][0] += v.x, x[n][1] += v.y, x[n][2] += v.z, x[n][3] += v.w;
  }
}

/* dK and dV of BN keys of one (batch, KV head): grid (key tiles, Hkv, batch). FULL: both head
 * dims are DP (no padding steps: the products' loops unroll whole). Warp w takes keys 16 (w %
 * GROUPS) .. and, where the columns are split, columns CW (w / GROUPS) .. of dK and dV. */
template <typename T, int DP, bool FULL>
__global__ void __launch_bounds__(cfg<DP>::THREADS) sdpa_bwd_dkdv_kernel(const sdpa_bwd_geom bg) {
  using C = cfg<DP>;
  constexpr int BM = C::STEP, BN = C::ROWS, THREADS = C::THREADS, CW = C::CW;
  const sdpa_geom &g = bg.f;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sk = reinterpret_cast<T *>(smem_raw);
  T *sv = sk + BN * DP;
  T *sq = sv + BN * DP;      /* 2 x BM rows */
  T *sdo = sq + 2 * BM * DP; /* 2 x BM rows */
  float *sl = reinterpret_cast<float *>(sdo + 2 * BM * DP); /* 2 x BM: LSE, log2 */
  float *sd = sl + 2 * BM;                                  /* 2 x BM: D */
  float4 *xs = reinterpret_cast<float4 *>(sd + 2 * BM);     /* SPLIT 2: S^T's and dP^T's partials */
  float4 *xd = xs + THREADS * (BM / 8);

  const int b = blockIdx.z, hk = blockIdx.y, n0 = blockIdx.x * BN;
  const sdpa_seq s = sdpa_sequence(g, b);
  if (n0 >= s.sk) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rw = C::rw(warp), c0 = C::c0(warp); /* my keys 16 rw .., my columns c0 .. c0 + CW - 1 */
  int t0, tiles;
  sdpa_query_tiles(g, s, n0, min(n0 + BN, s.sk) - 1, BM, &t0, &tiles);
  const int64_t total = (int64_t)tiles * g.group;
  const bool aligned = bg.aligned != 0;

  const T *kp = sdpa_head_rows<T>(g.k, b, s.k0, hk), *vp = sdpa_head_rows<T>(g.v, b, s.k0, hk);
  /* iteration it: query head hk group + it / tiles, query tile t0 + it % tiles */
  const auto load_tile = [&](int64_t it, int buf) {
    const int h = hk * g.group + (int)(it / tiles), m0 = (t0 + (int)(it % tiles)) * BM;
    const T *qp = sdpa_head_rows<T>(g.q, b, s.q0, h), *dp = sdpa_head_rows<T>(bg.dout, b, s.q0, h);
    load_rows<T, BM, DP, THREADS>(sq + buf * BM * DP, qp, g.q.ss, g.q.sd, s.sq, g.d, m0, aligned);
    load_rows<T, BM, DP, THREADS>(sdo + buf * BM * DP, dp, bg.dout.ss, bg.dout.sd, s.sq, g.dv, m0, aligned);
    if (threadIdx.x < BM) {
      sl[buf * BM + threadIdx.x] = lse_log2(g, s, b, h, m0 + threadIdx.x);
      sd[buf * BM + threadIdx.x] = dsum_at(bg, s, b, h, m0 + threadIdx.x);
    }
  };
  load_rows<T, BN, DP, THREADS>(sk, kp, g.k.ss, g.k.sd, s.sk, g.d, n0, aligned);
  load_rows<T, BN, DP, THREADS>(sv, vp, g.v.ss, g.v.sd, s.sk, g.dv, n0, aligned);
  if (total > 0) load_tile(0, 0);
  cp_commit();

  const int kd = (g.d + 15) / 16, kdv = (g.dv + 15) / 16; /* mma k16 steps that are not padding */
  float dk[CW / 8][4], dv[CW / 8][4];
#pragma unroll
  for (int n = 0; n < CW / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;
  const auto k_frag = fa2::own_rows_frag<DP>(sk, rw, lane), v_frag = fa2::own_rows_frag<DP>(sv, rw, lane);

  for (int64_t it = 0; it < total; ++it) {
    const int buf = (int)(it & 1), h = hk * g.group + (int)(it / tiles), m0 = (t0 + (int)(it % tiles)) * BM;
    cp_wait<0>();
    __syncthreads(); /* tile it has landed; every warp is done with tile it - 1's buffers */
    if (it + 1 < total) load_tile(it + 1, buf ^ 1);
    cp_commit();
    const T *qb = sq + buf * BM * DP, *ob = sdo + buf * BM * DP;
    const float *lb = sl + buf * BM, *db = sd + buf * BM;
    const auto col = [&](int n, int e) { return n * 8 + (lane % 4) * 2 + e % 2; };

    float p[BM / 8][4], ds[BM / 8][4];
    fa2::warp_qk<T, DP, BM, FULL, CW / 16>(p, k_frag, qb, 0, kd, lane, c0 / 16); /* S^T (my columns' part) */
    if constexpr (C::SPLIT > 1) pair_sum<C::GROUPS>(p, xs, warp, lane);
    const bool unmasked = sdpa_tile_unmasked(g, s, m0, min(m0 + BM, s.sq) - 1, n0, BN);
    probabilities<true>(g, s, b, h, unmasked, n0 + rw * 16, m0, lane, p,
                        [&](int n, int e) { return lb[col(n, e)]; });
    fa2::warp_qk<T, DP, BM, FULL, CW / 16>(ds, v_frag, ob, 0, kdv, lane, c0 / 16); /* dP^T */
    if constexpr (C::SPLIT > 1) pair_sum<C::GROUPS>(ds, xd, warp, lane);
    score_grads(ds, p, [&](int n, int e) { return db[col(n, e)]; });
    fa2::warp_pv<T, DP, BM, FULL, CW>(dv, p, ob, 0, kdv, lane, c0 / 16); /* dV += P^T dout */
    fa2::warp_pv<T, DP, BM, FULL, CW>(dk, ds, qb, 0, kd, lane, c0 / 16); /* dK += dS^T Q */
  }
  cp_wait<0>(); /* with no query tile, K and V's copies are still landing in the staging rows */
  __syncthreads();

  const int rows = min(16, s.sk - (n0 + rw * 16));
  const float ks[2] = {bg.scale, bg.scale}, one[2] = {1.0f, 1.0f};
  T *pk = static_cast<T *>(const_cast<void *>(bg.dk.p)) + b * bg.dk.sb + (s.k0 + n0 + rw * 16) * bg.dk.ss +
          hk * bg.dk.sh;
  T *pv = static_cast<T *>(const_cast<void *>(bg.dv.p)) + b * bg.dv.sb + (s.k0 + n0 + rw * 16) * bg.dv.ss +
          hk * bg.dv.sh;
  fa2::warp_store_rows<T, DP, CW>(sk + rw * 16 * DP, dk, ks, pk, bg.dk.ss, bg.dk.sd, rows, g.d, aligned, lane, c0);
  fa2::warp_store_rows<T, DP, CW>(sv + rw * 16 * DP, dv, one, pv, bg.dv.ss, bg.dv.sd, rows, g.dv, aligned, lane, c0);
}

/* dQ of BM query rows of one (batch, head): grid (query tiles, Hq, batch), the last tile
 * first (under a causal mask it sees the most keys). FULL as for the dK / dV pass. Warp w
 * takes query rows 16 (w % GROUPS) .. and, where the columns are split, columns CW (w / GROUPS)
 * .. of dQ. */
template <typename T, int DP, bool FULL>
__global__ void __launch_bounds__(cfg<DP>::THREADS, cfg<DP>::Q_MIN_BLOCKS) sdpa_bwd_dq_kernel(const sdpa_bwd_geom bg) {
  using C = cfg<DP>;
  constexpr int BM = C::ROWS, BN = C::STEP, THREADS = C::THREADS, CW = C::CW;
  const sdpa_geom &g = bg.f;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T *sq = reinterpret_cast<T *>(smem_raw);
  T *sdo = sq + BM * DP;
  T *sk = sdo + BM * DP;     /* 2 x BN rows */
  T *sv = sk + 2 * BN * DP;  /* 2 x BN rows */
  float4 *xs = reinterpret_cast<float4 *>(sv + 2 * BN * DP); /* SPLIT 2: S's and dP's partials */
  float4 *xd = xs + THREADS * (BN / 8);

  const int b = blockIdx.z, h = blockIdx.y, hk = h / g.group;
  const sdpa_seq s = sdpa_sequence(g, b);
  const int m0 = (gridDim.x - 1 - blockIdx.x) * BM;
  if (m0 >= s.sq) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rw = C::rw(warp), c0 = C::c0(warp); /* my rows 16 rw .., my columns c0 .. c0 + CW - 1 */
  const int i_lo = m0, i_hi = min(m0 + BM, s.sq) - 1;
  int t_begin, t_end;
  sdpa_key_tiles(g, s, i_lo, i_hi, BN, &t_begin, &t_end);
  const bool aligned = bg.aligned != 0;

  const T *qp = sdpa_head_rows<T>(g.q, b, s.q0, h), *dp = sdpa_head_rows<T>(bg.dout, b, s.q0, h);
  const T *kp = sdpa_head_rows<T>(g.k, b, s.k0, hk), *vp = sdpa_head_rows<T>(g.v, b, s.k0, hk);
  const auto load_keys = [&](int t, int buf) {
    load_rows<T, BN, DP, THREADS>(sk + buf * BN * DP, kp, g.k.ss, g.k.sd, s.sk, g.d, t * BN, aligned);
    load_rows<T, BN, DP, THREADS>(sv + buf * BN * DP, vp, g.v.ss, g.v.sd, s.sk, g.dv, t * BN, aligned);
  };
  load_rows<T, BM, DP, THREADS>(sq, qp, g.q.ss, g.q.sd, s.sq, g.d, m0, aligned);
  load_rows<T, BM, DP, THREADS>(sdo, dp, bg.dout.ss, bg.dout.sd, s.sq, g.dv, m0, aligned);
  if (t_begin < t_end) load_keys(t_begin, 0);
  cp_commit();

  const int kd = (g.d + 15) / 16, kdv = (g.dv + 15) / 16;
  const int r_in = rw * 16 + lane / 4; /* this thread's rows: r_in and r_in + 8 of the tile */
  const float l2[2] = {lse_log2(g, s, b, h, m0 + r_in), lse_log2(g, s, b, h, m0 + r_in + 8)};
  const float dd[2] = {dsum_at(bg, s, b, h, m0 + r_in), dsum_at(bg, s, b, h, m0 + r_in + 8)};
  float dq[CW / 8][4];
#pragma unroll
  for (int n = 0; n < CW / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
  const auto q_frag = fa2::own_rows_frag<DP>(sq, rw, lane), do_frag = fa2::own_rows_frag<DP>(sdo, rw, lane);

  for (int t = t_begin; t < t_end; ++t) {
    const int buf = (t - t_begin) & 1;
    cp_wait<0>();
    __syncthreads(); /* key tile t has landed; every warp is done with tile t - 1's buffers */
    if (t + 1 < t_end) load_keys(t + 1, buf ^ 1);
    cp_commit();
    const T *kb = sk + buf * BN * DP, *vb = sv + buf * BN * DP;

    float p[BN / 8][4], ds[BN / 8][4];
    fa2::warp_qk<T, DP, BN, FULL, CW / 16>(p, q_frag, kb, 0, kd, lane, c0 / 16); /* S (my columns' part) */
    if constexpr (C::SPLIT > 1) pair_sum<C::GROUPS>(p, xs, warp, lane);
    probabilities<false>(g, s, b, h, sdpa_tile_unmasked(g, s, i_lo, i_hi, t * BN, BN), m0 + rw * 16, t * BN,
                         lane, p, [&](int, int e) { return l2[e / 2]; });
    fa2::warp_qk<T, DP, BN, FULL, CW / 16>(ds, do_frag, vb, 0, kdv, lane, c0 / 16); /* dP */
    if constexpr (C::SPLIT > 1) pair_sum<C::GROUPS>(ds, xd, warp, lane);
    score_grads(ds, p, [&](int, int e) { return dd[e / 2]; });
    fa2::warp_pv<T, DP, BN, FULL, CW>(dq, ds, kb, 0, kd, lane, c0 / 16); /* dQ += dS K */
  }
  cp_wait<0>();
  __syncthreads(); /* every copy into Q's rows has landed (with no key tile, nothing waited yet) */

  const float sc[2] = {bg.scale, bg.scale};
  T *pq = static_cast<T *>(const_cast<void *>(bg.dq.p)) + b * bg.dq.sb + (s.q0 + m0 + rw * 16) * bg.dq.ss +
          h * bg.dq.sh;
  fa2::warp_store_rows<T, DP, CW>(sq + rw * 16 * DP, dq, sc, pq, bg.dq.ss, bg.dq.sd, min(16, s.sq - (m0 + rw * 16)),
                                  g.d, aligned, lane, c0);
}

/* The dK / dV and dQ passes of one FULL choice. */
template <typename T, int DP, bool FULL>
cudaError_t launch_passes(const sdpa_bwd_geom &bg, cudaStream_t stream, dim3 *gk) {
  using C = cfg<DP>;
  const sdpa_geom &g = bg.f;
  const auto dkdv = sdpa_bwd_dkdv_kernel<T, DP, FULL>;
  const auto dq = sdpa_bwd_dq_kernel<T, DP, FULL>;
  cudaError_t e = smem_optin(dkdv, C::KV_SMEM);
  if (e == cudaSuccess) e = smem_optin(dq, C::Q_SMEM);
  if (e != cudaSuccess) return e;
  *gk = dim3((unsigned)((g.seqlen_k + C::ROWS - 1) / C::ROWS), (unsigned)(g.heads_q / g.group), (unsigned)g.batch);
  if (gk->x > 0) dkdv<<<*gk, C::THREADS, C::KV_SMEM, stream>>>(bg);
  const dim3 gq((unsigned)((g.seqlen_q + C::ROWS - 1) / C::ROWS), (unsigned)g.heads_q, (unsigned)g.batch);
  if (gq.x > 0) dq<<<gq, C::THREADS, C::Q_SMEM, stream>>>(bg);
  return cudaSuccess;
}

/* Host side: the three launches on one stream; dsum's grid strides over (row, head) items. */
template <typename T, int DP>
cudaError_t launch_sdpa_bwd_mma(const sdpa_bwd_geom &bg, int sm_count, cudaStream_t stream, int32_t *grid,
                                int32_t *block, int32_t *smem_bytes) {
  using C = cfg<DP>;
  const sdpa_geom &g = bg.f;
  launch_dsum<T>(bg, sm_count, stream);
  dim3 gk;
  const cudaError_t e = g.d == DP && g.dv == DP ? launch_passes<T, DP, true>(bg, stream, &gk)
                                                : launch_passes<T, DP, false>(bg, stream, &gk);
  if (e != cudaSuccess) return e;
  grid[0] = (int32_t)gk.x, grid[1] = (int32_t)gk.y, grid[2] = (int32_t)gk.z;
  block[0] = C::THREADS, block[1] = block[2] = 1;
  *smem_bytes = C::KV_SMEM;
  return cudaGetLastError();
}

}  // namespace fa2bwd
}  // namespace opsi

/* One instantiation (the kernel sources, sdpa_kernels.h's lists); `extern` before it declares it. */
#define OPSI_SDPA_BWD_MMA_TEMPLATE(T, DP)                                                                    \
  template cudaError_t opsi::fa2bwd::launch_sdpa_bwd_mma<T, DP>(const opsi::fa2bwd::sdpa_bwd_geom &, int,   \
                                                                cudaStream_t, int32_t *, int32_t *, int32_t *);
#define OPSI_SDPA_BWD_MMA_INSTANTIATE(T, DP) OPSI_SDPA_BWD_MMA_TEMPLATE(T, DP)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_MMA_CUH_ */
