/*
 * The Hopper attention's tile scheduler: a call's work tiles, which (batch, head, query rows)
 * each covers and which key tiles it reads, and the order in which a block walks them. The
 * producer and the consumers of a block each walk the same sequence.
 *
 * Work tiles are query tiles of BM rows x Hq x batch. Tile idx: query tiles last-first within
 * a head (the longest causal work first), heads, then batches, so that the blocks running at
 * once share their heads' K and V in L2. A block takes idx = blockIdx.x, + gridDim.x, ... (a
 * persistent grid when the launcher gives fewer blocks than tiles).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_SCHED_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_SCHED_CUH_

#include "kernels/flash/sdpa_gpu.cuh"

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

template <int BM, int BN> __device__ __forceinline__ sdpa_work sdpa_work_at(const sdpa_geom &g, int64_t idx) {
  sdpa_work w;
  const int n_qt = sdpa_query_tiles<BM>(g);
  const int64_t bh = idx / n_qt;
  w.h = (int)(bh % g.heads_q), w.b = (int)(bh / g.heads_q), w.i_lo = (n_qt - 1 - (int)(idx - bh * n_qt)) * BM;
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
 * for (tile_scheduler<BM, BN> ts(tiles); ts.valid(); ts.advance()). */
template <int BM, int BN> struct tile_scheduler {
  int64_t idx, tiles;
  __device__ __forceinline__ explicit tile_scheduler(int64_t tiles_) : idx(blockIdx.x), tiles(tiles_) {}
  __device__ __forceinline__ bool valid() const { return idx < tiles; }
  __device__ __forceinline__ void advance() { idx += gridDim.x; }
  __device__ __forceinline__ sdpa_work work(const sdpa_geom &g) const { return sdpa_work_at<BM, BN>(g, idx); }
};

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_SCHED_CUH_ */
