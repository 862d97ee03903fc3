/*
 * The handle entry points that need the dispatcher's knowledge: creation applies
 * OPSLIB_FORCE_KERNEL (kernel names from the catalog), OPSLIB_AUTOTUNE, OPSLIB_TUNE_CACHE and
 * OPSLIB_PROFILE; pins; described
 * devices from the machine models. The runtime allocates and reads the device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities/machines.h"
#include "capabilities/rows.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"
#include "runtime/profiler.h"

static ops_status pin_one(ops_handle h, const char *fn, const char *name, size_t len) {
  char buf[128];
  if (len >= sizeof buf) len = sizeof buf - 1;
  memcpy(buf, name, len);
  buf[len] = '\0';
  const opsi_kernel_row *r = opsi_row_named(buf);
  if (r == NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: kernel_name: expected the name of a kernel of this build (see `opsctl list`), got '%s'",
                     fn, buf);
  }
  h->pinned[r->op] = r->id;
  return OPS_OK;
}

/* OPSLIB_FORCE_KERNEL=<name>[,<name>...] */
static ops_status pin_from_env(ops_handle h) {
  const char *env = getenv("OPSLIB_FORCE_KERNEL");
  for (const char *s = env; s != NULL && *s != '\0';) {
    const char *end = strchr(s, ',');
    const size_t len = end != NULL ? (size_t)(end - s) : strlen(s);
    if (len > 0) OPSI_TRY(pin_one(h, "ops_handle_create: OPSLIB_FORCE_KERNEL", s, len));
    s = end != NULL ? end + 1 : s + len;
  }
  return OPS_OK;
}

/* OPSLIB_AUTOTUNE=0|1, OPSLIB_TUNE_CACHE=<path> */
static ops_status autotune_from_env(ops_handle h) {
  const char *mode = getenv("OPSLIB_AUTOTUNE");
  if (mode != NULL && *mode != '\0') {
    if (strcmp(mode, "0") != 0 && strcmp(mode, "1") != 0) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_handle_create: OPSLIB_AUTOTUNE: expected 0 or 1, got '%s'",
                       mode);
    }
    h->autotune = mode[0] == '1' ? OPS_AUTOTUNE_MEASURE : OPS_AUTOTUNE_OFF;
  }
  const char *path = getenv("OPSLIB_TUNE_CACHE");
  if (path != NULL && *path != '\0') {
    ops_status st = ops_handle_set_tune_cache(h, path);
    if (st != OPS_OK) return opsi_fail(st, "ops_handle_create: OPSLIB_TUNE_CACHE: %s", ops_last_error());
  }
  return OPS_OK;
}

static ops_status apply_environment(ops_handle h) {
  ops_status st = pin_from_env(h);
  if (st == OPS_OK) st = autotune_from_env(h);
  const char *profile = getenv("OPSLIB_PROFILE");
  if (st == OPS_OK && profile != NULL && *profile != '\0') st = opsi_profiler_start_file(h, profile);
  if (st != OPS_OK) {
    char keep[OPSI_ERROR_MESSAGE_BYTES];
    snprintf(keep, sizeof keep, "%s", ops_last_error());
    ops_handle_destroy(h);
    opsi_fail(st, "%s", keep);
  }
  return st;
}

ops_status ops_handle_create(ops_handle *out, ops_device device) {
  opsi_clear_error();
  if (out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_create: out is NULL");
  }
  *out = NULL;
  ops_handle h = NULL;
  OPSI_TRY(opsi_handle_new(device, &h));
  OPSI_TRY(apply_environment(h));
  *out = h;
  return OPS_OK;
}

ops_status ops_handle_create_virtual(ops_handle *out, const ops_device_info *target) {
  opsi_clear_error();
  if (out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_create_virtual: out is NULL");
  }
  *out = NULL;
  ops_handle h = NULL;
  OPSI_TRY(opsi_handle_new_virtual(target, &h));
  OPSI_TRY(apply_environment(h));
  *out = h;
  return OPS_OK;
}

ops_status ops_device_info_for_sm(int sm, ops_device_info *out) {
  opsi_clear_error();
  if (out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_device_info_for_sm: out is NULL");
  }
  memset(out, 0, sizeof *out);
  out->struct_size = (uint32_t)sizeof *out;
  if (sm == 0) {
    out->device = ops_device_cpu();
    strcpy(out->name, "cpu");
    return OPS_OK;
  }
  const opsi_machine *m = opsi_machine_for(OPS_DEVICE_CUDA, sm);
  out->device = ops_device_cuda(0);
  snprintf(out->name, sizeof out->name, "%s", m->ref_name);
  out->sm_version = sm;
  out->code_sm = sm;
  out->sm_count = m->ref_sm_count;
  out->smem_per_block_optin = m->smem_per_block_optin;
  out->smem_per_sm = m->smem_per_sm;
  out->l2_bytes = m->l2_bytes;
  return OPS_OK;
}

ops_status ops_handle_pin_kernel(ops_handle handle, const char *kernel_name) {
  opsi_clear_error();
  if (handle == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_handle_pin_kernel: handle is NULL");
  }
  if (kernel_name == NULL || kernel_name[0] == '\0') {
    memset(handle->pinned, 0, sizeof handle->pinned);
  } else {
    OPSI_TRY(pin_one(handle, "ops_handle_pin_kernel", kernel_name, strlen(kernel_name)));
  }
  opsi_plan_cache_clear(&handle->cache); /* cached choices predate the pins */
  return OPS_OK;
}
