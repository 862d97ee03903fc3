/*
 * The Hopper GEMM (sm_90a): D tile BM x BN per step of a persistent CTA, warp-specialized,
 * built from pieces:
 *   gemm_sm90_cfg.cuh       the shape (gemm_shape.h), the shared-memory plan, the tile scheduler
 *   gemm_sm90_load.cuh      the producer: TMA loads of A / B K blocks into a ring of stages
 *   gemm_sm90_mma.cuh       the consumers' mainloop: wgmma, one group in flight
 *   gemm_sm90_epilogue.cuh  the fused epilogues, from registers, TMA stores or staged
 * The ring's state is ring_iter (kernels/common/sm90_async.cuh).
 *
 * Warpgroup 0 is the producer (setmaxnreg LOAD_REGS, gemm_shape.h; one thread issues);
 * warpgroups 1 and 2 are the consumers (setmaxnreg MMA_REGS), 64 rows of the tile each, or,
 * where gemm_shape.h's opsi_gemm_sm90_wide says (`wide`: tiles of up to 128 columns, unsplit,
 * M over 64), a whole tile each, taking the block's tiles in turn. Tiles
 * are walked in tile_order (groups of 8 tile rows) by gridDim.x CTAs, one per SM; a
 * consumer whose 64 rows lie wholly past M hands its stages back unread. Split-K (k_split,
 * gemm_shape.h): a block is one K range of a tile, the ranges of a tile one cluster; consumer
 * warpgroup cw's rows are added up and stored by the cluster's block cw % parts (split_reduce),
 * so that two blocks share the reduction and the epilogue.
 * K, M and N tails: TMA fills out-of-range elements with zeros; stores are bounded.
 * Launched as a programmatic dependent: the launch overlaps the previous kernel's tail, every
 * thread waits for that kernel's completion before any global access, and the producer lets
 * the next kernel launch once it has issued its last load.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SM90_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_SM90_CUH_

#include <cuda.h>

#include "kernels/common/launch_status.h"
#include "kernels/common/sm90_async.cuh"
#include "kernels/common/wgmma_ops.cuh"
#include "kernels/gemm/gemm_gpu.cuh"
#include "kernels/gemm/gemm_sm90_cfg.cuh"
#include "kernels/gemm/gemm_sm90_epilogue.cuh"
#include "kernels/gemm/gemm_sm90_load.cuh"
#include "kernels/gemm/gemm_sm90_mma.cuh"

namespace opsi {
namespace sm90 {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The K split's reduction, run by every thread of every block of a tile's cluster after its
 * mainloop (the ring is idle: every stage it filled was consumed). Consumer warpgroup cw's
 * rows belong to the block of rank cw % parts (split_owner): the other blocks put that
 * warpgroup's live accumulators in their ring, lane-interleaved float4 ([warpgroup][BN / 8]
 * [128 threads]), and the owner adds them to its own in rank order (with its own first: for
 * two parts the same sums, and for more the same as adding in rank order from rank 0, as
 * a + b = b + a in f32). Consumer warpgroups meet on named barrier 3 before the ring is
 * overwritten. live: the thread's warp's 16 rows begin inside the output (rows past M are
 * never stored, so their partials are not moved). */
__device__ __forceinline__ uint32_t split_owner(int cw, int32_t parts) { return (uint32_t)(cw % parts); }

template <int BN>
__device__ __forceinline__ void split_reduce(uint8_t *ring_smem, int32_t parts, bool consumer, bool live, int cw,
                                             float (&acc)[BN / 2]) {
  const uint32_t rank = cluster_rank(), owner = split_owner(cw, parts);
  float4 *mine = reinterpret_cast<float4 *>(ring_smem) + cw * (BN / 8) * 128 + threadIdx.x % 128;
  if (consumer) named_bar_sync(3, 256);
  if (consumer && live && rank != owner) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) mine[j * 128] = make_float4(acc[j * 4], acc[j * 4 + 1], acc[j * 4 + 2], acc[j * 4 + 3]);
  }
  cluster_sync();
  if (consumer && live && rank == owner) {
    for (int32_t r = 0; r < parts; ++r) {
      if ((uint32_t)r == owner) continue;
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const float4 v = ld_cluster_f4(mine + j * 128, (uint32_t)r);
        acc[j * 4] += v.x, acc[j * 4 + 1] += v.y, acc[j * 4 + 2] += v.z, acc[j * 4 + 3] += v.w;
      }
    }
  }
  cluster_sync(); /* every block's shared memory stays until its owners have read it */
}
#endif

/* a_batched / b_batched: the operand's tensor map has a batch axis (else batch 0 is read for
 * every bt: a broadcast operand). pairs, bit 0: D's columns are unit-stride and every pair of
 * columns (2c, 2c + 1) is aligned for one store; bit 1: so are C's and the residual's (each
 * when given) for one load, and the bias's, or the bias has column stride 0. l2_hints: A's
 * l2_evict in bits 0-1, B's in bits 2-3 (gemm_shape.h's opsi_gemm_sm90_l2_hints). PLAIN: the
 * instantiation for calls without an epilogue (g.plain): the plain stores and a staged path
 * without the element epilogue (epilogue_half, epilogue_staged), none of the fused paths.
 */
template <typename T, int BN, bool B_MN, bool PLAIN>
__global__ void __launch_bounds__(THREADS, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_d, const gemm_geom g, const tile_order order,
                     const k_split ks, int32_t a_batched, int32_t b_batched, int32_t pairs, int32_t d_tma,
                     int32_t wide, int32_t l2_hints) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = cfg<BN>;
  extern __shared__ uint8_t smem_raw[];
  const smem_plan<BN> sm(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = warp / 4;
  const int kblocks = (int)((g.k + BK - 1) / BK);

  if (threadIdx.x == 0) {
    for (int s = 0; s < C::STAGES; ++s) {
      mbar_init(&sm.full[s], 1);
      mbar_init(&sm.empty[s], wide ? 4 : 8); /* one arrival per consumer warp that reads the stage */
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  /* A programmatic dependent launch (launch_gemm_sm90): nothing the previous kernel on the
   * stream wrote is read before that kernel has completed (a no-op without the attribute). */
  asm volatile("griddepcontrol.wait;" ::: "memory");

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(OPSI_GEMM_SM90_LOAD_REGS));
    if (warp == 0 && lane == 0) {
      const producer<BN, B_MN> load{sm, &map_a, &map_b, a_batched, b_batched, l2_hints & 3, (l2_hints >> 2) & 3};
      load.run(order, ks, kblocks);
      /* every load issued: the next kernel may start launching (it waits for this one) */
      asm volatile("griddepcontrol.launch_dependents;");
    }
    if (ks.parts > 1) { /* one unit a block: its cluster's reduction */
      float none[BN / 2];
      split_reduce<BN>(sm.stages, ks.parts, false, false, 0, none);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(OPSI_GEMM_SM90_MMA_REGS));
    const int cw = wg - 1; /* rows cw * 64 .. of the tile, or (wide) its tiles of the block */
    ring_iter<C::STAGES> ring;
    /* a column bias vector read in pairs (see pair_epilogue): each tile's is loaded before
     * its mainloop */
    const bool bias_vec = g.bias.p != nullptr && g.bias.sr == 0 && g.bias.sc == 1 && (pairs & 2);
    const int mode = g.plain                                         ? EPI_PLAIN
                     : g.alpha != 1.0f || g.c.p != nullptr || g.res.p != nullptr ? EPI_GENERAL
                     : g.bias.p == nullptr                           ? EPI_ACT
                     : bias_vec                                      ? EPI_BIAS_VEC
                                                                     : EPI_GENERAL;
    const auto bias_of = [&](int64_t bt, int32_t tn) -> uint32_t {
      const int64_t col = (int64_t)tn * BN + 2 * (threadIdx.x % 128);
      if (!bias_vec || 2 * (threadIdx.x % 128) >= BN || col + 1 >= g.n) return 0u;
      return *reinterpret_cast<const uint32_t *>(static_cast<const uint16_t *>(g.bias.p) + bt * g.bias.sb + col);
    };
    if constexpr (BN <= OPSI_GEMM_SM90_WIDE_MAX_BN) {
      if (wide) { /* unsplit (opsi_gemm_sm90_wide): a tile a warpgroup, the block's u-th to warpgroup u % 2 */
        float lo_acc[BN / 2], hi_acc[BN / 2];
        int u = 0;
        for (tile_scheduler ts(order, 1); ts.valid(); ts.advance(), ++u) {
          if ((u & 1) != cw) { /* the other warpgroup's tile: its stages pass by */
            for (int kb = 0; kb < kblocks; ++kb) ring.advance();
            continue;
          }
          /* named barriers 4 + cw: the other warpgroup's mainloop is done, so that this one waits
           * on no stage more than one ring pass ahead */
          if (u > 0) named_bar_sync(4 + cw, 256);
          int64_t bt;
          int32_t tm, tn;
          ts.tile(&bt, &tm, &tn);
          const int64_t row_base = (int64_t)tm * BM;
          const uint32_t bias_pair = bias_of(bt, tn);
          mma_wide<T, BN, B_MN>(sm, ring, kblocks, lane, lo_acc, hi_acc);
          if (ts.t + gridDim.x < order.tiles) named_bar_arrive(4 + (cw ^ 1), 256);
          epilogue_half<BN, PLAIN>(g, &map_d, d_tma != 0, mode, bt, row_base, (int64_t)tn * BN, lo_acc, pairs,
                                   sm.epi + cw * EPI_WG_BYTES, sm.bias + cw * BN * 2, bias_pair, cw);
          if (row_base + 64 < g.m) {
            epilogue_half<BN, PLAIN>(g, &map_d, d_tma != 0, mode, bt, row_base + 64, (int64_t)tn * BN, hi_acc,
                                     pairs, sm.epi + cw * EPI_WG_BYTES, sm.bias + cw * BN * 2, bias_pair, cw);
          }
        }
        if (threadIdx.x % 128 == 0) bulk_wait<0>(); /* the last TMA stores, before shared memory goes */
        return;
      }
    }
    float acc[BN / 2];
    for (tile_scheduler ts(order, ks.parts); ts.valid(); ts.advance()) {
      int64_t bt;
      int32_t tm, tn;
      int kb0, kb1;
      ts.tile(&bt, &tm, &tn);
      ts.k_range(kblocks, ks.kb_per_part, &kb0, &kb1);
      const int64_t row_base = (int64_t)tm * BM + cw * 64;
      const bool owner = ts.part() == (int32_t)split_owner(cw, ks.parts); /* adds up and stores the rows */
      const uint32_t bias_pair = owner ? bias_of(bt, tn) : 0u;
      constexpr int IN_FLIGHT = OPSI_GEMM_SM90_IN_FLIGHT(BN);
      if (row_base >= g.m) mma_skip<BN>(sm, ring, kb1 - kb0, lane, acc);
      else if (IN_FLIGHT == OPSI_GEMM_SM90_IN_FLIGHT_SPLIT || ks.parts == 1)
        mma<T, BN, B_MN, IN_FLIGHT>(sm, ring, kb1 - kb0, cw, lane, acc);
      else mma<T, BN, B_MN, OPSI_GEMM_SM90_IN_FLIGHT_SPLIT>(sm, ring, kb1 - kb0, cw, lane, acc);
      if (ks.parts > 1) split_reduce<BN>(sm.stages, ks.parts, true, row_base + warp % 4 * 16 < g.m, cw, acc);
      if (owner) {
        epilogue_half<BN, PLAIN>(g, &map_d, d_tma != 0, mode, bt, row_base, (int64_t)tn * BN, acc, pairs,
                                 sm.epi + cw * EPI_WG_BYTES, sm.bias + cw * BN * 2, bias_pair, cw);
      }
    }
    if (threadIdx.x % 128 == 0) bulk_wait<0>(); /* the last TMA stores, before shared memory goes */
  }
#else
  (void)map_a, (void)map_b, (void)map_d, (void)g, (void)order, (void)ks, (void)a_batched, (void)b_batched,
      (void)pairs, (void)d_tma, (void)wide, (void)l2_hints;
  __trap();
#endif
}

/* Host side: launches one instantiation (gemm_sm90_*.cu) on `grid` persistent CTAs; with
 * ks.parts > 1 (grid = tiles x parts) in clusters of ks.parts, else in clusters of `cluster`
 * where it is over 1 (gemm_shape.h's opsi_gemm_sm90_spread_cluster). */
template <typename T, int BN, bool B_MN, bool PLAIN>
cudaError_t launch_gemm_sm90(const CUtensorMap &map_a, const CUtensorMap &map_b, const CUtensorMap &map_d,
                             const gemm_geom &g, const tile_order &order, const k_split &ks, int a_batched,
                             int b_batched, int pairs, int d_tma, int wide, int l2_hints, int grid, int cluster,
                             cudaStream_t stream) {
  const auto kernel = gemm_sm90_kernel<T, BN, B_MN, PLAIN>;
  const cudaError_t e = smem_optin(kernel, cfg<BN>::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3((unsigned)grid);
  lc.blockDim = dim3(THREADS);
  lc.dynamicSmemBytes = cfg<BN>::SMEM_BYTES;
  lc.stream = stream;
  cudaLaunchAttribute at[2];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  at[1].id = cudaLaunchAttributeClusterDimension;
  at[1].val.clusterDim.x = (unsigned)(ks.parts > 1 ? ks.parts : cluster);
  at[1].val.clusterDim.y = at[1].val.clusterDim.z = 1;
  lc.attrs = at, lc.numAttrs = ks.parts > 1 || cluster > 1 ? 2 : 1;
  return cudaLaunchKernelEx(&lc, kernel, map_a, map_b, map_d, g, order, ks, a_batched, b_batched, pairs, d_tma,
                            wide, l2_hints);
}

}  // namespace sm90
}  // namespace opsi

/* One instantiation (the kernel sources, gemm_kernels.h's lists); `extern` before it declares it. */
#define OPSI_GEMM_SM90_INSTANTIATE(T, BN, B_MN, PLAIN) OPSI_GEMM_SM90_TEMPLATE(T, BN, B_MN, PLAIN)
#define OPSI_GEMM_SM90_TEMPLATE(T, BN, B_MN, PLAIN)                                                        \
  template cudaError_t opsi::sm90::launch_gemm_sm90<T, BN, B_MN, PLAIN>(                                   \
      const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const opsi::gemm_geom &,                 \
      const opsi::tile_order &, const opsi::sm90::k_split &, int, int, int, int, int, int, int, int, cudaStream_t);

#endif /* OPSLIB_KERNELS_GEMM_GEMM_SM90_CUH_ */
