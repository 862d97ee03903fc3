/*
 * Host side of the TMA loads (sm_90): encoding a tensor map through the driver's
 * cuTensorMapEncodeTiled, reached from the static runtime (no libcuda link).
 */
#ifndef OPSLIB_KERNELS_COMMON_TMA_HOST_H_
#define OPSLIB_KERNELS_COMMON_TMA_HOST_H_

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "core/launch.h"
#include "opslib/tensor.h"

namespace opsi {

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn =
      reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(opsi_cuda_driver_entry("cuTensorMapEncodeTiled"));
  return fn;
}

/* A rank-`rank` map (2..5) of a tensor of `elem` bytes (CUtensorMapDataType `type`): dims[0]
 * the unit-stride axis, strides[i - 1] the element stride of axis i; box {box[0], box[1], ..}
 * (box[0] x elem at most 128 bytes), 128-byte swizzle, zeros past the edges. An axis of
 * extent 1 is never stepped along: it gets a stride TMA accepts whatever it was.
 * CUDA_ERROR_NOT_FOUND: the driver has no cuTensorMapEncodeTiled. */
inline CUresult encode_map(CUtensorMap *map, const void *base, CUtensorMapDataType type, int elem, int rank,
                           const int64_t *dims, const int64_t *strides, const uint32_t *box) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  cuuint64_t d[5], s[4];
  cuuint32_t bx[5], estr[5];
  const int64_t per16 = 16 / elem; /* elements of 16 bytes */
  int64_t span = (dims[0] + per16 - 1) / per16 * per16; /* elements up to the next axis, for a degenerate stride */
  for (int i = 0; i < rank; ++i) {
    d[i] = (cuuint64_t)dims[i];
    bx[i] = box[i];
    estr[i] = 1;
    if (i > 0) {
      const int64_t st = dims[i] == 1 || strides[i - 1] == 0 ? span : strides[i - 1];
      s[i - 1] = (cuuint64_t)(st * elem);
      span = st * dims[i];
    }
  }
  return encode(map, type, (cuuint32_t)rank, const_cast<void *>(base), d, s, bx, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/* A 16-bit tensor's map (bf16 or f16 by `dtype`), boxes of 64 columns (128 bytes) x box[1..]. */
inline CUresult encode_map_16bit(CUtensorMap *map, const void *base, int32_t dtype, int rank, const int64_t *dims,
                                 const int64_t *strides, const uint32_t *box) {
  return encode_map(map, base,
                    dtype == OPS_DTYPE_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
                    rank, dims, strides, box);
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_COMMON_TMA_HOST_H_ */
