/* DLTensor -> ops_tensor: a view of the same memory, no copy. */
#include "opslib/dlpack.h"

#include <stdint.h>

#include "runtime/error.h"

static int dtype_from_dlpack(DLDataType t) {
  if (t.lanes != 1) {
    return OPS_DTYPE_INVALID;
  }
  switch (t.code) {
    case kDLFloat:
      return t.bits == 32 ? OPS_DTYPE_F32 : t.bits == 16 ? OPS_DTYPE_F16 : OPS_DTYPE_INVALID;
    case kDLBfloat:
      return t.bits == 16 ? OPS_DTYPE_BF16 : OPS_DTYPE_INVALID;
    case kDLInt:
      return t.bits == 32 ? OPS_DTYPE_I32 : t.bits == 64 ? OPS_DTYPE_I64 : OPS_DTYPE_INVALID;
    case kDLUInt:
      return t.bits == 8 ? OPS_DTYPE_U8 : OPS_DTYPE_INVALID;
    default:
      return OPS_DTYPE_INVALID;
  }
}

ops_status ops_tensor_from_dlpack(const DLTensor *dl, ops_tensor *out) {
  opsi_clear_error();
  if (dl == NULL || out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_tensor_from_dlpack: %s is NULL",
                     dl == NULL ? "dl" : "out");
  }
  ops_device device;
  switch (dl->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      device = ops_device_cpu();
      break;
    case kDLCUDA:
    case kDLCUDAManaged:
      device = ops_device_cuda(dl->device.device_id);
      break;
    default:
      return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                       "ops_tensor_from_dlpack: device_type: expected kDLCPU (1), kDLCUDA (2), "
                       "kDLCUDAHost (3) or kDLCUDAManaged (13), got %d",
                       (int)dl->device.device_type);
  }
  int dtype = dtype_from_dlpack(dl->dtype);
  if (dtype == OPS_DTYPE_INVALID) {
    return opsi_fail(OPS_ERR_DTYPE_MISMATCH,
                     "ops_tensor_from_dlpack: dtype: expected float32/16, bfloat16, int32/64 or "
                     "uint8 with 1 lane, got code %u, %u bits, %u lanes",
                     (unsigned)dl->dtype.code, (unsigned)dl->dtype.bits, (unsigned)dl->dtype.lanes);
  }
  if (dl->ndim < 0 || dl->ndim > OPS_MAX_DIMS) {
    return opsi_fail(OPS_ERR_BAD_NDIM, "ops_tensor_from_dlpack: ndim: expected 0..%d, got %d",
                     OPS_MAX_DIMS, (int)dl->ndim);
  }
  size_t elem = ops_dtype_size((ops_dtype)dtype);
  if (dl->byte_offset % elem != 0) {
    return opsi_fail(OPS_ERR_MISALIGNED,
                     "ops_tensor_from_dlpack: byte_offset: expected a multiple of %zu bytes, got %llu",
                     elem, (unsigned long long)dl->byte_offset);
  }
  if (dl->data != NULL && dl->byte_offset > UINTPTR_MAX - (uintptr_t)dl->data) {
    return opsi_fail(OPS_ERR_BAD_SIZE,
                     "ops_tensor_from_dlpack: byte_offset: expected data + byte_offset within the "
                     "address space, got %llu bytes past %p",
                     (unsigned long long)dl->byte_offset, dl->data);
  }
  void *data = dl->data == NULL ? NULL : (void *)((char *)dl->data + dl->byte_offset);
  ops_status st = ops_tensor_init(out, data, (ops_dtype)dtype, device, dl->ndim, dl->shape,
                                  dl->strides);
  return st;
}
