/*
 * The Hopper GEMM's consumers: warpgroups 1 and 2, 64 rows of the tile each. Per K block, 4
 * wgmma m64nBNk16 reading A and B from shared memory through descriptors, f32 accumulators in
 * registers (BN / 2 a thread). A stage is handed back (its empty mbarrier, one arrival per
 * consumer warp) once its group has completed: right after it (IN_FLIGHT 0, gemm_shape.h's
 * OPSI_GEMM_SM90_IN_FLIGHT: one more stage in flight from the producer) or once the next K
 * block's group was issued (1: the warpgroup keeps its own group queued behind the running
 * one). The kernel picks the loop once a tile. mma_wide: one warpgroup, the whole tile.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SM90_MMA_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_SM90_MMA_CUH_

#include "kernels/common/wgmma_ops.cuh"
#include "kernels/gemm/gemm_sm90_cfg.cuh"

namespace opsi {
namespace sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* One K block's wgmma group into acc, committed: the 64 rows of A from shared address sa, B
 * from sb, every k16 step; `first`: the tile's first K block (acc is overwritten, not added to). */
template <typename T, int BN, bool B_MN>
__device__ __forceinline__ void kblock_group(float (&acc)[BN / 2], uint32_t sa, uint32_t sb, bool first) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    const uint64_t da = smem_desc(sa + kk * 32, 16, 1024);
    const uint64_t db = B_MN ? smem_desc(sb + kk * 16 * 128, 64 * BK * 2, 1024) : smem_desc(sb + kk * 32, 16, 1024);
    wgmma<T, BN, B_MN>::mma(acc, da, db, (!first || kk > 0) ? 1u : 0u);
  }
  wgmma_commit();
}

/* The mainloop of one tile into acc (rows cw * 64 .. of the tile), continuing the ring. */
template <typename T, int BN, bool B_MN, int IN_FLIGHT>
__device__ __forceinline__ void mma(const smem_plan<BN> &sm, ring_iter<cfg<BN>::STAGES> &ring, int kblocks, int cw,
                                    int lane, float (&acc)[BN / 2]) {
  using C = cfg<BN>;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  int prev = -1;
  for (int kb = 0; kb < kblocks; ++kb) {
    const int stage = ring.stage;
    mbar_wait(&sm.full[stage], ring.phase);
    const uint32_t sa = smem_addr(sm.stages + stage * C::STAGE_BYTES) + cw * 64 * BK * 2;
    const uint32_t sb = smem_addr(sm.stages + stage * C::STAGE_BYTES + C::A_BYTES);
    kblock_group<T, BN, B_MN>(acc, sa, sb, kb == 0);
    if constexpr (IN_FLIGHT == 0) {
      wgmma_wait<0>();
      if (lane == 0) mbar_arrive(&sm.empty[stage]);
    } else {
      if (prev >= 0) {
        wgmma_wait<1>();
        if (lane == 0) mbar_arrive(&sm.empty[prev]);
      }
      prev = stage;
    }
    ring.advance();
  }
  wgmma_wait<0>();
  fence_regs(acc);
  if (prev >= 0 && lane == 0) mbar_arrive(&sm.empty[prev]);
}

/* The mainloop of a whole tile by one warpgroup (the kernel's `wide` calls): rows 0-63 into
 * lo_acc, 64-127 into hi_acc, both from the stage's B. Per K block the first half's wgmma are
 * committed as a group of their own, then the previous K block's second group is waited for
 * (wgmma_wait<1>: every group but the newest complete) and its stage handed back, then the
 * second half is issued: the tensor pipe always holds a queued half while the warpgroup hands
 * a stage back and waits for the next. (A wait for all groups there would drain the first half
 * too: ptxas closes a scoreboard group at every wait.) Rows past M are computed from whatever
 * the stage holds there and never stored. */
template <typename T, int BN, bool B_MN>
__device__ __forceinline__ void mma_wide(const smem_plan<BN> &sm, ring_iter<cfg<BN>::STAGES> &ring, int kblocks,
                                         int lane, float (&lo_acc)[BN / 2], float (&hi_acc)[BN / 2]) {
  using C = cfg<BN>;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) lo_acc[i] = 0.0f, hi_acc[i] = 0.0f;
  int prev = -1;
  for (int kb = 0; kb < kblocks; ++kb) {
    const int stage = ring.stage;
    mbar_wait(&sm.full[stage], ring.phase);
    const uint32_t sa = smem_addr(sm.stages + stage * C::STAGE_BYTES);
    const uint32_t sb = smem_addr(sm.stages + stage * C::STAGE_BYTES + C::A_BYTES);
    kblock_group<T, BN, B_MN>(lo_acc, sa, sb, kb == 0);
    if (prev >= 0) {
      wgmma_wait<1>();
      if (lane == 0) mbar_arrive(&sm.empty[prev]);
    }
    kblock_group<T, BN, B_MN>(hi_acc, sa + 64 * BK * 2, sb, kb == 0);
    prev = stage;
    ring.advance();
  }
  wgmma_wait<0>();
  fence_regs(lo_acc);
  fence_regs(hi_acc);
  if (prev >= 0 && lane == 0) mbar_arrive(&sm.empty[prev]);
}

/* A half of the tile wholly past M: its K blocks' stages are handed back unread (the
 * accumulators, which nothing stores, are zeroed). */
template <int BN>
__device__ __forceinline__ void mma_skip(const smem_plan<BN> &sm, ring_iter<cfg<BN>::STAGES> &ring, int kblocks,
                                         int lane, float (&acc)[BN / 2]) {
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < kblocks; ++kb) {
    mbar_wait(&sm.full[ring.stage], ring.phase);
    if (lane == 0) mbar_arrive(&sm.empty[ring.stage]);
    ring.advance();
  }
}
#endif

}  // namespace sm90
}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMM_SM90_MMA_CUH_ */
