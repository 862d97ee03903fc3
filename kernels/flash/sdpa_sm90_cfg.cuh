/*
 * The Hopper attention's compile-time shape (cfg: tile sizes, warpgroups, register split,
 * shared-memory bytes, from sdpa_sm90_shape.h) and its shared-memory plan (where Q, the K / V
 * ring and the mbarriers live), which the kernel's pieces (load, mma, epilogue) share.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_CFG_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_CFG_CUH_

#include <stdint.h>

#include "kernels/common/sm90_async.cuh"
#include "kernels/common/sm90_stage.cuh"
#include "kernels/flash/sdpa_sm90_shape.h"

namespace opsi {
namespace fa3 {

enum { STAGES = 2 };
using sm90::ring_pos;

/* A kernel's shape: head dims up to DP, BN key rows a tile, NC consumer warpgroups of 64
 * query rows each (BM = 64 NC rows a work tile), QS Q buffers (work tile n's Q in buffer
 * n % QS), one producer warpgroup; setmaxnreg gives the producer LOAD_REGS registers a thread
 * and each consumer MMA_REGS. The split may not ask for more than the block was launched with
 * (THREADS x the launch bound's count: 168 or 128): an increase waits for registers that the
 * decreases gave back, and with too few it waits for ever. */
template <int DP_, int BN_, int NC_, int BM_, int LOAD_REGS_, int MMA_REGS_, int CLUSTER_, int QS_, int OS_>
struct cfg {
  static constexpr int DP = DP_, BN = BN_, NC = NC_, BM = BM_, LOAD_REGS = LOAD_REGS_, MMA_REGS = MMA_REGS_;
  static constexpr int QS = QS_, OS = OS_; /* OS: O staged and stored by TMA (sdpa_sm90_shape.h) */
  static constexpr int CLUSTER = CLUSTER_; /* blocks a cluster of the _pair kernel (its row decides when) */
  static constexpr int THREADS = 128 * (NC + 1);
  static constexpr int Q_BYTES = BM * DP * 2;
  static constexpr int KV_BYTES = BN * DP * 2; /* one of K or V, one stage */
  static constexpr int O_WARP_BYTES = sm90::staged_bytes<DP>(); /* a consumer warp's staging tile of O */
  static constexpr int BARRIER_BYTES = 8 * (2 * QS + 4 * STAGES);
  static constexpr int SMEM_BYTES = 1024 + QS * Q_BYTES + 2 * STAGES * KV_BYTES + OS * 4 * NC * O_WARP_BYTES +
                                    BARRIER_BYTES;
  static_assert(NC == 2 || NC == 3, "two or three consumer warpgroups");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory of one block");
  static_assert(QS == 1 || QS == 2, "one or two Q buffers");
  static_assert(OS == 0 || OS == 1, "O from registers, or staged");
  static_assert(SMEM_BYTES == OPSI_SDPA_SM90_SMEM(BM, BN, DP, QS, OS), "the rows' formula (sdpa_sm90_shape.h)");
  static_assert(BM == 64 * NC, "64 query rows a consumer warpgroup");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "one block, or a pair sharing K / V");
  static_assert(LOAD_REGS * 128 + MMA_REGS * 128 * NC <= THREADS * (65536 / THREADS / 8 * 8), "register split");
};

/* A shape of sdpa_sm90_shape.h as a cfg (the capability rows state the same numbers); the
 * kernel lists (sdpa_kernels.h) name their kernels' shapes by SHAPE (D64, D64_M128, ...). */
#define OPSI_SDPA_SM90_CFG(SHAPE)                                                                      \
  ::opsi::fa3::cfg<OPSI_SDPA_SM90_##SHAPE##_DP, OPSI_SDPA_SM90_##SHAPE##_BN, OPSI_SDPA_SM90_##SHAPE##_NC,    \
                   OPSI_SDPA_SM90_##SHAPE##_BM, OPSI_SDPA_SM90_##SHAPE##_LOAD_REGS,                        \
                   OPSI_SDPA_SM90_##SHAPE##_MMA_REGS, OPSI_SDPA_SM90_##SHAPE##_CLUSTER,                    \
                   OPSI_SDPA_SM90_##SHAPE##_QS, OPSI_SDPA_SM90_##SHAPE##_OS>

/* Shared memory, 1024-byte aligned (the 128-byte swizzle's atom): QS Q tiles (BM x DP each),
 * the ring of STAGES K and STAGES V tiles (BN x DP each), each as DP / 64 boxes of 64 columns;
 * where OS, a staging tile of O for each consumer warp (16 x DP, kernels/common/sm90_stage.cuh);
 * then the mbarriers: full / empty for each Q buffer and for each stage of K and of V. */
template <typename C> struct smem_plan {
  uint8_t *q, *k, *v, *o;
  uint64_t *q_full, *q_empty, *k_full, *v_full, *k_empty, *v_empty;
  __device__ __forceinline__ explicit smem_plan(uint8_t *raw) {
    q = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    k = q + C::QS * C::Q_BYTES, v = k + STAGES * C::KV_BYTES;
    o = v + STAGES * C::KV_BYTES;
    q_full = reinterpret_cast<uint64_t *>(o + C::OS * 4 * C::NC * C::O_WARP_BYTES), q_empty = q_full + C::QS;
    k_full = q_empty + C::QS, v_full = k_full + STAGES, k_empty = v_full + STAGES, v_empty = k_empty + STAGES;
  }
};

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_CFG_CUH_ */
