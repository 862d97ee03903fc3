/* gpu_ops_test: the reductions against the CPU reference (tests/support/gpu_call.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_ops.h"
#include "tests/support/gpu_call.h"
#include "tests/support/opst.h"

/* ---- reductions -------------------------------------------------------------------- */

static ops_status run_reduce(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  if (ex) return ops_reduce_explain(h, &c->reduce, &c->v[0], &c->v[1], ex);
  return q ? ops_reduce_workspace_size(h, &c->reduce, &c->v[0], &c->v[1], q)
           : ops_reduce(h, &c->reduce, &c->v[0], &c->v[1], ws, wsb);
}

static void reduce_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  int nd;
  int64_t s[4];
  /* every 4th case reduces the rows of [R, K], every 4th the columns; some are large */
  const int big = iter % 4 == 0 ? 1 : iter % 4 == 1 ? 2 : 0;
  if (big == 1) {
    nd = 2, s[0] = opst_int(r, 1, 40), s[1] = opst_chance(r, 0.5) ? opst_int(r, 10000, 70000) : opst_int(r, 1, 3000);
  } else if (big == 2) {
    nd = 2, s[0] = opst_chance(r, 0.5) ? opst_int(r, 1000, 9000) : opst_int(r, 1, 500), s[1] = opst_int(r, 1, 300);
    /* wide and tall enough for the sm_90 cluster kernel (>= 4096 columns, >= 1024 rows), in the
     * padded (iter % 16 == 1) and keepdim (== 5) classes below and one more */
    if (iter % 16 == 1 || iter % 16 == 5 || iter % 32 == 9) s[0] = opst_int(r, 1024, 1600), s[1] = opst_int(r, 4096, 4700);
  } else {
    nd = (int)opst_int(r, 1, 4);
    for (int i = 0; i < nd; ++i) s[i] = opst_int(r, opst_chance(r, 0.03) ? 0 : 1, nd == 1 ? 5000 : 40);
  }
  /* every 16th row or column case is padded with whole vectors: the strided input of the vec16 kernels */
  const int padded_vec = big != 0 && iter % 16 < 2;
  if (padded_vec) g_layout = 1;
  /* and every 16th row or column case keeps the reduced dim on the vec16 kernels, whatever the
   * draws (feature coverage must not depend on the seed) */
  const int keep_vec = iter % 16 == 4 || iter % 16 == 5;
  if (keep_vec) g_layout = 0;
  if (iter % 16 == 4) s[0] = 1; /* the [R, 1] output's rows are 16-byte aligned only for R == 1 */
  if (padded_vec || keep_vec || opst_chance(r, 0.5)) s[nd - 1] = (s[nd - 1] + 7) / 8 * 8; /* whole 16-byte vectors per row */
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_REDUCE;
  c.run = run_reduce;
  ops_reduce_params_init(&c.reduce);
  c.reduce.op = (int32_t)opst_int(r, 0, 3);
  c.reduce.keepdim = keep_vec || opst_chance(r, 0.3);
  uint32_t axes = 0;
  if (!padded_vec && !keep_vec && opst_chance(r, 0.15)) {
    axes = OPS_REDUCE_ALL_AXES;
  } else if (big == 1) {
    axes = 2;
  } else if (big == 2) {
    axes = 1;
  } else {
    for (int i = 0; i < nd; ++i) axes |= opst_chance(r, 0.5) ? 1u << i : 0u;
    if (axes == 0) axes = 1u << opst_int(r, 0, nd - 1);
  }
  c.reduce.axes = axes;
  int64_t ys[4];
  int ynd = 0;
  for (int i = 0; i < nd; ++i) {
    if (axes & (1u << i)) {
      if (c.reduce.keepdim) ys[ynd++] = 1;
    } else {
      ys[ynd++] = s[i];
    }
  }
  opst_tensor x, y, xa;
  alloc_x(&x, dt, nd, s);
  opst_fill_uniform(&x, r, -2, 2);
  const int32_t ydt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
  alloc_x(&y, ydt, ynd, ys);
  add_tensor(&c, &x, IN, -1);
  add_tensor(&c, &y, OUT, -1);
  /* the error scale of sum and mean: the same reduction of |x| */
  double *scale = NULL;
  if (c.reduce.op == OPS_REDUCE_SUM || c.reduce.op == OPS_REDUCE_MEAN) {
    opst_alloc(&xa, r, dt, nd, s, OPST_CONTIGUOUS);
    const int64_t n = opst_numel(&x);
    for (int64_t i = 0; i < n; ++i) opst_set_flat(&xa, i, fabs(opst_at_flat(&x, i)));
    opst_tensor sa;
    opst_alloc(&sa, r, OPS_DTYPE_F32, ynd, ys, OPST_CONTIGUOUS);
    OPST_OK(ops_reduce(g_cpu, &c.reduce, &xa.t, &sa.t, NULL, 0));
    const int64_t m = opst_numel(&sa);
    scale = calloc((size_t)m + 1, sizeof(double));
    for (int64_t i = 0; i < m; ++i) scale[i] = isfinite(opst_at_flat(&sa, i)) ? opst_at_flat(&sa, i) : 0.0;
    opst_free(&sa);
    opst_free(&xa);
  }
  c.scale[1] = scale;
  c.no_l2[1] = 1;
  char label[160];
  snprintf(label, sizeof label, "reduce case %d %s op %d axes 0x%x keepdim %d, %d-d x of %lld -> %s", iter,
           ops_dtype_name((ops_dtype)dt), c.reduce.op, axes, c.reduce.keepdim, nd, (long long)opst_numel(&x),
           ops_dtype_name((ops_dtype)ydt));
  c.label = label;
  check_call(&c);
  free(scale);
  free_call(&c);
}

void reductions(void **state) {
  (void)state;
  for (int i = 0; i < 120; ++i) reduce_case(i);
}
