/*
 * A CUDA launcher's failures as statuses that name what failed (core/launch.h's
 * opsi_launch_failed; the dispatch layer writes the message): a runtime error of the launch,
 * and a tensor map the driver would not encode.
 */
#ifndef OPSLIB_KERNELS_COMMON_LAUNCH_STATUS_H_
#define OPSLIB_KERNELS_COMMON_LAUNCH_STATUS_H_

#include <cuda.h>
#include <cuda_runtime.h>

#include "core/launch.h"

namespace opsi {

inline ops_status launch_status(const opsi_launch *ctx, cudaError_t e) {
  if (e == cudaSuccess) return OPS_OK;
  return opsi_launch_failed(ctx, OPS_ERR_CUDA, "launch", cudaGetErrorString(e), (int32_t)e);
}

/* r from encode_map_16bit (tma_host.h) for the map named `what` */
inline ops_status map_status(const opsi_launch *ctx, CUresult r, const char *what) {
  if (r == CUDA_ERROR_NOT_FOUND) {
    return opsi_launch_failed(ctx, OPS_ERR_CUDA, what, "the driver has no cuTensorMapEncodeTiled", 0);
  }
  if (r != CUDA_SUCCESS) return opsi_launch_failed(ctx, OPS_ERR_CUDA, what, "cuTensorMapEncodeTiled failed", (int32_t)r);
  return OPS_OK;
}

}  // namespace opsi

#endif /* OPSLIB_KERNELS_COMMON_LAUNCH_STATUS_H_ */
