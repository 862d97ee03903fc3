/* Status names, descriptions, the thread-local message, and the version calls. */
#include "runtime/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "opslib/version.h"

static _Thread_local char g_message[OPSI_ERROR_MESSAGE_BYTES];

ops_status opsi_fail(ops_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message, sizeof g_message, fmt, ap);
  va_end(ap);
  return status;
}

void opsi_append_error(const char *fmt, ...) {
  size_t used = strlen(g_message);
  if (used + 1 >= sizeof g_message) {
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_message + used, sizeof g_message - used, fmt, ap);
  va_end(ap);
}

void opsi_clear_error(void) { g_message[0] = '\0'; }

const char *ops_last_error(void) { return g_message; }

typedef struct {
  ops_status status;
  const char *name;
  const char *text;
} status_entry;

static const status_entry k_statuses[] = {
    {OPS_OK, "OPS_OK", "success"},
    {OPS_ERR_INVALID_ARGUMENT, "OPS_ERR_INVALID_ARGUMENT", "invalid argument"},
    {OPS_ERR_NULL_POINTER, "OPS_ERR_NULL_POINTER", "null pointer"},
    {OPS_ERR_STRUCT_SIZE, "OPS_ERR_STRUCT_SIZE", "unknown struct size"},
    {OPS_ERR_DTYPE_MISMATCH, "OPS_ERR_DTYPE_MISMATCH", "dtype mismatch"},
    {OPS_ERR_SHAPE_MISMATCH, "OPS_ERR_SHAPE_MISMATCH", "shape mismatch"},
    {OPS_ERR_BAD_NDIM, "OPS_ERR_BAD_NDIM", "wrong number of dimensions"},
    {OPS_ERR_BAD_SIZE, "OPS_ERR_BAD_SIZE", "negative or overflowing size"},
    {OPS_ERR_ALIASING, "OPS_ERR_ALIASING", "output overlaps another operand"},
    {OPS_ERR_MISALIGNED, "OPS_ERR_MISALIGNED", "misaligned pointer or stride"},
    {OPS_ERR_DEVICE_MISMATCH, "OPS_ERR_DEVICE_MISMATCH", "tensor and handle on different devices"},
    {OPS_ERR_UNSUPPORTED_DEVICE, "OPS_ERR_UNSUPPORTED_DEVICE", "unsupported device"},
    {OPS_ERR_WORKSPACE_TOO_SMALL, "OPS_ERR_WORKSPACE_TOO_SMALL", "workspace too small"},
    {OPS_ERR_UNSUPPORTED, "OPS_ERR_UNSUPPORTED", "no kernel supports this problem"},
    {OPS_ERR_CUDA, "OPS_ERR_CUDA", "CUDA runtime error"},
    {OPS_ERR_OUT_OF_MEMORY, "OPS_ERR_OUT_OF_MEMORY", "out of host memory"},
    {OPS_ERR_INTERNAL, "OPS_ERR_INTERNAL", "internal error"},
    {OPS_ERR_IO, "OPS_ERR_IO", "file input / output error"},
};

static const status_entry *find_status(ops_status status) {
  for (size_t i = 0; i < sizeof k_statuses / sizeof k_statuses[0]; ++i) {
    if (k_statuses[i].status == status) {
      return &k_statuses[i];
    }
  }
  return NULL;
}

const char *ops_status_string(ops_status status) {
  const status_entry *e = find_status(status);
  return e ? e->text : "unknown status";
}

const char *ops_status_name(ops_status status) {
  const status_entry *e = find_status(status);
  return e ? e->name : "OPS_ERR_UNKNOWN";
}

unsigned ops_version(void) { return OPS_VERSION_NUMBER; }

const char *ops_version_string(void) { return OPS_VERSION_STRING; }
