/*
 * ops_gemm: validation and normalization into opsi_gemm_args (3-D views; a broadcast
 * batch has stride 0; C, bias and residual broadcast to D), then the dispatcher.
 */
#include <math.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "kernels/common/pointwise.h"
#include "kernels/gemm/gemm_args.h"
#include "opslib/ops.h"
#include "runtime/error.h"

void ops_gemm_params_init(ops_gemm_params *p) {
  if (p == NULL) return;
  memset(p, 0, sizeof *p);
  p->struct_size = (uint32_t)sizeof *p;
  p->alpha = 1.0f;
  p->beta = 0.0f;
  p->activation = OPS_ACT_NONE;
}

/* A 2-D or 3-D operand as a 3-D view with `batch` entries (stride 0 when it has one). */
static ops_tensor as_batched(const ops_tensor *t, int64_t batch) {
  ops_tensor r = *t;
  if (t->ndim == 2) {
    r.shape[2] = t->shape[1], r.strides[2] = t->strides[1];
    r.shape[1] = t->shape[0], r.strides[1] = t->strides[0];
    r.shape[0] = 1, r.strides[0] = 0;
  }
  r.ndim = 3;
  if (r.shape[0] == 1 && batch != 1) {
    r.shape[0] = batch;
    r.strides[0] = 0;
  }
  return r;
}

/* An optional epilogue operand: D's dtype, broadcast to D, as a 3-D view. */
static ops_status epilogue_operand(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                                   const ops_tensor *d, int64_t batch, ops_tensor *out) {
  OPSI_TRY(opsi_check_tensor(v, arg, t, NULL));
  OPSI_TRY(opsi_check_dtype_eq(v, arg, t, d->dtype, "d's dtype"));
  ops_tensor view;
  OPSI_TRY(opsi_broadcast_to(v, arg, t, d->ndim, d->shape, "d's shape", &view));
  *out = as_batched(&view, batch);
  return OPS_OK;
}

static int unit_inner(const ops_tensor *t, int axis) {
  return t->shape[axis] <= 1 || t->strides[axis] == 1;
}

/* An axis the view steps through backwards (extent > 1, stride < 0). */
static int any_negative_stride(const ops_tensor *t) {
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] > 1 && t->strides[i] < 0) return 1;
  }
  return 0;
}

/* An operand's alignment (opsi_tensor_align) read along whichever of its last two axes is
 * unit-stride: a K-major B ([K, N] with strides (1, K)) is as aligned as its transpose. */
static void add_gemm_align(opsi_problem *pr, const ops_tensor *t) {
  if (t == NULL) return;
  const int nd = t->ndim;
  if (nd >= 2 && !unit_inner(t, nd - 1) && unit_inner(t, nd - 2)) {
    ops_tensor swapped = *t;
    swapped.shape[nd - 1] = t->shape[nd - 2], swapped.strides[nd - 1] = t->strides[nd - 2];
    swapped.shape[nd - 2] = t->shape[nd - 1], swapped.strides[nd - 2] = t->strides[nd - 1];
    opsi_problem_add_align(pr, &swapped);
  } else {
    opsi_problem_add_align(pr, t);
  }
}

static ops_status gemm_prepare(const opsi_vctx *v, const ops_gemm_params *params,
                               const ops_tensor *a, const ops_tensor *b, const ops_tensor *d,
                               opsi_gemm_args *g, opsi_problem *pr, int *empty) {
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  OPSI_TRY(opsi_read_params(v, "ops_gemm_params", params, sizeof p, &p));
  if (!isfinite(p.alpha) || !isfinite(p.beta)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->%s: expected a finite value, got %g",
                     v->fn, isfinite(p.alpha) ? "beta" : "alpha",
                     (double)(isfinite(p.alpha) ? p.beta : p.alpha));
  }
  if (!opsi_act_known(p.activation)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: params->activation: expected an ops_act value 0..%d, got %d",
                     v->fn, OPS_ACT_SIN, (int)p.activation);
  }
  if (p.beta != 0.0f && p.c == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: params->c: expected a tensor (params->beta is %g), got NULL",
                     v->fn, (double)p.beta);
  }
  int64_t nd;
  OPSI_TRY(opsi_check_tensor(v, "a", a, NULL));
  OPSI_TRY(opsi_check_tensor(v, "b", b, NULL));
  OPSI_TRY(opsi_check_tensor(v, "d", d, &nd));
  OPSI_TRY(opsi_check_dtype_in(v, "a", a, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_dtype_eq(v, "b", b, a->dtype, "a's dtype"));
  OPSI_TRY(opsi_check_dtype_in(v, "d", d, OPSI_DTYPE_BIT(a->dtype) | OPSI_DTYPE_BIT(OPS_DTYPE_F32)));
  OPSI_TRY(opsi_check_ndim(v, "a", a, 2, 3));
  OPSI_TRY(opsi_check_ndim(v, "b", b, 2, 3));
  OPSI_TRY(opsi_check_ndim(v, "d", d, 2, 3));
  const int64_t m = a->shape[a->ndim - 2], k = a->shape[a->ndim - 1], n = b->shape[b->ndim - 1];
  OPSI_TRY(opsi_check_extent(v, "b", b, b->ndim - 2, k, "k, from a"));
  const int64_t ba = a->ndim == 3 ? a->shape[0] : 1, bb = b->ndim == 3 ? b->shape[0] : 1;
  const int64_t batch = ba > bb ? ba : bb;
  if (ba != batch && ba != 1) {
    return opsi_fail(OPS_ERR_SHAPE_MISMATCH, "%s: a: axis 0 (batch): expected 1 or %lld (b's batch), got %lld",
                     v->fn, (long long)batch, (long long)ba);
  }
  if (bb != batch && bb != 1) {
    return opsi_fail(OPS_ERR_SHAPE_MISMATCH, "%s: b: axis 0 (batch): expected 1 or %lld (a's batch), got %lld",
                     v->fn, (long long)batch, (long long)bb);
  }
  if (d->ndim == 3 || batch != 1) {
    const int64_t d_shape[3] = {batch, m, n};
    OPSI_TRY(opsi_check_shape(v, "d", d, 3, d_shape, "[batch, M, N] from a and b"));
  } else {
    const int64_t d_shape[2] = {m, n};
    OPSI_TRY(opsi_check_shape(v, "d", d, 2, d_shape, "[M, N] from a and b"));
  }

  memset(g, 0, sizeof *g);
  if (p.c != NULL) OPSI_TRY(epilogue_operand(v, "params->c", p.c, d, batch, &g->c));
  if (p.bias != NULL) OPSI_TRY(epilogue_operand(v, "params->bias", p.bias, d, batch, &g->bias));
  if (p.residual != NULL) OPSI_TRY(epilogue_operand(v, "params->residual", p.residual, d, batch, &g->residual));

  const opsi_operand operands[] = {
      {"a", a, 0, {NULL, NULL}},
      {"b", b, 0, {NULL, NULL}},
      {"params->c", p.c, 0, {NULL, NULL}},
      {"params->bias", p.bias, 0, {NULL, NULL}},
      {"params->residual", p.residual, 0, {NULL, NULL}},
      {"d", d, 1, {p.c, p.residual}},
  };
  OPSI_TRY(opsi_check_aliasing(v, operands, (int)(sizeof operands / sizeof operands[0])));

  g->a = as_batched(a, batch);
  g->b = as_batched(b, batch);
  g->d = as_batched(d, batch);
  g->has_c = p.c != NULL;
  g->has_bias = p.bias != NULL;
  g->has_residual = p.residual != NULL;
  g->alpha = p.alpha;
  g->beta = p.beta;
  g->activation = p.activation;
  g->batch = batch, g->m = m, g->n = n, g->k = k;

  opsi_problem_init(pr, OPS_OP_GEMM, v->handle);
  pr->dtype = a->dtype;
  pr->out_dtype = d->dtype;
  pr->variant = p.activation;
  pr->dims[OPSI_GEMM_BATCH] = batch;
  pr->dims[OPSI_GEMM_M] = m;
  pr->dims[OPSI_GEMM_N] = n;
  pr->dims[OPSI_GEMM_K] = k;
  if (g->has_bias) pr->flags |= OPSI_F_BIAS;
  if (g->has_residual) pr->flags |= OPSI_F_RESIDUAL;
  if (g->has_c) pr->flags |= OPSI_F_BETA_C;
  if (batch > 1) pr->flags |= OPSI_F_BATCHED;
  pr->extra[0] = opsi_gemm_sm90_d_tma(g);
  /* A and B may be either major (transposes through strides); D's rows must be unit-stride. */
  const int na = a->ndim, nb = b->ndim;
  if ((!unit_inner(a, na - 1) && !unit_inner(a, na - 2)) ||
      (!unit_inner(b, nb - 1) && !unit_inner(b, nb - 2)) || !unit_inner(d, d->ndim - 1)) {
    pr->flags |= OPSI_F_STRIDED;
  }
  /* The Hopper rows' TMA maps and the vector loads of the others walk A and B forwards: an
   * axis of either stepped backwards makes the call the strided GEMM. */
  if (any_negative_stride(a) || any_negative_stride(b)) pr->flags |= OPSI_F_STRIDED;
  if (!unit_inner(a, na - 1)) pr->flags |= OPSI_F_A_M_MAJOR;
  if (!unit_inner(b, nb - 2)) pr->flags |= OPSI_F_B_N_MAJOR;
  /* problem.align covers A and B, which kernels read by vectors or TMA boxes; D, C, bias and
   * residual are accessed by elements (paired stores where a run-time check allows). */
  add_gemm_align(pr, a);
  add_gemm_align(pr, b);
  *empty = nd == 0;
  return OPS_OK;
}

static ops_status gemm_entry(const opsi_vctx *vc, const ops_gemm_params *params, const ops_tensor *a,
                             const ops_tensor *b, const ops_tensor *d, void *workspace,
                             size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  opsi_gemm_args args;
  opsi_problem pr;
  int empty = 0;
  OPSI_TRY(gemm_prepare(vc, params, a, b, d, &args, &pr, &empty));
  return opsi_finish(vc, &pr, &args, empty, workspace, workspace_bytes);
}

ops_status ops_gemm(ops_handle handle, const ops_gemm_params *params, const ops_tensor *a,
                    const ops_tensor *b, const ops_tensor *d, void *workspace,
                    size_t workspace_bytes) {
  const opsi_vctx vc = {"ops_gemm", handle, OPSI_RUN, NULL, NULL};
  return gemm_entry(&vc, params, a, b, d, workspace, workspace_bytes);
}

ops_status ops_gemm_workspace_size(ops_handle handle, const ops_gemm_params *params,
                                   const ops_tensor *a, const ops_tensor *b, const ops_tensor *d,
                                   size_t *bytes) {
  const opsi_vctx vc = {"ops_gemm_workspace_size", handle, OPSI_QUERY_WORKSPACE, bytes, NULL};
  return gemm_entry(&vc, params, a, b, d, NULL, 0);
}

ops_status ops_gemm_explain(ops_handle handle, const ops_gemm_params *params, const ops_tensor *a,
                            const ops_tensor *b, const ops_tensor *d, ops_explain *out) {
  const opsi_vctx vc = {"ops_gemm_explain", handle, OPSI_EXPLAIN, NULL, out};
  return gemm_entry(&vc, params, a, b, d, NULL, 0);
}
