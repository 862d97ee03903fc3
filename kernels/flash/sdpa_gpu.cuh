/*
 * What every CUDA attention kernel shares: the call as the kernels see it (sdpa_geom), the
 * sequence bounds of one (batch, head) with varlen's cu_seqlens read and clamped on the
 * device, the range of key tiles a block of query rows can see, and the visibility of one
 * (query, key) pair.
 *
 * Scores live in the log2 domain: x = (scale * q.k + mask) * log2(e), so that the softmax
 * is exp2(x - max) and LSE = (max + log2(sum)) * ln(2).
 *
 * Window (causal is window_right = 0), aligned to the bottom-right corner (diag = sk - sq):
 * key j is visible to query i when i + diag - window_left <= j <= i + diag + window_right,
 * each side only when that window is >= 0.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_GPU_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_GPU_CUH_

#include "kernels/common/cuda_common.cuh"
#include "kernels/flash/sdpa_geom.h"

namespace opsi {

/* The call (kernels/flash/sdpa_geom.h, built by the dispatch layer). */
using sdpa_view = ::opsi_sdpa_view;
using sdpa_geom = ::opsi_sdpa_geom;

/* One (batch, head)'s sequences: their starts in the packed tensors (0 without varlen) and
 * lengths, clamped to [0, max_seqlen] so that a bad cu_seqlens cannot send a read astray.
 * CACHE: the kernel serves KV caches, whose key count is kv_lens[b] (keys from the cache's
 * start; cu_seqlens_k is then NULL) where the call names one. */
struct sdpa_seq {
  int64_t q0, k0;
  int32_t sq, sk;
};

/* A KV cache's key count of sequence b, clamped to the capacity. */
__device__ __forceinline__ int32_t sdpa_cache_keys(const sdpa_geom &g, int b) {
  const int32_t l = g.kv_lens[b * g.kl_s];
  return l < 0 ? 0 : l > g.seqlen_k ? g.seqlen_k : l;
}

template <bool CACHE = false>
__device__ __forceinline__ sdpa_seq sdpa_sequence(const sdpa_geom &g, int b) {
  sdpa_seq s;
  const bool cache = CACHE && g.kv_lens != nullptr;
  if (g.cu_q == nullptr) {
    s.q0 = 0, s.k0 = 0, s.sq = g.seqlen_q, s.sk = cache ? sdpa_cache_keys(g, b) : g.seqlen_k;
    return s;
  }
  s.q0 = g.cu_q[b * g.cu_sq];
  s.k0 = cache ? 0 : g.cu_k[b * g.cu_sk];
  const int64_t lq = g.cu_q[(b + 1) * g.cu_sq] - s.q0, lk = cache ? 0 : g.cu_k[(b + 1) * g.cu_sk] - s.k0;
  s.sq = (int32_t)(lq < 0 ? 0 : lq > g.seqlen_q ? g.seqlen_q : lq);
  s.sk = cache ? sdpa_cache_keys(g, b) : (int32_t)(lk < 0 ? 0 : lk > g.seqlen_k ? g.seqlen_k : lk);
  if (s.q0 < 0) s.q0 = 0, s.sq = 0;
  if (s.k0 < 0) s.k0 = 0, s.sk = 0;
  return s;
}

/* The batch coordinate of sequence b in a TMA map of q, k, v (kernels/flash/sdpa_cuda_launch.cu's
 * encode_operand): b for [B, S, H, D] views; 0 for varlen views, whose maps have a batch axis of 1. */
__device__ __forceinline__ int sdpa_map_batch(const sdpa_geom &g, int b) { return g.cu_q == nullptr ? b : 0; }

/* The keys query rows [i_lo, i_hi] (inclusive, within the sequence) can see: [*j_lo, *j_hi).
 * Here and in sdpa_tile_unmasked, int sums of window edges: the launchers pass no window side
 * wider than every key (sdpa_geom's windows are < Sk on the left, < Sq on the right, else -1),
 * so each sum stays within (-Sq - Sk, Sq + Sk). */
__device__ __forceinline__ void sdpa_key_range(const sdpa_geom &g, const sdpa_seq &s, int i_lo, int i_hi,
                                               int *j_lo, int *j_hi) {
  const int diag = s.sk - s.sq;
  int lo = 0, hi = s.sk;
  if (g.window_left >= 0) lo = max(lo, i_lo + diag - g.window_left);
  if (g.window_right >= 0) hi = min(hi, i_hi + diag + g.window_right + 1);
  *j_lo = lo;
  *j_hi = hi;
}

/* The key tiles of BN rows query rows [i_lo, i_hi] can see: [*t_begin, *t_end). */
__device__ __forceinline__ void sdpa_key_tiles(const sdpa_geom &g, const sdpa_seq &s, int i_lo, int i_hi, int bn,
                                               int *t_begin, int *t_end) {
  int j_lo, j_hi;
  sdpa_key_range(g, s, i_lo, i_hi, &j_lo, &j_hi);
  *t_begin = j_lo / bn;
  *t_end = j_hi > j_lo ? (j_hi + bn - 1) / bn : *t_begin;
}

/* The query tiles of BM rows in which some row sees a key of [n0, n1] (inclusive, within the
 * sequence): tiles [*t0, *t0 + *tiles), none where no row does. The backward's walk over the
 * queries of a key tile; sdpa_key_tiles is its twin the other way. */
__device__ __forceinline__ void sdpa_query_tiles(const sdpa_geom &g, const sdpa_seq &s, int n0, int n1, int bm,
                                                 int *t0, int *tiles) {
  const int64_t diag = (int64_t)s.sk - s.sq;
  int64_t i_lo = 0, i_hi = (int64_t)s.sq - 1;
  if (g.window_right >= 0) i_lo = max(i_lo, n0 - diag - g.window_right);
  if (g.window_left >= 0) i_hi = min(i_hi, n1 - diag + g.window_left);
  *t0 = i_lo <= i_hi ? (int)(i_lo / bm) : 0;
  *tiles = i_lo <= i_hi ? (int)(i_hi / bm) - *t0 + 1 : 0;
}

/* Element (b, s0, h, 0) of a view: the rows of one (batch, head) from row s0. */
template <typename T>
__device__ __forceinline__ const T *sdpa_head_rows(const sdpa_view &v, int b, int64_t s0, int h) {
  return static_cast<const T *>(v.p) + b * v.sb + s0 * v.ss + h * v.sh;
}

/* Whether keys [j0, j0 + n) all are visible to every query of [i_lo, i_hi] (no mask to apply). */
__device__ __forceinline__ bool sdpa_tile_unmasked(const sdpa_geom &g, const sdpa_seq &s, int i_lo, int i_hi,
                                                   int j0, int n) {
  const int diag = s.sk - s.sq;
  if (g.mask != nullptr || j0 + n > s.sk) return false;
  if (g.window_right >= 0 && j0 + n - 1 > i_lo + diag + g.window_right) return false;
  if (g.window_left >= 0 && j0 < i_hi + diag - g.window_left) return false;
  return true;
}

/* The keys query row i sees: [*lo, *hi) (empty for a row past the sequence's end). In 64
 * bits: a window's edge may lie far outside the int range. */
__device__ __forceinline__ void sdpa_row_keys(const sdpa_geom &g, const sdpa_seq &s, int i, int *lo, int *hi) {
  const int64_t diag = (int64_t)s.sk - s.sq;
  int64_t l = 0, h = i < s.sq ? s.sk : 0;
  if (g.window_left >= 0) l = max(l, i + diag - g.window_left);
  if (g.window_right >= 0) h = min(h, i + diag + g.window_right + 1);
  *lo = (int)min(l, (int64_t)s.sk), *hi = (int)max(h, (int64_t)0);
}

/* One key tile's scores x, for the thread's two rows of the m16n8 / m64nN accumulator layout
 * (sc[n][e]: row (e / 2) * 8 of the thread's pair), -> unnormalized probabilities exp2(x k -
 * max), in place. Each row's running max and sum are updated over the quad of threads that
 * holds it; rs: the factor the row's O is to be rescaled by. */
template <bool TREE_SUM = false, int NB, typename Exp2>
__device__ __forceinline__ void sdpa_softmax_tile(float (&sc)[NB][4], float k, float (&row_max)[2],
                                                  float (&row_sum)[2], float (&rs)[2], Exp2 exp2) {
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float m[NB]; /* the row's max by a tree: log2(NB) dependent steps, not NB */
#pragma unroll
    for (int n = 0; n < NB; ++n) m[n] = fmaxf(sc[n][2 * hr], sc[n][2 * hr + 1]);
#pragma unroll
    for (int w = 1; w < NB; w *= 2)
#pragma unroll
      for (int n = 0; n + w < NB; n += 2 * w) m[n] = fmaxf(m[n], m[n + w]);
    float mx = m[0];
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(row_max[hr], mx * k);
    const float base = mx == -INFINITY ? 0.0f : mx; /* a row with nothing visible yet */
    rs[hr] = exp2(row_max[hr] - base);
    row_max[hr] = mx;
    float sum = 0.0f, p[NB]; /* TREE_SUM: the row's sum by a tree too (p), else in order */
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      sc[n][2 * hr] = exp2(fmaf(sc[n][2 * hr], k, -base));
      sc[n][2 * hr + 1] = exp2(fmaf(sc[n][2 * hr + 1], k, -base));
      if constexpr (TREE_SUM) {
        p[n] = sc[n][2 * hr] + sc[n][2 * hr + 1];
      } else {
        sum += sc[n][2 * hr] + sc[n][2 * hr + 1];
      }
    }
    if constexpr (TREE_SUM) {
#pragma unroll
      for (int w = 1; w < NB; w *= 2)
#pragma unroll
        for (int n = 0; n + w < NB; n += 2 * w) p[n] += p[n + w];
      sum = p[0];
    }
    row_sum[hr] = row_sum[hr] * rs[hr] + sum;
  }
}

/* One key tile's scores -> unnormalized probabilities, in place, for the thread's two rows of
 * the m16n8 / m64nN accumulator layout: sc[n][e] is row r0 + (e / 2) * 8, key j0 + 8 n +
 * (lane % 4) * 2 + e % 2 (tile rows i_lo .. i_hi, within the sequence). Each row's running
 * max and sum are updated over the quad of threads that holds it; rs: the factor the row's O
 * is to be rescaled by. Under a positive scale the raw dot products stay (-inf outside each
 * row's visible keys, where the tile cuts any): the max of the raw row times the scale is the
 * scaled max, and each probability is exp2(dot * scale - max), one FFMA; under a scale <= 0,
 * and on a masked tile of a kernel that takes a mask tensor, the scores go to the log2 domain
 * first and the factor is 1. TENSOR_MASK: whether the kernel takes an explicit mask tensor
 * (the Hopper rows do not). Without one, every tile runs the same copy of sdpa_softmax_tile,
 * masked or not, so that the consumers hold one softmax's code at each call site, not three.
 * SPARE_REGS: whether the kernel has registers to spare for the row sums by a tree
 * (sdpa_softmax_tile's TREE_SUM). */
template <bool TENSOR_MASK, bool SPARE_REGS, int NB, typename Exp2>
__device__ __forceinline__ void sdpa_online_softmax(const sdpa_geom &g, const sdpa_seq &s, int b, int h, int i_lo,
                                                    int i_hi, int r0, int j0, int lane, float (&sc)[NB][4],
                                                    float (&row_max)[2], float (&row_sum)[2], float (&rs)[2],
                                                    Exp2 exp2) {
  if constexpr (!TENSOR_MASK) {
    /* where the tile cuts a row (or the scale is <= 0): masked first, raw under a positive
     * scale, else in the log2 domain */
    const bool raw = g.scale_log2 > 0.0f;
    if (!raw || !sdpa_tile_unmasked(g, s, i_lo, i_hi, j0, NB * 8)) {
      int lo[2], hi[2];
      sdpa_row_keys(g, s, r0, &lo[0], &hi[0]);
      sdpa_row_keys(g, s, r0 + 8, &lo[1], &hi[1]);
      const int jq = j0 + (lane % 4) * 2;
      const float mul = raw ? 1.0f : g.scale_log2;
#pragma unroll
      for (int n = 0; n < NB; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = jq + n * 8 + e % 2;
          sc[n][e] = j >= lo[e / 2] && j < hi[e / 2] ? sc[n][e] * mul : -INFINITY;
        }
    }
    sdpa_softmax_tile<SPARE_REGS>(sc, raw ? g.scale_log2 : 1.0f, row_max, row_sum, rs, exp2);
  } else if (g.scale_log2 > 0.0f && sdpa_tile_unmasked(g, s, i_lo, i_hi, j0, NB * 8)) {
    sdpa_softmax_tile<SPARE_REGS>(sc, g.scale_log2, row_max, row_sum, rs, exp2);
  } else {
    /* to the log2 domain, -inf outside each row's visible keys, plus the mask where given:
     * the key bounds a row, not a test of every (i, j), keeps this path's registers few */
    int lo[2], hi[2];
    sdpa_row_keys(g, s, r0, &lo[0], &hi[0]);
    sdpa_row_keys(g, s, r0 + 8, &lo[1], &hi[1]);
    const int jq = j0 + (lane % 4) * 2;
    const int64_t mrow = TENSOR_MASK && g.mask != nullptr ? b * g.mb + h * g.mh + (int64_t)r0 * g.mi : 0;
#pragma unroll
    for (int n = 0; n < NB; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = jq + n * 8 + e % 2;
        float x = -INFINITY;
        if (j >= lo[e / 2] && j < hi[e / 2]) {
          x = sc[n][e] * g.scale_log2;
          if (TENSOR_MASK && g.mask != nullptr) {
            x += 1.4426950408889634f * load_any(g.mask, mrow + (e / 2) * 8 * g.mi + (int64_t)j * g.mj, g.mask_dtype);
          }
        }
        sc[n][e] = x;
      }
    sdpa_softmax_tile<SPARE_REGS>(sc, 1.0f, row_max, row_sum, rs, exp2);
  }
}

/* The end of query row i (the thread's part of its sum in row_sum): the sum over the quad;
 * LSE written (once, by the quad's first thread) when asked for and the row exists; returns
 * 1 / sum, or 0 for a row that saw no key (O = 0, LSE = -inf). */
__device__ __forceinline__ float sdpa_finish_row(const sdpa_geom &g, const sdpa_seq &s, int b, int h, int i,
                                                 float row_max, float row_sum, int lane) {
  float sum = row_sum;
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if (g.lse != nullptr && lane % 4 == 0 && i < s.sq) {
    g.lse[b * g.lb + h * g.lh + (s.q0 + i) * g.ls] =
        sum > 0.0f ? (row_max + log2f(sum)) * 0.6931471805599453f : -INFINITY;
  }
  return sum > 0.0f ? 1.0f / sum : 0.0f;
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_GPU_CUH_ */
