/*
 * The Hopper attention's epilogue: each consumer thread divides its two rows of O by their
 * softmax sums and writes the rows' LSE. Where O's rows are 16-byte aligned (g.aligned), the
 * four threads of a quad, which hold a row's columns in pairs, trade their pairs (a 4 x 4
 * transpose by two xor shuffles) so that each holds 8 consecutive columns and stores them as
 * one 16-byte vector: a warp's store covers 64 contiguous bytes of each of its 8 rows, whole
 * 32-byte sectors instead of 16-byte halves. Otherwise pairs of elements from registers (a
 * single one at an odd Dv's last column). Rows past the sequence and columns past Dv are not
 * stored.
 *
 * Shapes with OS (sdpa_sm90_shape.h) stage instead: each consumer warp rounds its 16 rows into
 * its own staging tile (kernels/common/sm90_stage.cuh) and one elected lane stores the tile by
 * TMA, a box of 64 columns at a time, bounded by the map of O; the warp goes on to its next
 * work tile while the copy engine writes, and waits for the copy to have read the tile only
 * before it stages the next one. Varlen rows that cross their sequence's end (the map would
 * write into the next sequence) and a Dv that is not a multiple of 8 (rows that end inside a
 * 16-byte chunk, which the copy was seen to write whole: bench/RESULTS.md, session 64) are read
 * back and stored by the warp.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_EPILOGUE_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_EPILOGUE_CUH_

#include "kernels/common/sm90_stage.cuh"
#include "kernels/flash/sdpa_sm90_sched.cuh"

namespace opsi {
namespace fa3 {

/* w[j] of quad thread p (j, p in 0..3) -> w[p] of quad thread j: the pairs of column block j
 * gathered in thread j, in column order. Two rounds: partners across lane bit 0, then bit 1,
 * each swapping the words whose index bit differs from the thread's. */
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4], int lane) {
#pragma unroll
  for (int bit = 1; bit <= 2; bit *= 2) {
    const bool hi = (lane & bit) != 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j & bit) continue; /* pair (j, j + bit) */
      const uint32_t send = hi ? w[j] : w[j + bit];
      const uint32_t got = __shfl_xor_sync(0xffffffffu, send, bit);
      if (hi) w[j] = got;
      else w[j + bit] = got;
    }
  }
}

template <typename T, int DP>
__device__ __forceinline__ void epilogue(const sdpa_geom &g, const sdpa_work &w, int r_in, int lane,
                                         const float (&o)[DP / 2], const float (&row_max)[2],
                                         const float (&row_sum)[2]) {
  const sdpa_seq &s = w.s;
  T *op = static_cast<T *>(const_cast<void *>(g.o.p)) + w.b * g.o.sb + s.q0 * g.o.ss + w.h * g.o.sh;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int i = w.i_lo + r_in + hr * 8;
    const float inv = sdpa_finish_row(g, s, w.b, w.h, i, row_max[hr], row_sum[hr], lane);
    T *row = op + (int64_t)i * g.o.ss;
    if (DP > 64 && g.aligned) {
#pragma unroll
      for (int grp = 0; grp < DP / 32; ++grp) { /* column blocks 4 grp .. 4 grp + 3 */
        uint32_t v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int nb = grp * 4 + j;
          v[j] = pack2<T>(o[nb * 4 + hr * 2] * inv, o[nb * 4 + hr * 2 + 1] * inv);
        }
        quad_transpose(v, lane); /* every lane: the shuffles take the whole warp */
        const int col = (grp * 4 + lane % 4) * 8;
        if (i >= s.sq || col >= g.dv) continue;
        if (col + 8 <= g.dv) {
          *reinterpret_cast<uint4 *>(row + col) = make_uint4(v[0], v[1], v[2], v[3]);
        } else {
          uint16_t *e = reinterpret_cast<uint16_t *>(row + col); /* T is 16-bit: v's halves as they are */
#pragma unroll
          for (int c = 0; c < 8; ++c) {
            if (col + c < g.dv) e[c] = (uint16_t)(v[c / 2] >> (16 * (c % 2)));
          }
        }
      }
      continue;
    }
    if (i >= s.sq) continue;
#pragma unroll
    for (int nb = 0; nb < DP / 8; ++nb) {
      const int col = nb * 8 + (lane % 4) * 2;
      if (col + 2 <= g.dv) {
        *reinterpret_cast<uint32_t *>(row + col) = pack2<T>(o[nb * 4 + hr * 2] * inv, o[nb * 4 + hr * 2 + 1] * inv);
      } else if (col < g.dv) {
        row[col] = from_f<T>(o[nb * 4 + hr * 2] * inv);
      }
    }
  }
}

/* The staged epilogue of a consumer warp (OS shapes; O's rows are 16-byte aligned, as the
 * Hopper rows require of every operand): `tile` is the warp's staging tile, map_o the map of O
 * as (d, s, h, b) in boxes of 64 x 16 (varlen: (d, t, h, 1)). The warp must be converged. */
template <typename T, int DP>
__device__ __forceinline__ void epilogue_staged(const sdpa_geom &g, const sdpa_work &w, const CUtensorMap *map_o,
                                                uint8_t *tile, int r_in, int lane, const float (&o)[DP / 2],
                                                const float (&row_max)[2], const float (&row_sum)[2]) {
  using namespace opsi::sm90;
  const sdpa_seq &s = w.s;
  float inv[2];
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) inv[hr] = sdpa_finish_row(g, s, w.b, w.h, w.i_lo + r_in + hr * 8, row_max[hr],
                                                          row_sum[hr], lane);
  /* the warp's first row, from lane 0: the compiler then knows it is the warp's */
  const int i0 = __shfl_sync(0xffffffffu, w.i_lo + (r_in & ~15), 0);
  if (elect_one()) bulk_wait_read<0>(); /* the tile's last store has read it */
  __syncwarp();
  stage_rows<T, DP>(tile, o, inv, lane);
  if (i0 >= s.sq) return;
  const bool varlen = g.cu_q != nullptr;
  if (g.dv % 8 == 0 && (!varlen || i0 + 16 <= s.sq)) {
    fence_proxy_async(); /* the staged rows, visible to the copy engine */
    __syncwarp();
    if (elect_one()) {
#pragma unroll
      for (int bx = 0; bx < DP / 64; ++bx) {
        if (bx * 64 >= g.dv) continue;
        tma_store_4d(map_o, tile + bx * STAGED_BOX_BYTES, bx * 64, s.q0 + i0, w.h, sdpa_map_batch(g, w.b));
      }
      bulk_commit();
    }
  } else {
    __syncwarp();
    T *op = static_cast<T *>(const_cast<void *>(g.o.p)) + w.b * g.o.sb + (s.q0 + i0) * g.o.ss + w.h * g.o.sh;
    store_staged<T, DP>(tile, op, g.o.ss, min(16, s.sq - i0), g.dv, lane);
  }
}

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_EPILOGUE_CUH_ */
