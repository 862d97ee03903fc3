/*
 * The Hopper attention forward (sm_90a): TMA + wgmma, warp-specialized, built from pieces
 * that the other Hopper attention kernels reuse:
 *   sdpa_sm90_cfg.cuh       the shape (sdpa_sm90_shape.h) and the shared-memory plan
 *   sdpa_sm90_sched.cuh     the tile scheduler: work tiles, their keys, a block's walk
 *   sdpa_sm90_load.cuh      the producer: TMA loads of Q and of K / V into a ring of stages
 *   sdpa_sm90_mma.cuh       the consumers: S = Q K^T, online softmax, O += P V (wgmma)
 *   sdpa_sm90_epilogue.cuh  O / sum and LSE: from registers, or staged and stored by TMA
 * The ring's position is ring_pos (kernels/common/sm90_async.cuh).
 *
 * A block is one producer warpgroup (setmaxnreg LOAD_REGS; one thread issues) and NC consumer
 * warpgroups (setmaxnreg MMA_REGS), 64 query rows each; it walks work tiles of BM = 64 NC
 * query rows of one (batch, head), the producer loading the next tile's Q (into the other Q
 * buffer where the shape has two) and K / V under the current one's keys and epilogue.
 * Clusters (CL 2, the _pair kernels: uniform calls with an even number of query tiles a head,
 * which their rows require): the two blocks of a cluster take neighbouring query tiles of one
 * head, which read the same keys; each producer loads its half of every K / V tile into both
 * blocks, and the empty barriers count the consumer warps of both blocks, so that a stage is
 * refilled only once both have read it: the L2 serves each K / V tile once a pair.
 * Out-of-range rows and columns: TMA reads zeros past a tensor's extent (varlen: the next
 * sequence's rows, masked like any key past the end); stores are bounded (those by TMA by the
 * map of O, which the launcher encodes for shapes that stage O).
 *
 * Operands: [B, S, H, D] views with unit-stride rows, 16-byte aligned base and strides
 * (TMA), q's and v's head dims up to DP (the map's extent: zero columns beyond).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_CUH_

#include <cuda.h>

#include <atomic>

#include "kernels/common/launch_status.h"
#include "kernels/common/sm90_async.cuh"
#include "kernels/flash/sdpa_sm90_cfg.cuh"
#include "kernels/flash/sdpa_sm90_epilogue.cuh"
#include "kernels/flash/sdpa_sm90_load.cuh"
#include "kernels/flash/sdpa_sm90_mma.cuh"
#include "kernels/flash/sdpa_sm90_sched.cuh"

namespace opsi {
namespace fa3 {

/* The tensor maps' axes: (d, s, h, b); varlen: (d, t, h, 1) with s = the sequence's start + row.
 * map_o is read only where C::OS (the launcher leaves it zero otherwise). */
template <typename T, typename C, int CL>
__global__ void __launch_bounds__(C::THREADS, 1)
    sdpa_sm90_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                     const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_o,
                     const sdpa_geom g, const __grid_constant__ sdpa_tile_divs divs) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace opsi::sm90;
  constexpr int NC = C::NC;
  extern __shared__ uint8_t smem_raw[];
  const smem_plan<C> sm(smem_raw);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = warp / 4;
  const int64_t tiles = sdpa_tiles<C::BM>(g);
  /* CL 2: a cluster of two, both blocks on neighbouring query tiles of one head (same keys) */
  const uint32_t rank = CL > 1 ? cluster_rank() : 0;

  if (threadIdx.x == 0) {
    for (int qb = 0; qb < C::QS; ++qb) {
      mbar_init(&sm.q_full[qb], 1);
      mbar_init(&sm.q_empty[qb], 4 * NC); /* one arrival per consumer warp */
    }
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(&sm.k_full[st], 1);
      mbar_init(&sm.v_full[st], 1);
      mbar_init(&sm.k_empty[st], 4 * NC * CL); /* one arrival per consumer warp of the cluster */
      mbar_init(&sm.v_empty[st], 4 * NC * CL);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CL > 1) {
    cluster_sync(); /* the other block's barriers are set up before anything lands there */
  } else {
    __syncthreads();
  }
  /* A programmatic dependent launch (launch_sdpa_sm90): nothing the previous kernel on the
   * stream wrote is read before that kernel has completed (a no-op without the attribute). */
  asm volatile("griddepcontrol.wait;" ::: "memory");

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(C::LOAD_REGS));
    if (warp == 0 && lane == 0) {
      const producer<C, CL> load{sm, &map_q, &map_k, &map_v, (int)rank * (C::BN / 2)};
      load.run(g, tiles, divs);
      /* every load issued: the next kernel may start launching (it waits for this one) */
      asm volatile("griddepcontrol.launch_dependents;");
      /* the producer's other threads have exited, which barrier.cluster does not wait for */
      if constexpr (CL > 1) cluster_sync();
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(C::MMA_REGS));
    const int cw = wg - 1;
    const consumer<T, C, CL> mma(sm, cw, warp, lane, rank);
    float o[C::DP / 2];
    uint32_t pa[C::BN / 16][4];
    float sc[C::BN / 2];
    /* the ring of turns: warpgroup 1 issues first, each hands the turn to the next; the turns
     * run on across work tiles (every warpgroup takes one a key tile, plus one a tile for its
     * last P V) */
    if (cw == NC - 1) named_bar_arrive(1, 256);
    int kv = 0, tn = 0; /* key tiles and work tiles consumed so far */
    for (tile_scheduler<C::BM, C::BN> ts(g, tiles, divs); ts.valid(); ts.advance()) {
      const sdpa_work w = ts.work(g);
      if (w.empty()) continue;
#pragma unroll
      for (int i = 0; i < C::DP / 2; ++i) o[i] = 0.0f;
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
      mma.mma(g, w, kv, tn, o, pa, sc, row_max, row_sum);
      kv += w.t_end - w.t_begin;
      ++tn;
      if constexpr (C::OS) {
        epilogue_staged<T, C::DP>(g, w, &map_o, sm.o + (warp - 4) * C::O_WARP_BYTES, mma.r_in, lane, o, row_max,
                                  row_sum);
      } else {
        epilogue<T, C::DP>(g, w, mma.r_in, lane, o, row_max, row_sum);
      }
    }
    /* the staging tile stays until the copy engine has read it */
    if constexpr (C::OS) {
      if (elect_one()) bulk_wait_read<0>();
    }
    /* the last warpgroup's last hand-over (one more than warpgroup 1 waited for) is taken
     * here, so that no arrival is left pending on barrier 1 */
    if (cw == 0) named_bar_sync(1, 256);
    /* no block leaves while the other may still load into it or hand it a stage back */
    if constexpr (CL > 1) cluster_sync();
  }
#else
  (void)map_q, (void)map_k, (void)map_v, (void)map_o, (void)g, (void)divs;
  __trap();
#endif
}

/* Host side: g's work tiles (sdpa_tiles) on `grid` blocks (a persistent grid when fewer), in
 * clusters of CL (2 wants an even number of query tiles a head and the same keys for every
 * tile: no window, no varlen, and maps whose K / V box is BN / 2 rows). The two are separate
 * instantiations, so that the kernel without a cluster has no remote arrivals to branch on. */
template <typename T, typename C, int CL>
cudaError_t launch_sdpa_sm90(const CUtensorMap &map_q, const CUtensorMap &map_k, const CUtensorMap &map_v,
                             const CUtensorMap &map_o, const sdpa_geom &g, int grid, cudaStream_t stream,
                             int32_t *grid_out, int32_t *block, int32_t *smem_bytes) {
  const auto kernel = sdpa_sm90_kernel<T, C, CL>;
  cudaError_t e = smem_optin(kernel, C::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  const sdpa_tile_divs divs = sdpa_tile_divs_make<C::BM>(g);
  /* a programmatic dependent launch: this kernel's prologue may run under the previous
   * kernel's tail (the kernel waits before its first global access) */
  cudaLaunchConfig_t lc = {};
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = (unsigned)CL, attr[1].val.clusterDim.y = attr[1].val.clusterDim.z = 1;
  lc.blockDim = dim3(C::THREADS), lc.dynamicSmemBytes = C::SMEM_BYTES, lc.stream = stream;
  lc.attrs = attr, lc.numAttrs = CL > 1 ? 2 : 1;
  if constexpr (CL == 1) {
    lc.gridDim = dim3((unsigned)grid);
    e = cudaLaunchKernelEx(&lc, kernel, map_q, map_k, map_v, map_o, g, divs);
    if (e != cudaSuccess) return e;
  } else {
    /* a persistent grid: as many clusters as fit at once (an SM of an odd GPC stays idle),
     * asked once a device */
    static std::atomic<int> fits[64];
    int dev = 0;
    e = cudaGetDevice(&dev);
    if (e != cudaSuccess) return e;
    int fit = dev < 64 ? fits[dev].load(std::memory_order_relaxed) : 0;
    if (fit == 0) {
      lc.gridDim = dim3((unsigned)grid);
      e = cudaOccupancyMaxActiveClusters(&fit, kernel, &lc);
      if (e != cudaSuccess) return e;
      if (dev < 64) fits[dev].store(fit, std::memory_order_relaxed);
    }
    if (fit > 0 && fit * CL < grid) grid = fit * CL;
    lc.gridDim = dim3((unsigned)grid);
    e = cudaLaunchKernelEx(&lc, kernel, map_q, map_k, map_v, map_o, g, divs);
    if (e != cudaSuccess) return e;
  }
  grid_out[0] = grid, grid_out[1] = grid_out[2] = 1;
  block[0] = C::THREADS, block[1] = block[2] = 1;
  *smem_bytes = C::SMEM_BYTES;
  return cudaGetLastError();
}

}  // namespace fa3
}  // namespace opsi

/* One instantiation (the kernel sources, sdpa_kernels.h's lists) of the shape SHAPE
 * (sdpa_sm90_shape.h); `extern` before it declares it. */
#define OPSI_SDPA_SM90_TEMPLATE(T, SHAPE, CL)                                                                   \
  template cudaError_t opsi::fa3::launch_sdpa_sm90<T, OPSI_SDPA_SM90_CFG(SHAPE), CL>(                           \
      const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const opsi::sdpa_geom &, \
      int, cudaStream_t, int32_t *, int32_t *, int32_t *);
#define OPSI_SDPA_SM90_INSTANTIATE(T, SHAPE, CL) OPSI_SDPA_SM90_TEMPLATE(T, SHAPE, CL)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_CUH_ */
