/*
 * A warp's 16 rows of a wgmma m64nDP accumulator on their way out through shared memory, for
 * the Hopper epilogues that store a tile whole (attention's O, the backward's dK and dV).
 *
 * The warp rounds its rows to 16 bits into a staging tile in the layout of DP / 64 TMA boxes
 * of 16 rows x 64 columns with the 128-byte swizzle (stage_rows): box b at 2048 b, its row r
 * at 128 r, the row's 16-byte chunk c at 16 (c ^ r % 8), so that the eight rows an stmatrix
 * writes, and the chunks a read-back takes, fall in different banks. The tile then goes out by
 * one TMA store a box (the tile must be 1024-byte aligned), or by store_staged: 16 bytes a
 * lane, bounded by rows and columns, for stores the TMA map cannot bound.
 */
#ifndef OPSLIB_KERNELS_COMMON_SM90_STAGE_CUH_
#define OPSLIB_KERNELS_COMMON_SM90_STAGE_CUH_

#include <stdint.h>

#include "kernels/common/cuda_common.cuh"
#include "kernels/common/sm90_async.cuh"

namespace opsi {
namespace sm90 {

/* bytes of one box (16 rows x 64 columns) and of a staging tile (16 rows of DP 16-bit elements) */
constexpr int STAGED_BOX_BYTES = 16 * 128;
template <int DP> constexpr int staged_bytes() { return DP / 64 * STAGED_BOX_BYTES; }

/* the byte offset of row `row`'s 16-byte chunk `chunk` (columns 8 chunk ..) in a staging tile */
__device__ __forceinline__ uint32_t staged_offset(int row, int chunk) {
  return (uint32_t)((chunk / 8) * STAGED_BOX_BYTES + row * 128 + (((chunk % 8) ^ (row % 8)) << 4));
}

/* The warp's accumulator rows into `tile`, rounded to T after scaling: acc[n * 4 + h * 2 + e]
 * (row lane / 4 + 8 h, column 8 n + 2 (lane % 4) + e) times mul[h]. One stmatrix x4 a 16
 * columns: matrix j is rows 8 (j % 2) .., columns 8 (2 p + j / 2) .. */
template <typename T, int DP>
__device__ __forceinline__ void stage_rows(uint8_t *tile, const float (&acc)[DP / 2], const float (&mul)[2],
                                           int lane) {
  const int j = lane / 8, row = (j % 2) * 8 + lane % 8; /* the row whose address this lane gives */
#pragma unroll
  for (int p = 0; p < DP / 16; ++p) {
    uint32_t r[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const int n = 2 * p + m / 2, h = m % 2;
      r[m] = pack2<T>(acc[n * 4 + h * 2] * mul[h], acc[n * 4 + h * 2 + 1] * mul[h]);
    }
    stmatrix_x4(smem_addr(tile + staged_offset(row, 2 * p + j / 2)), r[0], r[1], r[2], r[3]);
  }
}

/* The staged rows [0, rows) x columns [0, cols) to `base` (row r at base + r x row_stride
 * elements; base and row_stride 16-byte aligned), after a __syncwarp that follows
 * stage_rows: a lane a 16-byte chunk, the last, partial chunk of a row element by element. */
template <typename T, int DP>
__device__ __forceinline__ void store_staged(const uint8_t *tile, T *base, int64_t row_stride, int rows, int cols,
                                             int lane) {
  constexpr int CH = DP / 8, RPI = 32 / CH; /* chunks a row, rows a pass of the warp */
#pragma unroll
  for (int i = 0; i < 16 / RPI; ++i) {
    const int row = i * RPI + lane / CH, c = lane % CH;
    if (row >= rows || c * 8 >= cols) continue;
    uint4 w;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                 : "r"(smem_addr(tile + staged_offset(row, c))));
    T *q = base + row * row_stride + c * 8;
    if (c * 8 + 8 <= cols) {
      *reinterpret_cast<uint4 *>(q) = w;
    } else {
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (c * 8 + e < cols) *reinterpret_cast<uint16_t *>(q + e) = (uint16_t)(words[e / 2] >> (16 * (e % 2)));
      }
    }
  }
}

}  // namespace sm90
}  // namespace opsi

#endif /* OPSLIB_KERNELS_COMMON_SM90_STAGE_CUH_ */
