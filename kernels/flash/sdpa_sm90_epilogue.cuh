/*
 * The Hopper attention's epilogue: each consumer thread divides its two rows of O by their
 * softmax sums and stores them from registers (pairs of elements; a single one at an odd
 * Dv's last column), and writes the rows' LSE. Rows past the sequence and columns past Dv
 * are not stored.
 */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_SM90_EPILOGUE_CUH_
#define OPSLIB_KERNELS_FLASH_SDPA_SM90_EPILOGUE_CUH_

#include "kernels/flash/sdpa_sm90_sched.cuh"

namespace opsi {
namespace fa3 {

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
    if (i >= s.sq) continue;
    T *row = op + (int64_t)i * g.o.ss;
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

}  // namespace fa3
}  // namespace opsi

#endif /* OPSLIB_KERNELS_FLASH_SDPA_SM90_EPILOGUE_CUH_ */
