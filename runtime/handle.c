/* Handle lifetime and settings. Device properties are read here, once. */
#include <stdlib.h>
#include <string.h>

#include "opslib/handle.h"
#include "runtime/cuda_device.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"
#include "runtime/profiler.h"

static ops_status alloc_handle(const char *fn, ops_handle *out) {
  ops_handle p = (ops_handle)calloc(1, sizeof *p); /* zeroes the plan cache too */
  if (p == NULL) {
    return opsi_fail(OPS_ERR_OUT_OF_MEMORY, "%s: calloc(%zu) failed", fn, sizeof *p);
  }
  p->math_mode = OPS_MATH_STRICT;
  opsi_tuner_init(&p->tuner);
  p->info.struct_size = (uint32_t)sizeof(ops_device_info);
  *out = p;
  return OPS_OK;
}

ops_status opsi_handle_new(ops_device device, ops_handle *out) {
  ops_device_info info;
  memset(&info, 0, sizeof info);
  if (device.type == OPS_DEVICE_CPU) {
    if (device.ordinal != 0) {
      return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                       "ops_handle_create: device: expected ordinal 0 for the CPU, got %d",
                       (int)device.ordinal);
    }
    strcpy(info.name, "cpu");
  } else if (device.type == OPS_DEVICE_CUDA) {
    OPSI_TRY(opsi_cuda_read_device(device.ordinal, &info));
  } else {
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device.type: expected OPS_DEVICE_CPU (1) or "
                     "OPS_DEVICE_CUDA (2), got %d", (int)device.type);
  }
  OPSI_TRY(alloc_handle("ops_handle_create", out));
  info.struct_size = (uint32_t)sizeof(ops_device_info);
  info.device = device;
  (*out)->device = device;
  (*out)->info = info;
  return OPS_OK;
}

ops_status opsi_handle_new_virtual(const ops_device_info *target, ops_handle *out) {
  const char *fn = "ops_handle_create_virtual";
  if (target == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: target: expected a device description, got NULL", fn);
  }
  if (target->struct_size != sizeof(ops_device_info)) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE, "%s: target->struct_size: expected %zu, got %u", fn,
                     sizeof(ops_device_info), (unsigned)target->struct_size);
  }
  const ops_device d = target->device;
  if (d.type != OPS_DEVICE_CPU && d.type != OPS_DEVICE_CUDA) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: target->device.type: expected 1 (cpu) or 2 (cuda), got %d",
                     fn, (int)d.type);
  }
  if (d.type == OPS_DEVICE_CUDA &&
      (target->sm_version < 50 || target->sm_version > 200 || target->sm_count < 1 ||
       target->code_sm < 0 || target->code_sm > target->sm_version)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: target: expected sm_version 50..200, sm_count >= 1, 0 <= code_sm <= sm_version, "
                     "got sm_version %d, sm_count %d, code_sm %d", fn, (int)target->sm_version,
                     (int)target->sm_count, (int)target->code_sm);
  }
  OPSI_TRY(alloc_handle(fn, out));
  (*out)->device = d;
  (*out)->info = *target;
  (*out)->info.name[sizeof (*out)->info.name - 1] = '\0'; /* the name is compared (calibration sets) */
  if (d.type == OPS_DEVICE_CUDA && target->code_sm == 0) {
    (*out)->info.code_sm = target->sm_version;
  }
  (*out)->is_virtual = 1;
  return OPS_OK;
}

ops_status ops_handle_destroy(ops_handle handle) {
  opsi_clear_error();
  if (handle == NULL) return OPS_OK;
  opsi_profiler_stop(handle); /* delivers what is pending */
  opsi_tuner_free(&handle->tuner);
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
  if (handle->device.type != OPS_DEVICE_CUDA && stream != NULL) {
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
  return OPS_OK; /* the mode is part of every plan-cache key: no flush needed */
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
