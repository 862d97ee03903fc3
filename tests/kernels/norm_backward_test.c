/*
 * The backward ops on the CPU backend: ops_layernorm_backward, ops_rmsnorm_backward and
 * ops_softmax_backward, over random problems (any leading shape and strides, rows of 1 to
 * 129, f32 or x-typed weights, optional dweight / dbias of either dtype, dx in place on
 * dy). The reference multiplies dy by the full Jacobian of the forward, built here from
 * the statistics this test computes itself in double:
 *   LayerNorm  dy_j/dx_i = w_j r (delta_ij - 1/N - xhat_i xhat_j / N)
 *   RMSNorm    dy_j/dx_i = w_j r (delta_ij - xhat_i xhat_j / N)
 *   softmax    dy_j/dx_i = s y_j (delta_ij - y_i)
 * where the library uses the reduced closed forms; dweight and dbias are sums over rows.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/coverage.h"
#include "tests/support/opst.h"

static ops_handle g_h;
static opst_rng g_rng;

/* |out - ref| <= rtol |ref| + atol, atol relative to `mx`: the largest sum of the
 * magnitudes of the pieces the result is made of before they cancel. */
static void check(const opst_tensor *t, const double *ref, double mx, int32_t dt, const char *what, int iter) {
  char why[256];
  if (!opst_fully_written(t, why, sizeof why) ||
      !opst_check_close(t, ref, opst_rtol(dt) + 1e-6, 1e-6 * mx + opst_atol(dt), why, sizeof why)) {
    print_error("case %d, %s: %s\n", iter, what, why);
    fail();
  }
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  static const int64_t cols_choice[] = {1, 2, 3, 7, 16, 17, 64, 65, 129};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int kind = (int)opst_int(r, 0, 2); /* layernorm, rmsnorm, softmax */
  const int nd = (int)opst_int(r, 1, 4);
  int64_t shape[4];
  for (int i = 0; i < nd - 1; ++i) shape[i] = opst_int(r, opst_chance(r, 0.05) ? 0 : 1, 4);
  const int64_t n = cols_choice[opst_int(r, 0, 8)];
  shape[nd - 1] = n;
  opst_tensor dy, x, w, mean, rstd, dx, dw, db;
  opst_alloc_any(&dy, r, dt, nd, shape);
  opst_fill_uniform(&dy, r, -1, 1);
  opst_alloc_any(&x, r, dt, nd, shape);
  opst_fill_uniform(&x, r, -2, 2);
  const int64_t total = opst_numel(&x), rows = n > 0 ? total / n : 0;
  const int in_place = opst_chance(r, 0.25);
  if (in_place) {
    dx = dy;
  } else {
    opst_alloc_any(&dx, r, dt, nd, shape);
  }
  double *ref = calloc((size_t)total + 1, sizeof(double));
  double *rdw = calloc((size_t)n + 1, sizeof(double)), *rdb = calloc((size_t)n + 1, sizeof(double));
  double *v = calloc((size_t)n, sizeof(double)), *g = calloc((size_t)n, sizeof(double));
  double *adw = calloc((size_t)n + 1, sizeof(double)), *adb = calloc((size_t)n + 1, sizeof(double));
  double mx_dx = 0.0, mx_dw = 0.0, mx_db = 0.0;
  int has_dw = 0, has_db = 0;
  const double eps = opst_chance(r, 0.5) ? 1e-5 : 0.1;
  const float scale = (float)opst_uniform(r, 0.2, 2.0);
  if (kind == 2) {
    /* y: a softmax row in double, stored in x */
    for (int64_t row = 0; row < rows; ++row) {
      double m = -INFINITY, s = 0.0;
      for (int64_t j = 0; j < n; ++j) m = fmax(m, scale * opst_at_flat(&x, row * n + j));
      for (int64_t j = 0; j < n; ++j) s += exp(scale * opst_at_flat(&x, row * n + j) - m);
      for (int64_t j = 0; j < n; ++j) opst_set_flat(&x, row * n + j, exp(scale * opst_at_flat(&x, row * n + j) - m) / s);
    }
    opst_snapshot(&x);
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t i = 0; i < n; ++i) {
        const double yi = opst_at_flat(&x, row * n + i);
        double acc = 0.0, mag = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const double yj = opst_at_flat(&x, row * n + j);
          const double dsy = opst_at_flat(&dy, row * n + j) * (double)scale * yj;
          acc += dsy * ((i == j) - yi);
          mag += fabs(dsy) * ((i == j) + yi);
        }
        ref[row * n + i] = acc;
        mx_dx = fmax(mx_dx, mag);
      }
    }
    ops_softmax_params p;
    ops_softmax_params_init(&p);
    p.scale = scale;
    OPST_OK(ops_softmax_backward(g_h, &p, &dy.t, &x.t, &dx.t, NULL, 0));
  } else {
    const int32_t wdt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
    opst_alloc_any(&w, r, wdt, 1, &n);
    opst_fill_uniform(&w, r, 0.5, 1.5);
    opst_alloc_any(&mean, r, OPS_DTYPE_F32, nd - 1, shape);
    opst_alloc_any(&rstd, r, OPS_DTYPE_F32, nd - 1, shape);
    for (int64_t row = 0; row < rows; ++row) {
      double mu = 0.0, var = 0.0;
      for (int64_t j = 0; j < n; ++j) v[j] = opst_at_flat(&x, row * n + j);
      if (kind == 0) {
        for (int64_t j = 0; j < n; ++j) mu += v[j];
        mu /= (double)n;
      }
      for (int64_t j = 0; j < n; ++j) var += (v[j] - mu) * (v[j] - mu);
      /* the forward saves the statistics in f32, and the backward's contract is the derivative
         at those: the reference uses the same rounded values (a near-constant row magnifies
         the rounding of its mean by rstd^2, past any fixed tolerance) */
      mu = (double)(float)mu;
      const double rs = (double)(float)(1.0 / sqrt(var / (double)n + eps));
      opst_set_flat(&mean, row, mu);
      opst_set_flat(&rstd, row, rs);
      for (int64_t j = 0; j < n; ++j) {
        g[j] = (v[j] - mu) * rs; /* xhat */
        rdw[j] += opst_at_flat(&dy, row * n + j) * g[j];
        rdb[j] += opst_at_flat(&dy, row * n + j);
        adw[j] += fabs(opst_at_flat(&dy, row * n + j) * g[j]);
        adb[j] += fabs(opst_at_flat(&dy, row * n + j));
      }
      for (int64_t i = 0; i < n; ++i) {
        double acc = 0.0, mag = 0.0;
        for (int64_t j = 0; j < n; ++j) {
          const double jac = opst_at_flat(&w, j) * rs *
                             ((i == j) - (kind == 0 ? 1.0 / (double)n : 0.0) - g[i] * g[j] / (double)n);
          acc += opst_at_flat(&dy, row * n + j) * jac;
          mag += fabs(opst_at_flat(&dy, row * n + j) * opst_at_flat(&w, j) * rs) *
                 ((i == j) + 1.0 / (double)n + fabs(g[i] * g[j]) / (double)n);
        }
        ref[row * n + i] = acc;
        mx_dx = fmax(mx_dx, mag);
      }
    }
    opst_snapshot(&mean);
    opst_snapshot(&rstd);
    ops_norm_backward_params p;
    ops_norm_backward_params_init(&p);
    if ((has_dw = opst_chance(r, 0.6))) {
      opst_alloc_any(&dw, r, opst_chance(r, 0.5) ? wdt : OPS_DTYPE_F32, 1, &n);
      p.dweight = &dw.t;
    }
    if ((has_db = opst_chance(r, 0.5))) {
      opst_alloc_any(&db, r, opst_chance(r, 0.5) ? wdt : OPS_DTYPE_F32, 1, &n);
      p.dbias = &db.t;
    }
    OPST_OK(kind == 0 ? ops_layernorm_backward(g_h, &p, &dy.t, &x.t, &w.t, &mean.t, &rstd.t, &dx.t, NULL, 0)
                      : ops_rmsnorm_backward(g_h, &p, &dy.t, &x.t, &w.t, &rstd.t, &dx.t, NULL, 0));
    assert_true(opst_untouched(&w));
    assert_true(opst_untouched(&mean));
    assert_true(opst_untouched(&rstd));
    for (int64_t j = 0; j < n; ++j) mx_dw = fmax(mx_dw, adw[j]), mx_db = fmax(mx_db, adb[j]);
    if (has_dw) check(&dw, rdw, mx_dw, dw.t.dtype, "dweight", iter);
    if (has_db) check(&db, rdb, mx_db, db.t.dtype, "dbias", iter);
  }
  /* the statistics pass through f32: compare dx with that rounding allowed for */
  check(&dx, ref, mx_dx, dt, kind == 2 ? "softmax dx" : kind ? "rmsnorm dx" : "layernorm dx", iter);
  assert_true(opst_untouched(&x));
  if (!in_place) assert_true(opst_untouched(&dy));
  free(ref), free(rdw), free(rdb), free(adw), free(adb), free(v), free(g);
  opst_free(&dy), opst_free(&x);
  if (!in_place) opst_free(&dx);
  if (kind != 2) opst_free(&w), opst_free(&mean), opst_free(&rstd);
  if (has_dw) opst_free(&dw);
  if (has_db) opst_free(&db);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 240; ++i) random_case(i);
}

static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:norm_backward_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("norm_backward"));
  opst_coverage_start(g_h);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ops_handle_destroy(g_h);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_problems),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("norm_backward_cpu", tests, setup, teardown);
}
