/*
 * The Hopper attention backward (sm_90a): TMA + wgmma, warp-specialized, dQ summed in f32 by
 * TMA reductions, in whatever order they land or (DET) in a fixed order. Three launches:
 *
 *   dsum:   D = rowsum(dout * o) into the workspace, each (row, head)'s dQ accumulators zeroed
 *           (sdpa_bwd_mma.cuh's kernel).
 *   main:   a block owns BN = 128 keys of one (batch, KV head); one producer warpgroup and two
 *           consumer warpgroups of 64 keys each. The producer loads K and V once, then for each
 *           query head of the group and each query tile of BM rows that sees the keys (DP 128:
 *           64, one wgmma M; DP 64: 128, so that each warpgroup takes half of every tile's dQ),
 *           Q and dout (TMA) into a ring of STAGES; the consumers load the tile's LSE and D a
 *           tile ahead. Each consumer warpgroup, per tile:
 *             S^T = K Q^T, dP^T = V dout^T            (wgmma, A = K / V, B = Q / dout K-major)
 *             P^T = exp2(S^T scale log2(e) - LSE log2(e)), dS^T = P^T (dP^T - D)   (registers)
 *             dV += P^T dout, dK += dS^T Q            (wgmma, A from registers, B N-major)
 *             dS to shared memory (stmatrix, transposed: dS[query][key])
 *             dQ_tile = dS K over the block's 128 keys (wgmma; each warpgroup a 64 x 64 piece,
 *             64 columns at DP 128, 64 rows at DP 64), into the warpgroup's f32 piece in
 *             shared memory, which the producer warpgroup's dQ writer adds to the
 *             accumulators by TMA reductions (cp.reduce.async.bulk.tensor .add, a box of 64
 *             rows x 32 columns at a time) and hands back once the copy engine has read it
 *           then dK times the scale and dV stored once (a GQA group's sum stays in the block),
 *           staged in K's and V's shared memory for whole-row 16-byte stores;
 *           or, where the key tiles fill too little of a wave (kv_parts > 1; not at DP 256),
 *           each key tile's walk is cut in parts, a block each, and the part that finishes
 *           last adds the parts' dK and dV sums in part order (last_part) and stores.
 *   dq:     dq = the accumulators times the scale, rounded to T.
 * DP 256: a consumer warpgroup's dK or dV of 64 keys is all the registers it has (m64n256, 128 a
 * thread), so a block owns BN = 64 keys, streams query tiles of 64 in one stage, and its two
 * consumer warpgroups split the five products instead of the keys (consume_d256): the first
 * computes S^T = K Q^T and P, hands P to the second through shared memory (f32) and adds
 * dV += P^T dout; the second computes dP^T = V dout^T, dS^T = P^T (dP^T - D), stores dS and
 * adds dK += dS^T Q; each then takes half of dQ = dS K's columns (64 x 128) to its piece.
 * A row whose LSE is -inf and rows past a sequence's end take an LSE of +inf (P = 0). Keys
 * and query rows past the tensors' extents read as zeros (TMA); varlen's neighbouring rows
 * are masked like any key past the end. Blocks start their walk over the query tiles at a
 * place of their own, so that the key tiles of a head do not all add into the same dQ rows at
 * once. Where a causal mask or a window makes the walks' lengths differ from key tile to key
 * tile, blocks launch in chunks of order_chunk (batch, KV head) groups (as many as a wave
 * holds), within a chunk every group's first key tile (its longest walk) first, then the
 * second, and so on: the longest walks start first, whatever the group.
 *
 * DET (bitwise reproducible dQ): the blocks of a (batch, KV head) take their turns at a (query
 * tile, head)'s accumulators in one of three orders (bg.walk_order, chosen by shape:
 * opsi_sdpa_bwd_sm90_walk_order; descending walks a kernel of their own):
 *   ascending walks: every block walks from its first tile, and the turns go from the last key
 *     tile that sees the query tile down to the first: the order in which causal walks reach
 *     it (a later key tile starts at a later query tile, one step ahead of the key tile before
 *     it; without a mask they all reach it at the same step). Blocks launch last key tile
 *     first.
 *   descending walks (where causal walks shrink by several steps a key tile, or the key tiles
 *     are few): every block walks its query tiles from the last to the first, the group's
 *     query heads within each, and the turns go from the first key tile that sees the query
 *     tile to the last: every key tile reaches it at the same step (causal walks differ only
 *     in where they end), each waiting for the ones before it at its first tile only, while
 *     the longest walks, the first key tiles', start first and never wait.
 *   round (no mask: every key tile's walk takes the same steps): every block walks from a
 *     place of its own, as the default kernels' do, and the turns at a step's tile go in the
 *     order the walks' parts reach it (dq_turn_round), so that they reach their tiles a step
 *     apart and hand over under that step. A block then also waits for blocks launched after
 *     it: the launch is cooperative (every block resident at once).
 * Blocks launch in chunks of order_chunk (batch, KV head) groups (as many as a wave holds),
 * within a chunk every group's key tile of the first turn first (its parts side by side), then
 * the next, and so on: a block of the first two orders waits only for blocks launched before
 * it. Walks in parts go ascending or round, each part taking its run of the whole walk's steps
 * and the turns there.
 * A turn is an int32 counter a (query tile, head) in the workspace, zeroed by the dsum launch.
 * A keeper thread (the producer warpgroup's second warp) takes the block's turns up to two
 * tiles ahead of the dQ writer: once the counter counts the key tiles whose turn comes before
 * its own, it opens the tile's turn mbarrier; the writer waits on that, adds, waits for its
 * reductions to complete, makes them visible (fence), counts the block in and arrives on the
 * tile's added mbarrier, which the keeper polls beside the next turn's counter (the two
 * tiles it may run ahead). The consumers neither poll nor fence.
 * A dQ piece's rows past its sequence's end (its tile's last rows) are zeros (P is 0 there),
 * which the reduction adds to the next sequence's rows or clips at the tensor's end: adding
 * +-0 changes no sum, in any order.
 *
 * Operands: [B, S, H, D] views with unit-stride rows, 16-byte aligned base and strides (TMA),
 * head dims up to DP (zero columns beyond, which the products carry along).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_CUH_

#include <cuda.h>

#include "kernels/common/launch_status.h"
#include "kernels/common/sm90_async.cuh"
#include "kernels/common/sm90_stage.cuh"
#include "kernels/common/wgmma_ops.cuh"
#include "kernels/flash/sdpa_bwd_mma.cuh"
#include "kernels/flash/sdpa_bwd_sm90_shape.h"

namespace opsi {
namespace fa3bwd {

using sdpa_bwd_geom = ::opsi_sdpa_bwd_geom;

template <int DP_> struct cfg {
  static constexpr int DP = DP_, BN = OPSI_SDPA_BWD_SM90_BN_OF(DP_), BM = OPSI_SDPA_BWD_SM90_BM_OF(DP_);
  static constexpr int STAGES = OPSI_SDPA_BWD_SM90_STAGES_OF(DP_);
  static constexpr int LOAD_REGS = OPSI_SDPA_BWD_SM90_LOAD_REGS, MMA_REGS = OPSI_SDPA_BWD_SM90_MMA_REGS;
  static constexpr int THREADS = 384;
  static constexpr int KV_BYTES = BN * DP * 2, Q_BYTES = BM * DP * 2, DS_BYTES = BM * BN * 2;
  static constexpr int DQ_BYTES = OPSI_SDPA_BWD_SM90_DQ_BYTES_OF(DP_), XP_BYTES = OPSI_SDPA_BWD_SM90_XP_BYTES_OF(DP_);
  static constexpr int DQ_BOXES = DQ_BYTES / (64 * 32 * 4); /* a piece's boxes of 64 rows x 32 f32 columns */
  static constexpr int SMEM_BYTES = OPSI_SDPA_BWD_SM90_SMEM(DP);
  static_assert(BN == (DP == 256 ? 64 : 128), "consumer warpgroups of 64 keys each, or both on 64 (DP 256)");
  static_assert((DP == 64 && BM == 128) || (DP >= 128 && BM == 64), "dQ in two pieces of 64 rows a step");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory of one block");
  /* setmaxnreg moves registers within the block's launch allocation (65536 / THREADS a thread,
   * rounded down to 8), not the SM's whole file: an increase beyond it waits forever */
  static_assert(LOAD_REGS * 128 + MMA_REGS * 256 <= THREADS * (65536 / THREADS / 8 * 8), "register split");
};

/* Shared memory, 1024-byte aligned (the swizzle's atom): K, V (BN x DP), the ring's Q and
 * dout (BM x DP a stage), dS (2 buffers of BM x BN), each as boxes of 64 columns; dQ's pieces
 * (a consumer warpgroup's 64 rows of f32, as boxes of 32 columns: DQ_BYTES each); DP 256's P
 * (XP_BYTES); LSE (log2) and D (2 buffers of BM floats each); the mbarriers (DET's turn and
 * added: 2 each; a full and an empty a dQ piece). */
template <typename C> struct smem_plan {
  uint8_t *k, *v, *q, *dout, *ds, *dq;
  float *xp, *lse, *dsum;
  uint64_t *kv_full, *full, *empty, *turn, *added, *dq_full, *dq_empty;
  __device__ __forceinline__ explicit smem_plan(uint8_t *raw) {
    k = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    v = k + C::KV_BYTES, q = v + C::KV_BYTES, dout = q + C::STAGES * C::Q_BYTES;
    ds = dout + C::STAGES * C::Q_BYTES, dq = ds + 2 * C::DS_BYTES;
    xp = reinterpret_cast<float *>(dq + 2 * C::DQ_BYTES);
    lse = reinterpret_cast<float *>(dq + 2 * C::DQ_BYTES + C::XP_BYTES), dsum = lse + 2 * C::BM;
    kv_full = reinterpret_cast<uint64_t *>(dsum + 2 * C::BM);
    full = kv_full + 1, empty = full + C::STAGES, turn = empty + C::STAGES, added = turn + 2;
    dq_full = added + 2, dq_empty = dq_full + 2;
  }
};

/* A key tile's walk: the query tiles of BM rows that see its keys [n0, n0 + BN), for each
 * query head of the KV head's group: `total` steps, taken from a place of the tile's own
 * (rotate) or from the first. Part `part` of `parts` (kv_parts, sdpa_bwd_sm90_shape.h) is the
 * block's: `count` consecutive steps of that order, from step `first`. A cursor follows them
 * one step at a time (no division a step); walk_cursor<true> (DET's descending walks, whole)
 * takes the query tiles from the last to the first instead, the group's query heads within
 * each. */
struct walk {
  int t0, tiles, first;
  int64_t total, count;
  int hk, group;
  __device__ __forceinline__ walk(const sdpa_geom &g, const sdpa_seq &s, int n0, int bn, int bm, int hk_,
                                  bool rotate, int parts, int part) {
    sdpa_query_tiles(g, s, n0, min(n0 + bn, s.sk) - 1, bm, &t0, &tiles);
    hk = hk_, group = g.group;
    total = (int64_t)tiles * group;
    const int64_t lo = total * part / parts, hi = total * (part + 1) / parts;
    count = hi - lo;
    /* a place of the tile's own: its index mod total (the division only where it wraps) */
    const int64_t own = rotate && total > 0 ? (n0 / bn < total ? n0 / bn : n0 / bn % (int)total) : 0;
    first = (int)(own + lo < total ? own + lo : own + lo - total);
  }
};

template <bool DESC> struct walk_cursor {
  int hi, ti, tiles, group, h0, t0; /* the step's query head and tile within the walk */
  __device__ __forceinline__ explicit walk_cursor(const walk &w)
      : hi(w.tiles > 0 ? w.first / w.tiles : 0), ti(w.tiles > 0 ? w.first % w.tiles : 0), tiles(w.tiles),
        group(w.group), h0(w.hk * w.group), t0(w.t0) {
    if (DESC) hi = 0, ti = w.tiles - 1;
  }
  __device__ __forceinline__ int h() const { return h0 + hi; }
  __device__ __forceinline__ int m0(int bm) const { return (t0 + ti) * bm; }
  __device__ __forceinline__ void advance() {
    if (DESC) {
      if (++hi == group) hi = 0, --ti;
    } else if (++ti == tiles) {
      ti = 0;
      if (++hi == group) hi = 0;
    }
  }
};

/* DET: how many key tiles take their turn at query tile m (of BM rows) before key tile `blk`
 * (of BN keys): those after it that see m, or (DESC) those before it. The key tiles that see
 * m are a run (sdpa_query_tiles' first and last tiles grow with the keys) around blk: its last,
 * by bisection, is the last key tile whose first query tile is at or before m; its first, the
 * first key tile whose last query tile reaches m. */
template <bool DESC>
__device__ __forceinline__ int dq_turn(const sdpa_geom &g, const sdpa_seq &s, int blk, int m, int bn, int bm) {
  int lo = DESC ? 0 : blk, hi = DESC ? blk : (s.sk - 1) / bn;
  while (lo < hi) {
    const int mid = DESC ? lo + (hi - lo) / 2 : lo + (hi - lo + 1) / 2;
    int t0, tiles;
    sdpa_query_tiles(g, s, mid * bn, min(mid * bn + bn, s.sk) - 1, bm, &t0, &tiles);
    if (DESC) {
      if (tiles > 0 && t0 + tiles - 1 >= m) hi = mid;
      else lo = mid + 1;
    } else {
      if (tiles > 0 && t0 <= m) lo = mid;
      else hi = mid - 1;
    }
  }
  return DESC ? blk - lo : lo - blk;
}
/* DET, round (a sequence's walk in parts of one length, `len` steps, its key tiles no more
 * than that): how many key tiles take their turn before key tile `blk` (of `tiles`) at the
 * tile of its part's step `d`. Key tile j's walk starts at its step j, so the tile of place q
 * (in the (query head, query tile) order) is step (q - j) mod len of a part of key tile j:
 * those of an earlier step, the key tiles blk + 1 .. blk + d (mod len). */
__device__ __forceinline__ int dq_turn_round(int blk, int d, int len, int tiles) {
  const int end = blk + d + 1;
  return end <= len ? min(tiles, end) - blk - 1 : tiles - blk - 1 + min(tiles, end - len);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* DET's turn counters: whether *p has reached n (acquire; "reached", not "equals", so that
 * cu_seqlens whose sequences overlap, which share counters, cannot hang a block); count one
 * (release, after a fence that makes what the consumers added, ordered before it by the
 * added mbarrier, visible at gpu scope). */
__device__ __forceinline__ bool turn_reached(const int *p, int n) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v >= n;
}
__device__ __forceinline__ void end_turn(int *p) {
  __threadfence();
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(p) : "memory");
}

/* Four 8x8 matrices of a warp's fragments into shared memory transposed: register i holds the
 * thread's pair of matrix i (row lane / 4, columns 2 (lane % 4) + {0, 1}), and lane l gives the
 * address of row l % 8 of matrix l / 8 as stored, which holds the matrix's column l % 8. */
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

/* dS[query][key] (BM x BN, boxes of 64 keys, 128-byte swizzle) from a warp's fragments of its
 * 16 keys from key0, transposed: matrix i of k16 step kt is keys key0 + (i % 2) 8 ..,
 * queries 16 kt + (i / 2) 8 ..; its stored row l % 8 is query 16 kt + (i / 2) 8 + l % 8 */
template <int BM>
__device__ __forceinline__ void store_ds(uint8_t *dsb, int key0, int lane, const uint32_t (&da)[BM / 16][4]) {
  const int mi = lane / 8, kq = key0 + (mi % 2) * 8;
#pragma unroll
  for (int kt = 0; kt < BM / 16; ++kt) {
    const int q = kt * 16 + (mi / 2) * 8 + lane % 8;
    const uint32_t addr =
        sm90::smem_addr(dsb + (kq / 64) * BM * 128 + q * 128 + ((((kq % 64) / 8) ^ (q % 8)) << 4));
    stmatrix_x4_trans(addr, da[kt]);
  }
}

/* A consumer warp's 16 rows of its warpgroup's dQ piece (the m64n64 accumulators) into the
 * piece's two boxes of 32 f32 columns, each 64 rows of 128 bytes whose 16-byte chunks are
 * XOR-swizzled by row % 8 (the tensor map's 128-byte swizzle). A warp's store is 8 rows x 32
 * bytes: two 8-byte words a bank pair, no more conflicts than its 256 bytes need. */
__device__ __forceinline__ void put_dq(uint8_t *piece, int wl, int lane, const float (&dqa)[32]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = wl * 16 + lane / 4 + half * 8;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      const int chunk = (n % 4) * 2 + (lane % 4) / 2;
      const uint32_t addr = sm90::smem_addr(piece + (n / 4) * 8192 + r * 128 + ((chunk ^ (r % 8)) << 4) + (lane % 2) * 8);
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(dqa[n * 4 + half * 2]),
                   "f"(dqa[n * 4 + half * 2 + 1])
                   : "memory");
    }
  }
}

/* An f32 of shared memory (the LSE and D rows), by a shared-memory load. */
__device__ __forceinline__ float ld_shared_f32(const float *p) {
  float x;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(x) : "r"(sm90::smem_addr(p)) : "memory");
  return x;
}

template <typename T, int N>
__device__ __forceinline__ void round_frags(const float (&x)[N / 2], uint32_t (&a)[N / 16][4]) {
#pragma unroll
  for (int kt = 0; kt < N / 16; ++kt) {
    a[kt][0] = pack2<T>(x[kt * 8 + 0], x[kt * 8 + 1]);
    a[kt][1] = pack2<T>(x[kt * 8 + 2], x[kt * 8 + 3]);
    a[kt][2] = pack2<T>(x[kt * 8 + 4], x[kt * 8 + 5]);
    a[kt][3] = pack2<T>(x[kt * 8 + 6], x[kt * 8 + 7]);
  }
}

/* A consumer warp's 16 rows of dK or dV (f32 accumulators of the m64nDP layout, times `mul`)
 * into the gradient through `stage` (a staging tile, kernels/common/sm90_stage.cuh, in shared
 * memory no product reads any more), stored a whole row per DP / 8 lanes (the rows are 16-byte
 * aligned). Rows past the sequence's end and columns past `cols` are not written. */
template <typename T, int DP>
__device__ __forceinline__ void store_rows(uint8_t *stage, const sdpa_view &out, int b, int64_t row0, int rows, int hk,
                                           int cols, const float (&acc)[DP / 2], float mul, int lane) {
  const float muls[2] = {mul, mul};
  sm90::stage_rows<T, DP>(stage, acc, muls, lane);
  __syncwarp();
  T *base = static_cast<T *>(const_cast<void *>(out.p)) + b * out.sb + hk * out.sh + row0 * out.ss;
  sm90::store_staged<T, DP>(stage, base, out.ss, rows, cols, lane);
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* A part of key tile `tile` (kv_parts, sdpa_bwd_sm90_shape.h), run by the 256 consumer threads
 * after their walk: its dK and dV sums into its slot of the workspace (float4 j of consumer
 * thread t at [tile][part][j][t]: coalesced), then the tile's counter (`done`: the key tiles'
 * counters of parts done) counts it in. The part that counts last returns true with dk and dv
 * replaced by the sum of every part's, added in part order (its own read back like the
 * others'), a part's every float4 of dK (then of dV) loaded at once before they are added; the
 * others return false. `flag`: a word of shared memory no longer in use (the walk's LSE
 * buffer). */
template <int DP>
__device__ __forceinline__ bool last_part(const sdpa_bwd_geom &bg, int32_t *done, float *flag, int64_t tile,
                                          int parts, int part, float (&dk)[DP / 2], float (&dv)[DP / 2]) {
  constexpr int J = DP / 8; /* float4s of dK, then as many of dV */
  const int t = threadIdx.x - 128;
  float4 *slots = reinterpret_cast<float4 *>(bg.kv_sums) + tile * parts * (2 * J) * 256 + t;
  float4 *mine = slots + (int64_t)part * (2 * J) * 256;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    mine[j * 256] = make_float4(dk[j * 4], dk[j * 4 + 1], dk[j * 4 + 2], dk[j * 4 + 3]);
    mine[(J + j) * 256] = make_float4(dv[j * 4], dv[j * 4 + 1], dv[j * 4 + 2], dv[j * 4 + 3]);
  }
  __threadfence();             /* my sums are visible before the count that says so */
  sm90::named_bar_sync(1, 256); /* every consumer's sums are out (and the walk's reads of `flag` done) */
  if (t == 0) {
    const int before = atomicAdd(done + tile, 1);
    __threadfence(); /* the other parts' sums, which their counts were ordered after, are seen */
    *reinterpret_cast<volatile int *>(flag) = before == parts - 1;
  }
  sm90::named_bar_sync(1, 256);
  if (*reinterpret_cast<volatile int *>(flag) == 0) return false;
  const auto add_parts = [&](float(&acc)[DP / 2], int at) { /* at: dK's float4s (0) or dV's (J) */
    for (int q = 0; q < parts; ++q) { /* in part order */
      float4 x[J];
#pragma unroll
      for (int j = 0; j < J; ++j) x[j] = __ldcg(slots + ((int64_t)q * 2 * J + at + j) * 256);
#pragma unroll
      for (int j = 0; j < J; ++j) {
        if (q == 0) acc[j * 4] = x[j].x, acc[j * 4 + 1] = x[j].y, acc[j * 4 + 2] = x[j].z, acc[j * 4 + 3] = x[j].w;
        else acc[j * 4] += x[j].x, acc[j * 4 + 1] += x[j].y, acc[j * 4 + 2] += x[j].z, acc[j * 4 + 3] += x[j].w;
      }
    }
  };
  add_parts(dk, 0);
  add_parts(dv, J);
  return true;
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* One wgmma group of a consumer warpgroup: 64 rows of K or V (a, K-major, boxes of BN rows)
 * against stage st's BM rows of Q or dout (b, K-major) over the head dim: S^T = K Q^T or
 * dP^T = V dout^T. */
template <typename T, typename C>
__device__ __forceinline__ void issue_scores(int st, uint64_t a, uint64_t b, float (&acc)[C::BM / 2]) {
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < C::DP / 16; ++kk) {
    const uint32_t ka = (kk / 4) * C::BN * 128 + (kk % 4) * 32;
    const uint32_t qb = st * C::Q_BYTES + (kk / 4) * C::BM * 128 + (kk % 4) * 32;
    wgmma<T, C::BM, false>::mma(acc, sm90::desc_advance(a, ka), sm90::desc_advance(b, qb), kk > 0 ? 1u : 0u);
  }
  sm90::wgmma_commit();
}

/* DP 256's consumer warpgroups (cfg<256>: BN = BM = 64, one stage; the header says who does
 * what), after the kernel's setup: consumer warpgroup cw (0 or 1) of the block at keys n0.
 * Warp wl of a warpgroup holds keys wl 16 .. of every m64 product, its accumulators (acc: dV
 * for cw 0, dK for cw 1) as m64n256. Tile it, in order:
 *   both: wait for the stage; S^T (cw 0) or dP^T (cw 1) = K or V (A) x Q or dout (B, K-major)
 *   cw 0: P = exp2(S^T scale log2(e) - LSE log2(e)) into xp (f32, float4 j of thread t at
 *         [j][t]), arrive on barrier 2; dV += P^T dout (A from registers)
 *   cw 1: wait on barrier 2, read P, dS^T = P (dP^T - D), dS to shared memory (buffer it % 2,
 *         stmatrix transposed: dS[query][key]); dK += dS^T Q (A from registers)
 *   both: barrier 1 (dS in place; tile it + 1's LSE and D stored); dQ's columns cw 128 ..
 *         = dS K (64 x 128); hand the stage back once dV / dK are done, and dQ to the writer.
 * xp is written again only after barrier 1, which cw 1 reaches after reading it; dS buffer
 * it % 2 only after barrier 2 of tile it + 2, which cw 0 reaches after its dQ of tile it. */
template <typename T, bool DESC>
__device__ __forceinline__ void consume_d256(const smem_plan<cfg<256>> &sm, const sdpa_bwd_geom &bg,
                                             const sdpa_seq &s, const walk &wk, int b, int hk, int n0) {
  using namespace opsi::sm90;
  using C = cfg<256>;
  constexpr int DP = C::DP, BN = C::BN, BM = C::BM, STAGES = C::STAGES;
  const sdpa_geom &g = bg.f;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, cw = warp / 4 - 1, wl = warp % 4;
  const int key0 = wl * 16, t = threadIdx.x % 128;
  /* descriptors: K or V (A of S^T / dP^T), Q or dout (its B, K-major), dout or Q (B of dV /
   * dK, N-major), dS buffer 0 (A of dQ), K's columns cw 128 .. (B of dQ, N-major) */
  const uint64_t a_kv = smem_desc(smem_addr(cw == 0 ? sm.k : sm.v), 16, 1024);
  const uint64_t b_qo = smem_desc(smem_addr(cw == 0 ? sm.q : sm.dout), 16, 1024);
  const uint64_t b_grad = smem_desc(smem_addr(cw == 0 ? sm.dout : sm.q), BM * 128, 1024);
  const uint64_t a_ds = smem_desc(smem_addr(sm.ds), 16, 1024);
  const uint64_t b_k = smem_desc(smem_addr(sm.k) + cw * 2 * BN * 128, BN * 128, 1024);
  float acc[DP / 2];
#pragma unroll
  for (int i = 0; i < DP / 2; ++i) acc[i] = 0.0f;

  /* LSE (log2) for cw 0, D for cw 1, of tile it's rows in buffer it % 2: a row a thread of the
   * warpgroup's first BM, a tile ahead */
  const auto fetch = [&](const walk_cursor<DESC> &c) {
    const int h = c.h(), m0 = c.m0(BM);
    return t >= BM ? 0.0f : cw == 0 ? fa2bwd::lse_raw(g, s, b, h, m0 + t) : fa2bwd::dsum_at(bg, s, b, h, m0 + t);
  };
  const auto put = [&](int64_t it, float x) {
    if (t < BM) (cw == 0 ? sm.lse : sm.dsum)[(it & 1) * BM + t] = cw == 0 ? fa2bwd::lse_to_log2(x) : x;
  };
  walk_cursor<DESC> cur(wk), nxt(wk);
  if (wk.count > 0) {
    put(0, fetch(cur));
    named_bar_sync(1, 256);
  }
  nxt.advance();
  mbar_wait(sm.kv_full, 0);

  float4 *xp = reinterpret_cast<float4 *>(sm.xp) + t;
  for (int64_t it = 0; it < wk.count; ++it, cur = nxt, nxt.advance()) {
    const ring_pos<STAGES> pos{(int)it};
    const int st = pos.stage(), h = cur.h(), m0 = cur.m0(BM);
    float sc[BM / 2]; /* S^T (cw 0) or dP^T (cw 1): 64 keys x BM queries */
    mbar_wait(&sm.full[st], pos.full_parity());
    issue_scores<T, C>(st, a_kv, b_qo, sc);
    const float next = it + 1 < wk.count ? fetch(nxt) : 0.0f;
    const float *lb = sm.lse + (it & 1) * BM, *db = sm.dsum + (it & 1) * BM;
    const auto col = [&](int n, int e) { return n * 8 + (lane % 4) * 2 + e % 2; };
    auto &x4 = reinterpret_cast<float(&)[BM / 8][4]>(sc);
    uint32_t fa[BM / 16][4];
    wgmma_wait<0>();
    fence_regs(sc);
    if (cw == 0) {
      const bool unmasked = sdpa_tile_unmasked(g, s, m0, min(m0 + BM, s.sq) - 1, n0, BN);
      fa2bwd::probabilities<true>(g, s, b, h, unmasked, n0 + key0, m0, lane, x4,
                                  [&](int n, int e) { return ld_shared_f32(lb + col(n, e)); });
#pragma unroll
      for (int j = 0; j < BM / 8; ++j) xp[j * 128] = make_float4(x4[j][0], x4[j][1], x4[j][2], x4[j][3]);
      round_frags<T, BM>(sc, fa);
      named_bar_arrive(2, 256); /* P is in place for cw 1 */
    } else {
      named_bar_sync(2, 256);
      float p4[BM / 8][4];
#pragma unroll
      for (int j = 0; j < BM / 8; ++j) {
        const float4 v = xp[j * 128];
        p4[j][0] = v.x, p4[j][1] = v.y, p4[j][2] = v.z, p4[j][3] = v.w;
      }
      fa2bwd::score_grads(x4, p4, [&](int n, int e) { return ld_shared_f32(db + col(n, e)); });
      round_frags<T, BM>(sc, fa);
      store_ds<BM>(sm.ds + (it & 1) * C::DS_BYTES, key0, lane, fa); /* dS into buffer it % 2 */
      fence_proxy_async(); /* dS, written by stmatrix, is read by wgmma */
    }
    /* dV += P^T dout (cw 0), dK += dS^T Q (cw 1) */
    wgmma_fence();
#pragma unroll
    for (int kt = 0; kt < BM / 16; ++kt) {
      wgmma_rs<T, DP>::mma(acc, fa[kt], desc_advance(b_grad, st * C::Q_BYTES + kt * 16 * 128), 1u);
    }
    wgmma_commit();
    if (it + 1 < wk.count) put(it + 1, next);
    named_bar_sync(1, 256); /* dS in place, and tile it + 1's LSE and D */

    float dqa[64]; /* dQ's 64 x 128 piece of columns cw 128 .. */
    const uint64_t a0 = desc_advance(a_ds, (uint32_t)(it & 1) * C::DS_BYTES);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      wgmma<T, 128, true>::mma(dqa, desc_advance(a0, (kk % 4) * 32), desc_advance(b_k, kk * 16 * 128),
                               kk > 0 ? 1u : 0u);
    }
    wgmma_commit();
    wgmma_wait<1>(); /* dV / dK read their last of the stage */
    fence_regs(acc);
    if (lane == 0) mbar_arrive(&sm.empty[st]);
    wgmma_wait<0>();
    fence_regs(dqa);
    mbar_wait(&sm.dq_empty[cw], ((uint32_t)it & 1u) ^ 1u);
    put_dq(sm.dq + cw * C::DQ_BYTES, wl, lane, reinterpret_cast<const float(&)[32]>(dqa[0]));
    put_dq(sm.dq + cw * C::DQ_BYTES + C::DQ_BYTES / 2, wl, lane, reinterpret_cast<const float(&)[32]>(dqa[32]));
    fence_proxy_async();
    __syncwarp();
    if (lane == 0) mbar_arrive(&sm.dq_full[cw]);
  }

  /* dV (cw 0) or dK times the scale (cw 1), staged in the warp's rows of V or K, which no
   * product reads once both warpgroups are past their last */
  named_bar_sync(1, 256);
  const int rows = min(16, s.sk - (n0 + key0));
  const int64_t row0 = s.k0 + n0 + key0, at = (int64_t)key0 * DP * 2;
  if (cw == 0) store_rows<T, DP>(sm.v + at, bg.dv, b, row0, rows, hk, g.dv, acc, 1.0f, lane);
  else store_rows<T, DP>(sm.k + at, bg.dk, b, row0, rows, hk, g.d, acc, bg.scale, lane);
}
#endif

/* The main pass: grid (key tiles of BN x parts, Hkv, batch; launched in another order where
 * order_chunk says so). The tensor
 * maps' axes: (d, s, h, b); varlen: (d, t, h, 1) with s = the sequence's start + row. SPLIT:
 * the key tiles' walks are in kv_parts parts (a kernel of its own: a launch in one part
 * carries none of the parts' code). */
template <typename T, int DP, bool DET, bool SPLIT, bool DESC = false>
__global__ void __launch_bounds__(cfg<DP>::THREADS, 1)
    sdpa_bwd_sm90_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                         const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                         const __grid_constant__ CUtensorMap map_dq, const sdpa_bwd_geom bg) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  /* A programmatic dependent launch (launch_sdpa_bwd_sm90): nothing the dsum launch writes
   * (D, the zeroed dQ accumulators and counters) is touched before it has completed, and no
   * block exits before it has (the dQ conversion's wait covers this launch alone). */
  asm volatile("griddepcontrol.wait;" ::: "memory");
  using namespace opsi::sm90;
  using C = cfg<DP>;
  constexpr int BN = C::BN, BM = C::BM, STAGES = C::STAGES;
  const sdpa_geom &g = bg.f;
  extern __shared__ uint8_t smem_raw[];
  const smem_plan<C> sm(smem_raw);
  /* grid x: key tiles x parts, a key tile's parts side by side (SPLIT: kv_parts > 1) */
  const int parts = SPLIT ? bg.kv_parts : 1;
  int b = blockIdx.z, hk = blockIdx.y, x = blockIdx.x;
  if (bg.order_chunk > 0) { /* the launch order: see order_chunk */
    const int nk = gridDim.x;
    const int64_t groups = (int64_t)gridDim.y * gridDim.z, per = (int64_t)bg.order_chunk * nk;
    const int64_t lin = blockIdx.x + (int64_t)nk * (blockIdx.y + (int64_t)gridDim.y * blockIdx.z);
    const int64_t chunk = lin / per, in = lin % per;
    const int cc = (int)min((int64_t)bg.order_chunk, groups - chunk * bg.order_chunk);
    const int64_t gi = chunk * bg.order_chunk + in % cc;
    x = DET && !DESC ? nk - 1 - (int)(in / cc) : (int)(in / cc), hk = (int)(gi % gridDim.y), b = (int)(gi / gridDim.y);
  }
  const int blk = x / parts, part = x % parts;
  const int n0 = blk * BN;
  const sdpa_seq s = sdpa_sequence(g, b);
  if (n0 >= s.sk) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = warp / 4;
  /* Step it's dQ (BM x DP), for the consumers and the dQ writer alike: consumer warpgroup cw
   * takes the 64 x 64 piece whose column half (DP 128, the halves alternating from step to
   * step) or row half (DP 64, BM 128) is dq_half(it, cw); at DP 256, column half cw (64 x 128). */
  const auto dq_half = [](int64_t it, int cw) { return DP == 128 ? (int)((it + cw) & 1) : cw; };
  /* the walks' order: round where the default kernels' (!DET) or DET's round order for a
   * sequence whose walk's parts are of one length, its key tiles no more than that (else
   * ascending) */
  const int64_t steps = (int64_t)g.group * ((s.sq + BM - 1) / BM); /* parts: 1, 2, 4 or 8 */
  const bool rot = !DET || (bg.walk_order == OPSI_SDPA_BWD_SM90_WALK_ROT && (steps & (parts - 1)) == 0 &&
                            (s.sk + BN - 1) / BN <= steps >> (__ffs(parts) - 1));
  const walk wk(g, s, n0, BN, BM, hk, rot, parts, part);
  const int bmap = sdpa_map_batch(g, b);
  /* DET: the turn counter of query head h's tile at row m0 (-1: none, for cu_seqlens that
   * reach past the workspace's tiles) */
  const auto turn_of = [&](int h, int m0) {
    const int64_t at = ((b * bg.dsum_sb + s.q0 + m0) / BM + b) * g.heads_q + h;
    return at < bg.dq_turns ? (int)at : -1;
  };

  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full, 1);
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(&sm.full[st], 1);
      mbar_init(&sm.empty[st], 8);     /* one arrival per consumer warp */
    }
    for (int i = 0; i < 2; ++i) {
      mbar_init(&sm.turn[i], 1);     /* the keeper */
      mbar_init(&sm.added[i], 1);    /* the dQ writer */
      mbar_init(&sm.dq_full[i], 4);  /* the warps of consumer warpgroup i */
      mbar_init(&sm.dq_empty[i], 1); /* the dQ writer */
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(C::LOAD_REGS));
    if (warp == 0 && lane == 0) {
      mbar_expect_tx(sm.kv_full, 2 * C::KV_BYTES);
#pragma unroll
      for (int c = 0; c < DP / 64; ++c) {
        tma_load_4d(sm.k + c * BN * 128, &map_k, sm.kv_full, c * 64, (int32_t)(s.k0 + n0), hk, bmap);
        tma_load_4d(sm.v + c * BN * 128, &map_v, sm.kv_full, c * 64, (int32_t)(s.k0 + n0), hk, bmap);
      }
      walk_cursor<DESC> cur(wk);
      for (int64_t it = 0; it < wk.count; ++it, cur.advance()) {
        const ring_pos<STAGES> pos{(int)it};
        const int st = pos.stage(), h = cur.h(), m0 = cur.m0(BM);
        mbar_wait<1000000>(&sm.empty[st], pos.empty_parity());
        mbar_expect_tx(&sm.full[st], 2 * C::Q_BYTES);
#pragma unroll
        for (int c = 0; c < DP / 64; ++c) {
          tma_load_4d(sm.q + st * C::Q_BYTES + c * BM * 128, &map_q, &sm.full[st], c * 64, (int32_t)(s.q0 + m0), h,
                      bmap);
          tma_load_4d(sm.dout + st * C::Q_BYTES + c * BM * 128, &map_do, &sm.full[st], c * 64, (int32_t)(s.q0 + m0),
                      h, bmap);
        }
      }
    } else if (warp == 2 && lane == 0) {
      /* the dQ writer: each step's two pieces into the accumulators, in the consumers' order;
       * DET: at the block's turn, complete and visible, the turn counted in, before the keeper
       * is told */
      walk_cursor<DESC> cur(wk);
      for (int64_t it = 0; it < wk.count; ++it, cur.advance()) {
        const int32_t row = (int32_t)(b * bg.dsum_sb + s.q0 + cur.m0(BM)), h = cur.h();
        if (DET) {
          mbar_wait(&sm.turn[it & 1], (uint32_t)(it >> 1) & 1);
          fence_proxy_async_global(); /* the turn's acquire before the copy engine's additions */
        }
#pragma unroll
        for (int cw = 0; cw < 2; ++cw) {
          const int half = dq_half(it, cw), cb = DP == 256 ? cw * 128 : DP == 128 ? half * 64 : 0;
          const int32_t rb = row + (DP == 64 ? half * 64 : 0);
          mbar_wait(&sm.dq_full[cw], (uint32_t)it & 1u);
#pragma unroll
          for (int j = 0; j < C::DQ_BOXES; ++j) {
            tma_reduce_add(&map_dq, sm.dq + cw * C::DQ_BYTES + j * (C::DQ_BYTES / C::DQ_BOXES), cb + 32 * j, h, rb);
          }
        }
        bulk_commit();
        /* the pieces read (DET: and added, before the turn is counted in): the consumers may
         * write the next ones */
        if (DET) bulk_wait<0>();
        else bulk_wait_read<0>();
        mbar_arrive(&sm.dq_empty[0]);
        mbar_arrive(&sm.dq_empty[1]);
        if (DET) {
          fence_proxy_async_global();
          const int at = turn_of(h, cur.m0(BM));
          if (at >= 0) end_turn(bg.dq_turn + at);
          mbar_arrive(&sm.added[it & 1]);
        }
      }
      bulk_wait<0>(); /* every addition complete before the block exits */
    } else if (DET && warp == 1 && lane == 0) {
      /* the keeper, polling two things at once so that neither waits for the other: the
       * turn of tile `taking` (at most two tiles ahead of the writer's additions; its
       * counter and the count to wait for: at, need), and the writer's end of tile `ending` */
      walk_cursor<DESC> ahead(wk);
      int at = -2, need = 0;
      for (int64_t taking = 0, ending = 0; ending < wk.count;) {
        if (ending < taking && mbar_done(&sm.added[ending & 1], (uint32_t)(ending >> 1) & 1)) {
          ++ending;
        } else if (taking < wk.count && taking < ending + 2) {
          if (at == -2) {
            at = turn_of(ahead.h(), ahead.m0(BM));
            need = at < 0 ? 0
                   : rot ? dq_turn_round(blk, (int)taking, (int)wk.count, (s.sk + BN - 1) / BN)
                           : dq_turn<DESC>(g, s, blk, ahead.t0 + ahead.ti, BN, BM);
          }
          if (at < 0 || turn_reached(bg.dq_turn + at, need)) {
            mbar_arrive(&sm.turn[taking & 1]);
            ahead.advance();
            ++taking, at = -2;
          }
        }
      }
    }
  } else if constexpr (DP == 256) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(C::MMA_REGS));
    consume_d256<T, DESC>(sm, bg, s, wk, b, hk, n0);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(C::MMA_REGS));
    const int cw = wg - 1, wl = warp % 4;
    const int key0 = cw * 64 + wl * 16; /* the warp's first key of the block */
    /* descriptors: my 64 keys of K and V (A, K-major), stage 0's Q and dout (B: K-major for
     * S^T and dP^T, N-major for dK and dV), dS buffer 0 (A of dQ), K's columns (B of dQ) */
    const uint64_t dk_a = smem_desc(smem_addr(sm.k) + cw * 64 * 128, 16, 1024);
    const uint64_t dv_a = smem_desc(smem_addr(sm.v) + cw * 64 * 128, 16, 1024);
    const uint64_t dq_b = smem_desc(smem_addr(sm.q), 16, 1024), ddo_b = smem_desc(smem_addr(sm.dout), 16, 1024);
    const uint64_t dq_n = smem_desc(smem_addr(sm.q), BM * 128, 1024);
    const uint64_t ddo_n = smem_desc(smem_addr(sm.dout), BM * 128, 1024);
    const uint64_t dds_a = smem_desc(smem_addr(sm.ds), 16, 1024);
    const uint64_t dkn_b = smem_desc(smem_addr(sm.k), BN * 128, 1024);
    float dk[DP / 2], dv[DP / 2];
#pragma unroll
    for (int i = 0; i < DP / 2; ++i) dk[i] = dv[i] = 0.0f;

    /* tile it's S^T once its stage has landed, then its dP^T (P's exponentials run under dP) */
    const auto issue_s = [&](int64_t it, float(&sc)[BM / 2]) {
      const ring_pos<STAGES> pos{(int)it};
      mbar_wait(&sm.full[pos.stage()], pos.full_parity());
      issue_scores<T, C>(pos.stage(), dk_a, dq_b, sc);
    };
    const auto issue_dp = [&](int64_t it, float(&dp)[BM / 2]) {
      issue_scores<T, C>(ring_pos<STAGES>{(int)it}.stage(), dv_a, ddo_b, dp);
    };

    /* Tile it: issue S_it and dP_it; wait for S_it (its P under dP_it), then dP_it (dS); dS to
     * shared memory; issue dV += P^T dout and dK += dS^T Q, then (both warpgroups' dS in
     * place) dQ = dS K; wait for them all (the stage goes back) and hand dQ to the writer.
     * Issuing the next tile's S and dP before this one's dQ is handed over keeps more registers
     * live than the 240 of a consumer at DP 128 (ptxas spills). */
    /* LSE (log2) and D of tile it's rows, in buffer it % 2: warpgroup 0's first BM threads
     * load the LSE, warpgroup 1's the D, one row each, a tile ahead (read under the products,
     * stored before the barrier that precedes the tile) */
    const int r_own = threadIdx.x % 128;
    const auto fetch = [&](const walk_cursor<DESC> &c) { /* the load alone: its use waits until put */
      const int h = c.h(), m0 = c.m0(BM);
      return r_own >= BM ? 0.0f : cw == 0 ? fa2bwd::lse_raw(g, s, b, h, m0 + r_own)
                                          : fa2bwd::dsum_at(bg, s, b, h, m0 + r_own);
    };
    const auto put = [&](int64_t it, float x) {
      if (r_own < BM) (cw == 0 ? sm.lse : sm.dsum)[(it & 1) * BM + r_own] = cw == 0 ? fa2bwd::lse_to_log2(x) : x;
    };
    walk_cursor<DESC> cur(wk), nxt(wk); /* tile it's, tile it + 1's */
    if (wk.count > 0) { /* the first tile's, read while K and V land */
      put(0, fetch(cur));
      named_bar_sync(1, 256);
    }
    nxt.advance();
    mbar_wait(sm.kv_full, 0);

    float sc[BM / 2], dp[BM / 2], dqa[32];
    for (int64_t it = 0; it < wk.count; ++it, cur = nxt, nxt.advance()) {
      issue_s(it, sc), issue_dp(it, dp);
      const float next = it + 1 < wk.count ? fetch(nxt) : 0.0f;
      const ring_pos<STAGES> pos{(int)it};
      const int st = pos.stage(), h = cur.h(), m0 = cur.m0(BM);
      const float *lb = sm.lse + (it & 1) * BM, *db = sm.dsum + (it & 1) * BM; /* shared loads below */
      const auto col = [&](int n, int e) { return n * 8 + (lane % 4) * 2 + e % 2; };
      const bool unmasked = sdpa_tile_unmasked(g, s, m0, min(m0 + BM, s.sq) - 1, n0 + cw * 64, 64);
      auto &p4 = reinterpret_cast<float(&)[BM / 8][4]>(sc);
      auto &ds4 = reinterpret_cast<float(&)[BM / 8][4]>(dp);
      wgmma_wait<1>();
      fence_regs(sc);
      fa2bwd::probabilities<true>(g, s, b, h, unmasked, n0 + key0, m0, lane, p4,
                                  [&](int n, int e) { return ld_shared_f32(lb + col(n, e)); });
      wgmma_wait<0>();
      fence_regs(dp);
      fa2bwd::score_grads(ds4, p4, [&](int n, int e) { return ld_shared_f32(db + col(n, e)); });
      uint32_t pa[BM / 16][4], da[BM / 16][4];
      round_frags<T, BM>(sc, pa);
      round_frags<T, BM>(dp, da);

      store_ds<BM>(sm.ds + (it & 1) * C::DS_BYTES, key0, lane, da); /* dS into buffer it % 2 */

      wgmma_fence();
#pragma unroll
      for (int kt = 0; kt < BM / 16; ++kt) {
        wgmma_rs<T, DP>::mma(dv, pa[kt], desc_advance(ddo_n, st * C::Q_BYTES + kt * 16 * 128), 1u);
      }
#pragma unroll
      for (int kt = 0; kt < BM / 16; ++kt) {
        wgmma_rs<T, DP>::mma(dk, da[kt], desc_advance(dq_n, st * C::Q_BYTES + kt * 16 * 128), 1u);
      }
      wgmma_commit();
      fence_proxy_async();    /* dS, written by stmatrix, is read by wgmma */
      if (it + 1 < wk.count) put(it + 1, next);
      named_bar_sync(1, 256); /* both warpgroups' halves of dS are in place, and tile it + 1's LSE and D */

      { /* my piece of dQ: A = dS's rows (DP 64: my half's), B = K's columns (DP 128: my half's) */
        const uint32_t half = (uint32_t)dq_half(it, cw);
        const uint64_t a0 =
            desc_advance(dds_a, (uint32_t)(it & 1) * C::DS_BYTES + (DP == 128 ? 0u : half * 64 * 128));
        const uint64_t b0 = desc_advance(dkn_b, DP == 128 ? half * BN * 128 : 0);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          wgmma<T, 64, true>::mma(dqa, desc_advance(a0, (kk / 4) * BM * 128 + (kk % 4) * 32),
                                  desc_advance(b0, kk * 16 * 128), kk > 0 ? 1u : 0u);
        }
        wgmma_commit();
      }
      wgmma_wait<0>();
      fence_regs(dk), fence_regs(dv);
      if (lane == 0) mbar_arrive(&sm.empty[st]); /* Q and dout of this stage are read */
      /* dQ into my piece once the writer has handed it back, then to the writer */
      fence_regs(dqa);
      mbar_wait(&sm.dq_empty[cw], ((uint32_t)it & 1u) ^ 1u);
      put_dq(sm.dq + cw * C::DQ_BYTES, wl, lane, dqa);
      fence_proxy_async();
      __syncwarp();
      if (lane == 0) mbar_arrive(&sm.dq_full[cw]);
    }

    int32_t *const parts_done = DET ? bg.dq_turn + bg.dq_turns : bg.dq_turn; /* after DET's turns */
    if (SPLIT && !last_part<DP>(bg, parts_done, sm.lse, ((int64_t)b * gridDim.y + hk) * (gridDim.x / parts) + blk,
                                parts, part, dk, dv)) {
      return; /* another part adds and stores this key tile's dK and dV */
    }
    /* dK and dV staged in the warp's rows of K and V, which no product reads once both
     * consumer warpgroups are past their last (SPLIT: last_part's barriers are) */
    if (!SPLIT) named_bar_sync(1, 256);
    const int rows = min(16, s.sk - (n0 + key0));
    const int64_t row0 = s.k0 + n0 + key0, at = (int64_t)key0 * DP * 2;
    store_rows<T, DP>(sm.k + at, bg.dk, b, row0, rows, hk, g.d, dk, bg.scale, lane);
    store_rows<T, DP>(sm.v + at, bg.dv, b, row0, rows, hk, g.dv, dv, 1.0f, lane);
  }
#else
  (void)map_q, (void)map_k, (void)map_v, (void)map_do, (void)bg;
  __trap();
#endif
}

/* Heads a warp step of dQ's conversion covers on its fast path (aligned rows, d a multiple of 8,
 * dq_cols a power of two), 0 where it takes a head at a time: for its kernel and its launch's
 * runs alike. */
inline __host__ __device__ int convert_heads_a_step(const sdpa_bwd_geom &bg) {
  return bg.aligned && bg.f.d % 8 == 0 ? fa2bwd::heads_a_step(bg.dq_cols) : 0;
}

/* dq = the accumulators times the scale, a warp a query row's run of heads (fa2bwd's
 * bwd_row). Where d is a multiple of 8 and dq_cols a power of two, a lane takes 8 columns of one
 * head a step (two 16-byte loads, one 16-byte store: the rows are aligned), four steps' loads
 * in flight; else two columns a lane, a head at a time. */
template <typename T> __global__ void __launch_bounds__(256) sdpa_bwd_dq_convert_kernel(const sdpa_bwd_geom bg) {
  const sdpa_geom &g = bg.f;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory"); /* the main pass's accumulators, complete */
#endif
  constexpr int U = fa2bwd::ROW_STEPS;
  const int lane = threadIdx.x % 32, heads = g.heads_q, cols = bg.dq_cols;
  const int per = convert_heads_a_step(bg), lanes = per > 0 ? 32 / per : 32;
  for (int64_t row = (int64_t)blockIdx.x * 8 + threadIdx.x / 32; row < bg.rows; row += (int64_t)gridDim.x * 8) {
    const fa2bwd::bwd_row r(bg, row);
    const float *acc = bg.dq_acc + row * heads * cols;
    T *p = static_cast<T *>(const_cast<void *>(bg.dq.p)) + r.b * bg.dq.sb + r.i * bg.dq.ss;
    if (per > 0) {
      const int c = (lane % lanes) * 8;
      struct eight {
        float4 lo, hi;
      };
      fa2bwd::head_steps<U>(
          r.h0, r.h1, per, lane,
          [&](int h, bool live) {
            const float4 *src = reinterpret_cast<const float4 *>(acc + (int64_t)h * cols + c);
            return live && c < g.d ? eight{__ldcs(src), __ldcs(src + 1)} : eight{};
          },
          [&](int h, bool live, const eight &x) {
            if (!live || c >= g.d) return;
            const float s = bg.scale;
            const uint4 w = make_uint4(pack2<T>(x.lo.x * s, x.lo.y * s), pack2<T>(x.lo.z * s, x.lo.w * s),
                                       pack2<T>(x.hi.x * s, x.hi.y * s), pack2<T>(x.hi.z * s, x.hi.w * s));
            *reinterpret_cast<uint4 *>(p + h * bg.dq.sh + c) = w;
          });
    } else {
      for (int h = r.h0; h < r.h1; ++h) {
        for (int c = lane * 2; c < g.d; c += 64) {
          const float2 x = *reinterpret_cast<const float2 *>(acc + (int64_t)h * cols + c);
          T *q = p + h * bg.dq.sh;
          if (bg.aligned && c + 1 < g.d) {
            *reinterpret_cast<uint32_t *>(q + c) = pack2<T>(x.x * bg.scale, x.y * bg.scale);
          } else {
            q[c * bg.dq.sd] = from_f<T>(x.x * bg.scale);
            if (c + 1 < g.d) q[(c + 1) * bg.dq.sd] = from_f<T>(x.y * bg.scale);
          }
        }
      }
    }
  }
}

/* Host side: the three launches on one stream (bg's dsum, dq_acc and, DET, dq_turn point into
 * the workspace; with the key tiles in parts, kv_sums, and the parts' counters at dq_turn or,
 * DET, right after its turns, which the dsum launch zeroes with them), the second and third
 * programmatic dependents of the one before;
 * `keys`: k has rows (else no main pass, and its maps are not made). map_dq: dq_acc as (DP
 * columns, heads_q, rows) f32, boxes of 32 x 1 x 64, 128-byte swizzle. DET's round order
 * launches the main pass cooperatively; where the device cannot hold every block at once (a
 * share of its SMs), it runs ascending instead. walk_order: the order the main pass ran. */
template <typename T, int DP, bool DET>
cudaError_t launch_sdpa_bwd_sm90(const CUtensorMap &map_q, const CUtensorMap &map_k, const CUtensorMap &map_v,
                                 const CUtensorMap &map_do, const CUtensorMap &map_dq, const sdpa_bwd_geom &bg,
                                 bool keys, int sm_count, cudaStream_t stream, int32_t *grid, int32_t *block,
                                 int32_t *smem_bytes, int32_t *walk_order) {
  using C = cfg<DP>;
  const sdpa_geom &g = bg.f;
  const int parts = bg.kv_parts < 1 ? 1 : bg.kv_parts; /* the key tiles' parts, side by side */
  const dim3 gk((unsigned)((g.seqlen_k + C::BN - 1) / C::BN * parts), (unsigned)(g.heads_q / g.group),
                (unsigned)g.batch);
  sdpa_bwd_geom zg = bg; /* DET in parts: the parts' counters zeroed with the turns */
  if (DET && parts > 1) zg.dq_turns += (int64_t)(gk.x / parts) * gk.y * gk.z;
  fa2bwd::launch_dsum<T>(zg, sm_count, stream);
  constexpr bool SPLITS = DP != 256; /* the kernels whose key tiles may be cut in parts */
  /* DESC given as DET: the default kernels instantiate no descending twin; DET's descending
   * walks are whole (opsi_sdpa_bwd_sm90_walk_order) */
  const bool desc = DET && bg.walk_order == OPSI_SDPA_BWD_SM90_WALK_DESC;
  const auto kernel = desc         ? sdpa_bwd_sm90_kernel<T, DP, DET, false, DET>
                      : parts == 1 ? sdpa_bwd_sm90_kernel<T, DP, DET, false>
                                   : sdpa_bwd_sm90_kernel<T, DP, DET, SPLITS>;
  cudaError_t e = smem_optin(kernel, C::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  sdpa_bwd_geom kg = bg;
  /* the launch order (see order_chunk): DET's, and where the walks' lengths differ from key
   * tile to key tile (a causal mask or a window) longest first */
  const bool uneven = opsi_sdpa_bwd_sm90_uneven(g.window_left, g.window_right, g.seqlen_q, g.seqlen_k);
  const int32_t wave_groups = gk.x > 0 && (unsigned)sm_count > gk.x ? (int32_t)((unsigned)sm_count / gk.x) : 1;
  kg.order_chunk = DET || uneven ? wave_groups : 0;
  /* the main pass and the dQ conversion as programmatic dependent launches: each is resident
   * and set up while the launch before it drains (each waits before it reads what that wrote) */
  cudaLaunchAttribute pdl[2];
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
  pdl[1].id = cudaLaunchAttributeCooperative;
  pdl[1].val.cooperative = 1;
  cudaLaunchConfig_t lc = {};
  lc.stream = stream, lc.attrs = pdl, lc.numAttrs = 1;
  *walk_order = DET ? bg.walk_order : OPSI_SDPA_BWD_SM90_WALK_ASC;
  if (keys && gk.x > 0) {
    lc.gridDim = gk, lc.blockDim = dim3(C::THREADS), lc.dynamicSmemBytes = C::SMEM_BYTES;
    if (DET && bg.walk_order == OPSI_SDPA_BWD_SM90_WALK_ROT) {
      lc.numAttrs = 2;
      e = cudaLaunchKernelEx(&lc, kernel, map_q, map_k, map_v, map_do, map_dq, kg);
      lc.numAttrs = 1;
      if (e == cudaErrorCooperativeLaunchTooLarge) { /* not every block resident at once */
        (void)cudaGetLastError();
        kg.walk_order = *walk_order = OPSI_SDPA_BWD_SM90_WALK_ASC;
        e = cudaLaunchKernelEx(&lc, kernel, map_q, map_k, map_v, map_do, map_dq, kg);
      }
    } else {
      e = cudaLaunchKernelEx(&lc, kernel, map_q, map_k, map_v, map_do, map_dq, kg);
    }
    if (e != cudaSuccess) return e;
  }
  if (bg.rows > 0 && g.heads_q > 0 && g.d > 0) {
    const sdpa_bwd_geom cg = fa2bwd::in_runs(bg, convert_heads_a_step(bg), sm_count);
    lc.gridDim = fa2bwd::row_blocks(cg, sm_count), lc.blockDim = dim3(256), lc.dynamicSmemBytes = 0;
    e = cudaLaunchKernelEx(&lc, sdpa_bwd_dq_convert_kernel<T>, cg);
    if (e != cudaSuccess) return e;
  }
  grid[0] = (int32_t)gk.x, grid[1] = (int32_t)gk.y, grid[2] = (int32_t)gk.z;
  block[0] = C::THREADS, block[1] = block[2] = 1;
  *smem_bytes = C::SMEM_BYTES;
  return cudaGetLastError();
}

}  // namespace fa3bwd
}  // namespace opsi

/* One instantiation (the kernel sources, sdpa_kernels.h's lists); `extern` before it declares it. */
#define OPSI_SDPA_BWD_SM90_TEMPLATE(T, DP, DET)                                                                  \
  template cudaError_t opsi::fa3bwd::launch_sdpa_bwd_sm90<T, DP, DET>(                                           \
      const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const CUtensorMap &,   \
      const opsi::fa3bwd::sdpa_bwd_geom &, bool, int, cudaStream_t, int32_t *, int32_t *, int32_t *, int32_t *);
#define OPSI_SDPA_BWD_SM90_INSTANTIATE(T, DP) OPSI_SDPA_BWD_SM90_TEMPLATE(T, DP, false)
#define OPSI_SDPA_BWD_SM90_DET_INSTANTIATE(T, DP) OPSI_SDPA_BWD_SM90_TEMPLATE(T, DP, true)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_SM90_CUH_ */
