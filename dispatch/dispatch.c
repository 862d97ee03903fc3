/* Evaluation, choice, and the three ways a call ends: run, workspace query, explain. */
#include "dispatch/dispatch.h"

#include <stdio.h>
#include <string.h>

#include "dispatch/op_names.h"
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

const opsi_kernel_row *opsi_evaluate(const opsi_vctx *v, const opsi_problem *p, ops_verdict *verdicts,
                                     int *count) {
  size_t n = 0;
  const opsi_kernel_row *rows = opsi_rows_for_op(p->op, &n);
  const ops_device_info *dev = &v->handle->info;
  const opsi_kernel_row *chosen = NULL;
  char scratch[192];
  int k = 0;
  for (size_t i = 0; i < n; ++i) {
    ops_verdict *out = verdicts != NULL && k < OPS_EXPLAIN_MAX_CANDIDATES ? &verdicts[k++] : NULL;
    char *msg = out != NULL ? out->message : scratch;
    const size_t len = out != NULL ? sizeof out->message : sizeof scratch;
    const ops_reason r = opsi_rules_check(p, &rows[i], dev, msg, len);
    if (out != NULL) {
      out->kernel_id = rows[i].id;
      out->kernel_name = rows[i].name;
      out->reason = r;
      out->est_us = 0.0;
    }
    if (r == OPS_REASON_ELIGIBLE && chosen == NULL) {
      chosen = &rows[i];
      if (out == NULL) break;
    }
  }
  if (count != NULL) *count = k;
  return chosen;
}

static ops_status unsupported(const opsi_vctx *v, const opsi_problem *p) {
  ops_verdict verdicts[OPS_EXPLAIN_MAX_CANDIDATES];
  int count = 0;
  opsi_evaluate(v, p, verdicts, &count);
  char where[96];
  if (p->backend == OPS_DEVICE_CUDA) {
    snprintf(where, sizeof where, "cuda:%d (sm_%d, running sm_%d code)", (int)v->handle->device.ordinal,
             v->handle->info.sm_version, p->sm);
  } else {
    snprintf(where, sizeof where, "cpu");
  }
  opsi_fail(OPS_ERR_UNSUPPORTED, "%s: no kernel of this build supports the call on %s;", v->fn, where);
  for (int i = 0; i < count; ++i) {
    opsi_append_error(" %s [%s]: %s;", verdicts[i].kernel_name, ops_reason_name((ops_reason)verdicts[i].reason),
                      verdicts[i].message);
  }
  return OPS_ERR_UNSUPPORTED;
}

static size_t row_workspace(const opsi_kernel_row *row, const opsi_problem *p) {
  return row->workspace != NULL ? row->workspace(p) : 0;
}

static ops_status explain(const opsi_vctx *v, const opsi_problem *p, int empty) {
  ops_explain *e = v->explain_out;
  const uint32_t size = e->struct_size;
  memset(e, 0, sizeof *e);
  e->struct_size = size;
  e->op = p->op;
  e->empty = empty;
  opsi_describe_problem(p, e->problem, sizeof e->problem);
  int count = 0;
  const opsi_kernel_row *row = opsi_evaluate(v, p, e->verdicts, &count);
  e->count = count;
  e->chosen = -1;
  for (int i = 0; row != NULL && i < count; ++i) {
    if (e->verdicts[i].kernel_id == row->id) e->chosen = i;
  }
  return OPS_OK;
}

ops_status opsi_finish(const opsi_vctx *v, const opsi_problem *p, const void *args, int empty,
                       void *workspace, size_t workspace_bytes) {
  if (v->mode == OPSI_EXPLAIN) {
    return explain(v, p, empty);
  }
  if (empty) {
    if (v->mode == OPSI_QUERY_WORKSPACE) *v->workspace_out = 0;
    return OPS_OK;
  }
  const opsi_kernel_row *row = opsi_evaluate(v, p, NULL, NULL);
  if (row == NULL) {
    return unsupported(v, p);
  }
  if (v->mode == OPSI_QUERY_WORKSPACE) {
    *v->workspace_out = row_workspace(row, p);
    return OPS_OK;
  }
  OPSI_TRY(opsi_check_workspace(v, workspace, workspace_bytes, row_workspace(row, p)));
  const opsi_launch ctx = {v->handle, v->handle->stream, workspace, workspace_bytes};
  OPSI_TRY(row->launch(&ctx, args));
  if (row->backend == OPS_DEVICE_CUDA) {
    OPSI_TRY(opsi_cuda_check_launch(v->fn));
  }
  return OPS_OK;
}

void opsi_describe_problem(const opsi_problem *p, char *buf, size_t n) {
  size_t used = 0;
#define PUT(...)                                                              \
  do {                                                                        \
    if (used < n) used += (size_t)snprintf(buf + used, n - used, __VA_ARGS__); \
  } while (0)
  PUT("%s %s -> %s on ", ops_op_name((ops_op)p->op), ops_dtype_name((ops_dtype)p->dtype),
      ops_dtype_name((ops_dtype)p->out_dtype));
  if (p->backend == OPS_DEVICE_CUDA) PUT("cuda sm_%d:", p->sm); else PUT("cpu:");
  for (int i = 0; i < 8; ++i) {
    const char *name = opsi_dim_name(p->op, i);
    if (strncmp(name, "dims[", 5) == 0) break;
    PUT(" %s=%lld", name, (long long)p->dims[i]);
  }
  if (p->variant != 0) PUT(" variant=%d", p->variant);
  if (p->flags != 0) {
    char flags[160];
    PUT(" [%s]", opsi_flag_names(p->flags, flags, sizeof flags));
  }
  PUT(" align=%d", p->align);
  if (p->math_mode == OPS_MATH_ALLOW_TF32) PUT(" tf32");
  if (p->deterministic) PUT(" deterministic");
#undef PUT
}
