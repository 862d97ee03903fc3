/*
 * ops_reduce: validation, the split of x's axes into kept and reduced ones
 * (opsi_reduce_args), then the dispatcher.
 */
#include <string.h>

#include "dispatch/dispatch.h"
#include "kernels/reduce/reduce_args.h"
#include "opslib/ops.h"
#include "runtime/error.h"

void ops_reduce_params_init(ops_reduce_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->op = OPS_REDUCE_SUM;
  p->axes = OPS_REDUCE_ALL_AXES;
  p->keepdim = 0;
}

static ops_status reduce_prepare(const opsi_vctx *v, const ops_reduce_params *params,
                                 const ops_tensor *x, const ops_tensor *y, opsi_reduce_args *r,
                                 opsi_problem *pr, int *empty) {
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  OPSI_TRY(opsi_read_params(v, "ops_reduce_params", params, sizeof p, &p));
  if (p.op < OPS_REDUCE_SUM || p.op > OPS_REDUCE_MIN) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->op: expected an ops_reduce_op value 0..%d, got %d",
                     v->fn, OPS_REDUCE_MIN, (int)p.op);
  }
  if (p.keepdim != 0 && p.keepdim != 1) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->keepdim: expected 0 or 1, got %d", v->fn,
                     (int)p.keepdim);
  }
  int64_t ny;
  OPSI_TRY(opsi_check_tensor(v, "x", x, NULL));
  OPSI_TRY(opsi_check_tensor(v, "y", y, &ny));
  OPSI_TRY(opsi_check_dtype_in(v, "x", x, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_dtype_in(v, "y", y, OPSI_DTYPE_BIT(x->dtype) | OPSI_DTYPE_BIT(OPS_DTYPE_F32)));
  const uint32_t all = x->ndim == 32 ? 0xFFFFFFFFu : ((1u << x->ndim) - 1u);
  const uint32_t axes = p.axes == OPS_REDUCE_ALL_AXES ? all : p.axes;
  if (axes & ~all) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "%s: params->axes: expected bits for axes 0..%d of x (or OPS_REDUCE_ALL_AXES), got 0x%x",
                     v->fn, (int)x->ndim - 1, (unsigned)p.axes);
  }
  memset(r, 0, sizeof *r);
  int64_t y_shape[OPS_MAX_DIMS];
  int y_ndim = 0;
  /* the reduced count, checked: an empty x passes the element-count check however large its
   * other extents are */
  OPSI_TRY(opsi_extent_product(v, "x: the reduced axes' extents", x, axes, &r->red_count));
  for (int i = 0; i < x->ndim; ++i) {
    if (axes & (1u << i)) {
      r->red_shape[r->red_ndim] = x->shape[i];
      r->red_x_strides[r->red_ndim++] = x->strides[i];
      if (p.keepdim) y_shape[y_ndim++] = 1;
    } else {
      y_shape[y_ndim++] = x->shape[i];
    }
  }
  OPSI_TRY(opsi_check_shape(v, "y", y, y_ndim, y_shape,
                            p.keepdim ? "x's shape, reduced axes kept as 1" : "x's shape without the reduced axes"));
  const opsi_operand operands[] = {{"x", x, 0, {NULL, NULL}}, {"y", y, 1, {NULL, NULL}}};
  OPSI_TRY(opsi_check_aliasing(v, operands, 2));

  for (int i = 0, yi = 0; i < x->ndim; ++i) {
    if (axes & (1u << i)) {
      yi += p.keepdim;
      continue;
    }
    r->kept_shape[r->kept_ndim] = x->shape[i];
    r->kept_x_strides[r->kept_ndim] = x->strides[i];
    r->kept_y_strides[r->kept_ndim++] = y->strides[yi++];
  }
  /* Collapse both groups (an empty extent keeps its dim: the counts are 0 anyway). */
  if (r->red_count > 0 && ny > 0) {
    int64_t *red[1] = {r->red_x_strides}, *kept[2] = {r->kept_x_strides, r->kept_y_strides};
    opsi_collapse_dims(&r->red_ndim, r->red_shape, 1, red);
    opsi_collapse_dims(&r->kept_ndim, r->kept_shape, 2, kept);
  }
  r->op = p.op;
  r->x = *x;
  r->y_data = y->data;
  r->y_dtype = y->dtype;
  r->out_count = ny;

  opsi_problem_init(pr, OPS_OP_REDUCE, v->handle);
  pr->dtype = x->dtype;
  pr->out_dtype = y->dtype;
  pr->variant = p.op;
  pr->dims[OPSI_REDUCE_OUT] = ny;
  pr->dims[OPSI_REDUCE_INNER] = r->red_count;
  pr->dims[OPSI_REDUCE_NDIM] = x->ndim;
  if (p.keepdim) pr->flags |= OPSI_F_KEEPDIM;
  if (r->red_ndim > 1 || (r->red_ndim == 1 && r->red_x_strides[0] != 1)) pr->flags |= OPSI_F_REDUCE_NOT_INNER;
  if (r->kept_ndim != 1 || r->kept_x_strides[0] != 1 || r->red_ndim > 1) pr->flags |= OPSI_F_REDUCE_NOT_COLUMNS;
  if (!opsi_contiguous(x) || !opsi_contiguous(y)) pr->flags |= OPSI_F_STRIDED;
  opsi_problem_add_align(pr, x);
  opsi_problem_add_align(pr, y);
  /* An empty fold reads nothing of x, whose other extents and strides may then be anything
   * (its element count is 0): the kernels walk y alone, so that no offset into x is formed. */
  if (r->red_count == 0) {
    memset(r->kept_x_strides, 0, sizeof r->kept_x_strides);
    memset(r->red_x_strides, 0, sizeof r->red_x_strides);
  }
  *empty = ny == 0;
  return OPS_OK;
}

static ops_status reduce_entry(const opsi_vctx *vc, const ops_reduce_params *params, const ops_tensor *x,
                               const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_reduce_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(reduce_prepare(vc, params, x, y, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

ops_status ops_reduce(ops_handle handle, const ops_reduce_params *params, const ops_tensor *x,
                      const ops_tensor *y, void *workspace, size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_reduce", handle, OPSI_RUN, NULL, NULL};
  return reduce_entry(&vc, params, x, y, workspace, workspace_bytes);
}

ops_status ops_reduce_workspace_size(ops_handle handle, const ops_reduce_params *params,
                                     const ops_tensor *x, const ops_tensor *y, size_t *bytes) {
  const opsi_vctx vc = {"ops_reduce_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return reduce_entry(&vc, params, x, y, NULL, 0);
}

ops_status ops_reduce_explain(ops_handle handle, const ops_reduce_params *params, const ops_tensor *x,
                              const ops_tensor *y, ops_explain *out) {
  const opsi_vctx vc = {"ops_reduce_explain", handle, OPSI_EXPLAIN, NULL, out};
  return reduce_entry(&vc, params, x, y, NULL, 0);
}
