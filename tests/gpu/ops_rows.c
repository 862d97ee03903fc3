/* gpu_ops_test: LayerNorm, RMSNorm and softmax, forward and backward against the CPU reference (tests/support/gpu_call.h). */
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

/* ---- row-wise ops: LayerNorm, RMSNorm, softmax, forward --------------------------- */

static ops_status run_norm(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 x, 1 weight, 2 y, then optional: 3 bias, 4 residual, 5 residual_out, 6 mean, 7 rstd */
  ops_norm_params p = c->norm;
  p.bias = c->has[3] ? &c->v[3] : NULL;
  p.residual = c->has[4] ? &c->v[4] : NULL;
  p.residual_out = c->has[5] ? &c->v[5] : NULL;
  p.mean_out = c->has[6] ? &c->v[6] : NULL;
  p.rstd_out = c->has[7] ? &c->v[7] : NULL;
  if (ex) {
    return c->op == OPS_OP_LAYERNORM ? ops_layernorm_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], ex)
                                     : ops_rmsnorm_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], ex);
  }
  if (c->op == OPS_OP_LAYERNORM) {
    return q ? ops_layernorm_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], q)
             : ops_layernorm(h, &p, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
  }
  return q ? ops_rmsnorm_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], q)
           : ops_rmsnorm(h, &p, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
}

static ops_status run_softmax(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  if (ex) return ops_softmax_explain(h, &c->softmax, &c->v[0], &c->v[1], ex);
  return q ? ops_softmax_workspace_size(h, &c->softmax, &c->v[0], &c->v[1], q)
           : ops_softmax(h, &c->softmax, &c->v[0], &c->v[1], ws, wsb);
}


static const int64_t kSmallCols[] = {1, 8, 17, 64, 100, 256, 1000, 1024};

/* Half the cases have rows a warp holds; half have every optional operand. */
static int64_t pick_case_cols(opst_rng *r, int iter) {
  return (iter / 3) % 2 == 0 ? kSmallCols[opst_int(r, 0, 7)] : pick_cols(r);
}

/* A row case's shape into s: 0..3 leading extents, at most `cells` / cols (and `max_rows`)
 * rows in all, then cols. Returns the number of leading axes. */
static int row_case_shape(opst_rng *r, int64_t cols, int64_t cells, int64_t max_rows, int64_t *s) {
  const int nd = (int)opst_int(r, 0, 3);
  const int64_t fit = cells / cols;
  lead_shape(r, nd, fit > 1 ? (fit < max_rows ? fit : max_rows) : 1, s);
  s[nd] = cols;
  return nd;
}

static void rows_forward_case(int iter) {
  opst_rng *r = &g_rng;
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  const int kind = iter % 3; /* layernorm, rmsnorm, softmax */
  /* four norm cases in twelve have every optional operand on 16-byte rows whatever the draws
   * (feature coverage must not depend on the seed): rows a warp holds, a block holds, or
   * split across blocks */
  const int full_vec = iter % 12 == 0 || iter % 12 == 1 || iter % 12 == 3 || iter % 12 == 4;
  const int64_t cols = !full_vec ? pick_case_cols(r, iter)
                       : iter % 12 < 2 ? 64 << opst_int(r, 0, 4)
                                       : iter % 24 < 12 ? 4096 : 32768;
  const int all = full_vec || opst_chance(r, 0.5);
  pick_layout();
  if (full_vec) g_layout = 0;
  int64_t s[4];
  const int nd = row_case_shape(r, cols, 300000, 257, s);
  gcall c;
  memset(&c, 0, sizeof c);
  char label[160];
  opst_tensor x, w, y, b, res, res_out, mean, rstd;
  alloc_x(&x, dt, nd + 1, s);
  opst_fill_uniform(&x, r, -3, 3);
  if (kind == 2 && opst_chance(r, 0.2)) { /* -inf entries, sometimes a whole row */
    const int64_t n = opst_numel(&x);
    const int whole = opst_chance(r, 0.5);
    for (int64_t i = 0; i < n; ++i) {
      if ((whole && i < cols) || opst_chance(r, 0.05)) opst_set_flat(&x, i, -INFINITY);
    }
    opst_snapshot(&x);
  } else if (kind == 0 && opst_chance(r, 0.3)) { /* a large common offset: the centring must hold */
    const int64_t n = opst_numel(&x);
    for (int64_t i = 0; i < n; ++i) opst_set_flat(&x, i, opst_at_flat(&x, i) + 40.0);
    opst_snapshot(&x);
  }
  const int in_place = opst_chance(r, 0.25);
  if (kind == 2) {
    c.op = OPS_OP_SOFTMAX;
    c.run = run_softmax;
    ops_softmax_params_init(&c.softmax);
    c.softmax.scale = (float)opst_uniform(r, 0.1, 2.0);
    add_tensor(&c, &x, IN, -1);
    if (in_place) clone_tensor(&y, &x);
    else alloc_x(&y, dt, nd + 1, s);
    add_tensor(&c, &y, OUT, in_place ? 0 : -1);
    snprintf(label, sizeof label, "softmax case %d %s %lld rows x %lld%s", iter, ops_dtype_name((ops_dtype)dt),
             (long long)(opst_numel(&x) / cols), (long long)cols, in_place ? " in place" : "");
  } else {
    c.op = kind == 0 ? OPS_OP_LAYERNORM : OPS_OP_RMSNORM;
    c.run = run_norm;
    ops_norm_params_init(&c.norm);
    c.norm.eps = opst_chance(r, 0.5) ? 1e-5f : 1e-2f;
    const int32_t wdt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
    alloc_x(&w, wdt, 1, &cols);
    opst_fill_uniform(&w, r, 0.5, 1.5);
    add_tensor(&c, &x, IN, -1);
    add_tensor(&c, &w, IN, -1);
    if (in_place) clone_tensor(&y, &x);
    else alloc_x(&y, dt, nd + 1, s);
    add_tensor(&c, &y, OUT, in_place ? 0 : -1);
    const int has_b = all || opst_chance(r, 0.5), has_res = all || opst_chance(r, 0.4);
    const int has_ro = has_res && (all || opst_chance(r, 0.6)), ro_in_place = has_ro && opst_chance(r, 0.3);
    const int has_mean = kind == 0 && (all || opst_chance(r, 0.4)), has_rstd = all || opst_chance(r, 0.4);
    if (has_b) {
      alloc_x(&b, wdt, 1, &cols);
      opst_fill_uniform(&b, r, -1, 1);
      add_tensor(&c, &b, IN, -1);
    } else {
      add_absent(&c);
    }
    if (has_res) {
      alloc_x(&res, dt, nd + 1, s);
      opst_fill_uniform(&res, r, -1, 1);
      add_tensor(&c, &res, IN, -1);
    } else {
      add_absent(&c);
    }
    if (has_ro) {
      if (ro_in_place) clone_tensor(&res_out, &res);
      else alloc_x(&res_out, dt, nd + 1, s);
      add_tensor(&c, &res_out, OUT, ro_in_place ? 4 : -1);
    } else {
      add_absent(&c);
    }
    if (has_mean) {
      opst_alloc_any(&mean, r, OPS_DTYPE_F32, nd, s);
      add_tensor(&c, &mean, OUT, -1);
    } else {
      add_absent(&c);
    }
    if (has_rstd) {
      opst_alloc_any(&rstd, r, OPS_DTYPE_F32, nd, s);
      add_tensor(&c, &rstd, OUT, -1);
    } else {
      add_absent(&c);
    }
    snprintf(label, sizeof label, "%s case %d %s %lld rows x %lld%s%s%s%s%s", kind ? "rmsnorm" : "layernorm", iter,
             ops_dtype_name((ops_dtype)dt), (long long)(opst_numel(&x) / cols), (long long)cols,
             in_place ? " in place" : "", has_b ? " bias" : "", has_res ? " residual" : "",
             has_ro ? (ro_in_place ? " residual_out(in place)" : " residual_out") : "",
             has_mean || has_rstd ? " stats" : "");
  }
  /* Error scales of the norm outputs, per row of v = x (+ residual): y = (v - mean) rstd w + b
     cancels in v - mean, so a near-constant row (rstd large) turns the rounding of v (summed
     in f32) and of the mean (a sum of |v|) into an error of (|v| + mean |v|) rstd |w|; the
     mean output (tensor 6) cancels too, its scale is mean |v|. Tensors: 0 x, 1 w, 2 y, 3 b,
     4 residual, 5 residual_out, 6 mean, 7 rstd. */
  double *sy = NULL, *smean = NULL;
  if (kind != 2) {
    const int64_t rows = cols > 0 ? opst_numel(&x) / cols : 0;
    double *v = calloc((size_t)cols + 1, sizeof(double));
    sy = calloc((size_t)(rows * cols) + 1, sizeof(double));
    smean = calloc((size_t)rows + 1, sizeof(double));
    for (int64_t row = 0; row < rows; ++row) {
      double mu = 0.0, var = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        v[j] = opst_at_flat(&x, row * cols + j) + (c.has[4] ? opst_at_flat(&res, row * cols + j) : 0.0);
        mu += kind == 0 ? v[j] : 0.0;
        smean[row] += fabs(v[j]);
      }
      mu /= (double)cols;
      smean[row] /= (double)cols;
      for (int64_t j = 0; j < cols; ++j) var += (v[j] - mu) * (v[j] - mu);
      const double rs = 1.0 / sqrt(var / (double)cols + (double)c.norm.eps);
      for (int64_t j = 0; j < cols; ++j) {
        sy[row * cols + j] = (fabs(v[j]) + smean[row]) * rs * fabs(opst_at_flat(&w, j)) +
                             (c.has[3] ? fabs(opst_at_flat(&b, j)) : 0.0);
      }
    }
    free(v);
    c.scale[2] = sy;
    if (c.has[6]) c.scale[6] = smean;
  }
  c.label = label;
  check_call(&c);
  free(smean);
  free(sy);
  free_call(&c);
}

void rows_forward(void **state) {
  (void)state;
  for (int i = 0; i < 120; ++i) rows_forward_case(i);
}

/* ---- backward ------------------------------------------------------------------- */

static ops_status run_norm_bwd(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 dy, 1 x, 2 weight, 3 mean (layernorm) or absent, 4 rstd, 5 dx, 6 dweight, 7 dbias */
  ops_norm_backward_params p = c->norm_bwd;
  p.dweight = c->has[6] ? &c->v[6] : NULL;
  p.dbias = c->has[7] ? &c->v[7] : NULL;
  if (ex) {
    return c->op == OPS_OP_LAYERNORM_BACKWARD
               ? ops_layernorm_backward_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], &c->v[5], ex)
               : ops_rmsnorm_backward_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[4], &c->v[5], ex);
  }
  if (c->op == OPS_OP_LAYERNORM_BACKWARD) {
    return q ? ops_layernorm_backward_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4],
                                                     &c->v[5], q)
             : ops_layernorm_backward(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], &c->v[5], ws, wsb);
  }
  return q ? ops_rmsnorm_backward_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[4], &c->v[5], q)
           : ops_rmsnorm_backward(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[4], &c->v[5], ws, wsb);
}

static ops_status run_softmax_bwd(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  if (ex) return ops_softmax_backward_explain(h, &c->softmax, &c->v[0], &c->v[1], &c->v[2], ex);
  return q ? ops_softmax_backward_workspace_size(h, &c->softmax, &c->v[0], &c->v[1], &c->v[2], q)
           : ops_softmax_backward(h, &c->softmax, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
}

/* many_rows > 0: a [many_rows, many_cols] norm case in a 16-bit dtype with dweight and dbias,
 * rows enough that every block of the staged kernel walks several batches through its stages. */
static void rows_backward_case(int iter, int64_t many_rows, int64_t many_cols) {
  opst_rng *r = &g_rng;
  const int32_t dt = many_rows > 0 ? (iter % 2 ? OPS_DTYPE_F16 : OPS_DTYPE_BF16) : kDtypes[opst_int(r, 0, 2)];
  const int kind = many_rows > 0 ? iter % 2 : iter % 3; /* layernorm, rmsnorm, softmax */
  /* four norm cases in twelve have every optional operand on 16-byte rows whatever the draws
   * (feature coverage must not depend on the seed): rows a warp holds, a block holds, or
   * split across blocks */
  const int full_vec = many_rows > 0 || iter % 12 == 0 || iter % 12 == 1 || iter % 12 == 3 || iter % 12 == 4;
  /* and six in twelve read every other element (the strided kernels), rows a block holds or
   * streamed */
  const int strided = many_rows == 0 && iter % 12 >= 6;
  const int64_t cols = many_rows > 0  ? many_cols
                       : strided      ? (iter % 12 < 9 ? 1000 : 32768)
                       : !full_vec    ? pick_case_cols(r, iter)
                       : iter % 12 < 2 ? 64 << opst_int(r, 0, 4)
                                       : (const int64_t[]){4096, 16384, 32768}[(iter / 12) % 3];
  const int all = full_vec || opst_chance(r, 0.5);
  pick_layout();
  if (full_vec) g_layout = 0;
  if (strided) g_layout = 3;
  int64_t s[4];
  int nd = 1;
  if (many_rows > 0) s[0] = many_rows, s[1] = cols;
  else nd = row_case_shape(r, cols, 200000, 300, s);
  gcall c;
  memset(&c, 0, sizeof c);
  char label[160];
  opst_tensor dy, x, w, mean, rstd, dx, dw, db;
  alloc_x(&dy, dt, nd + 1, s);
  opst_fill_uniform(&dy, r, -1, 1);
  alloc_x(&x, dt, nd + 1, s);
  opst_fill_uniform(&x, r, -3, 3);
  const int in_place = opst_chance(r, 0.25);
  if (kind == 2) {
    /* y: a real softmax output (the CPU's), stored in x's layout */
    ops_softmax_params_init(&c.softmax);
    c.softmax.scale = (float)opst_uniform(r, 0.2, 2.0);
    OPST_OK(ops_softmax(g_cpu, &c.softmax, &x.t, &x.t, NULL, 0));
    opst_snapshot(&x);
    c.op = OPS_OP_SOFTMAX_BACKWARD;
    c.run = run_softmax_bwd;
    add_tensor(&c, &dy, IN, -1);
    add_tensor(&c, &x, IN, -1);
    if (in_place) clone_tensor(&dx, &dy);
    else alloc_x(&dx, dt, nd + 1, s);
    add_tensor(&c, &dx, OUT, in_place ? 0 : -1);
    snprintf(label, sizeof label, "softmax_backward case %d %s %lld rows x %lld%s", iter,
             ops_dtype_name((ops_dtype)dt), (long long)(opst_numel(&x) / cols), (long long)cols,
             in_place ? " in place" : "");
  } else {
    c.op = kind == 0 ? OPS_OP_LAYERNORM_BACKWARD : OPS_OP_RMSNORM_BACKWARD;
    c.run = run_norm_bwd;
    ops_norm_backward_params_init(&c.norm_bwd);
    const int32_t wdt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
    alloc_x(&w, wdt, 1, &cols);
    opst_fill_uniform(&w, r, 0.5, 1.5);
    /* the statistics the forward saves, from the CPU forward */
    opst_alloc_any(&mean, r, OPS_DTYPE_F32, nd, s);
    opst_alloc_any(&rstd, r, OPS_DTYPE_F32, nd, s);
    opst_tensor y;
    opst_alloc(&y, r, dt, nd + 1, s, OPST_CONTIGUOUS);
    ops_norm_params fp;
    ops_norm_params_init(&fp);
    fp.rstd_out = &rstd.t;
    fp.mean_out = kind == 0 ? &mean.t : NULL;
    OPST_OK(kind == 0 ? ops_layernorm(g_cpu, &fp, &x.t, &w.t, &y.t, NULL, 0)
                      : ops_rmsnorm(g_cpu, &fp, &x.t, &w.t, &y.t, NULL, 0));
    opst_free(&y);
    opst_snapshot(&mean);
    opst_snapshot(&rstd);
    add_tensor(&c, &dy, IN, -1);
    add_tensor(&c, &x, IN, -1);
    add_tensor(&c, &w, IN, -1);
    if (kind == 0) add_tensor(&c, &mean, IN, -1);
    else add_absent(&c);
    add_tensor(&c, &rstd, IN, -1);
    if (in_place) clone_tensor(&dx, &dy);
    else alloc_x(&dx, dt, nd + 1, s);
    add_tensor(&c, &dx, OUT, in_place ? 0 : -1);
    const int has_dw = all || opst_chance(r, 0.6), has_db = all || opst_chance(r, 0.5);
    if (has_dw) {
      opst_alloc_any(&dw, r, opst_chance(r, 0.5) ? wdt : OPS_DTYPE_F32, 1, &cols);
      add_tensor(&c, &dw, OUT, -1);
    } else {
      add_absent(&c);
    }
    if (has_db) {
      opst_alloc_any(&db, r, opst_chance(r, 0.5) ? wdt : OPS_DTYPE_F32, 1, &cols);
      add_tensor(&c, &db, OUT, -1);
    } else {
      add_absent(&c);
    }
    snprintf(label, sizeof label, "%s case %d %s %lld rows x %lld%s%s%s", kind ? "rmsnorm_backward" : "layernorm_backward",
             iter, ops_dtype_name((ops_dtype)dt), (long long)(opst_numel(&x) / cols), (long long)cols,
             in_place ? " in place" : "", has_dw ? " dweight" : "", has_db ? " dbias" : "");
  }
  /* error scales: the magnitudes of the pieces each result sums before they cancel */
  const int64_t total = opst_numel(&x), rows = cols > 0 ? total / cols : 0;
  double *sdx = calloc((size_t)total + 1, sizeof(double));
  double *sdw = calloc((size_t)cols + 1, sizeof(double)), *sdb = calloc((size_t)cols + 1, sizeof(double));
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t o = row * cols;
    double a1 = 0.0, a2 = 0.0;
    const double mu = kind == 0 ? opst_at_flat(&mean, row) : 0.0, rs = kind != 2 ? opst_at_flat(&rstd, row) : 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = opst_at_flat(&dy, o + j), v = opst_at_flat(&x, o + j);
      if (kind == 2) {
        a1 += fabs(d) * v;
      } else {
        const double xh = (v - mu) * rs, gj = d * opst_at_flat(&w, j);
        a1 += fabs(gj), a2 += fabs(gj * xh);
        sdw[j] += fabs(d * xh), sdb[j] += fabs(d);
      }
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double d = opst_at_flat(&dy, o + j), v = opst_at_flat(&x, o + j);
      sdx[o + j] = kind == 2 ? (double)c.softmax.scale * v * (fabs(d) + a1)
                             : rs * (fabs(d * opst_at_flat(&w, j)) + a1 / (double)cols +
                                     fabs((v - mu) * rs) * a2 / (double)cols);
    }
  }
  for (int i = 0; i < c.n; ++i) {
    if (c.h[i] == &dx) c.scale[i] = sdx;
    if (kind != 2 && c.has[i] && c.h[i] == &dw) c.scale[i] = sdw;
    if (kind != 2 && c.has[i] && c.h[i] == &db) c.scale[i] = sdb;
  }
  c.label = label;
  check_call(&c);
  free(sdx), free(sdw), free(sdb);
  if (kind == 1) opst_free(&mean);
  free_call(&c);
}

void rows_backward(void **state) {
  (void)state;
  for (int i = 0; i < 90; ++i) rows_backward_case(i, 0, 0);
  /* the staged kernel (132 blocks on the H100) walks 4 or more batches a block: its stages
     wrap around; 520 columns leave most of a row's threads one vector, lane 0 two */
  rows_backward_case(0, 20000, 64);
  rows_backward_case(1, 600, 16384);
  rows_backward_case(0, 10000, 520);
  rows_backward_case(1, 2400, 4096);
}
