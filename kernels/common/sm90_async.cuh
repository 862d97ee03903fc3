/*
 * The Hopper (sm_90a) asynchronous primitives that the GEMM and attention kernels share:
 * mbarriers, TMA loads completing on them, named barriers, the wgmma fence / commit / wait,
 * and the shared-memory matrix descriptor of 128-byte swizzled tiles.
 */
#ifndef OPSLIB_KERNELS_COMMON_SM90_ASYNC_CUH_
#define OPSLIB_KERNELS_COMMON_SM90_ASYNC_CUH_

#include <cuda.h>
#include <stdint.h>

namespace opsi {
namespace sm90 {

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/* The L2 eviction priority of an operand's loads: first where the operand is read once,
 * last where other blocks read it again soon, normal where neither is known. */
enum l2_evict { L2_EVICT_NORMAL = 0, L2_EVICT_FIRST = 1, L2_EVICT_LAST = 2 };

/* Where the n-th use of a ring of STAGES shared-memory stages falls (the pipeline state a
 * producer and its consumers each keep by counting uses): the stage, and the parity of that
 * stage's barrier phase to wait on. Its full barrier completes phase (n / STAGES) & 1; the
 * producer waits on the empty barrier's opposite parity, so that the first pass over the ring
 * finds every stage free. */
template <int STAGES> struct ring_pos {
  int n;
  __device__ __forceinline__ int stage() const { return n % STAGES; }
  __device__ __forceinline__ uint32_t full_parity() const { return (uint32_t)((n / STAGES) & 1); }
  __device__ __forceinline__ uint32_t empty_parity() const { return (uint32_t)((n / STAGES) & 1) ^ 1u; }
};

/* The same state kept incrementally, for a thread that walks the ring one use after another
 * (no division where STAGES is not a power of two): the stage, and the parity its full
 * barrier's current phase completes with (the empty barrier's wait: phase ^ 1). */
template <int STAGES> struct ring_iter {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) stage = 0, phase ^= 1;
  }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
/* Waits until the phase of `parity` has completed. SUSPEND_NS = 0 polls; otherwise the
 * hardware suspends the thread until the phase completes (or that many ns pass): for a thread
 * with nothing else to do (a producer), whose polling would take issue slots from the warps
 * that share its scheduler. */
template <uint32_t SUSPEND_NS = 0> __device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  const uint32_t addr = smem_addr(bar);
  uint32_t done = 0;
  do {
    if constexpr (SUSPEND_NS == 0) {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(addr), "r"(parity)
          : "memory");
    } else {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(addr), "r"(parity), "n"(SUSPEND_NS)
          : "memory");
    }
  } while (!done);
}
/* Whether the phase of `parity` has completed, without waiting (a thread that polls several
 * things at once). */
__device__ __forceinline__ bool mbar_done(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  asm volatile("{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(smem_addr(bar)), "r"(parity)
               : "memory");
  return done != 0;
}
/* A box of a 3-D tensor map at coordinates (c0 innermost, c1, c2) into shared memory. */
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t c0, int32_t c1,
                                         int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::
          "r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
/* tma_load with an L2 eviction priority, a policy from l2_policy */
__device__ __forceinline__ void tma_load_hint(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                                              int32_t c1, int32_t c2, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, "
      "%4, %5}], [%2], %6;" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}
/* An L2 cache policy for the whole of what a load reads (l2_evict) */
__device__ __forceinline__ uint64_t l2_policy(int evict) {
  uint64_t p;
  if (evict == L2_EVICT_FIRST) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  } else if (evict == L2_EVICT_LAST) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  }
  return p;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* Keeps the compiler from moving accumulator reads or writes across a wgmma wait. */
template <int N> __device__ __forceinline__ void fence_regs(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
#endif

/* Shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride byte
 * offsets (K-major: 8-row groups SBO = 1024 apart, LBO unused; MN-major: 64-element atoms LBO
 * apart along M/N, 8-row K groups SBO = 1024 apart). */
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32) |
         (1ull << 62);
}
/* A descriptor moved `bytes` further into shared memory: the start address is the low word's
 * low 14 bits (in 16-byte units), and shared memory ends below 2^18 bytes, so no carry leaves
 * the field and one 32-bit add does it. */
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)desc + (bytes >> 4));
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* A box of a 4-D tensor map at coordinates (c0 innermost, .., c3) into shared memory. */
__device__ __forceinline__ void tma_load_4d(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t c0, int32_t c1,
                                            int32_t c2, int32_t c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
/* The same box into the same shared-memory offset of every block of the cluster in `mask`
 * (bit r: rank r), completing bytes on each one's mbarrier at `bar`'s offset. */
__device__ __forceinline__ void tma_load_4d_multicast(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                                                      int32_t c1, int32_t c2, int32_t c3, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%3, %4, %5, %6}], [%2], %7;" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(mask)
      : "memory");
}
/* Thread block clusters: this block's rank, a barrier of every thread of the cluster (memory
 * ordered at cluster scope; threads that have exited are not waited for), loads from another
 * block's shared memory, and an arrival on the mbarrier at `bar`'s offset in block `rank`'s
 * shared memory (release at CTA scope, the default: a cluster-scope release puts a fence
 * before every arrival, which stalls the consumer warps; bench/RESULTS.md). */
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}
/* The same barrier with a relaxed arrival (no fence: a release waits for the block's global
 * stores to complete): for a cluster's last barrier, which only keeps each block's shared memory
 * until the others have read it, where every value a thread loaded from another block feeds a
 * store it issues before arriving (so the load has completed). */
__device__ __forceinline__ void cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;" ::: "memory");
}
/* A float4 / a float at `p`'s offset in the shared memory of cluster block `rank`. */
__device__ __forceinline__ float4 ld_cluster_f4(const void *p, uint32_t rank) {
  float4 v;
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %4, %5;\nld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [ra];\n}"
      : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
      : "r"(smem_addr(p)), "r"(rank)
      : "memory");
  return v;
}
__device__ __forceinline__ float ld_cluster_f32(const void *p, uint32_t rank) {
  float v;
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %1, %2;\nld.shared::cluster.f32 %0, [ra];\n}"
               : "=f"(v)
               : "r"(smem_addr(p)), "r"(rank)
               : "memory");
  return v;
}
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t rank) {
  asm volatile(
      "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, "
      "[ra];\n}" ::"r"(smem_addr(bar)),
      "r"(rank)
      : "memory");
}
/* Named barriers among a subset of warps (id 0 is __syncthreads'): sync waits until `count`
 * threads arrived or synced; arrive counts without waiting. */
__device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
#endif

/* TMA stores (not behind the sm_90a guard: the epilogues that call them are compiled for
 * every target, the kernels that call those only for sm_90a). Shared memory written by
 * ordinary stores (stmatrix included) is made visible to the copy engine by
 * fence_proxy_async in every writing thread, then a barrier, then one thread issues the store
 * and commits it as a bulk group; that thread alone may wait on its groups: bulk_wait_read<N>
 * until at most N groups still read shared memory (their source may be rewritten),
 * bulk_wait<N> until at most N are incomplete. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
/* A box of a 3-D tensor map at coordinates (c0 innermost, c1, c2) from shared memory;
 * elements past the tensor's edges are not written. */
__device__ __forceinline__ void tma_store(const CUtensorMap *map, const void *src, int32_t c0, int32_t c1,
                                          int32_t c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
/* A box of a 4-D tensor map at coordinates (c0 innermost, .., c3) from shared memory; the
 * same bounds as tma_store. */
__device__ __forceinline__ void tma_store_4d(const CUtensorMap *map, const void *src, int32_t c0, int32_t c1,
                                             int32_t c2, int32_t c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
               : "memory");
}
/* One lane of the warp, the same one each time the whole warp calls it (elect.sync over every
 * lane): a branch the compiler knows is taken by one lane of a converged warp, so that the
 * warp-uniform operands of what it issues (a TMA store's map and coordinates) stay in
 * uniform registers, which a branch on the lane index loses. */
__device__ __forceinline__ bool elect_one() {
  uint32_t pred = 0;
  asm volatile("{\n.reg .pred p;\nelect.sync _|p, 0xffffffff;\nselp.u32 %0, 1, 0, p;\n}\n" : "=r"(pred));
  return pred != 0;
}
/* The same box added element-wise (f32) into the tensor in global memory: an atomic
 * reduction a 128-byte line at a time, done by the copy engine. */
__device__ __forceinline__ void tma_reduce_add(const CUtensorMap *map, const void *src, int32_t c0, int32_t c1,
                                               int32_t c2) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
/* Orders this thread's ordinary accesses of global memory with its bulk copies' (both ways). */
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N> __device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
/* Four 8x8 matrices of 16-bit elements from a warp's mma fragments into shared memory: lane
 * l gives the address of row l % 8 of matrix l / 8; register i holds the thread's pair of
 * matrix i (row lane / 4, columns 2 (lane % 4) + {0, 1}). */
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace sm90
}  // namespace opsi

#endif /* OPSLIB_KERNELS_COMMON_SM90_ASYNC_CUH_ */
