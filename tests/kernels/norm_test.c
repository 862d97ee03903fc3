/*
 * ops_layernorm and ops_rmsnorm on the CPU backend: hand-checked rows, then random
 * problems (any leading shape and strides, rows of 1 to 129, f32 or x-typed weights,
 * optional bias, fused residual add with residual_out in place, y in place on x,
 * saved mean / rstd) against the naive formulation below, which uses Welford's one-pass
 * update for the variance where the library makes two passes.
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

static void golden_rows(void **state) {
  (void)state;
  float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, y[4];
  const int64_t s4[1] = {4};
  ops_tensor tx, tw, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 1, s4, NULL));
  OPST_OK(ops_tensor_init(&tw, w, OPS_DTYPE_F32, ops_device_cpu(), 1, s4, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 1, s4, NULL));
  ops_norm_params p;
  ops_norm_params_init(&p);
  p.eps = 0;
  OPST_OK(ops_layernorm(g_h, &p, &tx, &tw, &ty, NULL, 0));
  /* mean 2.5, variance 1.25 */
  assert_float_equal(y[0], -1.5 / sqrt(1.25), 1e-6);
  assert_float_equal(y[3], 1.5 / sqrt(1.25), 1e-6);
  float x2[2] = {3, 4}, w2[2] = {1, 2}, y2[2];
  const int64_t s2[1] = {2};
  OPST_OK(ops_tensor_init(&tx, x2, OPS_DTYPE_F32, ops_device_cpu(), 1, s2, NULL));
  OPST_OK(ops_tensor_init(&tw, w2, OPS_DTYPE_F32, ops_device_cpu(), 1, s2, NULL));
  OPST_OK(ops_tensor_init(&ty, y2, OPS_DTYPE_F32, ops_device_cpu(), 1, s2, NULL));
  OPST_OK(ops_rmsnorm(g_h, &p, &tx, &tw, &ty, NULL, 0));
  /* rms = sqrt((9 + 16) / 2) */
  assert_float_equal(y2[0], 3 / sqrt(12.5), 1e-6);
  assert_float_equal(y2[1], 2 * 4 / sqrt(12.5), 1e-6);
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  static const int64_t cols_choice[] = {1, 2, 3, 7, 16, 17, 64, 65, 129};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int rms = opst_chance(r, 0.5);
  const int nd = (int)opst_int(r, 1, 4);
  int64_t shape[4];
  for (int i = 0; i < nd - 1; ++i) shape[i] = opst_int(r, opst_chance(r, 0.05) ? 0 : 1, 4);
  shape[nd - 1] = cols_choice[opst_int(r, 0, 8)];
  const int64_t n = shape[nd - 1];
  int64_t rows = 1;
  for (int i = 0; i < nd - 1; ++i) rows *= shape[i];

  ops_norm_params p;
  ops_norm_params_init(&p);
  p.eps = (float)opst_uniform(r, 1e-6, 1e-2);
  const int32_t wdt = opst_chance(r, 0.5) ? OPS_DTYPE_F32 : dt;
  const int use_bias = opst_chance(r, 0.5), use_res = opst_chance(r, 0.5);
  const int use_res_out = use_res && opst_chance(r, 0.6), res_out_in_place = use_res_out && opst_chance(r, 0.5);
  const int y_in_place = opst_chance(r, 0.25);
  const int use_mean = !rms && opst_chance(r, 0.4), use_rstd = opst_chance(r, 0.4);

  opst_tensor x, w, b, y, res, res_out, mean, rstd;
  opst_alloc_any(&x, r, dt, nd, shape);
  opst_fill_uniform(&x, r, -3, 3);
  if (opst_chance(r, 0.3)) { /* an offset row mean, as in real activations */
    for (int64_t i = 0; i < opst_numel(&x); ++i) opst_set_flat(&x, i, opst_at_flat(&x, i) + 5);
    opst_snapshot(&x);
  }
  const int64_t wshape[1] = {n};
  opst_alloc_any(&w, r, wdt, 1, wshape);
  opst_fill_uniform(&w, r, -2, 2);
  if (use_bias) {
    opst_alloc_any(&b, r, wdt, 1, wshape);
    opst_fill_uniform(&b, r, -1, 1);
    p.bias = &b.t;
  }
  if (use_res) {
    opst_alloc_any(&res, r, dt, nd, shape);
    opst_fill_uniform(&res, r, -1, 1);
    p.residual = &res.t;
  }
  /* the naive result, before any in-place output overwrites an input */
  const int64_t total = rows * n;
  double *ry = calloc((size_t)total + 1, sizeof(double)), *rs = calloc((size_t)total + 1, sizeof(double));
  double *rmean = calloc((size_t)rows + 1, sizeof(double)), *rrstd = calloc((size_t)rows + 1, sizeof(double));
  for (int64_t row = 0; row < rows; ++row) {
    double m = 0, m2 = 0, sq = 0;
    for (int64_t j = 0; j < n; ++j) { /* Welford */
      const int64_t at = row * n + j;
      const double s = opst_at_flat(&x, at) + (use_res ? opst_at_flat(&res, at) : 0);
      rs[at] = s;
      const double delta = s - m;
      m += delta / (double)(j + 1);
      m2 += delta * (s - m);
      sq += s * s;
    }
    const double var = rms ? sq / (double)n : m2 / (double)n;
    const double inv = 1 / sqrt(var + (double)p.eps);
    rmean[row] = m;
    rrstd[row] = inv;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t at = row * n + j;
      ry[at] = (rms ? rs[at] : rs[at] - m) * inv * opst_at_flat(&w, j) + (use_bias ? opst_at_flat(&b, j) : 0);
    }
  }
  if (y_in_place) {
    y = x;
  } else {
    opst_alloc_any(&y, r, dt, nd, shape);
  }
  if (use_res_out) {
    if (res_out_in_place) {
      res_out = res;
    } else {
      opst_alloc_any(&res_out, r, dt, nd, shape);
    }
    p.residual_out = &res_out.t;
  }
  if (use_mean) {
    opst_alloc_any(&mean, r, OPS_DTYPE_F32, nd - 1, shape);
    p.mean_out = &mean.t;
  }
  if (use_rstd) {
    opst_alloc_any(&rstd, r, OPS_DTYPE_F32, nd - 1, shape);
    p.rstd_out = &rstd.t;
  }
  const ops_status st = rms ? ops_rmsnorm(g_h, &p, &x.t, &w.t, &y.t, NULL, 0)
                            : ops_layernorm(g_h, &p, &x.t, &w.t, &y.t, NULL, 0);
  OPST_OK(st);
  char why[256];
  int ok = opst_fully_written(&y, why, sizeof why) && opst_check_close(&y, ry, opst_rtol(dt), opst_atol(dt), why, sizeof why);
  if (ok && use_res_out) {
    ok = opst_fully_written(&res_out, why, sizeof why) &&
         opst_check_close(&res_out, rs, opst_rtol(dt), opst_atol(dt), why, sizeof why);
  }
  if (ok && use_mean) ok = opst_check_close(&mean, rmean, 1e-6, 1e-9, why, sizeof why);
  if (ok && use_rstd) ok = opst_check_close(&rstd, rrstd, 1e-6, 1e-9, why, sizeof why);
  if (!ok) {
    print_error("case %d (%s %s nd=%d rows=%lld n=%lld w=%s bias=%d res=%d res_out=%d%s y%s mean=%d rstd=%d): %s\n",
                iter, rms ? "rmsnorm" : "layernorm", ops_dtype_name((ops_dtype)dt), nd, (long long)rows,
                (long long)n, ops_dtype_name((ops_dtype)wdt), use_bias, use_res, use_res_out,
                res_out_in_place ? " in place" : "", y_in_place ? " in place" : "", use_mean, use_rstd, why);
    fail();
  }
  assert_true(opst_untouched(&w));
  if (use_res && !res_out_in_place) assert_true(opst_untouched(&res));
  if (!y_in_place) assert_true(opst_untouched(&x));
  free(ry), free(rs), free(rmean), free(rrstd);
  opst_free(&x), opst_free(&w);
  if (!y_in_place) opst_free(&y);
  if (use_bias) opst_free(&b);
  if (use_res) opst_free(&res);
  if (use_res_out && !res_out_in_place) opst_free(&res_out);
  if (use_mean) opst_free(&mean);
  if (use_rstd) opst_free(&rstd);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 250; ++i) random_case(i);
}

/* Last: every feature the capability rows of this test's kernels claim was exercised. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:norm_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("norm"));
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
      cmocka_unit_test(golden_rows),
      cmocka_unit_test(random_problems),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("norm_cpu", tests, setup, teardown);
}
