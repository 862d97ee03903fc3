/*
 * The Hopper attention forward (sm_90a): TMA + wgmma, warp-specialized.
 *
 * A work tile is BM = 64 NC query rows of one (batch, head); a block walks work tiles:
 *   warpgroup 0, producer (setmaxnreg 24, or 32 beside three consumers): one thread issues
 *     the TMA loads of the Q tile (once the consumers' last S has read the previous one:
 *     q_empty) and of each key tile's K and V (BN rows x DP, as DP / 64 boxes of 64
 *     columns, 128-byte swizzled) into a ring of 2 stages; K and V complete, and are handed
 *     back, on their own mbarriers, and K runs a key tile ahead of V (K_t+1, then V_t):
 *     S = Q K^T starts before V has landed, the next K loads as soon as S has read the last
 *     one, and V, held a tile longer (its P V runs under the next softmax), does not hold K
 *     back. The thread waits suspended on the mbarriers: polling took a tenth of the issue
 *     slots of the scheduler it shares with the consumer warps.
 *   warpgroups 1 .. NC, consumers (setmaxnreg 240 for two, 160 for three), 64 query rows
 *     each. Per key tile: S = Q K^T by wgmma m64nBNk16 from shared memory (f32 in
 *     registers; descriptors made once, moved by an add); where the tile crosses a sequence
 *     end or a window edge, -inf outside each row's visible keys; online softmax in
 *     registers (exp2; an unmasked tile's scale goes into the exponent's FFMA); P rounded to
 *     16 bits stays in registers as the A operand of O += P V, wgmma m64nDPk16 with V
 *     N-major in shared memory. K and V go back to the producer (one arrival per consumer
 *     warp) once the wgmma group that read each is done.
 *   Inside a warpgroup, tile t's S = Q K^T is issued together with tile t - 1's P V, and
 *   t's softmax runs while that P V is still in flight; O is rescaled by t's factors in the
 *   next turn, between S_t+1 and P_t V_t, under S_t+1 (and not at all where no row max of
 *   the warp moved). The consumer warpgroups take turns issuing, in a ring (named barriers
 *   1 .. NC), so that one's softmax overlaps the others' wgmma.
 * Clusters (CLUSTER 2, the _pair kernels: uniform calls with an even number of query tiles a
 * head, which their rows require): the two blocks of a cluster take neighbouring query
 * tiles of one head, which read the same keys;
 * each producer loads its half of every K / V tile's rows into both blocks (TMA multicast,
 * completing on each block's full barrier), and its empty barriers count the consumer warps
 * of both blocks (the others arrive remotely), so that a stage is refilled only once both
 * have read it. The L2 serves each K / V tile once a pair: at d128 s16k 9.2 GB instead of
 * 16.0, L2 busy 32% instead of 53%, and the board's power goes to the SMs.
 * The epilogue divides by the row sums and stores O from registers (pairs of elements), and
 * LSE. Out-of-range rows and columns: TMA reads zeros past a tensor's extent (varlen: the
 * next sequence's rows, masked like any key past the end); stores are bounded.
 *
 * Operands: [B, S, H, D] views with unit-stride rows, 16-byte aligned base and strides
 * (TMA), q's and v's head dims up to DP (the map's extent: zero columns beyond).
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_CUH_

#include <cuda.h>

#include <atomic>

#include "kernels/common/sm90_async.cuh"
#include "kernels/common/wgmma_ops.cuh"
#include "kernels/flash/sdpa_gpu.cuh"
#include "kernels/flash/sdpa_sm90_shape.h"

namespace opsi {
namespace fa3 {

enum { STAGES = 2 };

/* A kernel's shape: head dims up to DP, BN key rows a tile, NC consumer warpgroups of 64
 * query rows each (BM = 64 NC rows a work tile), one producer warpgroup; setmaxnreg gives the
 * producer LOAD_REGS registers a thread and each consumer MMA_REGS. The split may not ask for
 * more than the block was launched with (THREADS x the launch bound's count: 168 or 128): an
 * increase waits for registers that the decreases gave back, and with too few it waits for
 * ever (an experimental variant asking 48 + 2 x 232 = 65536 of 64512 hung on the H100). */
template <int DP_, int BN_, int NC_, int BM_, int LOAD_REGS_, int MMA_REGS_, int CLUSTER_> struct cfg {
  static constexpr int DP = DP_, BN = BN_, NC = NC_, BM = BM_, LOAD_REGS = LOAD_REGS_, MMA_REGS = MMA_REGS_;
  static constexpr int CLUSTER = CLUSTER_; /* blocks a cluster of the _pair kernel (its row decides when) */
  static constexpr int THREADS = 128 * (NC + 1);
  static constexpr int Q_BYTES = BM * DP * 2;
  static constexpr int KV_BYTES = BN * DP * 2; /* one of K or V, one stage */
  static constexpr int BARRIER_BYTES = 8 * (2 + 4 * STAGES);
  static constexpr int SMEM_BYTES = 1024 + Q_BYTES + 2 * STAGES * KV_BYTES + BARRIER_BYTES;
  static_assert(NC == 2 || NC == 3, "two or three consumer warpgroups");
  static_assert(SMEM_BYTES <= 227 * 1024, "shared memory of one block");
  static_assert(BM == 64 * NC, "64 query rows a consumer warpgroup");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "one block, or a pair sharing K / V");
  static_assert(LOAD_REGS * 128 + MMA_REGS * 128 * NC <= THREADS * (65536 / THREADS / 8 * 8), "register split");
};

/* The shape a head dim runs: sdpa_sm90_shape.h (the capability rows state the same numbers;
 * bench/RESULTS.md has the measurements behind them). */
#define OPSI_SDPA_SM90_CFG(D)                                                                           \
  cfg<D, OPSI_SDPA_SM90_D##D##_BN, OPSI_SDPA_SM90_D##D##_NC, OPSI_SDPA_SM90_D##D##_BM,                 \
      OPSI_SDPA_SM90_D##D##_LOAD_REGS, OPSI_SDPA_SM90_D##D##_MMA_REGS, OPSI_SDPA_SM90_D##D##_CLUSTER>
template <int DP> struct shape_of;
template <> struct shape_of<64> { using type = OPSI_SDPA_SM90_CFG(64); };
template <> struct shape_of<128> { using type = OPSI_SDPA_SM90_CFG(128); };
template <> struct shape_of<256> { using type = OPSI_SDPA_SM90_CFG(256); };
#undef OPSI_SDPA_SM90_CFG
template <int DP> using shape = typename shape_of<DP>::type;

/* 2^x by the MUFU unit (ex2.approx.ftz: 2 ulp; -inf gives +0). */
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* g's work tiles: query tiles of BM rows x Hq x batch. Tile idx: query tiles last-first
 * within a head (the longest causal work first), heads, then batches, so that the blocks
 * running at once share their heads' K and V in L2; its sequence and query rows [i_lo,
 * i_hi], and the key tiles of BN it needs, [t_begin, t_end) (none when the tile starts past
 * its sequence's end: varlen's shorter sequences). */
template <int BM> __device__ __host__ __forceinline__ int sdpa_query_tiles(const sdpa_geom &g) {
  return (g.seqlen_q + BM - 1) / BM;
}
template <int BM> __device__ __host__ __forceinline__ int64_t sdpa_tiles(const sdpa_geom &g) {
  return (int64_t)sdpa_query_tiles<BM>(g) * g.heads_q * g.batch;
}
struct sdpa_work {
  sdpa_seq s;
  int b, h, i_lo, i_hi, t_begin, t_end;
};
template <int BM, int BN> __device__ __forceinline__ sdpa_work sdpa_work_at(const sdpa_geom &g, int64_t idx) {
  sdpa_work w;
  const int n_qt = sdpa_query_tiles<BM>(g);
  const int64_t bh = idx / n_qt;
  w.h = (int)(bh % g.heads_q), w.b = (int)(bh / g.heads_q), w.i_lo = (n_qt - 1 - (int)(idx - bh * n_qt)) * BM;
  w.s = sdpa_sequence(g, w.b);
  w.i_hi = min(w.i_lo + BM, w.s.sq) - 1;
  w.t_begin = w.t_end = 0;
  if (w.i_lo < w.s.sq) {
    int j_lo, j_hi;
    sdpa_key_range(g, w.s, w.i_lo, w.i_hi, &j_lo, &j_hi);
    w.t_begin = j_lo / BN, w.t_end = j_hi > j_lo ? (j_hi + BN - 1) / BN : w.t_begin;
  }
  return w;
}

/* The tensor maps' axes: (d, s, h, b); varlen: (d, t, h, 1) with s = the sequence's start + row.
 * Blocks walk the work tiles idx = blockIdx.x, + gridDim.x, ... (a persistent grid when the
 * launcher gives fewer blocks than tiles): the producer loads the next tile's Q once the
 * consumers' last S of the current one has read it (q_empty) and its K / V into the ring as
 * stages come free, under the current tile's last P V and epilogue. */
template <typename T, typename C, int CL>
__global__ void __launch_bounds__(C::THREADS, 1)
    sdpa_sm90_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                     const __grid_constant__ CUtensorMap map_v, const sdpa_geom g) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using namespace opsi::sm90;
  constexpr int DP = C::DP, BN = C::BN, BM = C::BM, NC = C::NC;
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t *sq = smem, *sk = smem + C::Q_BYTES, *sv = sk + STAGES * C::KV_BYTES;
  uint64_t *q_full = reinterpret_cast<uint64_t *>(sv + STAGES * C::KV_BYTES), *q_empty = q_full + 1;
  uint64_t *k_full = q_full + 2, *v_full = k_full + STAGES, *k_empty = v_full + STAGES, *v_empty = k_empty + STAGES;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wg = warp / 4;
  const int64_t tiles = sdpa_tiles<BM>(g);
  /* CL 2: a cluster of two, both blocks on neighbouring query tiles of one head (same keys) */
  const uint32_t rank = CL > 1 ? cluster_rank() : 0;

  if (threadIdx.x == 0) {
    mbar_init(q_full, 1);
    mbar_init(q_empty, 4 * NC); /* one arrival per consumer warp */
    for (int st = 0; st < STAGES; ++st) {
      mbar_init(&k_full[st], 1);
      mbar_init(&v_full[st], 1);
      mbar_init(&k_empty[st], 4 * NC * CL); /* one arrival per consumer warp of the cluster */
      mbar_init(&v_empty[st], 4 * NC * CL);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (CL > 1) {
    cluster_sync(); /* the other block's barriers are set up before anything lands there */
  } else {
    __syncthreads();
  }

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(C::LOAD_REGS));
    if (warp == 0 && lane == 0) {
      /* K runs a key tile ahead of V (K_t+1 before V_t): S_t+1 needs K_t+1 a softmax before
       * P_t V_t needs V_t, and V's stage comes free a tile later than K's */
      const int mine = (int)rank * (BN / 2); /* in a cluster, the first of my half of a tile's rows */
      const auto load = [&](const CUtensorMap *map, uint8_t *buf, uint64_t *full, uint64_t *empty, int n,
                            int32_t row, int hk, int bmap) {
        const int st = n % STAGES;
        mbar_wait<1000000>(&empty[st], ((n / STAGES) & 1) ^ 1);
        mbar_expect_tx(&full[st], C::KV_BYTES);
#pragma unroll
        for (int c = 0; c < DP / 64; ++c) {
          uint8_t *dst = buf + st * C::KV_BYTES + c * BN * 128 + mine * 128;
          if constexpr (CL == 1) {
            tma_load_4d(dst, map, &full[st], c * 64, row, hk, bmap);
          } else { /* my half of the rows (the map's box), into both blocks */
            tma_load_4d_multicast(dst, map, &full[st], c * 64, row + mine, hk, bmap, 0x3);
          }
        }
      };
      int kv = 0, tn = 0; /* key tiles and work tiles loaded so far */
      for (int64_t idx = blockIdx.x; idx < tiles; idx += gridDim.x) {
        const sdpa_work w = sdpa_work_at<BM, BN>(g, idx);
        const sdpa_seq &s = w.s;
        if (w.i_lo >= s.sq) continue;
        const int hk = w.h / g.group, bmap = g.cu_q == nullptr ? w.b : 0; /* varlen maps: batch axis of 1 */
        const int t_begin = w.t_begin, t_end = w.t_end;
        mbar_wait<1000000>(q_empty, (tn & 1) ^ 1);
        mbar_expect_tx(q_full, C::Q_BYTES);
#pragma unroll
        for (int c = 0; c < DP / 64; ++c) {
          tma_load_4d(sq + c * BM * 128, &map_q, q_full, c * 64, (int32_t)(s.q0 + w.i_lo), w.h, bmap);
        }
        for (int t = t_begin; t < t_end; ++t, ++kv) {
          load(&map_k, sk, k_full, k_empty, kv, (int32_t)(s.k0 + t * BN), hk, bmap);
          if (t > t_begin) load(&map_v, sv, v_full, v_empty, kv - 1, (int32_t)(s.k0 + (t - 1) * BN), hk, bmap);
        }
        if (t_end > t_begin) load(&map_v, sv, v_full, v_empty, kv - 1, (int32_t)(s.k0 + (t_end - 1) * BN), hk, bmap);
        ++tn;
      }
      /* the producer's other threads have exited, which barrier.cluster does not wait for */
      if constexpr (CL > 1) cluster_sync();
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(C::MMA_REGS));
    const int cw = wg - 1, wq = warp % 4;
    const int r_in = cw * 64 + wq * 16 + lane / 4; /* this thread's rows r_in and r_in + 8 of the tile */
    /* shared-memory descriptors of this warpgroup's Q rows and of stage 0's K and V */
    const uint64_t dq = smem_desc(smem_addr(sq) + cw * 64 * 128, 16, 1024);
    const uint64_t dk = smem_desc(smem_addr(sk), 16, 1024), dv = smem_desc(smem_addr(sv), BN * 128, 1024);
    float o[DP / 2];
    uint32_t pa[BN / 16][4];
    float sc[BN / 2];

    /* a stage goes back to the producers of every block that reads it */
    const auto release = [&](uint64_t *empty) {
      if (lane == 0) {
        mbar_arrive(empty);
        if constexpr (CL > 1) mbar_arrive_cluster(empty, rank ^ 1);
      }
    };

    /* the ping-pong: warpgroup 1 issues first, each hands the turn to the next; the turns run
     * on across work tiles (every warpgroup takes one a key tile, plus one a tile for its
     * last P V) */
    const int turn = 1 + cw, next_turn = 1 + (cw + 1) % NC; /* named barriers: mine, the next's */
    if (cw == NC - 1) named_bar_arrive(1, 256);

    int kv = 0, tn = 0; /* key tiles and work tiles consumed so far */
    for (int64_t idx = blockIdx.x; idx < tiles; idx += gridDim.x) {
      const sdpa_work w = sdpa_work_at<BM, BN>(g, idx);
      const sdpa_seq &s = w.s;
      if (w.i_lo >= s.sq) continue;
      const int b = w.b, h = w.h, i_lo = w.i_lo, i_hi = w.i_hi, t_begin = w.t_begin, t_end = w.t_end;
#pragma unroll
      for (int i = 0; i < DP / 2; ++i) o[i] = 0.0f;
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};
      mbar_wait(q_full, tn & 1);

      /* Tile t: issue S_t = Q K_t^T, rescale O by t - 1's factors under it, and issue
       * O += P_{t-1} V_{t-1} (one turn of the ping-pong); wait for S_t only; its softmax runs
       * while P V is still in flight; then wait for P V, hand the stage of t - 1 back and
       * round P_t. The first tile has no P V before it and the last one's follows the loop:
       * the steady state has no branch around a wgmma (ptxas serializes every wgmma of a
       * kernel where it cannot see the groups). Q goes back to the producer once the last S
       * has read it. */
      const auto issue_s = [&](int st) {
        const uint64_t kd = desc_advance(dk, st * C::KV_BYTES);
#pragma unroll
        for (int kk = 0; kk < DP / 16; ++kk) {
          const uint32_t off = (kk / 4) * BM * 128 + (kk % 4) * 32, koff = (kk / 4) * BN * 128 + (kk % 4) * 32;
          wgmma<T, BN, false>::mma(sc, desc_advance(dq, off), desc_advance(kd, koff), kk > 0 ? 1u : 0u);
        }
        wgmma_commit();
      };
      const auto issue_pv = [&](int st) {
        const uint64_t vd = desc_advance(dv, st * C::KV_BYTES);
#pragma unroll
        for (int kt = 0; kt < BN / 16; ++kt) wgmma_rs<T, DP>::mma(o, pa[kt], desc_advance(vd, kt * 16 * 128), 1u);
        wgmma_commit();
      };
      /* S_t -> P_t in sc (f32; the m64nBN accumulators are BN / 8 blocks of the m16n8 layout)
       * with the row statistics; O's rescale factors into rs */
      const auto softmax = [&](int t, float (&rs)[2]) {
        sdpa_online_softmax<false>(g, s, b, h, i_lo, i_hi, i_lo + r_in, t * BN, lane,
                                   reinterpret_cast<float(&)[BN / 8][4]>(sc), row_max, row_sum, rs, fast_exp2);
      };
      const auto round_p = [&]() {
#pragma unroll
        for (int kt = 0; kt < BN / 16; ++kt) {
          pa[kt][0] = pack2<T>(sc[kt * 8 + 0], sc[kt * 8 + 1]);
          pa[kt][1] = pack2<T>(sc[kt * 8 + 2], sc[kt * 8 + 3]);
          pa[kt][2] = pack2<T>(sc[kt * 8 + 4], sc[kt * 8 + 5]);
          pa[kt][3] = pack2<T>(sc[kt * 8 + 6], sc[kt * 8 + 7]);
        }
      };

      /* O *= its rows' rescale factors; nothing to do when no row max of the warp moved (most
       * key tiles, once a row has seen a few) */
      const auto rescale_o = [&](const float (&f)[2]) {
        if (!__any_sync(0xffffffffu, f[0] != 1.0f || f[1] != 1.0f)) return;
#pragma unroll
        for (int nb = 0; nb < DP / 8; ++nb) {
          o[nb * 4] *= f[0], o[nb * 4 + 1] *= f[0];
          o[nb * 4 + 2] *= f[1], o[nb * 4 + 3] *= f[1];
        }
      };

      if (t_end > t_begin) {
        float rs[2];
        const int st0 = kv % STAGES;
        mbar_wait(&k_full[st0], (kv / STAGES) & 1);
        named_bar_sync(turn, 256); /* my turn to issue */
        wgmma_fence();
        issue_s(st0);
        named_bar_arrive(next_turn, 256); /* the next warpgroup's turn */
        wgmma_wait<0>();
        fence_regs(sc);
        release(&k_empty[st0]);
        if (lane == 0 && t_end - t_begin == 1) mbar_arrive(q_empty);
        softmax(t_begin, rs); /* O is still 0: its rescale by these factors changes nothing */
        round_p();
        for (int t = t_begin + 1; t < t_end; ++t) {
          const int n = kv + (t - t_begin), st = n % STAGES, pst = (n - 1) % STAGES;
          mbar_wait(&k_full[st], (n / STAGES) & 1);
          named_bar_sync(turn, 256);
          wgmma_fence();
          issue_s(st);
          rescale_o(rs); /* by t - 1's factors, under S_t */
          mbar_wait(&v_full[pst], ((n - 1) / STAGES) & 1);
          wgmma_fence();
          issue_pv(pst);
          named_bar_arrive(next_turn, 256);
          wgmma_wait<1>(); /* S_t has landed (K_t is free); P_{t-1} V_{t-1} may still run */
          fence_regs(sc);
          release(&k_empty[st]);
          if (lane == 0 && t == t_end - 1) mbar_arrive(q_empty);
          softmax(t, rs);
          wgmma_wait<0>();
          fence_regs(o);
          release(&v_empty[pst]);
          round_p();
        }
        const int n = kv + (t_end - 1 - t_begin), pst = n % STAGES;
        mbar_wait(&v_full[pst], (n / STAGES) & 1);
        named_bar_sync(turn, 256);
        rescale_o(rs);
        wgmma_fence();
        issue_pv(pst);
        named_bar_arrive(next_turn, 256);
        wgmma_wait<0>();
        fence_regs(o);
        release(&v_empty[pst]);
      } else if (lane == 0) {
        mbar_arrive(q_empty); /* no key: Q was not read */
      }
      kv += t_end - t_begin;
      ++tn;

      /* O / sum and LSE */
      T *op = static_cast<T *>(const_cast<void *>(g.o.p)) + b * g.o.sb + s.q0 * g.o.ss + h * g.o.sh;
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        const int i = i_lo + r_in + hr * 8;
        const float inv = sdpa_finish_row(g, s, b, h, i, row_max[hr], row_sum[hr], lane);
        if (i >= s.sq) continue;
        T *row = op + (int64_t)i * g.o.ss;
#pragma unroll
        for (int nb = 0; nb < DP / 8; ++nb) {
          const int col = nb * 8 + (lane % 4) * 2;
          if (col + 2 <= g.dv) {
            *reinterpret_cast<uint32_t *>(row + col) =
                pack2<T>(o[nb * 4 + hr * 2] * inv, o[nb * 4 + hr * 2 + 1] * inv);
          } else if (col < g.dv) {
            row[col] = from_f<T>(o[nb * 4 + hr * 2] * inv);
          }
        }
      }
    }
    /* the last warpgroup's last hand-over (one more than warpgroup 1 waited for) is taken
     * here, so that no arrival is left pending on barrier 1 */
    if (cw == 0) named_bar_sync(1, 256);
    /* no block leaves while the other may still load into it or hand it a stage back */
    if constexpr (CL > 1) cluster_sync();
  }
#else
  (void)map_q, (void)map_k, (void)map_v, (void)g;
  __trap();
#endif
}

/* Host side: g's work tiles (sdpa_tiles) on `grid` blocks (a persistent grid when fewer), in
 * clusters of CL (2 wants an even number of query tiles a head and the same keys for every
 * tile: no window, no varlen, and maps whose K / V box is BN / 2 rows). The two are separate
 * kernels: a cluster's remote arrivals, read from a register at run time, cost the kernel
 * without one 2% (causal, s1k batch 16) on the H100. */
template <typename T, int DP, int CL>
cudaError_t launch_sdpa_sm90(const CUtensorMap &map_q, const CUtensorMap &map_k, const CUtensorMap &map_v,
                             const sdpa_geom &g, int grid, cudaStream_t stream, int32_t *grid_out, int32_t *block,
                             int32_t *smem_bytes) {
  using C = shape<DP>;
  const auto kernel = sdpa_sm90_kernel<T, C, CL>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES);
  if (e != cudaSuccess) return e;
  if constexpr (CL == 1) {
    kernel<<<grid, C::THREADS, C::SMEM_BYTES, stream>>>(map_q, map_k, map_v, g);
  } else {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)CL, attr[0].val.clusterDim.y = attr[0].val.clusterDim.z = 1;
    lc.blockDim = dim3(C::THREADS), lc.dynamicSmemBytes = C::SMEM_BYTES, lc.stream = stream;
    lc.attrs = attr, lc.numAttrs = 1;
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
    e = cudaLaunchKernelEx(&lc, kernel, map_q, map_k, map_v, g);
    if (e != cudaSuccess) return e;
  }
  grid_out[0] = grid, grid_out[1] = grid_out[2] = 1;
  block[0] = C::THREADS, block[1] = block[2] = 1;
  *smem_bytes = C::SMEM_BYTES;
  return cudaGetLastError();
}

}  // namespace fa3
}  // namespace opsi

#define OPSI_SDPA_SM90_INSTANTIATE(T, DP, CL)                                                              \
  template cudaError_t opsi::fa3::launch_sdpa_sm90<T, DP, CL>(const CUtensorMap &, const CUtensorMap &,  \
                                                              const CUtensorMap &, const opsi::sdpa_geom &, \
                                                              int, cudaStream_t, int32_t *, int32_t *, int32_t *);

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_CUH_ */
