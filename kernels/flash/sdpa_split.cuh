/*
 * Split-KV attention with packed GQA rows (every SM >= 80): decode and short query blocks
 * against long key ranges, contiguous or in a paged KV cache.
 *
 * A block owns one KV head of one sequence and BM packed rows: packed row p is query row
 * p / group of query head hk * group + p % group, so the query heads that share a KV head
 * are the rows of one tile and K / V are read once for all of them. The key range those rows
 * see is cut into `splits` parts of whole key tiles (grid x: row tile + row tiles * part);
 * each block streams its part's tiles through a STAGES-deep cp.async ring:
 *
 *   copy Q (packed rows) and the first STAGES tiles (K and V rows by the block table when
 *   paged; rows past the sequence, or of a page id outside the pool, zero-filled)
 *   tile t:  wait for tile t; barrier; (first tile, Q in registers: take Q's fragments)
 *            after the first tile, copy tile t + STAGES - 1 into the stage the barrier freed
 *            (paged: by the rows' offsets formed a trip ahead in shared memory; read the
 *            table for tile t + STAGES now, so that no copy waits on a table lookup)
 *            S = Q K^T over this warp's keys (mma.sync m16n8k16, ldmatrix; on sm_90a
 *            _d128_m64: the warpgroup's wgmma m64n64k16, Q from registers); to the log2
 *            domain, -inf outside each row's visible keys (tiles inside every row's
 *            range skip the test); online softmax; O += P V (ldmatrix.trans; on sm_90a
 *            _d128_m64: wgmma with P from registers and V N-major in shared memory)
 *   merge:   each warp's row max, sum and f32 O into shared memory (the ring's space); the
 *            key warps of a row folded in warp order (no atomics: bitwise reproducible);
 *            one part: O / sum and LSE into the outputs; several: the part's normalized O
 *            and LSE into the workspace, and sdpa_split_combine folds the parts in order;
 *            or, where the parts are a cluster (sm_90, sdpa_split_shape.h), into the merge
 *            buffer's own rows, and after a cluster barrier the cluster's blocks fold every
 *            part's rows in part order over distributed shared memory, rows shared out among
 *            them (a second barrier keeps each block's rows until all have read them).
 *
 * BM 16 (_m16): the 4 warps split each 64-key tile, 16 keys a warp, over the same 16 rows.
 * BM 64 (_m64): a warp 16 rows over all 64 keys (_d128_m64 on sm_90a: one warpgroup's wgmma,
 * whose accumulators hold the same rows a warp, in the same layout; its K and V tiles by TMA,
 * a tile's box copies spread over the warps (tma_kv_op) on a barrier a stage, where the launcher
 * encoded their maps: opsi_sdpa_split_tma_box). Operands: 16-bit,
 * unit-stride rows with 16-byte aligned bases and strides (the rows' alignment), head dims up
 * to DP.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SPLIT_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SPLIT_CUH_

#include "kernels/common/launch_status.h"
#include "kernels/common/mma_sync.cuh"
#include "kernels/common/sm90_async.cuh"
#include "kernels/common/wgmma_ops.cuh"
#include "kernels/flash/sdpa_gpu.cuh"
#include "kernels/flash/sdpa_mma.cuh"
#include "kernels/flash/sdpa_split_shape.h"

namespace opsi {
namespace split {

/* The shape a (head dim, packed rows) runs: sdpa_split_shape.h (the rows state the same). */
template <int DP, int BM> struct depth;
#define OPSI_SDPA_SPLIT_DEPTH(D, M)                                        \
  template <> struct depth<D, M> {                                         \
    static constexpr int STAGES = OPSI_SDPA_SPLIT_D##D##_M##M##_STAGES;    \
    static constexpr int PER_SM = OPSI_SDPA_SPLIT_D##D##_M##M##_PER_SM;    \
  };
OPSI_SDPA_SPLIT_DEPTH(64, 16)
OPSI_SDPA_SPLIT_DEPTH(64, 64)
OPSI_SDPA_SPLIT_DEPTH(128, 16)
OPSI_SDPA_SPLIT_DEPTH(128, 64)
OPSI_SDPA_SPLIT_DEPTH(256, 16)
OPSI_SDPA_SPLIT_DEPTH(256, 64)
#undef OPSI_SDPA_SPLIT_DEPTH

template <typename T, int DP, int BM_> struct cfg {
  static constexpr int WARPS = OPSI_SDPA_SPLIT_WARPS, THREADS = WARPS * 32;
  static constexpr int BM = BM_, BN = OPSI_SDPA_SPLIT_BN;
  static constexpr int RW = BM / 16, KW = WARPS / RW; /* row warps x key warps */
  static constexpr int NW = BN / KW;                   /* keys a warp takes of each tile */
  static constexpr int STAGES = depth<DP, BM>::STAGES, PER_SM = depth<DP, BM>::PER_SM;
  static constexpr int SMEM_BYTES = OPSI_SDPA_SPLIT_SMEM(BM, BN, DP, STAGES);
  static constexpr int PITCH = DP + 8; /* floats a row of the merge buffer: rows 8 banks apart */
  static constexpr bool HOIST_Q = OPSI_SDPA_SPLIT_HOIST_Q(DP);          /* Q's fragments in registers */
  static constexpr bool Q_IN_RING = OPSI_SDPA_SPLIT_Q_IN_RING(DP, BM_); /* Q's rows in the last stage */
  static constexpr int AHEAD = Q_IN_RING ? STAGES - 1 : STAGES;          /* tiles in flight at the start */
  static constexpr bool WG_ROWS = OPSI_SDPA_SPLIT_WGMMA(DP, BM_);       /* sm_90a: one warpgroup's wgmma */
  static_assert(!Q_IN_RING || BM <= BN, "Q's rows fit in a stage's K half");
  static_assert(!WG_ROWS || HOIST_Q, "wgmma takes Q's fragments from registers");
  static_assert(RW * KW == WARPS && NW % 16 == 0, "whole warps of 16 rows and 16 keys");
  static_assert(!WG_ROWS || (WARPS == 4 && BM == 64 && BN == 64), "one warpgroup, m64n64 scores");
  static_assert(BN <= THREADS, "a thread reads a key row's page id");
  static_assert(KW * BM * PITCH * 4 <= STAGES * 2 * BN * DP * 2, "the merge buffer fits in the ring");
  static_assert(KW * BM <= 64, "row statistics of 64 rows");
  static_assert(sizeof(T) == 2, "16-bit operands");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define OPSI_SDPA_SPLIT_ON_SM90A 1
#else
#define OPSI_SDPA_SPLIT_ON_SM90A 0
#endif

/* Element offset of (r, c) in a shared tile of `rows` rows of DP 16-bit columns: for wgmma
 * (WG), 128-byte swizzle atoms of 64 columns, rows x 64 elements apart; else the mma.sync
 * kernels' chunks XOR-swizzled by r % 8. */
template <int DP, bool WG> __device__ __forceinline__ int tile_at(int r, int c, int rows) {
  if constexpr (WG) return (c >> 6) * rows * 64 + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3) + (c & 7);
  else return fa2::swz<DP>(r, c);
}

/* The block table's entry for key row j of sequence b (paged calls), unchecked: an entry read
 * a trip ahead is checked (in_pool) where it is used, so that nothing waits for the load before. */
__device__ __forceinline__ int32_t table_page(const sdpa_geom &g, int b, int j) {
  return g.pages[b * g.pg_sb + (int64_t)(j / g.page_size) * g.pg_sp];
}
/* A table entry, or -1 where it names no page of the pool. */
__device__ __forceinline__ int32_t in_pool(const sdpa_geom &g, int32_t page) {
  return page >= 0 && page < g.num_pages ? page : -1;
}
/* The pool page that holds key row j of sequence b, or -1 for a page id outside the pool. */
__device__ __forceinline__ int32_t key_page(const sdpa_geom &g, int b, int j) {
  return in_pool(g, table_page(g, b, j));
}

/* Four output columns x[0..3] * scale at dst, as one 8-byte store where all four lie inside the
 * head dim (`left` columns from dst on), else the ones that do one by one (unrolled, so that x
 * stays in registers). */
template <typename T>
__device__ __forceinline__ void store4(T *dst, const float (&x)[4], float scale, int left) {
  if (left >= 4) {
    *reinterpret_cast<uint2 *>(dst) =
        make_uint2(pack2<T>(x[0] * scale, x[1] * scale), pack2<T>(x[2] * scale, x[3] * scale));
    return;
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (e < left) dst[e] = from_f<T>(x[e] * scale);
  }
}

/* The element offsets of key rows [j0, j0 + bn) in a paged call's pools, formed a trip ahead:
 * `read` takes a row's page id from the table (a thread a row, threads < bn), `put` writes the
 * row's K and V offsets (-1: a page outside the pool, or no row) into `rows` (bn K offsets,
 * then bn V offsets) after the tile's math, so that the table's latency hides behind it and
 * the division by the page size is done once a row. */
struct paged_rows {
  int32_t page = -1;
  __device__ __forceinline__ void read(const sdpa_geom &g, int b, int j0, int j_end, int bn) {
    const int j = j0 + (int)threadIdx.x;
    page = g.pages != nullptr && (int)threadIdx.x < bn && j < j_end ? table_page(g, b, j) : -1;
  }
  __device__ __forceinline__ void put(const sdpa_geom &g, int j0, int64_t *rows, int bn) const {
    if (g.pages == nullptr || (int)threadIdx.x >= bn) return;
    const int64_t r = (j0 + (int)threadIdx.x) % g.page_size;
    const int32_t p = in_pool(g, page);
    rows[threadIdx.x] = p < 0 ? -1 : p * g.k.sb + r * g.k.ss;
    rows[bn + threadIdx.x] = p < 0 ? -1 : p * g.v.sb + r * g.v.ss;
  }
};

/* Element offsets of key row j (KV head hk) of sequence b in a paged call's K and V pools: from
 * `rows` (the tile's row offsets, paged_rows) or through the table when `rows` is null. False
 * for a page outside the pool. */
template <int BN>
__device__ __forceinline__ bool key_rows(const sdpa_geom &g, int b, int hk, int j, int r, const int64_t *rows,
                                         int64_t *ko, int64_t *vo) {
  if (rows != nullptr) {
    const int64_t kr = rows[r], vr = rows[BN + r];
    *ko = kr + hk * g.k.sh, *vo = vr + hk * g.v.sh;
    return kr >= 0;
  }
  const int32_t page = key_page(g, b, j);
  if (page < 0) return false;
  const int64_t pr = j % g.page_size;
  *ko = page * g.k.sb + pr * g.k.ss + hk * g.k.sh;
  *vo = page * g.v.sb + pr * g.v.ss + hk * g.v.sh;
  return true;
}

/* K and V rows [j0, j0 + BN) into one ring stage (swizzled 16-byte chunks); rows at or past
 * j_end zero-filled. Paged calls take the rows' offsets from `rows` (paged_rows), or read the
 * table here when `rows` is null. */
template <typename T, int DP, int BN, int THREADS, bool WG>
__device__ __forceinline__ void load_kv(T *kb, T *vb, const sdpa_geom &g, int b, const sdpa_seq &s, int hk, int j0,
                                        int j_end, const int64_t *rows) {
  constexpr int PER_ROW = DP / 8, ROWS_PASS = THREADS / PER_ROW, PASSES = BN / ROWS_PASS;
  static_assert(THREADS % PER_ROW == 0 && BN % ROWS_PASS == 0, "whole rows a pass");
  const int c = (threadIdx.x % PER_ROW) * 8;
  const int kbytes = valid_bytes(c, g.d, sizeof(T)), vbytes = valid_bytes(c, g.dv, sizeof(T));
  const T *kp = static_cast<const T *>(g.k.p), *vp = static_cast<const T *>(g.v.p);
  if (g.pages == nullptr) { /* contiguous: the thread's rows ROWS_PASS rows apart from its first */
    const int r0 = threadIdx.x / PER_ROW;
    const int64_t jr = s.k0 + j0 + r0;
    const T *kr = kp + b * g.k.sb + jr * g.k.ss + hk * g.k.sh + c;
    const T *vr = vp + b * g.v.sb + jr * g.v.ss + hk * g.v.sh + c;
    const int64_t kstep = ROWS_PASS * g.k.ss, vstep = ROWS_PASS * g.v.ss;
#pragma unroll
    for (int e = 0; e < PASSES; ++e) {
      const int r = r0 + e * ROWS_PASS;
      const bool ok = j0 + r < j_end;
      cp_async16(kb + tile_at<DP, WG>(r, c, BN), ok && kbytes > 0 ? kr + e * kstep : kp, ok ? kbytes : 0);
      cp_async16(vb + tile_at<DP, WG>(r, c, BN), ok && vbytes > 0 ? vr + e * vstep : vp, ok ? vbytes : 0);
    }
    return;
  }
#pragma unroll
  for (int e = 0; e < PASSES; ++e) {
    const int r = threadIdx.x / PER_ROW + e * ROWS_PASS, j = j0 + r;
    int64_t ko = 0, vo = 0;
    const bool ok = j < j_end && key_rows<BN>(g, b, hk, j, r, rows, &ko, &vo);
    cp_async16(kb + tile_at<DP, WG>(r, c, BN), ok && kbytes > 0 ? kp + ko + c : kp, ok ? kbytes : 0);
    cp_async16(vb + tile_at<DP, WG>(r, c, BN), ok && vbytes > 0 ? vp + vo + c : vp, ok ? vbytes : 0);
  }
}

/* The table entry of key row j where a TMA box of it starts (paged calls; -1: past the
 * sequence), unchecked (tma_kv checks it). */
__device__ __forceinline__ int32_t box_page(const sdpa_geom &g, int b, const sdpa_seq &s, int j) {
  return g.pages != nullptr && j < s.sk ? table_page(g, b, j) : -1;
}

/* The TMA copies of a box (_d128_m64): K's and V's 64-column halves. */
template <int DP> struct tma_ops_box { static constexpr int value = 2 * (DP / 64); };

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* K and V rows [j0, j0 + BN) into one ring stage by TMA (_d128_m64 on sm_90a), as TMA_OPS(BN /
 * box) box copies spread over the block's warps, so that no warp's issue holds up the
 * warpgroup's next wgmma by more than a few: before the block barrier that frees the stage,
 * one thread arms the stage's K and V barriers (bar[0], bar[1]) for their bytes (tma_kv_arm);
 * after it, thread `op` (op = lane x WARPS + warp, op < TMA_OPS) issues copy op: box op /
 * TMA_OPS_BOX (rows [j0 + box x that, + box)) of K's (first half of the ops a box) or V's
 * 64-column halves, landing as wgmma's 128-byte swizzle atoms (tile_at; box is a multiple of 8
 * rows, so each box starts on an atom's row 0). Contiguous views: one box of BN rows at
 * (column, k0 + j0, hk, batch), the batch coordinate 0 where the view has no batch stride
 * (varlen). Paged: a box a run of `box` rows inside one page, at (column, row in page, hk,
 * page), `page` the thread's box_page (read a trip ahead, checked here): -1 or a page outside
 * the pool goes past the pool's last page. TMA reads zeros past a tensor or pool; rows past
 * the sequence inside it are masked (K) and zeroed by the kernel (V). */
template <typename T, int DP, int BN> __device__ __forceinline__ void tma_kv_arm(uint64_t *bar) {
  sm90::mbar_expect_tx(&bar[0], (uint32_t)(BN * DP * sizeof(T)));
  sm90::mbar_expect_tx(&bar[1], (uint32_t)(BN * DP * sizeof(T)));
}
template <typename T, int DP, int BN>
__device__ __forceinline__ void tma_kv_op(T *kb, T *vb, const CUtensorMap *tk, const CUtensorMap *tv, uint64_t *bar,
                                          const sdpa_geom &g, int b, const sdpa_seq &s, int hk, int j0, int box,
                                          int32_t page, int op) {
  using namespace opsi::sm90;
  constexpr int OPS_BOX = tma_ops_box<DP>::value;
  const int r = (op / OPS_BOX) * box, which = op % OPS_BOX, h = which % (DP / 64);
  const bool is_v = which >= DP / 64;
  int32_t row, kb3, vb3;
  if (g.pages == nullptr) {
    row = (int32_t)(s.k0 + j0), kb3 = g.k.sb == 0 ? 0 : b, vb3 = g.v.sb == 0 ? 0 : b;
  } else {
    const int32_t p = in_pool(g, page);
    row = (j0 + r) % g.page_size, kb3 = vb3 = p < 0 ? (int32_t)g.num_pages : p;
  }
  if (!is_v) tma_load_4d(kb + tile_at<DP, true>(r, h * 64, BN), tk, &bar[0], h * 64, row, hk, kb3);
  else tma_load_4d(vb + tile_at<DP, true>(r, h * 64, BN), tv, &bar[1], h * 64, row, hk, vb3);
}

/* Zeros V's rows [r0, BN) of a stage (rows past the sequence that TMA read from inside the
 * tensor or page: a cache's unused slots may hold anything, and 0 x NaN is NaN), then fences
 * them for wgmma's reads. */
template <typename T, int DP, int BN, int THREADS> __device__ __forceinline__ void zero_v_rows(T *vb, int r0) {
  for (int idx = threadIdx.x; idx < (BN - r0) * (DP / 8); idx += THREADS) {
    const int r = r0 + idx / (DP / 8), c = (idx % (DP / 8)) * 8;
    *reinterpret_cast<uint4 *>(vb + tile_at<DP, true>(r, c, BN)) = make_uint4(0u, 0u, 0u, 0u);
  }
  sm90::fence_proxy_async();
}

/* The parts of a row tile as one cluster (rank = part): every block's `red` holds its part's
 * normalized rows (row r at r * PITCH, the LSE in column DP). After a barrier, the cluster's
 * threads take the (row, 4 columns) items in turn, each folding the parts in part order as
 * sdpa_split_combine does; a second barrier keeps every block's rows until all have read. */
template <typename T, int DP, int BM, int PITCH, int THREADS>
__device__ __forceinline__ void cluster_merge(const sdpa_geom &g, const sdpa_seq &s, const float *red, int splits,
                                              int rank, int64_t row0, int64_t rows, int hk, int b, int dv4) {
  using namespace opsi::sm90;
  cluster_sync();
  const int n_rows = rows - row0 < BM ? (int)(rows - row0) : BM, n4 = dv4 / 4;
  T *op = static_cast<T *>(const_cast<void *>(g.o.p));
  for (int idx = rank * THREADS + threadIdx.x; idx < n_rows * n4; idx += splits * THREADS) {
    const int r = idx / n4, c = (idx % n4) * 4;
    float lse[OPSI_SDPA_SPLIT_CLUSTER_MAX], m = -INFINITY;
#pragma unroll
    for (int p = 0; p < OPSI_SDPA_SPLIT_CLUSTER_MAX; ++p) {
      lse[p] = p < splits ? ld_cluster_f32(&red[r * PITCH + DP], (uint32_t)p) : -INFINITY;
      m = fmaxf(m, lse[p]);
    }
    float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int p = 0; p < OPSI_SDPA_SPLIT_CLUSTER_MAX; ++p) {
      if (p >= splits) break;
      const float w = m == -INFINITY || lse[p] == -INFINITY ? 0.0f : __expf(lse[p] - m);
      const float4 v = ld_cluster_f4(&red[r * PITCH + c], (uint32_t)p);
      l += w, acc[0] += w * v.x, acc[1] += w * v.y, acc[2] += w * v.z, acc[3] += w * v.w;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int64_t pr = row0 + r, i = pr / g.group, h = hk * g.group + pr % g.group;
    store4<T>(op + b * g.o.sb + (s.q0 + i) * g.o.ss + h * g.o.sh + c, acc, inv, g.dv - c);
    if (c == 0 && g.lse != nullptr) g.lse[b * g.lb + h * g.lh + (s.q0 + i) * g.ls] = l > 0.0f ? m + logf(l) : -INFINITY;
  }
  cluster_sync_relaxed(); /* every value read above went into the stores above */
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* S = Q K^T of the block's 64 rows over a 64-key tile by the warpgroup (wgmma m64n64k16, Q's
 * fragments from registers, K K-major in shared memory): the accumulators are the m16n8 layout
 * of each warp's rows. */
template <typename T, int DP, int BN>
__device__ __forceinline__ void wg_qk(float (&sc)[BN / 8][4], const uint32_t (&qf)[DP / 16][4], const T *kb) {
  using namespace opsi::sm90;
  float(&acc)[BN / 2] = reinterpret_cast<float(&)[BN / 2]>(sc);
  const uint64_t dk = smem_desc(smem_addr(kb), 16, 1024);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    wgmma_rs_k<T, BN>::mma(acc, qf[kk], desc_advance(dk, (kk / 4) * BN * 128 + (kk % 4) * 32), kk > 0 ? 1u : 0u);
  }
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(acc);
}

/* O += P V: P (the probabilities in sc, rounded to 16 bits) as the A operand from registers,
 * V N-major in shared memory (its DP / 64 atoms BN x 128 bytes apart). */
template <typename T, int DP, int BN>
__device__ __forceinline__ void wg_pv(float (&o)[DP / 8][4], const float (&sc)[BN / 8][4], const T *vb) {
  using namespace opsi::sm90;
  float(&acc)[DP / 2] = reinterpret_cast<float(&)[DP / 2]>(o);
  uint32_t pa[BN / 16][4];
#pragma unroll
  for (int kt = 0; kt < BN / 16; ++kt) fa2::p_frag<T>(sc, kt, pa[kt]);
  const uint64_t dv = smem_desc(smem_addr(vb), BN * 128, 1024);
  fence_regs(acc);
  wgmma_fence();
#pragma unroll
  for (int kt = 0; kt < BN / 16; ++kt) wgmma_rs<T, DP>::mma(acc, pa[kt], desc_advance(dv, kt * 16 * 128), 1u);
  wgmma_commit();
  wgmma_wait<0>();
  fence_regs(acc);
}
#endif

template <typename T, int DP, int BM>
__global__ void __launch_bounds__(cfg<T, DP, BM>::THREADS, cfg<T, DP, BM>::PER_SM)
    sdpa_split_kernel(const sdpa_geom g, int32_t splits, int32_t row_tiles, int32_t clustered, float *ws_lse,
                      float *ws_o, int64_t tokens_q, const __grid_constant__ CUtensorMap tk,
                      const __grid_constant__ CUtensorMap tv, int32_t tma_box) {
  using C = cfg<T, DP, BM>;
  constexpr int BN = C::BN, NW = C::NW, STAGES = C::STAGES, THREADS = C::THREADS;
  constexpr bool WG = C::WG_ROWS && OPSI_SDPA_SPLIT_ON_SM90A; /* wgmma's swizzle atoms: 1024-byte aligned */
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  T *ring = reinterpret_cast<T *>(smem_raw); /* STAGES x (K, V) x BN x DP */
  T *sq = C::Q_IN_RING ? ring + (STAGES - 1) * 2 * BN * DP : ring + STAGES * 2 * BN * DP;
  /* the paged rows' offsets of the next two tiles (2 x K and V x BN), then the row statistics */
  int64_t *kv_rows = reinterpret_cast<int64_t *>(ring + STAGES * 2 * BN * DP + (C::Q_IN_RING ? 0 : BM * DP));
  float *st_m = reinterpret_cast<float *>(kv_rows + 2 * 2 * BN), *st_l = st_m + 64;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  /* A programmatic dependent launch on sm_90 (launch_sdpa_split): nothing the previous kernel on
   * the stream wrote (kv_lens, the page table, Q, the cache) is read before that kernel has
   * completed (a no-op without the attribute). */
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif

  /* a cluster's blocks are one row tile's parts, neighbours in x; else the parts are row_tiles apart */
  const int rt = clustered ? blockIdx.x / splits : blockIdx.x % row_tiles;
  const int sp = clustered ? blockIdx.x % splits : blockIdx.x / row_tiles;
  const int hk = blockIdx.y, b = blockIdx.z, group = g.group;
  const sdpa_seq s = sdpa_sequence<true>(g, b);
  const int64_t rows = (int64_t)s.sq * group;
  const int64_t row0 = (int64_t)rt * BM;
  if (row0 >= rows) return;
  const int i_lo = (int)(row0 / group), i_hi = (int)((min(row0 + BM, rows) - 1) / group);
  int j_lo, j_hi;
  sdpa_key_range(g, s, i_lo, i_hi, &j_lo, &j_hi);
  const int t_begin = j_lo / BN, t_end = j_hi > j_lo ? (j_hi + BN - 1) / BN : t_begin;
  const int n_t = t_end - t_begin, per = (n_t + splits - 1) / splits;
  const int ta = t_begin + min(sp * per, n_t), tb = t_begin + min((sp + 1) * per, n_t);
  /* keys every row of the block sees: tiles inside [in_lo, in_hi) need no mask */
  int in_lo, in_hi, unused;
  sdpa_row_keys(g, s, i_hi, &in_lo, &unused);
  sdpa_row_keys(g, s, i_lo, &unused, &in_hi);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int rw = warp % C::RW, kw = warp / C::RW;
  int lo[2], hi[2]; /* the visible keys of this thread's two rows */
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int64_t pr = row0 + rw * 16 + lane / 4 + 8 * hr;
    sdpa_row_keys(g, s, pr < rows ? (int)(pr / group) : s.sq, &lo[hr], &hi[hr]);
  }

  /* K and V by TMA (the _d128_m64 kernel on sm_90a, where the launcher encoded their maps:
   * tma_box > 0), a K and a V barrier a stage where the paged rows' offsets would be; else
   * cp.async */
  const bool tma = WG && tma_box > 0;
  /* a tile's TMA copies (tma_kv_op), thread my_op's one of them after the first tiles */
  const int tma_ops = tma ? BN / tma_box * tma_ops_box<DP>::value : 0;
  const int my_op = lane * C::WARPS + warp;
  uint64_t *bars = reinterpret_cast<uint64_t *>(kv_rows);
  (void)bars; /* read by sm_90a's code only */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (WG) {
    if (tma) {
      if (threadIdx.x == 0) {
#pragma unroll
        for (int st = 0; st < 2 * STAGES; ++st) sm90::mbar_init(&bars[st], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      }
      __syncthreads();
    }
  }
#endif
  { /* Q: packed rows, zero past the last row and the head dim */
    constexpr int PER_ROW = DP / 8, ROWS_PASS = THREADS / PER_ROW;
    const int c = (threadIdx.x % PER_ROW) * 8, bytes = valid_bytes(c, g.d, sizeof(T));
    const T *qp = static_cast<const T *>(g.q.p);
    for (int r = threadIdx.x / PER_ROW; r < BM; r += ROWS_PASS) {
      const int64_t pr = row0 + r;
      const bool ok = pr < rows && bytes > 0;
      const int64_t i = ok ? pr / group : 0, h = ok ? hk * group + pr % group : 0;
      cp_async16(sq + fa2::swz<DP>(r, c), ok ? qp + b * g.q.sb + (s.q0 + i) * g.q.ss + h * g.q.sh + c : qp,
                 ok ? bytes : 0);
    }
  }
  constexpr int AHEAD = C::AHEAD;
  if (tma) cp_commit(); /* Q alone */
#pragma unroll
  for (int st = 0; st < AHEAD; ++st) {
    T *kb = ring + st * 2 * BN * DP;
    if (tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if constexpr (WG) {
        if (warp == 0 && ta + st < tb) { /* warp 0 alone, once: armed, then a copy a lane */
          const int j0 = (ta + st) * BN;
          if (lane == 0) tma_kv_arm<T, DP, BN>(&bars[2 * st]);
          __syncwarp();
          if (lane < tma_ops) {
            tma_kv_op<T, DP, BN>(kb, kb + BN * DP, &tk, &tv, &bars[2 * st], g, b, s, hk, j0, tma_box,
                                 box_page(g, b, s, j0 + (lane / tma_ops_box<DP>::value) * tma_box), lane);
          }
        }
      }
#endif
    } else {
      if (ta + st < tb) {
        load_kv<T, DP, BN, THREADS, WG>(kb, kb + BN * DP, g, b, s, hk, (ta + st) * BN, s.sk, nullptr);
      }
      cp_commit();
    }
  }
  paged_rows next; /* the next tile to copy, a trip ahead (paged calls) */
  int32_t box_next = -1; /* TMA: the page of my_op's box of the next tile, a trip ahead */
  const int my_row = tma ? (my_op / tma_ops_box<DP>::value) * tma_box : 0; /* its box's first row in a tile */
  if (tma) {
    if (my_op < tma_ops && ta + AHEAD < tb) box_next = box_page(g, b, s, (ta + AHEAD) * BN + my_row);
  } else {
    next.read(g, b, (ta + AHEAD) * BN, ta + AHEAD < tb ? s.sk : 0, BN);
    if (C::Q_IN_RING) next.put(g, (ta + AHEAD) * BN, kv_rows + ((ta + AHEAD) % 2) * 2 * BN, BN);
  }

  const int kd = (g.d + 15) / 16, kdv = (g.dv + 15) / 16; /* mma k16 steps that are not padding */
  const bool full = kd == DP / 16 && kdv == DP / 16;     /* head dims that fill the kernel's */
  float o[DP / 8][4];
#pragma unroll
  for (int n = 0; n < DP / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
  uint32_t qf[C::HOIST_Q ? DP / 16 : 1][4];

  for (int t = ta; t < tb; ++t) {
    if (tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if constexpr (WG) {
        const sm90::ring_pos<STAGES> at{t - ta};
        if (t == ta) cp_wait<0>(); /* Q */
        sm90::mbar_wait(&bars[2 * at.stage()], at.full_parity()); /* K */
        if (t * BN + BN > s.sk) { /* V now, to zero its rows past the sequence */
          sm90::mbar_wait(&bars[2 * at.stage() + 1], at.full_parity());
          zero_v_rows<T, DP, BN, THREADS>(ring + at.stage() * 2 * BN * DP + BN * DP, max(s.sk - t * BN, 0));
        }
      }
#endif
    } else {
      if (t == ta) cp_wait<AHEAD - 1>(); /* tile t landed (and Q, with the first) */
      else cp_wait<STAGES - 2>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      if constexpr (WG) sm90::fence_proxy_async(); /* the copies' rows, for wgmma's reads */
#endif
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (WG) { /* the stage this trip refills, armed before the barrier that frees it */
      if (tma && threadIdx.x == 0 && (C::Q_IN_RING || t > ta) && t + STAGES - 1 < tb) {
        tma_kv_arm<T, DP, BN>(&bars[2 * ((t + STAGES - 1 - ta) % STAGES)]);
      }
    }
#endif
    __syncthreads();
    if constexpr (C::HOIST_Q) {
      if (t == ta) {
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk) {
          ldmatrix_x4(qf[kk], &sq[fa2::swz<DP>(rw * 16 + lane % 16, kk * 16 + (lane / 16) * 8)]);
        }
        if (C::Q_IN_RING) { /* the copy below fills the stage Q's rows sit in */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
          if (tma) sm90::fence_proxy_async(); /* Q's reads before TMA's writes */
#endif
          __syncthreads();
        }
      }
    }
    if (C::Q_IN_RING || t > ta) { /* into the stage the barrier freed (none first, where all were filled) */
      const int nt = t + STAGES - 1;
      T *kb = ring + ((nt - ta) % STAGES) * 2 * BN * DP;
      if (tma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        if constexpr (WG) {
          if (my_op < tma_ops && nt < tb) {
            tma_kv_op<T, DP, BN>(kb, kb + BN * DP, &tk, &tv, &bars[2 * ((nt - ta) % STAGES)], g, b, s, hk, nt * BN,
                                 tma_box, box_next, my_op);
            box_next = nt + 1 < tb ? box_page(g, b, s, (nt + 1) * BN + my_row) : -1;
          }
        }
#endif
      } else {
        if (nt < tb) {
          load_kv<T, DP, BN, THREADS, WG>(kb, kb + BN * DP, g, b, s, hk, nt * BN, s.sk, kv_rows + (nt % 2) * 2 * BN);
        }
        cp_commit();
        next.read(g, b, (nt + 1) * BN, nt + 1 < tb ? s.sk : 0, BN);
      }
    }
    const T *kb = ring + ((t - ta) % STAGES) * 2 * BN * DP, *vb = kb + BN * DP;

    const auto q_frag = [&](int kk, uint32_t(&qa)[4]) {
      if constexpr (C::HOIST_Q) {
        qa[0] = qf[kk][0], qa[1] = qf[kk][1], qa[2] = qf[kk][2], qa[3] = qf[kk][3];
      } else {
        ldmatrix_x4(qa, &sq[fa2::swz<DP>(rw * 16 + lane % 16, kk * 16 + (lane / 16) * 8)]);
      }
    };
    float sc[NW / 8][4];
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (WG) wg_qk<T, DP, BN>(sc, qf, kb);
#endif
    if constexpr (!WG) {
      if (full) fa2::warp_qk<T, DP, NW, true>(sc, q_frag, kb, kw * NW, kd, lane);
      else fa2::warp_qk<T, DP, NW>(sc, q_frag, kb, kw * NW, kd, lane);
    }

    /* scores -> log2 domain (masked unless the tile is inside every row's keys) -> P */
    const bool inside = t * BN >= in_lo && t * BN + BN <= in_hi;
    const int jq = t * BN + kw * NW + (lane % 4) * 2;
#pragma unroll
    for (int n = 0; n < NW / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = jq + n * 8 + e % 2;
        sc[n][e] = inside || (j >= lo[e / 2] && j < hi[e / 2]) ? sc[n][e] * g.scale_log2 : -INFINITY;
      }
    float rs[2];
    sdpa_softmax_tile(sc, 1.0f, row_max, row_sum, rs, [](float x) { return exp2f(x); });
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) o[n][0] *= rs[0], o[n][1] *= rs[0], o[n][2] *= rs[1], o[n][3] *= rs[1];

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (WG) {
      const sm90::ring_pos<STAGES> at{t - ta};
      if (tma) sm90::mbar_wait(&bars[2 * at.stage() + 1], at.full_parity()); /* V */
      wg_pv<T, DP, BN>(o, sc, vb);
    }
#endif
    if constexpr (!WG) { /* O += P V over this warp's keys */
      if (full) fa2::warp_pv<T, DP, NW, true>(o, sc, vb, kw * NW, kdv, lane);
      else fa2::warp_pv<T, DP, NW>(o, sc, vb, kw * NW, kdv, lane);
    }
    if (!tma) next.put(g, (t + STAGES) * BN, kv_rows + ((t + STAGES) % 2) * 2 * BN, BN); /* after this trip's barrier */
  }
  cp_wait<0>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;"); /* the combine may start launching (it waits) */
#endif
  __syncthreads(); /* every warp is done with the ring: the merge buffer takes its space */

  float *red = reinterpret_cast<float *>(ring);
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float sum = row_sum[hr];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int r = rw * 16 + lane / 4 + 8 * hr, slot = kw * BM + r;
    if (lane % 4 == 0) st_m[slot] = row_max[hr], st_l[slot] = sum;
#pragma unroll
    for (int n = 0; n < DP / 8; ++n) {
      *reinterpret_cast<float2 *>(&red[slot * C::PITCH + n * 8 + (lane % 4) * 2]) =
          make_float2(o[n][2 * hr], o[n][2 * hr + 1]);
    }
  }
  __syncthreads();

  const int dv4 = (g.dv + 3) / 4 * 4;
  T *op = static_cast<T *>(const_cast<void *>(g.o.p));
  for (int idx = threadIdx.x; idx < BM * (DP / 4); idx += THREADS) {
    const int r = idx / (DP / 4), c = (idx % (DP / 4)) * 4;
    const int64_t pr = row0 + r;
    if (pr >= rows || c >= dv4) continue;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < C::KW; ++w) m = fmaxf(m, st_m[w * BM + r]);
    float l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < C::KW; ++w) {
      const int slot = w * BM + r;
      const float f = m == -INFINITY ? 0.0f : exp2f(st_m[slot] - m);
      l += st_l[slot] * f;
      const float4 x = *reinterpret_cast<const float4 *>(&red[slot * C::PITCH + c]);
      acc[0] += x.x * f, acc[1] += x.y * f, acc[2] += x.z * f, acc[3] += x.w * f;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const float lse = l > 0.0f ? (m + log2f(l)) * 0.6931471805599453f : -INFINITY;
    const int64_t i = pr / group, h = hk * group + pr % group;
    if (splits == 1) {
      store4<T>(op + b * g.o.sb + (s.q0 + i) * g.o.ss + h * g.o.sh + c, acc, inv, g.dv - c);
      if (c == 0 && g.lse != nullptr) g.lse[b * g.lb + h * g.lh + (s.q0 + i) * g.ls] = lse;
    } else if (clustered) { /* in place: only this thread reads these four columns of row r */
      *reinterpret_cast<float4 *>(&red[r * C::PITCH + c]) =
          make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      if (c == 0) red[r * C::PITCH + DP] = lse;
    } else {
      const int64_t tq = g.cu_q != nullptr ? s.q0 + i : (int64_t)b * g.seqlen_q + i;
      const int64_t part = ((int64_t)sp * tokens_q + tq) * g.heads_q + h;
      *reinterpret_cast<float4 *>(&ws_o[part * dv4 + c]) =
          make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      if (c == 0) ws_lse[part] = lse;
    }
  }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if (clustered) cluster_merge<T, DP, C::BM, C::PITCH, THREADS>(g, s, red, splits, sp, row0, rows, hk, b, dv4);
#else
  if (clustered) __trap(); /* the launcher clusters only code built for sm_90a */
#endif
}

/* The parts of each (query row, head), a block a row: warp w folds parts w, w + 4, ... with
 * their loads in flight together, then the warps' sums are added in warp order (no atomics:
 * bitwise reproducible). Columns: a lane 4 of each 128 (Dv <= 256). On sm_90 it is launched
 * as the split kernel's programmatic dependent: its launch overlaps the split kernel's last
 * blocks, and it waits for that grid's completion (and memory) before reading a part. */
constexpr int COMBINE_WARPS = 4, COMBINE_UNROLL = 4;
template <typename T>
__global__ void __launch_bounds__(COMBINE_WARPS * 32)
    sdpa_split_combine(const sdpa_geom g, int32_t splits, const float *ws_lse, const float *ws_o, int64_t tokens_q) {
  __shared__ float4 part[COMBINE_WARPS][64];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  const int64_t row = blockIdx.x, pitch = tokens_q * g.heads_q;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int dv4 = (g.dv + 3) / 4 * 4;
  float m = -INFINITY;
  for (int p = lane; p < splits; p += 32) m = fmaxf(m, ws_lse[p * pitch + row]);
  m = warp_max(m);
  const auto weight = [m](float x) { return m == -INFINITY || x == -INFINITY ? 0.0f : __expf(x - m); };
  float l = 0.0f;
  for (int p = lane; p < splits; p += 32) l += weight(ws_lse[p * pitch + row]);
  l = warp_sum(l);
  float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll COMBINE_UNROLL
  for (int p = warp; p < splits; p += COMBINE_WARPS) {
    const float w = weight(ws_lse[p * pitch + row]);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int c = lane * 4 + 128 * k;
      if (c >= dv4) continue;
      const float4 v = *reinterpret_cast<const float4 *>(&ws_o[(p * pitch + row) * dv4 + c]);
      acc[k][0] += w * v.x, acc[k][1] += w * v.y, acc[k][2] += w * v.z, acc[k][3] += w * v.w;
    }
  }
#pragma unroll
  for (int k = 0; k < 2; ++k) part[warp][lane + 32 * k] = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
  __syncthreads();
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  const int64_t tq = row / g.heads_q, h = row % g.heads_q;
  const int64_t b = g.cu_q != nullptr ? 0 : tq / g.seqlen_q, i = g.cu_q != nullptr ? tq : tq % g.seqlen_q;
  T *dst = static_cast<T *>(const_cast<void *>(g.o.p)) + b * g.o.sb + i * g.o.ss + h * g.o.sh;
  for (int q = threadIdx.x; q * 4 < g.dv; q += COMBINE_WARPS * 32) {
    float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int w = 0; w < COMBINE_WARPS; ++w) {
      const float4 x = part[w][q];
      r[0] += x.x, r[1] += x.y, r[2] += x.z, r[3] += x.w;
    }
    store4<T>(dst + q * 4, r, inv, g.dv - q * 4);
  }
  if (threadIdx.x == 0 && g.lse != nullptr) g.lse[b * g.lb + h * g.lh + i * g.ls] = l > 0.0f ? m + logf(l) : -INFINITY;
}

/* Host side: grid (row tiles x parts, Hkv, batch), the parts of a row tile one cluster where
 * they are merged in one (sdpa_split_shape.h); else the combine when there are parts. On sm >= 90
 * both kernels are programmatic dependent launches of what precedes them on the stream. */
template <typename T, int DP, int BM>
cudaError_t launch_sdpa_split(const sdpa_geom &g, int32_t splits, int32_t row_tiles, int32_t clustered,
                              void *workspace, int64_t tokens_q, const CUtensorMap &tk, const CUtensorMap &tv,
                              int32_t tma_box, int32_t sm, cudaStream_t stream, int32_t *grid, int32_t *block,
                              int32_t *smem_bytes, int32_t *cluster) {
  using C = cfg<T, DP, BM>;
  const auto kernel = sdpa_split_kernel<T, DP, BM>;
  const cudaError_t e = smem_optin(kernel, C::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  float *ws_lse = splits > 1 && !clustered ? static_cast<float *>(workspace) : nullptr;
  float *ws_o = ws_lse != nullptr ? reinterpret_cast<float *>(static_cast<unsigned char *>(workspace) +
                                                              opsi_sdpa_split_lse_bytes(splits, tokens_q, g.heads_q))
                                  : nullptr;
  const dim3 gr((unsigned)((int64_t)row_tiles * splits), (unsigned)(g.heads_q / g.group), (unsigned)g.batch);
  grid[0] = (int32_t)gr.x, grid[1] = (int32_t)gr.y, grid[2] = (int32_t)gr.z;
  block[0] = C::THREADS, block[1] = block[2] = 1;
  *smem_bytes = C::SMEM_BYTES;
  *cluster = clustered ? splits : 0;
  /* on sm_90 a programmatic dependent launch (the kernel waits before its first read), and the
   * parts' cluster where they are merged in one */
  cudaLaunchConfig_t lc = {};
  lc.gridDim = gr;
  lc.blockDim = dim3(C::THREADS);
  lc.dynamicSmemBytes = C::SMEM_BYTES;
  lc.stream = stream;
  cudaLaunchAttribute at[2];
  unsigned n = 0;
  if (sm >= 90) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (clustered) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n++].val.clusterDim = {(unsigned)splits, 1, 1};
  }
  lc.attrs = at, lc.numAttrs = n;
  const cudaError_t le =
      cudaLaunchKernelEx(&lc, kernel, g, splits, row_tiles, clustered, ws_lse, ws_o, tokens_q, tk, tv, tma_box);
  if (clustered || splits <= 1 || le != cudaSuccess) return le;
  /* the combine, a programmatic dependent launch on sm_90 (at[0]) */
  lc.gridDim = dim3((unsigned)(tokens_q * g.heads_q));
  lc.blockDim = dim3(COMBINE_WARPS * 32);
  lc.dynamicSmemBytes = 0;
  lc.numAttrs = sm >= 90 ? 1 : 0;
  return cudaLaunchKernelEx(&lc, sdpa_split_combine<T>, g, splits, static_cast<const float *>(ws_lse),
                            static_cast<const float *>(ws_o), tokens_q);
}

}  // namespace split
}  // namespace opsi

/* One instantiation (the kernel sources, sdpa_kernels.h's lists); `extern` before it declares it. */
#define OPSI_SDPA_SPLIT_TEMPLATE(T, DP, BM)                                                                   \
  template cudaError_t opsi::split::launch_sdpa_split<T, DP, BM>(                                            \
      const opsi::sdpa_geom &, int32_t, int32_t, int32_t, void *, int64_t, const CUtensorMap &, const CUtensorMap &, \
      int32_t, int32_t, cudaStream_t, int32_t *, int32_t *, int32_t *, int32_t *);
#define OPSI_SDPA_SPLIT_INSTANTIATE(T, DP, BM) OPSI_SDPA_SPLIT_TEMPLATE(T, DP, BM)

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SPLIT_CUH_ */
