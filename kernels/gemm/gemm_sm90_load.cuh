/*
 * The Hopper GEMM's producer: one thread of warpgroup 0 issues the TMA loads of each K block
 * of every work unit (a tile, or a K range of one) the block walks (A: BM x BK, K-major; B: BN x BK K-major, or BN / 64 boxes of
 * 64 x 64 N-major) into the ring of STAGES shared-memory stages, 128-byte swizzled; a stage's
 * full mbarrier completes when its bytes have landed, and the producer waits for its empty
 * mbarrier (the consumers' hand-back) before refilling it. Each operand's loads carry the L2
 * eviction priority the launch chose for it (l2_evict).
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SM90_LOAD_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_SM90_LOAD_CUH_

#include "kernels/gemm/gemm_sm90_cfg.cuh"

namespace opsi {
namespace sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* a_batched / b_batched: the operand's tensor map has a batch axis (else batch 0 is read for
 * every bt: a broadcast operand). */
template <int BN, bool B_MN> struct producer {
  const smem_plan<BN> sm;
  const CUtensorMap *map_a, *map_b;
  int32_t a_batched, b_batched;
  int32_t evict_a, evict_b; /* l2_evict of A's and B's loads */

  __device__ __forceinline__ void load(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t c0, int32_t c1,
                                       int32_t c2, int evict, uint64_t policy) const {
    if (evict != L2_EVICT_NORMAL) tma_load_hint(dst, map, bar, c0, c1, c2, policy);
    else tma_load(dst, map, bar, c0, c1, c2);
  }

  __device__ __forceinline__ void run(const tile_order &order, const k_split &ks, int kblocks) const {
    using C = cfg<BN>;
    ring_iter<C::STAGES> ring;
    const uint64_t pol_a = l2_policy(evict_a), pol_b = l2_policy(evict_b);
    for (tile_scheduler ts(order, ks.parts); ts.valid(); ts.advance()) {
      int64_t bt;
      int32_t tm, tn;
      int kb0, kb1;
      ts.tile(&bt, &tm, &tn);
      ts.k_range(kblocks, ks.kb_per_part, &kb0, &kb1);
      const int32_t ba = a_batched ? (int32_t)bt : 0, bb = b_batched ? (int32_t)bt : 0;
      for (int kb = kb0; kb < kb1; ++kb) {
        const int stage = ring.stage;
        mbar_wait(&sm.empty[stage], ring.phase ^ 1);
        uint8_t *sa = sm.stages + stage * C::STAGE_BYTES, *sb = sa + C::A_BYTES;
        mbar_expect_tx(&sm.full[stage], ks.a_bytes + C::B_BYTES); /* A's box may be shorter than BM */
        load(sa, map_a, &sm.full[stage], kb * BK, tm * BM, ba, evict_a, pol_a);
        if (B_MN) {
#pragma unroll
          for (int c = 0; c < BN / 64; ++c) {
            load(sb + c * 64 * BK * 2, map_b, &sm.full[stage], tn * BN + c * 64, kb * BK, bb, evict_b, pol_b);
          }
        } else {
          load(sb, map_b, &sm.full[stage], kb * BK, tn * BN, bb, evict_b, pol_b);
        }
        ring.advance();
      }
    }
  }
};
#endif

}  // namespace sm90
}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMM_SM90_LOAD_CUH_ */
