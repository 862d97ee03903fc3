/*
 * The Hopper GEMM's epilogues, run by each consumer warpgroup on its 64-row half of a tile
 * in registers, while the producer already loads the next tile's first stages: a whole half
 * with 16-bit D whose epilogue operands can be read in column pairs is finished in registers
 * (a plain one with any D); when D is 16-bit with 16-byte aligned rows the result goes by
 * stmatrix into shared memory and out by TMA stores (epilogue_tma) that drain while the next
 * tile's mainloop runs, else the threads store it; any other half goes through shared memory
 * in chunks (epilogue_staged). epilogue_half picks one.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_SM90_EPILOGUE_CUH_
#define OPSLIB_KERNELS_GEMM_GEMM_SM90_EPILOGUE_CUH_

#include "kernels/common/wgmma_ops.cuh"
#include "kernels/gemm/gemm_sm90_cfg.cuh"

namespace opsi {
namespace sm90 {

/* A whole tile of a plain GEMM (D = acc) with paired stores: the consumer thread's rows
 * row0 and row0 + 8, columns col0 + 8 j + {0, 1}. */
template <int BN, typename O>
__device__ __forceinline__ void store_plain(const gemm_geom &g, int64_t bt, int64_t row0, int64_t col0,
                                            const float (&acc)[BN / 2]) {
  O *d = static_cast<O *>(const_cast<void *>(g.d.p)) + bt * g.d.sb + row0 * g.d.sr + col0;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    O *p = d + r * 8 * g.d.sr;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) store2<O>(p + j * 8, acc[j * 4 + r * 2], acc[j * 4 + r * 2 + 1]);
  }
}

/* Two neighbouring 16-bit elements as floats (p aligned to 4 bytes). */
template <typename O> __device__ __forceinline__ float2 load2(const O *p);
template <> __device__ __forceinline__ float2 load2<__half>(const __half *p) {
  return __half22float2(*reinterpret_cast<const __half2 *>(p));
}
template <> __device__ __forceinline__ float2 load2<__nv_bfloat16>(const __nv_bfloat16 *p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(p));
}

/* The activation of a 16-bit output. GELU (tanh) takes the
 * hardware tanh.approx.f32 (relative error 2^-10.99, below the output's rounding for bf16
 * and about it for f16) instead of tanhf's ~25 instructions: one MUFU op an element. */
template <int ACT> __device__ __forceinline__ float act16(float x) {
  if constexpr (ACT == OPS_ACT_GELU_TANH) {
    const float u = 0.7978845608028654f * fmaf(0.044715f * x, x * x, x);
    float t;
    asm("tanh.approx.f32 %0, %1;" : "=f"(t) : "f"(u));
    const float h = 0.5f * x;
    return fmaf(h, t, h);
  } else {
    return act_f(ACT, x);
  }
}

/* What a register epilogue holds, decided once a call: EPI_PLAIN D = acc; EPI_ACT only the
 * activation; EPI_BIAS_VEC a column bias vector and the activation (nn.Linear's); both with
 * alpha 1; EPI_GENERAL any mix of alpha, beta C, a bias of any broadcast, the activation and
 * the residual. The narrow ones leave the per-pair tests of the general one out of the
 * unrolled loop. */
enum { EPI_GENERAL = 0, EPI_BIAS_VEC = 1, EPI_ACT = 2, EPI_PLAIN = 3 };

/* The fused epilogue of the consumer thread's pairs (rows row0 and row0 + 8, columns
 * col0 + 8 j + {0, 1}) with 16-bit operands: the fast path of a whole tile. Every operand is
 * read in column pairs (unit column stride, pairs aligned: the launcher's `pairs` bit 1), or,
 * for the bias only, as one value a row (column stride 0). A bias vector along the columns
 * (row stride 0, as nn.Linear's) goes through the warpgroup's shared memory `stage` (BN
 * elements, named barrier 1 + cw): each thread loaded its pair of the tile's columns
 * (`bias_pair`, BN / 2 threads) before the mainloop, where the load's latency hides, and
 * stores it there now, instead of loading it here behind the accumulators' registers
 * (bench/RESULTS.md has the stalls that decided it). Each pair of
 * C / residual is read by the thread that then writes D there, before it does (C or
 * residual may be D). */
template <typename O, int ACT, int MODE> struct pair_epilogue {
  const O *c, *res, *bias, *vec;
  bool bias_cols;
  float brow[2];

  __device__ __forceinline__ void init(const gemm_geom &g, int64_t bt, int64_t row0, int64_t col0, O *stage,
                                       uint32_t bias_pair, int tile_cols, int cw) {
    c = res = bias = vec = nullptr;
    bias_cols = false;
    brow[0] = brow[1] = 0.0f;
    if (MODE == EPI_PLAIN || MODE == EPI_ACT) return;
    if (MODE == EPI_GENERAL) {
      c = g.c.p ? static_cast<const O *>(g.c.p) + bt * g.c.sb + row0 * g.c.sr + col0 : nullptr;
      res = g.res.p ? static_cast<const O *>(g.res.p) + bt * g.res.sb + row0 * g.res.sr + col0 : nullptr;
      bias = g.bias.p ? static_cast<const O *>(g.bias.p) + bt * g.bias.sb + row0 * g.bias.sr + col0 * g.bias.sc
                      : nullptr;
      bias_cols = g.bias.sc != 0;
    }
    if (MODE == EPI_BIAS_VEC || (bias != nullptr && bias_cols && g.bias.sr == 0)) {
      const int t = threadIdx.x % 128;
      asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory"); /* the last tile's reads are done */
      if (2 * t < tile_cols) reinterpret_cast<uint32_t *>(stage)[t] = bias_pair;
      asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
      vec = stage + (threadIdx.x % 4) * 2;
    } else if (bias != nullptr && !bias_cols) {
      brow[0] = to_f(bias[0]), brow[1] = to_f(bias[8 * g.bias.sr]);
    }
  }

  /* Outputs (row0 + 8 r, col0 + 8 j + {0, 1}) from their accumulators a0, a1. */
  __device__ __forceinline__ float2 operator()(const gemm_geom &g, int j, int r, float a0, float a1) const {
    if (MODE == EPI_PLAIN) return make_float2(a0, a1);
    if (MODE == EPI_ACT) return make_float2(act16<ACT>(a0), act16<ACT>(a1));
    if (MODE == EPI_BIAS_VEC) {
      const float2 bv = load2(vec + j * 8);
      return make_float2(act16<ACT>(a0 + bv.x), act16<ACT>(a1 + bv.y));
    }
    const int64_t r8 = r * 8;
    float v0 = g.alpha * a0, v1 = g.alpha * a1;
    if (c != nullptr) {
      const float2 cv = load2(c + r8 * g.c.sr + j * 8);
      v0 = fmaf(g.beta, cv.x, v0), v1 = fmaf(g.beta, cv.y, v1);
    }
    if (vec != nullptr) {
      const float2 bv = load2(vec + j * 8);
      v0 += bv.x, v1 += bv.y;
    } else if (bias != nullptr) {
      if (bias_cols) {
        const float2 bv = load2(bias + r8 * g.bias.sr + j * 8);
        v0 += bv.x, v1 += bv.y;
      } else {
        v0 += brow[r], v1 += brow[r];
      }
    }
    v0 = act16<ACT>(v0), v1 = act16<ACT>(v1);
    if (res != nullptr) {
      const float2 rv = load2(res + r8 * g.res.sr + j * 8);
      v0 += rv.x, v1 += rv.y;
    }
    return make_float2(v0, v1);
  }
};

/* The general fused epilogue of a whole tile stored straight from the registers, 16-bit D
 * (pairs aligned): D without a TMA store map. */
template <int BN, typename O, int ACT>
__device__ __forceinline__ void epilogue_regs(const gemm_geom &g, int64_t bt, int64_t row0, int64_t col0,
                                              const float (&acc)[BN / 2], O *stage, uint32_t bias_pair, int cw) {
  O *d = static_cast<O *>(const_cast<void *>(g.d.p)) + bt * g.d.sb + row0 * g.d.sr + col0;
  pair_epilogue<O, ACT, EPI_GENERAL> e;
  e.init(g, bt, row0, col0, stage, bias_pair, BN, cw);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float2 v = e(g, j, r, acc[j * 4 + r * 2], acc[j * 4 + r * 2 + 1]);
      store2<O>(d + r * 8 * g.d.sr + j * 8, v.x, v.y);
    }
  }
}

/* The epilogue of a consumer warpgroup's 64 x BN half at (row_base, col_base) through TMA
 * stores, 16-bit D: chunks of 64 columns (128 bytes a row) go from the fragments through
 * pair_epilogue by stmatrix into one of the warpgroup's two 8 KB buffers, 128-byte swizzled
 * as the store's map (16-byte unit u of row i at u ^ (i % 8): each 8x8 matrix's rows land
 * in distinct banks), and one thread stores the chunk as a 64 x 64 box and goes on; a buffer
 * is rewritten once its store two chunks back has been read (with one chunk a tile, BN = 64:
 * the last tile's store). The copy engine drains the stores while the warpgroup starts its
 * next tile's mainloop, and clips them at D's edges (any tile may take this path when
 * EPI_PLAIN). Named barrier 1 + cw. */
template <int BN, typename O, int ACT, int MODE>
__device__ __forceinline__ void epilogue_tma(const gemm_geom &g, const CUtensorMap *map_d, int64_t bt,
                                             int64_t row_base, int64_t col_base, const float (&acc)[BN / 2],
                                             uint8_t *out, O *stage, uint32_t bias_pair, int cw) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  pair_epilogue<O, ACT, MODE> e;
  e.init(g, bt, row_base + warp * 16 + lane / 4, col_base + (lane % 4) * 2, stage, bias_pair, BN, cw);
  const int q = lane / 8, x = lane % 8; /* this lane addresses row x of matrix q */
  const uint32_t row_addr = smem_addr(out) + (uint32_t)(warp * 16 + (q % 2) * 8 + x) * 128;
#pragma unroll
  for (int ch = 0; ch < BN / 64; ++ch) {
    if (t == 0) {
      if (BN / 64 % 2 == 0) bulk_wait_read<1>();
      else bulk_wait_read<0>(); /* one chunk a tile: the last tile's store read this buffer */
    }
    asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
      uint32_t reg[4]; /* matrices (rows 0-7, 8-15) x (column groups j, j + 1) */
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int j = ch * 8 + jp * 2 + h;
          const float2 v = e(g, j, r, acc[j * 4 + r * 2], acc[j * 4 + r * 2 + 1]);
          reg[h * 2 + r] = pack2<O>(v.x, v.y);
        }
      }
      stmatrix_x4(row_addr + (ch % 2) * 8192 + ((uint32_t)((jp * 2 + q / 2) ^ x) << 4), reg[0], reg[1], reg[2],
                  reg[3]);
    }
    fence_proxy_async();
    asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
    if (t == 0) {
      if (row_base < g.m && col_base + ch * 64 < g.n) { /* a chunk wholly past an edge is not stored */
        tma_store(map_d, out + (ch % 2) * 8192, (int32_t)(col_base + ch * 64), (int32_t)row_base, (int32_t)bt);
      }
      bulk_commit();
    }
  }
}

/* The activations of transformer MLPs have a register epilogue each (the activation a
 * constant in it); the others take the staged one. */
__device__ __forceinline__ bool regs_act(int32_t act) {
  return act == OPS_ACT_NONE || act == OPS_ACT_RELU || act == OPS_ACT_GELU_TANH || act == OPS_ACT_GELU_ERF ||
         act == OPS_ACT_SILU;
}

/* The fused epilogue of a whole tile, 16-bit D, the activation a constant: through TMA
 * stores (buffers `out`) in the call's epilogue mode when D has a store map (widths of whole
 * 64-column boxes only), else the general one straight from the registers. */
template <int BN, typename O, int ACT>
__device__ __forceinline__ void epilogue_fused(const gemm_geom &g, const CUtensorMap *map_d, bool d_tma, int mode,
                                               int64_t bt, int64_t row_base, int64_t col_base,
                                               const float (&acc)[BN / 2], uint8_t *out, O *stage,
                                               uint32_t bias_pair, int cw) {
  if (!OPSI_GEMM_SM90_BOXED(BN) || !d_tma) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    epilogue_regs<BN, O, ACT>(g, bt, row_base + warp * 16 + lane / 4, col_base + (lane % 4) * 2, acc, stage,
                              bias_pair, cw);
  } else if (mode == EPI_BIAS_VEC) {
    epilogue_tma<BN, O, ACT, EPI_BIAS_VEC>(g, map_d, bt, row_base, col_base, acc, out, stage, bias_pair, cw);
  } else if (mode == EPI_ACT) {
    epilogue_tma<BN, O, ACT, EPI_ACT>(g, map_d, bt, row_base, col_base, acc, out, stage, bias_pair, cw);
  } else {
    epilogue_tma<BN, O, ACT, EPI_GENERAL>(g, map_d, bt, row_base, col_base, acc, out, stage, bias_pair, cw);
  }
}

template <int BN, typename O>
__device__ __forceinline__ void epilogue_fused_act(const gemm_geom &g, const CUtensorMap *map_d, bool d_tma,
                                                   int mode, int64_t bt, int64_t row_base, int64_t col_base,
                                                   const float (&acc)[BN / 2], uint8_t *out, O *stage,
                                                   uint32_t bias_pair, int cw) {
#define OPSI_EPI_ACT(ACT) \
  epilogue_fused<BN, O, ACT>(g, map_d, d_tma, mode, bt, row_base, col_base, acc, out, stage, bias_pair, cw)
  switch (g.act) {
    case OPS_ACT_RELU: OPSI_EPI_ACT(OPS_ACT_RELU); break;
    case OPS_ACT_GELU_TANH: OPSI_EPI_ACT(OPS_ACT_GELU_TANH); break;
    case OPS_ACT_GELU_ERF: OPSI_EPI_ACT(OPS_ACT_GELU_ERF); break;
    case OPS_ACT_SILU: OPSI_EPI_ACT(OPS_ACT_SILU); break;
    default: OPSI_EPI_ACT(OPS_ACT_NONE); break;
  }
#undef OPSI_EPI_ACT
}

/* The epilogue of a consumer warpgroup's 64 x BN tile at (row0, col0) for any call: chunks
 * of EPI_COLS columns (the last one narrower where BN is not a multiple of EPI_COLS) go from
 * the accumulator fragments to shared memory, then each thread
 * takes a pair of columns of every eighth row (a half warp covers a row segment: coalesced
 * C / bias / residual reads and D writes) through the element epilogue, in a loop the
 * compiler keeps rolled. `buf` is the warpgroup's staging area, which its TMA stores' buffers
 * share; named barrier 1 + cw. PLAIN: plain calls only, stored without the element epilogue. */
template <int BN, bool PLAIN>
__device__ __forceinline__ void epilogue_staged(const gemm_geom &g, int64_t bt, int64_t row0, int64_t col0,
                                                const float (&acc)[BN / 2], float *buf, int cw) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int fr = warp * 16 + lane / 4, fc = (lane % 4) * 2;
  /* the last tile's TMA stores may still read buf: their issuing thread waits, then the
   * warpgroup meets */
  if (t == 0) bulk_wait_read<0>();
  asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
#pragma unroll
  for (int ch = 0; ch < (BN + EPI_COLS - 1) / EPI_COLS; ++ch) {
    const int cols = BN - ch * EPI_COLS < EPI_COLS ? BN - ch * EPI_COLS : EPI_COLS; /* a multiple of 8 */
#pragma unroll
    for (int jj = 0; jj < EPI_COLS / 8; ++jj) {
      const int j = ch * (EPI_COLS / 8) + jj;
      if (jj * 8 >= cols) break;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        *reinterpret_cast<float2 *>(&buf[(fr + 8 * r) * EPI_PITCH + jj * 8 + fc]) =
            make_float2(acc[j * 4 + r * 2], acc[j * 4 + r * 2 + 1]);
      }
    }
    asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
    const int pc = (t % (EPI_COLS / 2)) * 2;
#pragma unroll 1
    for (int row = t / (EPI_COLS / 2); row < 64 && pc < cols; row += 128 / (EPI_COLS / 2)) {
      const float2 v = *reinterpret_cast<const float2 *>(&buf[row * EPI_PITCH + pc]);
      gemm_store_pair<PLAIN>(g, bt, row0 + row, col0 + ch * EPI_COLS + pc, v.x, v.y);
    }
    asm volatile("bar.sync %0, 128;" ::"r"(1 + cw) : "memory");
  }
}

/* The epilogue of the 64-row half of a tile at (row_base, col_base) held by a consumer
 * warpgroup, its shared memory `epi` (EPI_WG_BYTES, 1024-aligned) and `stage` (BN 16-bit
 * elements). A plain half with a 16-bit D that has a store map (d_tma) goes through TMA
 * stores, whole or not; else a whole half is stored from registers: plain with any D
 * (pairs aligned), fused (see pair_epilogue) with 16-bit D, through TMA stores when it can;
 * anything else is staged through shared memory. PLAIN: the plain calls' kernel, without the
 * fused paths (a plain call never takes them). */
template <int BN, bool PLAIN>
__device__ __forceinline__ void epilogue_half(const gemm_geom &g, const CUtensorMap *map_d, bool d_tma, int mode,
                                              int64_t bt, int64_t row_base, int64_t col_base,
                                              const float (&acc)[BN / 2], int32_t pairs, uint8_t *epi, void *stage,
                                              uint32_t bias_pair, int cw) {
  const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int64_t row0 = row_base + warp * 16 + lane / 4, col0 = col_base + (lane % 4) * 2;
  const bool whole = row_base + 64 <= g.m && col_base + BN <= g.n;
  const bool fused = whole && pairs == 3 && regs_act(g.act);
  if (OPSI_GEMM_SM90_BOXED(BN) && g.plain && d_tma) {
    if (g.d_dtype == OPS_DTYPE_BF16) {
      epilogue_tma<BN, __nv_bfloat16, OPS_ACT_NONE, EPI_PLAIN>(g, map_d, bt, row_base, col_base, acc, epi, nullptr,
                                                              0u, cw);
    } else {
      epilogue_tma<BN, __half, OPS_ACT_NONE, EPI_PLAIN>(g, map_d, bt, row_base, col_base, acc, epi, nullptr, 0u, cw);
    }
  } else if (g.plain && whole && (pairs & 1)) {
    switch (g.d_dtype) {
      case OPS_DTYPE_BF16: store_plain<BN, __nv_bfloat16>(g, bt, row0, col0, acc); break;
      case OPS_DTYPE_F16: store_plain<BN, __half>(g, bt, row0, col0, acc); break;
      default: store_plain<BN, float>(g, bt, row0, col0, acc); break;
    }
  } else if (!PLAIN && fused && g.d_dtype == OPS_DTYPE_BF16) {
    epilogue_fused_act<BN, __nv_bfloat16>(g, map_d, d_tma, mode, bt, row_base, col_base, acc, epi,
                                          static_cast<__nv_bfloat16 *>(stage), bias_pair, cw);
  } else if (!PLAIN && fused && g.d_dtype == OPS_DTYPE_F16) {
    epilogue_fused_act<BN, __half>(g, map_d, d_tma, mode, bt, row_base, col_base, acc, epi,
                                   static_cast<__half *>(stage), bias_pair, cw);
  } else {
    epilogue_staged<BN, PLAIN>(g, bt, row_base, col_base, acc, reinterpret_cast<float *>(epi), cw);
  }
}

}  // namespace sm90
}  // namespace opsi

#endif /* OPSLIB_KERNELS_GEMM_GEMM_SM90_EPILOGUE_CUH_ */
