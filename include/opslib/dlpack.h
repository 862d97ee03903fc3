/*
 * opslib/dlpack.h: DLPack interop (needs <dlpack/dlpack.h>, Debian's libdlpack-dev).
 *
 * Any framework that exports DLPack (PyTorch, CuPy, JAX, NumPy) hands opslib its tensors
 * without a copy: convert the DLTensor, call the op, keep the producer alive meanwhile.
 */
#ifndef OPSLIB_DLPACK_H_
#define OPSLIB_DLPACK_H_

#include <dlpack/dlpack.h>

#include "opslib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Describes `dl` as an ops_tensor (a view: data = dl->data + dl->byte_offset).
 * Supported: devices kDLCPU and kDLCUDA (kDLCUDAHost and kDLCUDAManaged map to CPU and
 * CUDA pointers respectively); dtypes float32/16, bfloat16, int32/64, uint8, one lane;
 * ndim <= 8; NULL strides mean row-major contiguous.
 * Errors: OPS_ERR_NULL_POINTER, OPS_ERR_UNSUPPORTED_DEVICE, OPS_ERR_DTYPE_MISMATCH,
 * OPS_ERR_BAD_NDIM, OPS_ERR_MISALIGNED (byte_offset not a multiple of the element size),
 * OPS_ERR_BAD_SIZE (an extent or stride, or data + byte_offset past the address space). */
OPS_API ops_status ops_tensor_from_dlpack(const DLTensor *dl, ops_tensor *out);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_DLPACK_H_ */
