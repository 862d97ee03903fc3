/* Selection and launch: the one path every op takes after validation. */
#include "dispatch/dispatch.h"

#include <stdio.h>
#include <string.h>

#include "dispatch/rules.h"
#include "runtime/cuda_device.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"

void opsi_problem_init(opsi_problem *p, int32_t op, ops_handle handle) {
  memset(p, 0, sizeof *p);
  p->op = op;
  p->backend = handle->device.type;
  p->sm = handle->info.code_sm; /* what the build can run there decides eligibility */
  p->math_mode = handle->math_mode;
  p->deterministic = handle->deterministic;
  p->align = 16;
}

void opsi_problem_add_align(opsi_problem *p, const ops_tensor *t) {
  if (t != NULL) {
    const int32_t a = opsi_tensor_align(t);
    if (a < p->align) p->align = a;
  }
}

ops_status opsi_select(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row **row) {
  size_t n = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &n);
  const ops_device_info *dev = &v->handle->info;
  char msg[256];
  for (size_t i = 0; i < n; ++i) {
    if (opsi_rules_check(p, &rows[i], dev, msg, sizeof msg) == OPSI_REASON_ELIGIBLE) {
      *row = &rows[i];
      return OPS_OK;
    }
  }
  char where[64];
  if (p->backend == OPS_DEVICE_CUDA) {
    snprintf(where, sizeof where, "cuda:%d (sm_%d, running sm_%d code)",
             (int)v->handle->device.ordinal, v->handle->info.sm_version, p->sm);
  } else {
    snprintf(where, sizeof where, "cpu");
  }
  opsi_fail(OPS_ERR_UNSUPPORTED, "%s: no kernel of this build supports the call on %s;", v->fn, where);
  for (size_t i = 0; i < n; ++i) {
    const opsi_reason r = opsi_rules_check(p, &rows[i], dev, msg, sizeof msg);
    opsi_append_error(" %s [%s]: %s;", rows[i].name, opsi_reason_name(r), msg);
  }
  return OPS_ERR_UNSUPPORTED;
}

static size_t row_workspace(const opsi_kernel_row *row, const opsi_problem *p) {
  return row->workspace != NULL ? row->workspace(p) : 0;
}

ops_status opsi_execute(const opsi_vctx *v, const opsi_problem *p, const void *args, int empty,
                        void *workspace, size_t workspace_bytes) {
  if (empty) {
    return OPS_OK;
  }
  const opsi_kernel_row *row = NULL;
  OPSI_TRY(opsi_select(v, p, &row));
  OPSI_TRY(opsi_check_workspace(v, workspace, workspace_bytes, row_workspace(row, p)));
  const opsi_launch ctx = {v->handle, v->handle->stream, workspace, workspace_bytes};
  OPSI_TRY(row->launch(&ctx, args));
  if (row->backend == OPS_DEVICE_CUDA) {
    OPSI_TRY(opsi_cuda_check_launch(v->fn));
  }
  return OPS_OK;
}

ops_status opsi_workspace_query(const opsi_vctx *v, const opsi_problem *p, int empty,
                                size_t *bytes) {
  *bytes = 0;
  if (empty) {
    return OPS_OK;
  }
  const opsi_kernel_row *row = NULL;
  OPSI_TRY(opsi_select(v, p, &row));
  *bytes = row_workspace(row, p);
  return OPS_OK;
}

ops_status opsi_null_query(const char *fn) {
  opsi_clear_error();
  return opsi_fail(OPS_ERR_NULL_POINTER, "%s: bytes: expected a pointer, got NULL", fn);
}
