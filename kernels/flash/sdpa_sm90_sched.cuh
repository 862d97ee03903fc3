/*
 * The Hopper attention's tile scheduler: a call's work tiles, which (batch, head, query rows)
 * each covers and which key tiles it reads, and the order in which a block walks them. The
 * producer and the consumers of a block each walk the same sequence.
 *
 * Work tiles are query tiles of BM rows x Hq x batch, in one of two orders:
 *  - by head: query tiles last-first within a head (the longest causal work first), heads,
 *    then batches, so that the blocks running at once share their heads' K and V in L2;
 *  - by length (where opsi_sdpa_sm90_by_length says so: causal or windowed tiles on a
 *    persistent grid with room for several tiles of each KV head at once): every head's
 *    last query tile, then every head's one before it, ..., heads of a KV head next to each
 *    other. The tiles then run longest first over the whole call, not only within a head.
 * A block takes one tile of each pass of gridDim.x tiles (a persistent grid when the launcher
 * gives fewer blocks than tiles): in even passes the blockIdx.x-th, in odd ones the
 * blockIdx.x-th from the pass's end, so that a block that drew long tiles in one pass draws
 * short ones in the next (by length, a near-even split). The pairs of a cluster (uniform
 * calls, even grids, by head) stay on neighbouring tiles either way.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_SCHED_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_SCHED_CUH_

#include "kernels/common/fast_div.h"
#include "kernels/flash/sdpa_gpu.cuh"
#include "kernels/flash/sdpa_sm90_shape.h"

namespace opsi {
namespace fa3 {

template <int BM> __device__ __host__ __forceinline__ int sdpa_query_tiles(const sdpa_geom &g) {
  return (g.seqlen_q + BM - 1) / BM;
}
template <int BM> __device__ __host__ __forceinline__ int64_t sdpa_tiles(const sdpa_geom &g) {
  return (int64_t)sdpa_query_tiles<BM>(g) * g.heads_q * g.batch;
}

/* One work tile: its sequence, batch and head, query rows [i_lo, i_hi], and the key tiles of
 * BN it reads, [t_begin, t_end) (none when the tile starts past its sequence's end: varlen's
 * shorter sequences). */
struct sdpa_work {
  sdpa_seq s;
  int b, h, i_lo, i_hi, t_begin, t_end;
  __device__ __forceinline__ bool empty() const { return i_lo >= s.sq; }
};

/* The divisors of a tile index (query tiles a head, heads x batches, query heads), made once a
 * call on the host (sdpa_tile_divs_make) and passed to the kernel, where the scheduler reads
 * them from its parameters: by multiply-high (kernels/common/fast_div.h) where the call has
 * fewer than 2^31 work tiles, which bounds the indices and every divisor below 2^31; else the
 * 64-bit division. */
struct sdpa_tile_divs {
  int32_t fast;
  opsi_fast_div qt, heads, hq;
};
template <int BM> __host__ __forceinline__ sdpa_tile_divs sdpa_tile_divs_make(const sdpa_geom &g) {
  sdpa_tile_divs dv = {};
  dv.fast = sdpa_tiles<BM>(g) < 2147483648ll;
  if (dv.fast) {
    dv.qt = opsi_fast_div_make((uint32_t)sdpa_query_tiles<BM>(g)), dv.hq = opsi_fast_div_make((uint32_t)g.heads_q);
    dv.heads = opsi_fast_div_make((uint32_t)g.heads_q * (uint32_t)g.batch);
  }
  return dv;
}

template <int BM, int BN>
__device__ __forceinline__ sdpa_work sdpa_work_at(const sdpa_geom &g, int64_t idx, bool by_length,
                                                 const sdpa_tile_divs &dv) {
  sdpa_work w;
  const int n_qt = sdpa_query_tiles<BM>(g);
  int r; /* the tile's rank in its head, 0 = the last query tile */
  if (dv.fast) {
    const uint32_t i = (uint32_t)idx;
    uint32_t bh, q;
    if (by_length) {
      q = opsi_fast_div_q(dv.heads, i), bh = i - q * dv.heads.d;
    } else {
      bh = opsi_fast_div_q(dv.qt, i), q = i - bh * dv.qt.d;
    }
    const uint32_t b = opsi_fast_div_q(dv.hq, bh);
    r = (int)q, w.b = (int)b, w.h = (int)(bh - b * dv.hq.d);
  } else {
    int64_t bh;
    if (by_length) {
      const int64_t heads = (int64_t)g.heads_q * g.batch;
      r = (int)(idx / heads), bh = idx - (int64_t)r * heads;
    } else {
      bh = idx / n_qt, r = (int)(idx - bh * n_qt);
    }
    w.h = (int)(bh % g.heads_q), w.b = (int)(bh / g.heads_q);
  }
  w.i_lo = (n_qt - 1 - r) * BM;
  w.s = sdpa_sequence(g, w.b);
  w.i_hi = min(w.i_lo + BM, w.s.sq) - 1;
  w.t_begin = w.t_end = 0;
  if (w.i_lo < w.s.sq) {
    int j_lo, j_hi;
    sdpa_key_range(g, w.s, w.i_lo, w.i_hi, &j_lo, &j_hi);
    w.t_begin = j_lo / BN, w.t_end = j_hi > j_lo ? (j_hi + BN - 1) / BN : w.t_begin;
  }
  return w;
}

/* A block's walk over the call's `tiles` work tiles (sdpa_tiles, computed once a kernel):
 * for (tile_scheduler<BM, BN> ts(g, tiles, divs); ts.valid(); ts.advance()). */
template <int BM, int BN> struct tile_scheduler {
  int64_t idx, tiles, pass; /* any pass's tile index exceeds every earlier pass's of this block */
  bool by_length;
  const sdpa_tile_divs *divs; /* the kernel's parameter */
  __device__ __forceinline__ tile_scheduler(const sdpa_geom &g, int64_t tiles_, const sdpa_tile_divs &divs_)
      : idx(blockIdx.x), tiles(tiles_), pass(0),
        by_length(opsi_sdpa_sm90_by_length(g.window_left >= 0 || g.window_right >= 0, tiles_, gridDim.x,
                                           g.batch, g.heads_q / g.group) != 0),
        divs(&divs_) {}
  __device__ __forceinline__ bool valid() const { return idx < tiles; }
  __device__ __forceinline__ void advance() {
    ++pass;
    idx = pass * gridDim.x + ((pass & 1) != 0 ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
  }
  __device__ __forceinline__ sdpa_work work(const sdpa_geom &g) const {
    return sdpa_work_at<BM, BN>(g, idx, by_length, *divs);
  }
};

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_SCHED_CUH_ */
