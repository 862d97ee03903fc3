/*
 * A CUDA launcher's failures as statuses that name what failed (core/launch.h's
 * opsi_launch_failed; the dispatch layer writes the message): a runtime error of the launch,
 * and a tensor map the driver would not encode. And the shared-memory opt-in of a kernel's
 * launch, set once per context (core/launch.h's opsi_cuda_smem_optin).
 */
#ifndef OPSLIB_KERNELS_COMMON_LAUNCH_STATUS_H_
#define OPSLIB_KERNELS_COMMON_LAUNCH_STATUS_H_

#include <cuda.h>
#include <cuda_runtime.h>

#include "core/launch.h"

namespace opsi {

/* cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), skipped
 * where this context already has the limit (opsi_cuda_smem_optin). */
template <typename K> inline cudaError_t smem_optin(K *kernel, int bytes) {
  return static_cast<cudaError_t>(opsi_cuda_smem_optin(reinterpret_cast<const void *>(kernel), bytes));
}

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
