/* Handle lifetime and settings. Device properties are read here, once. */
#include <stdlib.h>
#include <string.h>

#include "opslib/handle.h"
#include "runtime/cuda_device.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"

ops_status ops_handle_create(ops_handle *out, ops_device device) {
  opsi_clear_error();
  if (out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_create: out is NULL");
  }
  *out = NULL;
  struct ops_handle_s h;
  memset(&h, 0, sizeof h);
  h.device = device;
  h.math_mode = OPS_MATH_STRICT;
  h.info.struct_size = (uint32_t)sizeof(ops_device_info);
  h.info.device = device;
  if (device.type == OPS_DEVICE_CPU) {
    if (device.ordinal != 0) {
      return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                       "ops_handle_create: device: expected ordinal 0 for the CPU, got %d",
                       (int)device.ordinal);
    }
    strcpy(h.info.name, "cpu");
  } else if (device.type == OPS_DEVICE_CUDA) {
    OPSI_TRY(opsi_cuda_read_device(device.ordinal, &h.info));
  } else {
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device.type: expected OPS_DEVICE_CPU (1) or "
                     "OPS_DEVICE_CUDA (2), got %d", (int)device.type);
  }
  ops_handle p = (ops_handle)malloc(sizeof *p);
  if (p == NULL) {
    return opsi_fail(OPS_ERR_OUT_OF_MEMORY, "ops_handle_create: malloc(%zu) failed", sizeof *p);
  }
  *p = h;
  *out = p;
  return OPS_OK;
}

ops_status ops_handle_destroy(ops_handle handle) {
  opsi_clear_error();
  free(handle);
  return OPS_OK;
}

#define REQUIRE_HANDLE(fn)                                                      \
  do {                                                                          \
    opsi_clear_error();                                                         \
    if (handle == NULL) {                                                       \
      return opsi_fail(OPS_ERR_NULL_POINTER, fn ": handle is NULL");            \
    }                                                                           \
  } while (0)

#define REQUIRE_OUT(fn, ptr)                                                    \
  do {                                                                          \
    if ((ptr) == NULL) {                                                        \
      return opsi_fail(OPS_ERR_NULL_POINTER, fn ": " #ptr " is NULL");          \
    }                                                                           \
  } while (0)

ops_status ops_handle_set_stream(ops_handle handle, void *stream) {
  REQUIRE_HANDLE("ops_handle_set_stream");
  if (handle->device.type == OPS_DEVICE_CPU && stream != NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "ops_handle_set_stream: stream: expected NULL for a CPU handle, got %p", stream);
  }
  handle->stream = stream;
  return OPS_OK;
}

ops_status ops_handle_get_stream(ops_handle handle, void **stream) {
  REQUIRE_HANDLE("ops_handle_get_stream");
  REQUIRE_OUT("ops_handle_get_stream", stream);
  *stream = handle->stream;
  return OPS_OK;
}

ops_status ops_handle_set_math_mode(ops_handle handle, ops_math_mode mode) {
  REQUIRE_HANDLE("ops_handle_set_math_mode");
  if (mode != OPS_MATH_STRICT && mode != OPS_MATH_ALLOW_TF32) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "ops_handle_set_math_mode: mode: expected OPS_MATH_STRICT (0) or "
                     "OPS_MATH_ALLOW_TF32 (1), got %d", (int)mode);
  }
  handle->math_mode = mode;
  return OPS_OK;
}

ops_status ops_handle_get_math_mode(ops_handle handle, ops_math_mode *mode) {
  REQUIRE_HANDLE("ops_handle_get_math_mode");
  REQUIRE_OUT("ops_handle_get_math_mode", mode);
  *mode = (ops_math_mode)handle->math_mode;
  return OPS_OK;
}

ops_status ops_handle_set_deterministic(ops_handle handle, int deterministic) {
  REQUIRE_HANDLE("ops_handle_set_deterministic");
  handle->deterministic = deterministic != 0;
  return OPS_OK;
}

ops_status ops_handle_get_deterministic(ops_handle handle, int *deterministic) {
  REQUIRE_HANDLE("ops_handle_get_deterministic");
  REQUIRE_OUT("ops_handle_get_deterministic", deterministic);
  *deterministic = handle->deterministic;
  return OPS_OK;
}

ops_status ops_handle_get_device_info(ops_handle handle, ops_device_info *info) {
  REQUIRE_HANDLE("ops_handle_get_device_info");
  REQUIRE_OUT("ops_handle_get_device_info", info);
  if (info->struct_size != sizeof(ops_device_info)) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE,
                     "ops_handle_get_device_info: info->struct_size: expected %zu, got %u",
                     sizeof(ops_device_info), (unsigned)info->struct_size);
  }
  *info = handle->info;
  return OPS_OK;
}
