/*
 * The elementwise ops: ops_sin_affine, ops_unary, ops_binary. Every input is broadcast to
 * y's shape (opsi_ew_args), then the dispatcher.
 */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "kernels/common/pointwise.h"
#include "kernels/elementwise/dropout_args.h"
#include "kernels/elementwise/ew_args.h"
#include "opslib/ops.h"
#include "runtime/error.h"

void ops_sin_affine_params_init(ops_sin_affine_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->a = 1.0f;
  p->b = 0.0f;
}

void ops_unary_params_init(ops_unary_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->fn = OPS_ACT_NONE;
}

void ops_scale_params_init(ops_scale_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->alpha = 1.0f;
}

void ops_dropout_params_init(ops_dropout_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
}

void ops_binary_params_init(ops_binary_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->op = OPS_BINARY_ADD;
}

/* The inputs of one elementwise call, named for messages. */
typedef struct {
  const char *name[3];
  const ops_tensor *t[3];
} ew_inputs;

/* Checks y and the inputs, broadcasts each to y, checks aliasing (y may be any input of
 * y's own shape, in place), and fills the problem. */
static ops_status ew_prepare(const opsi_vctx *v, int32_t op, int32_t kind, int32_t fn,
                             const ew_inputs *in, const ops_tensor *y, opsi_ew_args *e,
                             opsi_problem *pr, int *empty) {
  int64_t ny;
  OPSI_TRY(opsi_check_tensor(v, "y", y, &ny));
  OPSI_TRY(opsi_check_dtype_in(v, "y", y, OPSI_FLOAT_DTYPES));
  memset(e, 0, sizeof *e);
  opsi_problem_init(pr, op, v->handle);
  int ninputs = 0;
  for (int k = 0; k < 3; ++k) {
    if (in->t[k] == NULL) continue;
    ++ninputs;
    OPSI_TRY(opsi_check_tensor(v, in->name[k], in->t[k], NULL));
    OPSI_TRY(opsi_check_dtype_eq(v, in->name[k], in->t[k], y->dtype, "y's dtype"));
    OPSI_TRY(opsi_broadcast_to(v, in->name[k], in->t[k], y->ndim, y->shape, "y's shape", &e->in[k]));
    e->has_in[k] = 1;
    if (in->t[k]->ndim != y->ndim || memcmp(in->t[k]->shape, y->shape, sizeof(int64_t) * (size_t)y->ndim) != 0) {
      pr->flags |= OPSI_F_BROADCAST;
    }
    if (!opsi_contiguous(in->t[k])) pr->flags |= OPSI_F_STRIDED;
    opsi_problem_add_base_align(pr, in->t[k]);
  }
  const opsi_operand operands[] = {
      {in->name[0], in->t[0], 0, {NULL, NULL}},
      {in->name[1], in->t[1], 0, {NULL, NULL}},
      {in->name[2], in->t[2], 0, {NULL, NULL}},
      {"y", y, 1, {in->t[0], in->t[1]}},
  };
  OPSI_TRY(opsi_check_aliasing(v, operands, 4));
  if (!opsi_contiguous(y)) pr->flags |= OPSI_F_STRIDED;
  opsi_problem_add_base_align(pr, y);
  e->kind = kind;
  e->fn = fn;
  e->y = *y;
  e->numel = ny;
  pr->dtype = y->dtype;
  pr->out_dtype = y->dtype;
  pr->variant = fn;
  pr->dims[OPSI_EW_NUMEL] = ny;
  pr->dims[OPSI_EW_NDIM] = y->ndim;
  pr->dims[OPSI_EW_INPUTS] = ninputs;
  *empty = ny == 0;
  return OPS_OK;
}

static ops_status sin_affine_entry(const opsi_vctx *vc, const ops_sin_affine_params *params,
                                   const ops_tensor *x, const ops_tensor *y, void *workspace,
                                   size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_sin_affine_params p;
  ops_sin_affine_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_sin_affine_params", params, sizeof p, &p));
  if (x == NULL) return opsi_check_tensor(vc, "x", x, NULL);
  const ew_inputs in = {{"x", "params->a_tensor", "params->b_tensor"}, {x, p.a_tensor, p.b_tensor}};
  opsi_ew_args e;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(ew_prepare(vc, OPS_OP_SIN_AFFINE, OPSI_EW_SIN_AFFINE, 0, &in, y, &e, &pr, &empty));
  e.a = p.a;
  e.b = p.b;
  return opsi_finish(vc, &pr, &e, empty, workspace, workspace_bytes);
}

ops_status ops_sin_affine(ops_handle handle, const ops_sin_affine_params *params, const ops_tensor *x,
                          const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_sin_affine", handle, OPSI_RUN, NULL, NULL};
  return sin_affine_entry(&vc, params, x, y, workspace, workspace_bytes);
}

ops_status ops_sin_affine_workspace_size(ops_handle handle, const ops_sin_affine_params *params,
                                         const ops_tensor *x, const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_sin_affine_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return sin_affine_entry(&vc, params, x, y, NULL, 0);
}

ops_status ops_sin_affine_explain(ops_handle handle, const ops_sin_affine_params *params, const ops_tensor *x,
                                  const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_sin_affine_explain", handle, OPSI_EXPLAIN, NULL, out};
  return sin_affine_entry(&vc, params, x, y, NULL, 0);
}

static ops_status unary_entry(const opsi_vctx *vc, const ops_unary_params *params, const ops_tensor *x,
                              const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_unary_params p;
  ops_unary_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_unary_params", params, sizeof p, &p));
  if (!opsi_act_known(p.fn)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->fn: expected an ops_act value 0..%d, got %d",
                     vc->fn, OPS_ACT_SIN, (int)p.fn);
  }
  if (x == NULL) return opsi_check_tensor(vc, "x", x, NULL);
  const ew_inputs in = {{"x", NULL, NULL}, {x, NULL, NULL}};
  opsi_ew_args e;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(ew_prepare(vc, OPS_OP_UNARY, OPSI_EW_UNARY, p.fn, &in, y, &e, &pr, &empty));
  return opsi_finish(vc, &pr, &e, empty, workspace, workspace_bytes);
}

ops_status ops_unary(ops_handle handle, const ops_unary_params *params, const ops_tensor *x,
                     const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_unary", handle, OPSI_RUN, NULL, NULL};
  return unary_entry(&vc, params, x, y, workspace, workspace_bytes);
}

ops_status ops_unary_workspace_size(ops_handle handle, const ops_unary_params *params,
                                    const ops_tensor *x, const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_unary_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return unary_entry(&vc, params, x, y, NULL, 0);
}

ops_status ops_unary_explain(ops_handle handle, const ops_unary_params *params, const ops_tensor *x,
                             const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_unary_explain", handle, OPSI_EXPLAIN, NULL, out};
  return unary_entry(&vc, params, x, y, NULL, 0);
}

static ops_status binary_entry(const opsi_vctx *vc, const ops_binary_params *params, const ops_tensor *a,
                               const ops_tensor *b, const ops_tensor *y, void *workspace,
                               size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_binary_params p;
  ops_binary_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_binary_params", params, sizeof p, &p));
  if (!opsi_binary_known(p.op)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->op: expected an ops_binary_op value 0..%d, got %d",
                     vc->fn, OPS_BINARY_MIN, (int)p.op);
  }
  if (a == NULL || b == NULL) return opsi_check_tensor(vc, a == NULL ? "a" : "b", NULL, NULL);
  const ew_inputs in = {{"a", "b", NULL}, {a, b, NULL}};
  opsi_ew_args e;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(ew_prepare(vc, OPS_OP_BINARY, OPSI_EW_BINARY, p.op, &in, y, &e, &pr, &empty));
  return opsi_finish(vc, &pr, &e, empty, workspace, workspace_bytes);
}

ops_status ops_binary(ops_handle handle, const ops_binary_params *params, const ops_tensor *a,
                      const ops_tensor *b, const ops_tensor *y, void *workspace,
                      size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_binary", handle, OPSI_RUN, NULL, NULL};
  return binary_entry(&vc, params, a, b, y, workspace, workspace_bytes);
}

ops_status ops_binary_workspace_size(ops_handle handle, const ops_binary_params *params,
                                     const ops_tensor *a, const ops_tensor *b, const ops_tensor *y,
                                     size_t *bytes) {
  const opsi_vctx vc = {"ops_binary_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return binary_entry(&vc, params, a, b, y, NULL, 0);
}

ops_status ops_binary_explain(ops_handle handle, const ops_binary_params *params, const ops_tensor *a,
                              const ops_tensor *b, const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_binary_explain", handle, OPSI_EXPLAIN, NULL, out};
  return binary_entry(&vc, params, a, b, y, NULL, 0);
}

static ops_status scale_entry(const opsi_vctx *vc, const ops_scale_params *params, const ops_tensor *x,
                              const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_scale_params p;
  ops_scale_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_scale_params", params, sizeof p, &p));
  if (!isfinite(p.alpha)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->alpha: expected a finite value, got %g", vc->fn,
                     (double)p.alpha);
  }
  if (x == NULL) return opsi_check_tensor(vc, "x", x, NULL);
  const ew_inputs in = {{"x", NULL, NULL}, {x, NULL, NULL}};
  opsi_ew_args e;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(ew_prepare(vc, OPS_OP_SCALE, OPSI_EW_SCALE, 0, &in, y, &e, &pr, &empty));
  e.a = p.alpha;
  return opsi_finish(vc, &pr, &e, empty, workspace, workspace_bytes);
}

ops_status ops_scale(ops_handle handle, const ops_scale_params *params, const ops_tensor *x,
                     const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_scale", handle, OPSI_RUN, NULL, NULL};
  return scale_entry(&vc, params, x, y, workspace, workspace_bytes);
}

ops_status ops_scale_workspace_size(ops_handle handle, const ops_scale_params *params,
                                    const ops_tensor *x, const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_scale_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return scale_entry(&vc, params, x, y, NULL, 0);
}

ops_status ops_scale_explain(ops_handle handle, const ops_scale_params *params, const ops_tensor *x,
                             const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_scale_explain", handle, OPSI_EXPLAIN, NULL, out};
  return scale_entry(&vc, params, x, y, NULL, 0);
}

static ops_status dropout_entry(const opsi_vctx *vc, const ops_dropout_params *params, const ops_tensor *x,
                                const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  ops_dropout_params p;
  ops_dropout_params_init(&p);
  OPSI_TRY(opsi_read_params(vc, "ops_dropout_params", params, sizeof p, &p));
  if (!(p.p >= 0.0f && p.p <= 1.0f)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->p: expected a probability in [0, 1], got %g", vc->fn,
                     (double)p.p);
  }
  int64_t ny;
  OPSI_TRY(opsi_check_tensor(vc, "x", x, NULL));
  OPSI_TRY(opsi_check_tensor(vc, "y", y, &ny));
  OPSI_TRY(opsi_check_dtype_in(vc, "x", x, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_dtype_eq(vc, "y", y, x->dtype, "x's dtype"));
  OPSI_TRY(opsi_check_shape(vc, "y", y, x->ndim, x->shape, "x's shape"));
  const opsi_operand operands[] = {{"x", x, 0, {NULL, NULL}}, {"y", y, 1, {x, NULL}}};
  OPSI_TRY(opsi_check_aliasing(vc, operands, 2));
  opsi_dropout_args a;
  memset(&a, 0, sizeof a);
  a.x = *x;
  a.y = *y;
  a.numel = ny;
  a.p = p.p;
  a.seed = p.seed;
  a.offset = p.offset;
  opsi_problem pr;
  opsi_problem_init(&pr, OPS_OP_DROPOUT, vc->handle);
  pr.dtype = pr.out_dtype = x->dtype;
  pr.dims[OPSI_EW_NUMEL] = ny;
  pr.dims[OPSI_EW_NDIM] = x->ndim;
  pr.dims[OPSI_EW_INPUTS] = 1;
  if (!opsi_contiguous(x) || !opsi_contiguous(y)) pr.flags |= OPSI_F_STRIDED;
  opsi_problem_add_base_align(&pr, x);
  opsi_problem_add_base_align(&pr, y);
  return opsi_finish(vc, &pr, &a, ny == 0, workspace, workspace_bytes);
}

ops_status ops_dropout(ops_handle handle, const ops_dropout_params *params, const ops_tensor *x,
                       const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_dropout", handle, OPSI_RUN, NULL, NULL};
  return dropout_entry(&vc, params, x, y, workspace, workspace_bytes);
}

ops_status ops_dropout_workspace_size(ops_handle handle, const ops_dropout_params *params,
                                      const ops_tensor *x, const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_dropout_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return dropout_entry(&vc, params, x, y, NULL, 0);
}

ops_status ops_dropout_explain(ops_handle handle, const ops_dropout_params *params, const ops_tensor *x,
                               const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_dropout_explain", handle, OPSI_EXPLAIN, NULL, out};
  return dropout_entry(&vc, params, x, y, NULL, 0);
}
