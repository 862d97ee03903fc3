/*
 * The row-wise ops over the last axis: ops_layernorm, ops_rmsnorm and ops_softmax.
 * Validation and normalization into opsi_rows_args, then the dispatcher.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "kernels/norm/rows_args.h"
#include "opslib/ops.h"
#include "runtime/error.h"

void ops_norm_params_init(ops_norm_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->eps = 1e-5f;
}

void ops_norm_backward_params_init(ops_norm_backward_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
}

void ops_softmax_params_init(ops_softmax_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->scale = 1.0f;
}

/* x [..., N] and y (x's shape and dtype): the row geometry every row-wise op shares. */
static ops_status rows_common(const opsi_vctx *v, const char *xn, const ops_tensor *x, const char *yn,
                              const ops_tensor *y, opsi_rows_args *a, opsi_problem *pr, int32_t op, int64_t *ny) {
  char why[64];
  snprintf(why, sizeof why, "%s's dtype", xn);
  OPSI_TRY(opsi_check_tensor(v, xn, x, NULL));
  OPSI_TRY(opsi_check_tensor(v, yn, y, ny));
  OPSI_TRY(opsi_check_dtype_in(v, xn, x, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_ndim(v, xn, x, 1, OPS_MAX_DIMS));
  OPSI_TRY(opsi_check_dtype_eq(v, yn, y, x->dtype, why));
  snprintf(why, sizeof why, "%s's shape", xn);
  OPSI_TRY(opsi_check_shape(v, yn, y, x->ndim, x->shape, why));
  memset(a, 0, sizeof *a);
  a->op = op;
  a->x = *x;
  a->y = *y;
  a->lead_ndim = x->ndim - 1;
  snprintf(why, sizeof why, "%s's leading extents (its rows)", xn);
  OPSI_TRY(opsi_extent_product(v, why, x, (1u << a->lead_ndim) - 1u, &a->rows));
  for (int i = 0; i < a->lead_ndim; ++i) a->lead_shape[i] = x->shape[i];
  a->cols = x->shape[x->ndim - 1];
  opsi_problem_init(pr, op, v->handle);
  pr->dtype = x->dtype;
  pr->out_dtype = y->dtype;
  pr->dims[OPSI_ROWS_ROWS] = a->rows;
  pr->dims[OPSI_ROWS_COLS] = a->cols;
  return OPS_OK;
}

/* An optional tensor with exactly x's shape and dtype (residual, residual_out). */
static ops_status like_x(const opsi_vctx *v, const char *arg, const ops_tensor *t, const ops_tensor *x,
                         int64_t *n) {
  OPSI_TRY(opsi_check_tensor(v, arg, t, n));
  OPSI_TRY(opsi_check_dtype_eq(v, arg, t, x->dtype, "x's dtype"));
  return opsi_check_shape(v, arg, t, x->ndim, x->shape, "x's shape");
}

/* An optional f32 statistics output with x's shape minus the last axis. */
static ops_status stats_out(const opsi_vctx *v, const char *arg, const ops_tensor *t, const ops_tensor *x,
                            int64_t *n) {
  OPSI_TRY(opsi_check_tensor(v, arg, t, n));
  OPSI_TRY(opsi_check_dtype_eq(v, arg, t, OPS_DTYPE_F32, "statistics are f32"));
  return opsi_check_shape(v, arg, t, x->ndim - 1, x->shape, "x's shape without the last axis");
}

static ops_status norm_prepare(const opsi_vctx *v, int rms, const ops_norm_params *params,
                               const ops_tensor *x, const ops_tensor *w, const ops_tensor *y,
                               opsi_rows_args *a, opsi_problem *pr, int *empty) {
  ops_norm_params p;
  ops_norm_params_init(&p);
  OPSI_TRY(opsi_read_params(v, "ops_norm_params", params, sizeof p, &p));
  if (!isfinite(p.eps) || p.eps < 0.0f) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->eps: expected a finite value >= 0, got %g",
                     v->fn, (double)p.eps);
  }
  if (p.residual_out != NULL && p.residual == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "%s: params->residual: expected a tensor (params->residual_out is set), got NULL", v->fn);
  }
  if (rms && p.mean_out != NULL) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: params->mean_out: expected NULL (RMSNorm subtracts no mean), got a tensor", v->fn);
  }
  int64_t ny, nres = 0, nmean = 0, nrstd = 0;
  OPSI_TRY(rows_common(v, "x", x, "y", y, a, pr, rms ? OPS_OP_RMSNORM : OPS_OP_LAYERNORM, &ny));
  const int64_t cols = a->cols;
  OPSI_TRY(opsi_check_tensor(v, "weight", w, NULL));
  OPSI_TRY(opsi_check_dtype_in(v, "weight", w, OPSI_DTYPE_BIT(x->dtype) | OPSI_DTYPE_BIT(OPS_DTYPE_F32)));
  OPSI_TRY(opsi_check_shape(v, "weight", w, 1, &cols, "[N], N = x's last extent"));
  if (p.bias != NULL) {
    OPSI_TRY(opsi_check_tensor(v, "params->bias", p.bias, NULL));
    OPSI_TRY(opsi_check_dtype_eq(v, "params->bias", p.bias, w->dtype, "weight's dtype"));
    OPSI_TRY(opsi_check_shape(v, "params->bias", p.bias, 1, &cols, "[N], N = x's last extent"));
  }
  if (p.residual != NULL) OPSI_TRY(like_x(v, "params->residual", p.residual, x, NULL));
  if (p.residual_out != NULL) OPSI_TRY(like_x(v, "params->residual_out", p.residual_out, x, &nres));
  if (p.mean_out != NULL) OPSI_TRY(stats_out(v, "params->mean_out", p.mean_out, x, &nmean));
  if (p.rstd_out != NULL) OPSI_TRY(stats_out(v, "params->rstd_out", p.rstd_out, x, &nrstd));

  const opsi_operand operands[] = {
      {"x", x, 0, {NULL, NULL}},
      {"weight", w, 0, {NULL, NULL}},
      {"params->bias", p.bias, 0, {NULL, NULL}},
      {"params->residual", p.residual, 0, {NULL, NULL}},
      {"y", y, 1, {x, NULL}},
      {"params->residual_out", p.residual_out, 1, {p.residual, NULL}},
      {"params->mean_out", p.mean_out, 1, {NULL, NULL}},
      {"params->rstd_out", p.rstd_out, 1, {NULL, NULL}},
  };
  OPSI_TRY(opsi_check_aliasing(v, operands, (int)(sizeof operands / sizeof operands[0])));

  a->weight = *w;
  a->rms = rms;
  a->eps = p.eps;
  if ((a->has_bias = p.bias != NULL)) a->bias = *p.bias;
  if ((a->has_residual = p.residual != NULL)) a->residual = *p.residual;
  if ((a->has_residual_out = p.residual_out != NULL)) a->residual_out = *p.residual_out;
  if ((a->has_mean_out = p.mean_out != NULL)) a->mean_out = *p.mean_out;
  if ((a->has_rstd_out = p.rstd_out != NULL)) a->rstd_out = *p.rstd_out;

  if (a->has_bias) pr->flags |= OPSI_F_BIAS;
  if (a->has_residual) pr->flags |= OPSI_F_RESIDUAL;
  if (a->has_residual_out) pr->flags |= OPSI_F_RESIDUAL_OUT;
  if (a->has_mean_out || a->has_rstd_out) pr->flags |= OPSI_F_STATS_OUT;
  const ops_tensor *rows[] = {x, y, w, p.bias, p.residual, p.residual_out};
  for (size_t i = 0; i < 6; ++i) opsi_problem_add_row_layout(pr, rows[i]);
  *empty = ny == 0 && nres == 0 && nmean == 0 && nrstd == 0;
  return OPS_OK;
}

static ops_status softmax_prepare(const opsi_vctx *v, const ops_softmax_params *params,
                                  const ops_tensor *x, const ops_tensor *y, opsi_rows_args *a,
                                  opsi_problem *pr, int *empty) {
  ops_softmax_params p;
  ops_softmax_params_init(&p);
  OPSI_TRY(opsi_read_params(v, "ops_softmax_params", params, sizeof p, &p));
  if (!isfinite(p.scale)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->scale: expected a finite value, got %g",
                     v->fn, (double)p.scale);
  }
  int64_t ny;
  OPSI_TRY(rows_common(v, "x", x, "y", y, a, pr, OPS_OP_SOFTMAX, &ny));
  const opsi_operand operands[] = {{"x", x, 0, {NULL, NULL}}, {"y", y, 1, {x, NULL}}};
  OPSI_TRY(opsi_check_aliasing(v, operands, 2));
  a->scale = p.scale;
  opsi_problem_add_row_layout(pr, x);
  opsi_problem_add_row_layout(pr, y);
  *empty = ny == 0;
  return OPS_OK;
}

/* The operands every backward shares: dy [..., N] (f32, f16 or bf16), the forward tensor
 * `fwd` (x for the norms, y for softmax) and dx, all of dy's shape and dtype. */
static ops_status backward_common(const opsi_vctx *v, const char *fwd_name, const ops_tensor *dy, const ops_tensor *fwd,
                                  const ops_tensor *dx, int32_t op, opsi_rows_args *a, opsi_problem *pr, int64_t *ndx) {
  OPSI_TRY(opsi_check_tensor(v, "dy", dy, NULL));
  OPSI_TRY(opsi_check_tensor(v, fwd_name, fwd, NULL));
  OPSI_TRY(opsi_check_dtype_in(v, "dy", dy, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_ndim(v, "dy", dy, 1, OPS_MAX_DIMS));
  OPSI_TRY(opsi_check_dtype_eq(v, fwd_name, fwd, dy->dtype, "dy's dtype"));
  OPSI_TRY(opsi_check_shape(v, fwd_name, fwd, dy->ndim, dy->shape, "dy's shape"));
  OPSI_TRY(rows_common(v, "dy", dy, "dx", dx, a, pr, op, ndx)); /* dx: dy's shape and dtype */
  a->backward = 1;
  a->dy = *dy;
  a->x = *fwd;
  opsi_problem_add_row_layout(pr, dy);
  opsi_problem_add_row_layout(pr, fwd);
  opsi_problem_add_row_layout(pr, dx);
  return OPS_OK;
}

static ops_status norm_backward_prepare(const opsi_vctx *v, int rms, const ops_norm_backward_params *params,
                                        const ops_tensor *dy, const ops_tensor *x, const ops_tensor *w,
                                        const ops_tensor *mean, const ops_tensor *rstd, const ops_tensor *dx,
                                        opsi_rows_args *a, opsi_problem *pr, int *empty) {
  ops_norm_backward_params p;
  ops_norm_backward_params_init(&p);
  OPSI_TRY(opsi_read_params(v, "ops_norm_backward_params", params, sizeof p, &p));
  int64_t ndx, ndw = 0, ndb = 0;
  OPSI_TRY(backward_common(v, "x", dy, x, dx, rms ? OPS_OP_RMSNORM_BACKWARD : OPS_OP_LAYERNORM_BACKWARD, a, pr, &ndx));
  const int64_t cols = a->cols;
  const uint32_t wdt = OPSI_DTYPE_BIT(x->dtype) | OPSI_DTYPE_BIT(OPS_DTYPE_F32);
  OPSI_TRY(opsi_check_tensor(v, "weight", w, NULL));
  OPSI_TRY(opsi_check_dtype_in(v, "weight", w, wdt));
  OPSI_TRY(opsi_check_shape(v, "weight", w, 1, &cols, "[N], N = x's last extent"));
  if (!rms) {
    if (mean == NULL) return opsi_fail(OPS_ERR_NULL_POINTER, "%s: mean: expected the forward's mean_out, got NULL", v->fn);
    OPSI_TRY(stats_out(v, "mean", mean, x, NULL));
  }
  OPSI_TRY(stats_out(v, "rstd", rstd, x, NULL));
  if (p.dweight != NULL) {
    OPSI_TRY(opsi_check_tensor(v, "params->dweight", p.dweight, &ndw));
    OPSI_TRY(opsi_check_dtype_in(v, "params->dweight", p.dweight, wdt));
    OPSI_TRY(opsi_check_shape(v, "params->dweight", p.dweight, 1, &cols, "[N], N = x's last extent"));
  }
  if (p.dbias != NULL) {
    OPSI_TRY(opsi_check_tensor(v, "params->dbias", p.dbias, &ndb));
    OPSI_TRY(opsi_check_dtype_in(v, "params->dbias", p.dbias, wdt));
    OPSI_TRY(opsi_check_shape(v, "params->dbias", p.dbias, 1, &cols, "[N], N = x's last extent"));
  }
  const opsi_operand operands[] = {
      {"dy", dy, 0, {NULL, NULL}},     {"x", x, 0, {NULL, NULL}},    {"weight", w, 0, {NULL, NULL}},
      {"mean", mean, 0, {NULL, NULL}}, {"rstd", rstd, 0, {NULL, NULL}}, {"dx", dx, 1, {dy, NULL}},
      {"params->dweight", p.dweight, 1, {NULL, NULL}}, {"params->dbias", p.dbias, 1, {NULL, NULL}},
  };
  OPSI_TRY(opsi_check_aliasing(v, operands, (int)(sizeof operands / sizeof operands[0])));
  a->rms = rms;
  a->weight = *w;
  if ((a->has_mean_out = mean != NULL && !rms)) a->mean_out = *mean;
  a->has_rstd_out = 1;
  a->rstd_out = *rstd;
  if ((a->has_dweight = p.dweight != NULL)) a->dweight = *p.dweight;
  if ((a->has_dbias = p.dbias != NULL)) a->dbias = *p.dbias;
  if (a->has_dweight) pr->flags |= OPSI_F_DWEIGHT;
  if (a->has_dbias) pr->flags |= OPSI_F_BIAS;
  opsi_problem_add_align(pr, w);
  *empty = ndx == 0 && ndw == 0 && ndb == 0;
  return OPS_OK;
}

static ops_status softmax_backward_prepare(const opsi_vctx *v, const ops_softmax_params *params, const ops_tensor *dy,
                                           const ops_tensor *y, const ops_tensor *dx, opsi_rows_args *a,
                                           opsi_problem *pr, int *empty) {
  ops_softmax_params p;
  ops_softmax_params_init(&p);
  OPSI_TRY(opsi_read_params(v, "ops_softmax_params", params, sizeof p, &p));
  if (!isfinite(p.scale)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->scale: expected a finite value, got %g", v->fn,
                     (double)p.scale);
  }
  int64_t ndx;
  OPSI_TRY(backward_common(v, "y", dy, y, dx, OPS_OP_SOFTMAX_BACKWARD, a, pr, &ndx));
  const opsi_operand operands[] = {{"dy", dy, 0, {NULL, NULL}}, {"y", y, 0, {NULL, NULL}}, {"dx", dx, 1, {dy, NULL}}};
  OPSI_TRY(opsi_check_aliasing(v, operands, 3));
  a->scale = p.scale;
  *empty = ndx == 0;
  return OPS_OK;
}

static ops_status norm_backward_entry(const opsi_vctx *vc, int rms, const ops_norm_backward_params *params,
                                      const ops_tensor *dy, const ops_tensor *x, const ops_tensor *w,
                                      const ops_tensor *mean, const ops_tensor *rstd, const ops_tensor *dx,
                                      void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_rows_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(norm_backward_prepare(vc, rms, params, dy, x, w, mean, rstd, dx, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

static ops_status softmax_backward_entry(const opsi_vctx *vc, const ops_softmax_params *params, const ops_tensor *dy,
                                         const ops_tensor *y, const ops_tensor *dx, void *workspace,
                                         size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_rows_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(softmax_backward_prepare(vc, params, dy, y, dx, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

#define VC(name, mode, ws, ex) const opsi_vctx vc = {name, handle, mode, ws, ex}

ops_status ops_layernorm_backward(ops_handle handle, const ops_norm_backward_params *params, const ops_tensor *dy,
                                  const ops_tensor *x, const ops_tensor *weight, const ops_tensor *mean,
                                  const ops_tensor *rstd, const ops_tensor *dx, void *workspace,
                                  size_t workspace_bytes) {
  VC("ops_layernorm_backward", OPSI_RUN, NULL, NULL);
  return norm_backward_entry(&vc, 0, params, dy, x, weight, mean, rstd, dx, workspace, workspace_bytes);
}

ops_status ops_layernorm_backward_workspace_size(ops_handle handle, const ops_norm_backward_params *params,
                                                 const ops_tensor *dy, const ops_tensor *x, const ops_tensor *weight,
                                                 const ops_tensor *mean, const ops_tensor *rstd, const ops_tensor *dx,
                                                 size_t *bytes) {
  VC("ops_layernorm_backward_workspace_size", OPSI_QUERY_WORKSPACE, bytes, NULL);
  return norm_backward_entry(&vc, 0, params, dy, x, weight, mean, rstd, dx, NULL, 0);
}

ops_status ops_layernorm_backward_explain(ops_handle handle, const ops_norm_backward_params *params,
                                          const ops_tensor *dy, const ops_tensor *x, const ops_tensor *weight,
                                          const ops_tensor *mean, const ops_tensor *rstd, const ops_tensor *dx,
                                          ops_explain *out) {
  VC("ops_layernorm_backward_explain", OPSI_EXPLAIN, NULL, out);
  return norm_backward_entry(&vc, 0, params, dy, x, weight, mean, rstd, dx, NULL, 0);
}

ops_status ops_rmsnorm_backward(ops_handle handle, const ops_norm_backward_params *params, const ops_tensor *dy,
                                const ops_tensor *x, const ops_tensor *weight, const ops_tensor *rstd,
                                const ops_tensor *dx, void *workspace, size_t workspace_bytes) {
  VC("ops_rmsnorm_backward", OPSI_RUN, NULL, NULL);
  return norm_backward_entry(&vc, 1, params, dy, x, weight, NULL, rstd, dx, workspace, workspace_bytes);
}

ops_status ops_rmsnorm_backward_workspace_size(ops_handle handle, const ops_norm_backward_params *params,
                                               const ops_tensor *dy, const ops_tensor *x, const ops_tensor *weight,
                                               const ops_tensor *rstd, const ops_tensor *dx, size_t *bytes) {
  VC("ops_rmsnorm_backward_workspace_size", OPSI_QUERY_WORKSPACE, bytes, NULL);
  return norm_backward_entry(&vc, 1, params, dy, x, weight, NULL, rstd, dx, NULL, 0);
}

ops_status ops_rmsnorm_backward_explain(ops_handle handle, const ops_norm_backward_params *params,
                                        const ops_tensor *dy, const ops_tensor *x, const ops_tensor *weight,
                                        const ops_tensor *rstd, const ops_tensor *dx, ops_explain *out) {
  VC("ops_rmsnorm_backward_explain", OPSI_EXPLAIN, NULL, out);
  return norm_backward_entry(&vc, 1, params, dy, x, weight, NULL, rstd, dx, NULL, 0);
}

ops_status ops_softmax_backward(ops_handle handle, const ops_softmax_params *params, const ops_tensor *dy,
                                const ops_tensor *y, const ops_tensor *dx, void *workspace, size_t workspace_bytes) {
  VC("ops_softmax_backward", OPSI_RUN, NULL, NULL);
  return softmax_backward_entry(&vc, params, dy, y, dx, workspace, workspace_bytes);
}

ops_status ops_softmax_backward_workspace_size(ops_handle handle, const ops_softmax_params *params,
                                               const ops_tensor *dy, const ops_tensor *y, const ops_tensor *dx,
                                               size_t *bytes) {
  VC("ops_softmax_backward_workspace_size", OPSI_QUERY_WORKSPACE, bytes, NULL);
  return softmax_backward_entry(&vc, params, dy, y, dx, NULL, 0);
}

ops_status ops_softmax_backward_explain(ops_handle handle, const ops_softmax_params *params, const ops_tensor *dy,
                                        const ops_tensor *y, const ops_tensor *dx, ops_explain *out) {
  VC("ops_softmax_backward_explain", OPSI_EXPLAIN, NULL, out);
  return softmax_backward_entry(&vc, params, dy, y, dx, NULL, 0);
}

#undef VC

static ops_status norm_entry(const opsi_vctx *vc, int rms, const ops_norm_params *params,
                             const ops_tensor *x, const ops_tensor *w, const ops_tensor *y,
                             void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_rows_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(norm_prepare(vc, rms, params, x, w, y, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

static ops_status softmax_entry(const opsi_vctx *vc, const ops_softmax_params *params,
                                const ops_tensor *x, const ops_tensor *y, void *workspace,
                                size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_rows_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(softmax_prepare(vc, params, x, y, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

ops_status ops_layernorm(ops_handle handle, const ops_norm_params *params, const ops_tensor *x,
                         const ops_tensor *weight, const ops_tensor *y, void *workspace,
                         size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_layernorm", handle, OPSI_RUN, NULL, NULL};
  return norm_entry(&vc, 0, params, x, weight, y, workspace, workspace_bytes);
}

ops_status ops_layernorm_workspace_size(ops_handle handle, const ops_norm_params *params,
                                        const ops_tensor *x, const ops_tensor *weight,
                                        const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_layernorm_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return norm_entry(&vc, 0, params, x, weight, y, NULL, 0);
}

ops_status ops_layernorm_explain(ops_handle handle, const ops_norm_params *params, const ops_tensor *x,
                                 const ops_tensor *weight, const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_layernorm_explain", handle, OPSI_EXPLAIN, NULL, out};
  return norm_entry(&vc, 0, params, x, weight, y, NULL, 0);
}

ops_status ops_rmsnorm(ops_handle handle, const ops_norm_params *params, const ops_tensor *x,
                       const ops_tensor *weight, const ops_tensor *y, void *workspace,
                       size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_rmsnorm", handle, OPSI_RUN, NULL, NULL};
  return norm_entry(&vc, 1, params, x, weight, y, workspace, workspace_bytes);
}

ops_status ops_rmsnorm_workspace_size(ops_handle handle, const ops_norm_params *params,
                                      const ops_tensor *x, const ops_tensor *weight,
                                      const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_rmsnorm_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return norm_entry(&vc, 1, params, x, weight, y, NULL, 0);
}

ops_status ops_rmsnorm_explain(ops_handle handle, const ops_norm_params *params, const ops_tensor *x,
                               const ops_tensor *weight, const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_rmsnorm_explain", handle, OPSI_EXPLAIN, NULL, out};
  return norm_entry(&vc, 1, params, x, weight, y, NULL, 0);
}

ops_status ops_softmax(ops_handle handle, const ops_softmax_params *params, const ops_tensor *x,
                       const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_softmax", handle, OPSI_RUN, NULL, NULL};
  return softmax_entry(&vc, params, x, y, workspace, workspace_bytes);
}

ops_status ops_softmax_workspace_size(ops_handle handle, const ops_softmax_params *params,
                                      const ops_tensor *x, const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_softmax_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return softmax_entry(&vc, params, x, y, NULL, 0);
}

ops_status ops_softmax_explain(ops_handle handle, const ops_softmax_params *params, const ops_tensor *x,
                               const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_softmax_explain", handle, OPSI_EXPLAIN, NULL, out};
  return softmax_entry(&vc, params, x, y, NULL, 0);
}
