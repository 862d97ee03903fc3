/*
 * The Hopper attention's producer: one thread of warpgroup 0 issues every TMA load of a block.
 * For each work tile, its Q (into its buffer once the consumers' last S of the tile that held
 * it has read it: q_empty; with two buffers a tile ahead, right after the previous tile's
 * first K), then each key tile's K and V (BN rows x DP, as DP / 64 boxes of 64 columns,
 * 128-byte swizzled) into the ring of STAGES; K and V complete, and are handed back, on their
 * own mbarriers, and K runs a key tile ahead of V (K_t+1, then V_t): S = Q K^T starts before V
 * has landed, the next K loads as soon as S has read the last one, and V, held a tile longer
 * (its P V runs under the next softmax), does not hold K back. The thread waits suspended on
 * the mbarriers, leaving the issue slots of its scheduler to the consumer warps.
 * In a cluster of two (CL 2), each producer loads its half of every K / V tile's rows into
 * both blocks (TMA multicast, completing on each block's full barrier).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_LOAD_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_LOAD_CUH_

#include "kernels/flash/sdpa_sm90_cfg.cuh"
#include "kernels/flash/sdpa_sm90_sched.cuh"

namespace opsi {
namespace fa3 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
template <typename C, int CL> struct producer {
  const smem_plan<C> sm;
  const CUtensorMap *map_q, *map_k, *map_v;
  int mine; /* in a cluster, the first of my half of a tile's rows */

  /* the n-th key tile's K or V (rows from `row`, KV head hk) into its stage, once free */
  __device__ __forceinline__ void load_kv(const CUtensorMap *map, uint8_t *buf, uint64_t *full, uint64_t *empty,
                                          ring_pos<STAGES> pos, int32_t row, int hk, int bmap) const {
    using namespace opsi::sm90;
    constexpr int DP = C::DP, BN = C::BN;
    const int st = pos.stage();
    mbar_wait<1000000>(&empty[st], pos.empty_parity());
    mbar_expect_tx(&full[st], C::KV_BYTES);
#pragma unroll
    for (int c = 0; c < DP / 64; ++c) {
      uint8_t *dst = buf + st * C::KV_BYTES + c * BN * 128 + mine * 128;
      if constexpr (CL == 1) {
        tma_load_4d(dst, map, &full[st], c * 64, row, hk, bmap);
      } else { /* my half of the rows (the map's box), into both blocks */
        tma_load_4d_multicast(dst, map, &full[st], c * 64, row + mine, hk, bmap, 0x3);
      }
    }
  }

  /* the tn-th work tile's Q into buffer tn % QS, once the consumers are done with the tile
   * that held it before */
  __device__ __forceinline__ void load_q(const sdpa_work &w, int tn, int bmap) const {
    using namespace opsi::sm90;
    const int qb = tn % C::QS;
    uint8_t *dst = sm.q + qb * C::Q_BYTES;
    mbar_wait<1000000>(&sm.q_empty[qb], ((tn / C::QS) & 1) ^ 1);
    mbar_expect_tx(&sm.q_full[qb], C::Q_BYTES);
#pragma unroll
    for (int c = 0; c < C::DP / 64; ++c) {
      tma_load_4d(dst + c * C::BM * 128, map_q, &sm.q_full[qb], c * 64, (int32_t)(w.s.q0 + w.i_lo), w.h,
                  bmap);
    }
  }

  /* the scheduler's next non-empty work tile from ts on (ts moves to it); false past the end */
  __device__ __forceinline__ static bool next_work(const sdpa_geom &g, tile_scheduler<C::BM, C::BN> &ts,
                                                   sdpa_work &w) {
    for (; ts.valid(); ts.advance()) {
      w = ts.work(g);
      if (!w.empty()) return true;
    }
    return false;
  }

  /* every work tile of the block, in the scheduler's order. With two Q buffers the next tile's
   * Q goes out right after this tile's first K (its buffer frees once the previous tile's last
   * S has read it, as the second K's stage does): a tile ahead of where it would come in the
   * order of the keys. */
  __device__ __forceinline__ void run(const sdpa_geom &g, int64_t tiles, const sdpa_tile_divs &divs) const {
    constexpr int BN = C::BN;
    int kv = 0, tn = 0; /* key tiles and work tiles loaded so far */
    tile_scheduler<C::BM, BN> ts(g, tiles, divs);
    sdpa_work w;
    bool have = next_work(g, ts, w);
    if (C::QS > 1 && have) load_q(w, 0, sdpa_map_batch(g, w.b));
    while (have) {
      tile_scheduler<C::BM, BN> ts_next = ts;
      ts_next.advance();
      sdpa_work wn;
      const bool have_next = C::QS > 1 && next_work(g, ts_next, wn);
      const sdpa_seq &s = w.s;
      const int hk = w.h / g.group, bmap = sdpa_map_batch(g, w.b);
      const int t_begin = w.t_begin, t_end = w.t_end;
      if (C::QS == 1) load_q(w, tn, bmap);
      for (int t = t_begin; t < t_end; ++t, ++kv) {
        load_kv(map_k, sm.k, sm.k_full, sm.k_empty, ring_pos<STAGES>{kv}, (int32_t)(s.k0 + t * BN), hk, bmap);
        if (t == t_begin && have_next) load_q(wn, tn + 1, sdpa_map_batch(g, wn.b));
        if (t > t_begin) {
          load_kv(map_v, sm.v, sm.v_full, sm.v_empty, ring_pos<STAGES>{kv - 1}, (int32_t)(s.k0 + (t - 1) * BN), hk,
                  bmap);
        }
      }
      if (t_end > t_begin) {
        load_kv(map_v, sm.v, sm.v_full, sm.v_empty, ring_pos<STAGES>{kv - 1}, (int32_t)(s.k0 + (t_end - 1) * BN), hk,
                bmap);
      } else if (have_next) {
        load_q(wn, tn + 1, sdpa_map_batch(g, wn.b)); /* a tile without keys */
      }
      ++tn;
      if (C::QS == 1) {
        ts.advance();
        have = next_work(g, ts, w);
      } else {
        ts = ts_next, w = wn, have = have_next;
      }
    }
  }
};
#endif

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_LOAD_CUH_ */
