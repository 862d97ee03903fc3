/*
 * The Hopper attention's consumers: warpgroups 1 .. NC, 64 query rows of the work tile each.
 * Per key tile: S = Q K^T by wgmma m64nBNk16 from shared memory (f32 in registers;
 * descriptors made once, moved by an add); where the tile crosses a sequence end or a window
 * edge, -inf outside each row's visible keys; online softmax in registers (exp2; an unmasked
 * tile's scale goes into the exponent's FFMA); P rounded to 16 bits stays in registers as the
 * A operand of O += P V, wgmma m64nDPk16 with V N-major in shared memory. K and V go back to
 * the producer (one arrival per consumer warp, and in a cluster to the other block's producer
 * too) once the wgmma group that read each is done.
 * Inside a warpgroup, tile t's S = Q K^T is issued together with tile t - 1's P V, and t's
 * softmax runs while that P V is still in flight; O is rescaled by t's factors in the next
 * turn, between S_t+1 and P_t V_t, under S_t+1 (and not at all where no row max of the warp
 * moved). The consumer warpgroups take turns issuing, in a ring (named barriers 1 .. NC), so
 * that one's softmax overlaps the others' wgmma.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_MMA_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_MMA_CUH_

#include "kernels/common/wgmma_ops.cuh"
#include "kernels/flash/sdpa_sm90_cfg.cuh"
#include "kernels/flash/sdpa_sm90_sched.cuh"

namespace opsi {
namespace fa3 {

/* 2^x by the MUFU unit (ex2.approx.ftz: 2 ulp; -inf gives +0). */
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* One consumer thread's place: its rows, its warpgroup's turn in the issue ring, its shared-
 * memory descriptors. Its registers (the kernel's locals, passed in): O (f32, DP / 2), P
 * (16-bit A fragments, BN / 16 x 4), S (f32, BN / 2) and its rows' softmax statistics. */
template <typename T, typename C, int CL> struct consumer {
  static constexpr int DP = C::DP, BN = C::BN, BM = C::BM, NC = C::NC;
  const smem_plan<C> sm;
  int lane, r_in;              /* this thread's rows of the tile: r_in and r_in + 8 */
  uint32_t rank;               /* in a cluster: this block's rank */
  int turn, next_turn;         /* named barriers: mine, the next warpgroup's */
  uint64_t dq, dk, dv;         /* descriptors of this warpgroup's Q rows and of stage 0's K and V */

  __device__ __forceinline__ consumer(const smem_plan<C> &sm_, int cw, int warp, int lane_, uint32_t rank_)
      : sm(sm_), lane(lane_), r_in(cw * 64 + (warp % 4) * 16 + lane_ / 4), rank(rank_), turn(1 + cw),
        next_turn(1 + (cw + 1) % NC) {
    using namespace opsi::sm90;
    dq = smem_desc(smem_addr(sm.q) + cw * 64 * 128, 16, 1024);
    dk = smem_desc(smem_addr(sm.k), 16, 1024), dv = smem_desc(smem_addr(sm.v), BN * 128, 1024);
  }

  /* a stage goes back to the producers of every block that reads it */
  __device__ __forceinline__ void release(uint64_t *empty) const {
    using namespace opsi::sm90;
    if (lane == 0) {
      mbar_arrive(empty);
      if constexpr (CL > 1) mbar_arrive_cluster(empty, rank ^ 1);
    }
  }

  __device__ __forceinline__ void issue_s(uint64_t qd, int st, float (&sc)[BN / 2]) const {
    using namespace opsi::sm90;
    const uint64_t kd = desc_advance(dk, st * C::KV_BYTES);
#pragma unroll
    for (int kk = 0; kk < DP / 16; ++kk) {
      const uint32_t off = (kk / 4) * BM * 128 + (kk % 4) * 32, koff = (kk / 4) * BN * 128 + (kk % 4) * 32;
      wgmma<T, BN, false>::mma(sc, desc_advance(qd, off), desc_advance(kd, koff), kk > 0 ? 1u : 0u);
    }
    wgmma_commit();
  }

  __device__ __forceinline__ void issue_pv(int st, float (&o)[DP / 2], const uint32_t (&pa)[BN / 16][4]) const {
    using namespace opsi::sm90;
    const uint64_t vd = desc_advance(dv, st * C::KV_BYTES);
#pragma unroll
    for (int kt = 0; kt < BN / 16; ++kt) wgmma_rs<T, DP>::mma(o, pa[kt], desc_advance(vd, kt * 16 * 128), 1u);
    wgmma_commit();
  }

  /* S_t -> P_t in sc (f32; the m64nBN accumulators are BN / 8 blocks of the m16n8 layout) with
   * the row statistics; O's rescale factors into rs */
  __device__ __forceinline__ void softmax(const sdpa_geom &g, const sdpa_work &w, int t, float (&sc)[BN / 2],
                                         float (&row_max)[2], float (&row_sum)[2], float (&rs)[2]) const {
    /* registers to spare for the row sums by a tree (sdpa_online_softmax) where the consumers have 240 */
    sdpa_online_softmax<false, (C::MMA_REGS >= 240)>(g, w.s, w.b, w.h, w.i_lo, w.i_hi, w.i_lo + r_in, t * BN,
                                                     lane, reinterpret_cast<float(&)[BN / 8][4]>(sc), row_max,
                                                     row_sum, rs, fast_exp2);
  }

  __device__ __forceinline__ void round_p(const float (&sc)[BN / 2], uint32_t (&pa)[BN / 16][4]) const {
#pragma unroll
    for (int kt = 0; kt < BN / 16; ++kt) {
      pa[kt][0] = pack2<T>(sc[kt * 8 + 0], sc[kt * 8 + 1]);
      pa[kt][1] = pack2<T>(sc[kt * 8 + 2], sc[kt * 8 + 3]);
      pa[kt][2] = pack2<T>(sc[kt * 8 + 4], sc[kt * 8 + 5]);
      pa[kt][3] = pack2<T>(sc[kt * 8 + 6], sc[kt * 8 + 7]);
    }
  }

  /* O *= its rows' rescale factors; nothing to do when no row max of the warp moved (most key
   * tiles, once a row has seen a few) */
  __device__ __forceinline__ void rescale_o(const float (&f)[2], float (&o)[DP / 2]) const {
    if (!__any_sync(0xffffffffu, f[0] != 1.0f || f[1] != 1.0f)) return;
#pragma unroll
    for (int nb = 0; nb < DP / 8; ++nb) {
      o[nb * 4] *= f[0], o[nb * 4 + 1] *= f[0];
      o[nb * 4 + 2] *= f[1], o[nb * 4 + 3] *= f[1];
    }
  }

  /* Work tile w, whose first key tile is the kv-th of the ring and which is the tn-th tile:
   * O and the row statistics for the epilogue. Tile t: issue S_t = Q K_t^T, rescale O by
   * t - 1's factors under it, and issue O += P_{t-1} V_{t-1} (one turn of the ring); wait for
   * S_t only; its softmax runs while P V is still in flight; then wait for P V, hand the stage
   * of t - 1 back and round P_t. The first tile has no P V before it and the last one's
   * follows the loop: the steady state has no branch around a wgmma (ptxas serializes every
   * wgmma of a kernel where it cannot see the groups). Q goes back to the producer once the
   * last S has read it. The caller has zeroed O and set the statistics to (-inf, 0). */
  __device__ __forceinline__ void mma(const sdpa_geom &g, const sdpa_work &w, int kv, int tn, float (&o)[DP / 2],
                                     uint32_t (&pa)[BN / 16][4], float (&sc)[BN / 2], float (&row_max)[2],
                                     float (&row_sum)[2]) const {
    using namespace opsi::sm90;
    const int t_begin = w.t_begin, t_end = w.t_end, qb = tn % C::QS;
    const uint64_t qd = opsi::sm90::desc_advance(dq, qb * C::Q_BYTES); /* this tile's Q buffer */
    mbar_wait(&sm.q_full[qb], (tn / C::QS) & 1);
    if (t_end > t_begin) {
      float rs[2];
      const ring_pos<STAGES> p0{kv};
      const int st0 = p0.stage();
      mbar_wait(&sm.k_full[st0], p0.full_parity());
      named_bar_sync(turn, 256); /* my turn to issue */
      wgmma_fence();
      issue_s(qd, st0, sc);
      named_bar_arrive(next_turn, 256); /* the next warpgroup's turn */
      wgmma_wait<0>();
      fence_regs(sc);
      release(&sm.k_empty[st0]);
      if (lane == 0 && t_end - t_begin == 1) mbar_arrive(&sm.q_empty[qb]);
      softmax(g, w, t_begin, sc, row_max, row_sum, rs); /* O is still 0: its rescale by these factors changes nothing */
      round_p(sc, pa);
      for (int t = t_begin + 1; t < t_end; ++t) {
        const ring_pos<STAGES> p{kv + (t - t_begin)}, pp{p.n - 1};
        const int st = p.stage(), pst = pp.stage();
        mbar_wait(&sm.k_full[st], p.full_parity());
        named_bar_sync(turn, 256);
        wgmma_fence();
        issue_s(qd, st, sc);
        rescale_o(rs, o); /* by t - 1's factors, under S_t */
        mbar_wait(&sm.v_full[pst], pp.full_parity());
        wgmma_fence();
        issue_pv(pst, o, pa);
        named_bar_arrive(next_turn, 256);
        wgmma_wait<1>(); /* S_t has landed (K_t is free); P_{t-1} V_{t-1} may still run */
        fence_regs(sc);
        release(&sm.k_empty[st]);
        if (lane == 0 && t == t_end - 1) mbar_arrive(&sm.q_empty[qb]);
        softmax(g, w, t, sc, row_max, row_sum, rs);
        wgmma_wait<0>();
        fence_regs(o);
        release(&sm.v_empty[pst]);
        round_p(sc, pa);
      }
      const ring_pos<STAGES> pl{kv + (t_end - 1 - t_begin)};
      const int pst = pl.stage();
      mbar_wait(&sm.v_full[pst], pl.full_parity());
      named_bar_sync(turn, 256);
      rescale_o(rs, o);
      wgmma_fence();
      issue_pv(pst, o, pa);
      named_bar_arrive(next_turn, 256);
      wgmma_wait<0>();
      fence_regs(o);
      release(&sm.v_empty[pst]);
    } else if (lane == 0) {
      mbar_arrive(&sm.q_empty[qb]); /* no key: Q was not read */
    }
  }
};
#endif

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_MMA_CUH_ */
