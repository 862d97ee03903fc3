/*
 * The Hopper GEMM's compile-time shape (gemm_shape.h: tile, K block, stages, threads), its
 * shared-memory plan (the stage ring, the consumers' epilogue memory, the column bias, the
 * mbarriers) and its tile scheduler, which the kernel's pieces (load, mma, epilogue) share.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SM90_CFG_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_SM90_CFG_CUH_

#include <stdint.h>

#include "kernels/common/sm90_async.cuh"
#include "kernels/gemm/gemm_gpu.cuh"
#include "kernels/gemm/gemm_shape.h"

namespace opsi {
namespace sm90 {

enum { BM = OPSI_GEMM_SM90_BM, BK = OPSI_GEMM_SM90_BK, THREADS = OPSI_GEMM_SM90_THREADS, SWIZZLE_BYTES = 1024 };
/* The general epilogue walks a warpgroup's 64 x BN accumulators in chunks of EPI_COLS
 * columns through shared memory (rows padded to EPI_PITCH floats: the fragment's float2
 * stores are conflict-free per half warp). A consumer warpgroup's EPI_WG_BYTES hold that
 * staging or the two 64 x 64 16-bit buffers of its TMA stores. */
enum { EPI_COLS = 32, EPI_PITCH = 40, EPI_WG_BYTES = OPSI_GEMM_SM90_EPI_WG_BYTES };
static_assert(64 * EPI_PITCH * 4 <= EPI_WG_BYTES, "the staged epilogue fits a warpgroup's epilogue memory");

template <int BN> struct cfg {
  static constexpr int STAGES = OPSI_GEMM_SM90_STAGES(BN);
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int BARRIER_BYTES = 2 * STAGES * 8; /* full and empty mbarrier a stage */
  static constexpr int VEC_BYTES = 2 * BN * 2;          /* a column bias a consumer warpgroup, 16-bit */
  /* stages, epilogue memory, bias, barriers; plus slack to align the stages to the swizzle
   * atom (the epilogue buffers after them stay aligned) */
  static constexpr int SMEM_BYTES = SWIZZLE_BYTES + STAGES * STAGE_BYTES + 2 * EPI_WG_BYTES + VEC_BYTES + BARRIER_BYTES;
  static_assert(SMEM_BYTES <= 232448, "fits an sm_90 block's shared memory");
  static_assert(SMEM_BYTES == OPSI_GEMM_SM90_SMEM(BN), "the rows' formula (gemm_shape.h)");
};

/* Shared memory, aligned to the swizzle atom: STAGES stages (A BM x BK, then B BN x BK), each
 * consumer warpgroup's epilogue memory (EPI_WG_BYTES), each one's column bias (BN 16-bit
 * values), then a full and an empty mbarrier a stage. */
template <int BN> struct smem_plan {
  uint8_t *stages, *epi, *bias;
  uint64_t *full, *empty;
  __device__ __forceinline__ explicit smem_plan(uint8_t *raw) {
    using C = cfg<BN>;
    stages = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(raw) + SWIZZLE_BYTES - 1) &
                                         ~uintptr_t(SWIZZLE_BYTES - 1));
    epi = stages + C::STAGES * C::STAGE_BYTES;
    bias = epi + 2 * EPI_WG_BYTES;
    full = reinterpret_cast<uint64_t *>(bias + C::VEC_BYTES);
    empty = full + C::STAGES;
  }
};

/* The K split of a call (gemm_shape.h): each tile's K blocks in `parts` ranges of
 * kb_per_part, a work unit a (tile, range); with parts > 1 the grid is one block a unit and the
 * parts of a tile are one cluster (rank = part). a_bytes: the bytes of a stage's A box
 * (opsi_gemm_sm90_a_rows rows). */
struct k_split {
  int32_t parts, kb_per_part, a_bytes;
};

/* A block's walk over the work units (tile_order's tiles, each in ks.parts K ranges),
 * persistent: for (tile_scheduler ts(order, ks.parts); ts.valid(); ts.advance()). */
struct tile_scheduler {
  const tile_order &order;
  const int32_t parts;
  int64_t t;
  __device__ __forceinline__ tile_scheduler(const tile_order &o, int32_t p) : order(o), parts(p), t(blockIdx.x) {}
  __device__ __forceinline__ bool valid() const { return t < order.tiles * parts; }
  __device__ __forceinline__ void advance() { t += gridDim.x; }
  __device__ __forceinline__ int64_t tile_index() const { return t / parts; }
  __device__ __forceinline__ int32_t part() const { return (int32_t)(t % parts); }
  __device__ __forceinline__ void tile(int64_t *bt, int32_t *tm, int32_t *tn) const {
    order.decode(tile_index(), bt, tm, tn);
  }
  /* the unit's K blocks [*kb0, *kb1) */
  __device__ __forceinline__ void k_range(int kblocks, int kb_per_part, int *kb0, int *kb1) const {
    *kb0 = part() * kb_per_part;
    *kb1 = min(kblocks, *kb0 + kb_per_part);
  }
};

}  // namespace sm90
}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMM_SM90_CFG_CUH_ */
