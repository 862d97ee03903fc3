/*
 * The elementwise ops on the CPU backend: hand-checked values of every function, then
 * random problems (outputs of 0 to 5 axes, inputs that broadcast by missing or unit axes,
 * any strides, in place) against the naive formulation below, which maps each output
 * index to each input index by the broadcasting rule itself.
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

static double fn_value(int fn, double x) {
  switch (fn) {
    case OPS_ACT_NONE: return x;
    case OPS_ACT_RELU: return fmax(x, 0);
    case OPS_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case OPS_ACT_GELU_ERF: return x * 0.5 * erfc(-x / sqrt(2.0));
    case OPS_ACT_SILU: return x / (1 + exp(-x));
    case OPS_ACT_SIGMOID: return 0.5 * (1 + tanh(x / 2)); /* = 1 / (1 + e^-x) */
    case OPS_ACT_TANH: return tanh(x);
    case OPS_ACT_EXP: return exp(x);
    case OPS_ACT_NEG: return -x;
    case OPS_ACT_ABS: return fabs(x);
    case OPS_ACT_SIN: return sin(x);
    default: return NAN;
  }
}

static double op_value(int op, double a, double b) {
  switch (op) {
    case OPS_BINARY_ADD: return a + b;
    case OPS_BINARY_SUB: return a - b;
    case OPS_BINARY_MUL: return a * b;
    case OPS_BINARY_DIV: return a / b;
    case OPS_BINARY_MAX: return fmax(a, b);
    case OPS_BINARY_MIN: return fmin(a, b);
    default: return NAN;
  }
}

static void golden_values(void **state) {
  (void)state;
  float x[4] = {0, 1, -1, 2}, y[4];
  const int64_t s[1] = {4};
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  ops_sin_affine_params sp;
  ops_sin_affine_params_init(&sp);
  sp.a = 2;
  sp.b = 1;
  OPST_OK(ops_sin_affine(g_h, &sp, &tx, &ty, NULL, 0));
  assert_float_equal(y[0], sin(1.0), 1e-7);
  assert_float_equal(y[1], sin(3.0), 1e-7);
  assert_float_equal(y[2], sin(-1.0), 1e-7);
  static const struct {
    int fn;
    double at1; /* fn(1), from tables */
  } k[] = {
      {OPS_ACT_RELU, 1.0},
      {OPS_ACT_GELU_TANH, 0.8411919906082768},
      {OPS_ACT_GELU_ERF, 0.8413447460685429},
      {OPS_ACT_SILU, 0.7310585786300049},
      {OPS_ACT_SIGMOID, 0.7310585786300049},
      {OPS_ACT_TANH, 0.7615941559557649},
      {OPS_ACT_EXP, 2.718281828459045},
      {OPS_ACT_NEG, -1.0},
      {OPS_ACT_ABS, 1.0},
      {OPS_ACT_SIN, 0.8414709848078965},
  };
  ops_unary_params up;
  ops_unary_params_init(&up);
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i) {
    up.fn = k[i].fn;
    OPST_OK(ops_unary(g_h, &up, &tx, &ty, NULL, 0));
    assert_float_equal(y[1], k[i].at1, 1e-7);
  }
  /* [2, 1] + [3] broadcasts to [2, 3] */
  float a[2] = {10, 20}, b[3] = {1, 2, 3}, z[6];
  const int64_t as[2] = {2, 1}, bs[1] = {3}, zs[2] = {2, 3};
  ops_tensor ta, tb, tz;
  OPST_OK(ops_tensor_init(&ta, a, OPS_DTYPE_F32, ops_device_cpu(), 2, as, NULL));
  OPST_OK(ops_tensor_init(&tb, b, OPS_DTYPE_F32, ops_device_cpu(), 1, bs, NULL));
  OPST_OK(ops_tensor_init(&tz, z, OPS_DTYPE_F32, ops_device_cpu(), 2, zs, NULL));
  ops_binary_params bp;
  ops_binary_params_init(&bp);
  bp.op = OPS_BINARY_SUB;
  OPST_OK(ops_binary(g_h, &bp, &ta, &tb, &tz, NULL, 0));
  const float want[6] = {9, 8, 7, 19, 18, 17};
  assert_memory_equal(z, want, sizeof want);
}

/* A random shape that broadcasts to y: some leading axes dropped, some extents set to 1. */
static int bcast_shape(opst_rng *r, int ndim, const int64_t *y, int64_t *out) {
  const int nd = opst_chance(r, 0.3) ? (int)opst_int(r, 0, ndim) : ndim;
  for (int i = 0; i < nd; ++i) out[i] = opst_chance(r, 0.3) ? 1 : y[ndim - nd + i];
  return nd;
}

static double at_bcast(const opst_tensor *t, int ndim, const int64_t *idx) {
  int64_t in[OPS_MAX_DIMS];
  const int nd = t->t.ndim;
  for (int i = 0; i < nd; ++i) in[i] = t->t.shape[i] == 1 ? 0 : idx[ndim - nd + i];
  return opst_at(t, in);
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int kind = (int)opst_int(r, 0, 3); /* sin_affine, unary, binary, scale */
  const int ndim = (int)opst_int(r, 0, 5);
  int64_t ys[OPS_MAX_DIMS];
  for (int i = 0; i < ndim; ++i) ys[i] = opst_int(r, opst_chance(r, 0.03) ? 0 : 1, 5);
  opst_tensor in[3], y;
  int has[3] = {0, 0, 0};
  int64_t s[OPS_MAX_DIMS];
  const int nin = kind == 1 || kind == 3 ? 1 : kind == 2 ? 2 : 1 + (int)opst_int(r, 0, 2);
  for (int i = 0; i < nin; ++i) {
    int k = i;
    if (kind == 0 && i > 0) k = nin == 2 ? (int)opst_int(r, 1, 2) : i; /* a and/or b as tensors */
    const int nd = bcast_shape(r, ndim, ys, s);
    opst_alloc_any(&in[k], r, dt, nd, s);
    opst_fill_uniform(&in[k], r, -2, 2);
    if (kind == 2 && k == 1 && opst_chance(r, 0.5)) { /* keep divisors away from 0 */
      for (int64_t e = 0; e < opst_numel(&in[k]); ++e) {
        const double v = opst_at_flat(&in[k], e);
        opst_set_flat(&in[k], e, v < 0 ? v - 0.5 : v + 0.5);
      }
      opst_snapshot(&in[k]);
    }
    has[k] = 1;
  }
  /* in place when the first input already has y's shape */
  int in_place = 0;
  if (in[0].t.ndim == ndim && opst_chance(r, 0.3)) {
    in_place = 1;
    for (int i = 0; i < ndim; ++i) in_place = in_place && in[0].t.shape[i] == ys[i];
  }
  if (in_place) {
    y = in[0];
  } else {
    opst_alloc_any(&y, r, dt, ndim, ys);
  }
  const int fn = kind == 1 ? (int)opst_int(r, 0, OPS_ACT_SIN) : kind == 2 ? (int)opst_int(r, 0, OPS_BINARY_MIN) : 0;
  const double a = opst_uniform(r, -3, 3), b = opst_uniform(r, -3, 3);
  const int64_t n = opst_numel(&y);
  double *ref = calloc((size_t)n + 1, sizeof(double));
  int64_t idx[OPS_MAX_DIMS] = {0};
  for (int64_t e = 0; e < n; ++e) {
    const double x0 = at_bcast(&in[0], ndim, idx);
    if (kind == 0) {
      const double av = has[1] ? at_bcast(&in[1], ndim, idx) : (double)(float)a;
      const double bv = has[2] ? at_bcast(&in[2], ndim, idx) : (double)(float)b;
      ref[e] = sin(av * x0 + bv);
    } else if (kind == 1) {
      ref[e] = fn_value(fn, x0);
    } else if (kind == 3) {
      ref[e] = (double)(float)a * x0;
    } else {
      ref[e] = op_value(fn, x0, at_bcast(&in[1], ndim, idx));
    }
    opst_next_index(ndim, ys, idx);
  }
  ops_status st;
  if (kind == 0) {
    ops_sin_affine_params p;
    ops_sin_affine_params_init(&p);
    p.a = (float)a;
    p.b = (float)b;
    p.a_tensor = has[1] ? &in[1].t : NULL;
    p.b_tensor = has[2] ? &in[2].t : NULL;
    st = ops_sin_affine(g_h, &p, &in[0].t, &y.t, NULL, 0);
  } else if (kind == 1) {
    ops_unary_params p;
    ops_unary_params_init(&p);
    p.fn = fn;
    st = ops_unary(g_h, &p, &in[0].t, &y.t, NULL, 0);
  } else if (kind == 3) {
    ops_scale_params p;
    ops_scale_params_init(&p);
    p.alpha = (float)a;
    st = ops_scale(g_h, &p, &in[0].t, &y.t, NULL, 0);
  } else {
    ops_binary_params p;
    ops_binary_params_init(&p);
    p.op = fn;
    st = ops_binary(g_h, &p, &in[0].t, &in[1].t, &y.t, NULL, 0);
  }
  OPST_OK(st);
  char why[256];
  if (!opst_fully_written(&y, why, sizeof why) || !opst_check_close(&y, ref, opst_rtol(dt), opst_atol(dt), why, sizeof why)) {
    print_error("case %d (%s kind=%d fn=%d ndim=%d inputs=%d%s): %s\n", iter, ops_dtype_name((ops_dtype)dt), kind, fn,
                ndim, nin, in_place ? " in place" : "", why);
    fail();
  }
  for (int k = 0; k < 3; ++k) {
    if (has[k] && !(in_place && k == 0)) assert_true(opst_untouched(&in[k]));
  }
  free(ref);
  for (int k = 0; k < 3; ++k) if (has[k]) opst_free(&in[k]);
  if (!in_place) opst_free(&y);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 300; ++i) random_case(i);
}

/* Last: every feature the capability rows of this test's kernels claim was exercised. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:elementwise_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("elementwise"));
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
      cmocka_unit_test(golden_values),
      cmocka_unit_test(random_problems),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("elementwise_cpu", tests, setup, teardown);
}
