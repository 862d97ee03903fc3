/*
 * ops_reduce on the CPU backend: hand-checked reductions and the documented empty-axis
 * identities, then random problems (0 to 5 axes, any subset reduced, keepdim, any
 * strides, f32 or input-typed output) against the naive formulation below, which walks x
 * once and scatters each element into its output slot.
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

static void reduce_f32(int op, uint32_t axes, int keepdim, const float *x, int xnd, const int64_t *xs,
                       float *y, int ynd, const int64_t *ys) {
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, (void *)x, OPS_DTYPE_F32, ops_device_cpu(), xnd, xs, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), ynd, ys, NULL));
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.op = op;
  p.axes = axes;
  p.keepdim = keepdim;
  OPST_OK(ops_reduce(g_h, &p, &tx, &ty, NULL, 0));
}

static void golden_reductions(void **state) {
  (void)state;
  const float x[6] = {1, 2, 3, 4, 5, -6};
  const int64_t xs[2] = {2, 3}, row[1] = {2}, col[1] = {3}, kept[2] = {2, 1};
  float y[3];
  reduce_f32(OPS_REDUCE_SUM, 1u << 1, 0, x, 2, xs, y, 1, row);
  assert_true(y[0] == 6 && y[1] == 3);
  reduce_f32(OPS_REDUCE_MAX, 1u << 0, 0, x, 2, xs, y, 1, col);
  assert_true(y[0] == 4 && y[1] == 5 && y[2] == 3);
  reduce_f32(OPS_REDUCE_MIN, 1u << 1, 1, x, 2, xs, y, 2, kept);
  assert_true(y[0] == 1 && y[1] == -6);
  reduce_f32(OPS_REDUCE_MEAN, OPS_REDUCE_ALL_AXES, 0, x, 2, xs, y, 0, NULL);
  assert_float_equal(y[0], 9.0 / 6.0, 1e-7);
  /* reducing an axis of extent 0: the identities (mean is 0 / 0) */
  const int64_t empty[2] = {2, 0};
  const float none[1] = {0};
  reduce_f32(OPS_REDUCE_SUM, 1u << 1, 0, none, 2, empty, y, 1, row);
  assert_true(y[0] == 0 && y[1] == 0);
  reduce_f32(OPS_REDUCE_MAX, 1u << 1, 0, none, 2, empty, y, 1, row);
  assert_true(isinf(y[0]) && y[0] < 0);
  reduce_f32(OPS_REDUCE_MIN, 1u << 1, 0, none, 2, empty, y, 1, row);
  assert_true(isinf(y[0]) && y[0] > 0);
  reduce_f32(OPS_REDUCE_MEAN, 1u << 1, 0, none, 2, empty, y, 1, row);
  assert_true(isnan(y[0]));
  /* no axes: a copy; NaN propagates through max */
  const float withnan[3] = {1, NAN, 3};
  reduce_f32(OPS_REDUCE_MAX, 1u << 0, 0, withnan, 1, col, y, 0, NULL);
  assert_true(isnan(y[0]));
  reduce_f32(OPS_REDUCE_SUM, 0, 0, x, 1, col, y, 1, col);
  assert_true(y[0] == 1 && y[2] == 3);
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int32_t ydt = opst_chance(r, 0.4) ? OPS_DTYPE_F32 : dt;
  const int op = (int)opst_int(r, 0, 3);
  const int ndim = (int)opst_int(r, 0, 5);
  int64_t xs[OPS_MAX_DIMS], ys[OPS_MAX_DIMS];
  for (int i = 0; i < ndim; ++i) xs[i] = opst_int(r, opst_chance(r, 0.04) ? 0 : 1, 6);
  uint32_t axes = (uint32_t)opst_int(r, 0, (1 << ndim) - 1);
  const int all = opst_chance(r, 0.15);
  if (all) axes = (1u << ndim) - 1;
  const int keepdim = opst_chance(r, 0.4);
  int ynd = 0;
  for (int i = 0; i < ndim; ++i) {
    if (axes & (1u << i)) {
      if (keepdim) ys[ynd++] = 1;
    } else {
      ys[ynd++] = xs[i];
    }
  }
  opst_tensor x, y;
  opst_alloc_any(&x, r, dt, ndim, xs);
  opst_fill_uniform(&x, r, -4, 4);
  opst_alloc_any(&y, r, ydt, ynd, ys);
  /* scatter: every x element into its output slot */
  const int64_t nx = opst_numel(&x), ny = opst_numel(&y);
  double *ref = calloc((size_t)ny + 1, sizeof(double));
  int64_t *count = calloc((size_t)ny + 1, sizeof(int64_t));
  for (int64_t e = 0; e < ny; ++e) ref[e] = op == OPS_REDUCE_MAX ? -INFINITY : op == OPS_REDUCE_MIN ? INFINITY : 0;
  int64_t idx[OPS_MAX_DIMS] = {0};
  for (int64_t e = 0; e < nx; ++e) {
    int64_t slot = 0;
    for (int i = 0; i < ndim; ++i) {
      if (axes & (1u << i)) continue;
      slot = slot * xs[i] + idx[i];
    }
    const double v = opst_at(&x, idx);
    if (op == OPS_REDUCE_MAX) ref[slot] = fmax(ref[slot], v);
    else if (op == OPS_REDUCE_MIN) ref[slot] = fmin(ref[slot], v);
    else ref[slot] += v;
    ++count[slot];
    opst_next_index(ndim, xs, idx);
  }
  if (op == OPS_REDUCE_MEAN) for (int64_t e = 0; e < ny; ++e) ref[e] /= (double)count[e];
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.op = op;
  p.axes = all && opst_chance(r, 0.5) ? OPS_REDUCE_ALL_AXES : axes;
  p.keepdim = keepdim;
  size_t ws = 7;
  OPST_OK(ops_reduce_workspace_size(g_h, &p, &x.t, &y.t, &ws));
  assert_int_equal(ws, 0);
  OPST_OK(ops_reduce(g_h, &p, &x.t, &y.t, NULL, 0));
  char why[256];
  if (!opst_fully_written(&y, why, sizeof why) ||
      !opst_check_close(&y, ref, opst_rtol(ydt), opst_atol(ydt), why, sizeof why)) {
    print_error("case %d (%s->%s op=%d ndim=%d axes=0x%x keepdim=%d): %s\n", iter, ops_dtype_name((ops_dtype)dt),
                ops_dtype_name((ops_dtype)ydt), op, ndim, axes, keepdim, why);
    fail();
  }
  assert_true(opst_untouched(&x));
  free(ref);
  free(count);
  opst_free(&x), opst_free(&y);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 300; ++i) random_case(i);
}

/* Last: every feature the capability rows of this test's kernels claim was exercised. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:reduce_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("reduce"));
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
      cmocka_unit_test(golden_reductions),
      cmocka_unit_test(random_problems),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("reduce_cpu", tests, setup, teardown);
}
