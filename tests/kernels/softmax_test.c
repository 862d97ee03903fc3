/*
 * ops_softmax on the CPU backend: hand-checked rows (including a row of -inf), then
 * random problems (any leading shape and strides, rows of 1 to 129, scales, -inf
 * entries, in place) against exp(s - logsumexp(s)) computed below.
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
  float x[6] = {1, 2, 3, -INFINITY, -INFINITY, -INFINITY}, y[6];
  const int64_t s[2] = {2, 3};
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 2, s, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 2, s, NULL));
  OPST_OK(ops_softmax(g_h, NULL, &tx, &ty, NULL, 0));
  assert_float_equal(y[0], 0.09003057317038046, 1e-7);
  assert_float_equal(y[1], 0.24472847105479764, 1e-7);
  assert_float_equal(y[2], 0.6652409557748219, 1e-7);
  assert_true(y[3] == 0 && y[4] == 0 && y[5] == 0); /* a row of -inf gives zeros, not NaN */
  ops_softmax_params p;
  ops_softmax_params_init(&p);
  p.scale = 0.5f;
  OPST_OK(ops_softmax(g_h, &p, &tx, &tx, NULL, 0)); /* in place */
  assert_float_equal(x[0], exp(-1.0) / (exp(-1.0) + exp(-0.5) + 1), 1e-7);
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  static const int64_t cols_choice[] = {1, 2, 3, 7, 16, 17, 64, 65, 129};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int nd = (int)opst_int(r, 1, 4);
  int64_t shape[4];
  for (int i = 0; i < nd - 1; ++i) shape[i] = opst_int(r, opst_chance(r, 0.05) ? 0 : 1, 4);
  shape[nd - 1] = cols_choice[opst_int(r, 0, 8)];
  const int64_t n = shape[nd - 1];
  int64_t rows = 1;
  for (int i = 0; i < nd - 1; ++i) rows *= shape[i];
  ops_softmax_params p;
  ops_softmax_params_init(&p);
  if (opst_chance(r, 0.5)) p.scale = (float)opst_uniform(r, 0.05, 4.0);
  const int in_place = opst_chance(r, 0.3);
  opst_tensor x, y;
  opst_alloc_any(&x, r, dt, nd, shape);
  opst_fill_uniform(&x, r, -8, 8);
  for (int64_t i = 0; i < opst_numel(&x); ++i) {
    if (opst_chance(r, 0.1)) opst_set_flat(&x, i, -INFINITY);
  }
  opst_snapshot(&x);
  double *ref = calloc((size_t)(rows * n) + 1, sizeof(double));
  for (int64_t row = 0; row < rows; ++row) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mx = fmax(mx, p.scale * opst_at_flat(&x, row * n + j));
    double sum = 0;
    for (int64_t j = 0; j < n && mx > -INFINITY; ++j) sum += exp(p.scale * opst_at_flat(&x, row * n + j) - mx);
    const double lse = mx + log(sum);
    for (int64_t j = 0; j < n; ++j) {
      ref[row * n + j] = mx > -INFINITY ? exp(p.scale * opst_at_flat(&x, row * n + j) - lse) : 0.0;
    }
  }
  if (in_place) {
    y = x;
  } else {
    opst_alloc_any(&y, r, dt, nd, shape);
  }
  OPST_OK(ops_softmax(g_h, &p, &x.t, &y.t, NULL, 0));
  char why[256];
  /* exp(s - lse) and exp(s - max) / sum differ by a few double roundings: far below dtype */
  if (!opst_fully_written(&y, why, sizeof why) ||
      !opst_check_close(&y, ref, opst_rtol(dt) + 1e-12, opst_atol(dt), why, sizeof why)) {
    print_error("case %d (%s nd=%d rows=%lld n=%lld scale=%g%s): %s\n", iter, ops_dtype_name((ops_dtype)dt), nd,
                (long long)rows, (long long)n, (double)p.scale, in_place ? " in place" : "", why);
    fail();
  }
  if (!in_place) {
    assert_true(opst_untouched(&x));
    opst_free(&y);
  }
  free(ref);
  opst_free(&x);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 200; ++i) random_case(i);
}

/* Last: every feature the capability rows of this test's kernels claim was exercised. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:softmax_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("softmax"));
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
  return cmocka_run_group_tests_name("softmax_cpu", tests, setup, teardown);
}
