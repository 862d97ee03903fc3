/*
 * ops_gemm on the CPU backend: hand-checked products and epilogues, then random problems
 * (odd M, N, K including 1 and 0, batches with broadcast operands, transposes and padding
 * through strides, every epilogue, C and residual in place on D) against the naive
 * formulation below: the product as an i-p-j accumulation, then the epilogue.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/gemm/gemm_shape.h"
#include "opslib/opslib.h"
#include "tests/support/coverage.h"
#include "tests/support/opst.h"

static ops_handle g_h;
static opst_rng g_rng;

static double act(int fn, double x) {
  switch (fn) {
    case OPS_ACT_NONE: return x;
    case OPS_ACT_RELU: return x < 0 ? 0 : x;
    case OPS_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * pow(x, 3))));
    case OPS_ACT_GELU_ERF: return x * 0.5 * erfc(-x / sqrt(2.0));
    case OPS_ACT_SILU: return x * (1 / (1 + exp(-x)));
    case OPS_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case OPS_ACT_TANH: return tanh(x);
    case OPS_ACT_EXP: return exp(x);
    case OPS_ACT_NEG: return -x;
    case OPS_ACT_ABS: return x < 0 ? -x : x;
    case OPS_ACT_SIN: return sin(x);
    default: return NAN;
  }
}

static void golden_small_product_with_epilogues(void **state) {
  (void)state;
  const float a[6] = {1, 2, 3, 4, 5, 6};       /* 2x3 */
  const float b[6] = {1, -1, 0, 2, -2, 0.5f};  /* 3x2 */
  const float bias[2] = {0.5f, -100};
  float d[4];
  const int64_t as[2] = {2, 3}, bs[2] = {3, 2}, ds[2] = {2, 2}, bias_s[1] = {2};
  ops_tensor ta, tb, td, tbias;
  OPST_OK(ops_tensor_init(&ta, (void *)a, OPS_DTYPE_F32, ops_device_cpu(), 2, as, NULL));
  OPST_OK(ops_tensor_init(&tb, (void *)b, OPS_DTYPE_F32, ops_device_cpu(), 2, bs, NULL));
  OPST_OK(ops_tensor_init(&td, d, OPS_DTYPE_F32, ops_device_cpu(), 2, ds, NULL));
  OPST_OK(ops_tensor_init(&tbias, (void *)bias, OPS_DTYPE_F32, ops_device_cpu(), 1, bias_s, NULL));
  OPST_OK(ops_gemm(g_h, NULL, &ta, &tb, &td, NULL, 0));
  /* [1 2 3; 4 5 6] [1 -1; 0 2; -2 0.5] = [-5 4.5; -8 9] */
  assert_float_equal(d[0], -5, 0);
  assert_float_equal(d[1], 4.5, 0);
  assert_float_equal(d[2], -8, 0);
  assert_float_equal(d[3], 9, 0);
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  p.bias = &tbias;
  p.activation = OPS_ACT_RELU;
  p.alpha = 2;
  OPST_OK(ops_gemm(g_h, &p, &ta, &tb, &td, NULL, 0));
  /* relu(2 [-5 4.5; -8 9] + [0.5 -100]) = [0 0; 0 0] except none positive... */
  assert_float_equal(d[0], 0, 0);   /* -9.5 */
  assert_float_equal(d[1], 0, 0);   /* -91 */
  p.activation = OPS_ACT_GELU_ERF;
  p.alpha = 0;
  p.bias = NULL;
  float c[4] = {1, 1, 1, 1};
  ops_tensor tc;
  OPST_OK(ops_tensor_init(&tc, c, OPS_DTYPE_F32, ops_device_cpu(), 2, ds, NULL));
  p.c = &tc;
  p.beta = 1;
  OPST_OK(ops_gemm(g_h, &p, &ta, &tb, &td, NULL, 0));
  assert_float_equal(d[0], 0.8413447460685429, 1e-7); /* GELU(1) */
  p.activation = OPS_ACT_GELU_TANH;
  OPST_OK(ops_gemm(g_h, &p, &ta, &tb, &td, NULL, 0));
  assert_float_equal(d[0], 0.8411919906082768, 1e-7);
  p.activation = OPS_ACT_SILU;
  p.residual = &tc; /* silu(1) + 1 */
  OPST_OK(ops_gemm(g_h, &p, &ta, &tb, &td, NULL, 0));
  assert_float_equal(d[3], 1.7310585786300049, 1e-7);
}

/* A shape that broadcasts to [.., M, N]: per column [N], per row [M, 1], full, batched. */
static int random_epilogue_shape(opst_rng *r, int64_t batch, int64_t m, int64_t n, int64_t *shape) {
  switch (opst_int(r, 0, 3)) {
    case 0: shape[0] = n; return 1;
    case 1: shape[0] = m, shape[1] = 1; return 2;
    case 2: shape[0] = m, shape[1] = n; return 2;
    default: shape[0] = batch, shape[1] = opst_chance(r, 0.5) ? m : 1, shape[2] = n; return 3;
  }
}

static double at_bcast(const opst_tensor *t, int64_t b, int64_t i, int64_t j) {
  const int64_t full[3] = {b, i, j};
  int64_t idx[3];
  const int nd = t->t.ndim;
  for (int a = 0; a < nd; ++a) idx[a] = t->t.shape[a] == 1 ? 0 : full[3 - nd + a];
  return opst_at(t, idx);
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  static const int64_t sizes[] = {0, 1, 2, 3, 5, 7, 8, 13, 16, 17};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int32_t dt_out = opst_chance(r, 0.3) ? OPS_DTYPE_F32 : dt;
  const int64_t m = sizes[opst_int(r, 1, 9)], n = sizes[opst_int(r, 1, 9)];
  const int64_t k = sizes[opst_int(r, opst_chance(r, 0.05) ? 0 : 1, 9)];
  const int64_t batch = opst_chance(r, 0.5) ? 1 : opst_int(r, 2, 3);
  const int a3 = batch > 1 ? !opst_chance(r, 0.25) : opst_chance(r, 0.3);
  const int b3 = batch > 1 ? !a3 || opst_chance(r, 0.75) : opst_chance(r, 0.3);
  const int64_t ab = a3 && (batch > 1 && opst_chance(r, 0.8)) ? batch : 1;
  const int64_t bb = b3 && (batch > 1 && (ab == 1 || opst_chance(r, 0.8))) ? batch : 1;
  const int64_t eff_batch = ab > bb ? ab : bb;
  const int d3 = eff_batch > 1 || opst_chance(r, 0.3);

  opst_tensor a, b, d, c, bias, res;
  const int64_t as[3] = {ab, m, k}, bs[3] = {bb, k, n}, ds[3] = {eff_batch, m, n};
  opst_alloc_any(&a, r, dt, a3 ? 3 : 2, a3 ? as : as + 1);
  opst_alloc_any(&b, r, dt, b3 ? 3 : 2, b3 ? bs : bs + 1);
  opst_alloc_any(&d, r, dt_out, d3 ? 3 : 2, d3 ? ds : ds + 1);
  opst_fill_uniform(&a, r, -1, 1);
  opst_fill_uniform(&b, r, -1, 1);

  ops_gemm_params p;
  ops_gemm_params_init(&p);
  p.alpha = opst_chance(r, 0.5) ? 1.0f : (float)opst_uniform(r, -2, 2);
  p.activation = (int32_t)opst_int(r, 0, OPS_ACT_SIN);
  const int use_c = opst_chance(r, 0.4), c_in_place = use_c && opst_chance(r, 0.4);
  const int use_bias = opst_chance(r, 0.5), use_res = opst_chance(r, 0.4);
  const int res_in_place = use_res && !c_in_place && opst_chance(r, 0.3);
  int64_t es[3];
  int nd;
  if (use_c) {
    p.beta = (float)opst_uniform(r, -2, 2);
    if (c_in_place) {
      opst_fill_uniform(&d, r, -1, 1); /* D holds C before the call */
      p.c = &d.t;
    } else {
      nd = random_epilogue_shape(r, eff_batch, m, n, es);
      if (nd == 3 && !d3) nd = 2, es[0] = es[1], es[1] = es[2];
      opst_alloc_any(&c, r, dt_out, nd, es);
      opst_fill_uniform(&c, r, -1, 1);
      p.c = &c.t;
    }
  }
  if (use_bias) {
    nd = random_epilogue_shape(r, eff_batch, m, n, es);
    if (nd == 3 && !d3) nd = 2, es[0] = es[1], es[1] = es[2];
    opst_alloc_any(&bias, r, dt_out, nd, es);
    opst_fill_uniform(&bias, r, -1, 1);
    p.bias = &bias.t;
  }
  if (use_res) {
    if (res_in_place) {
      opst_fill_uniform(&d, r, -1, 1);
      p.residual = &d.t;
    } else {
      nd = random_epilogue_shape(r, eff_batch, m, n, es);
      if (nd == 3 && !d3) nd = 2, es[0] = es[1], es[1] = es[2];
      opst_alloc_any(&res, r, dt_out, nd, es);
      opst_fill_uniform(&res, r, -1, 1);
      p.residual = &res.t;
    }
  }
  /* The naive product: accumulate over p in the middle loop, into a double matrix. */
  const int64_t total = eff_batch * m * n;
  double *ref = calloc((size_t)total + 1, sizeof(double));
  for (int64_t bt = 0; bt < eff_batch; ++bt) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < k; ++q) {
        const int64_t ai[3] = {ab > 1 ? bt : 0, i, q};
        const double av = opst_at(&a, a3 ? ai : ai + 1);
        for (int64_t j = 0; j < n; ++j) {
          const int64_t bi[3] = {bb > 1 ? bt : 0, q, j};
          ref[(bt * m + i) * n + j] += av * opst_at(&b, b3 ? bi : bi + 1);
        }
      }
      for (int64_t j = 0; j < n; ++j) {
        double x = p.alpha * ref[(bt * m + i) * n + j];
        if (use_c) x += p.beta * at_bcast(c_in_place ? &d : &c, bt, i, j);
        if (use_bias) x += at_bcast(&bias, bt, i, j);
        x = act(p.activation, x);
        if (use_res) x += at_bcast(res_in_place ? &d : &res, bt, i, j);
        ref[(bt * m + i) * n + j] = x;
      }
    }
  }
  OPST_OK(ops_gemm(g_h, &p, &a.t, &b.t, &d.t, NULL, 0));
  char why[256];
  if (!opst_fully_written(&d, why, sizeof why) ||
      !opst_check_close(&d, ref, opst_rtol(dt_out), opst_atol(dt_out), why, sizeof why)) {
    print_error("case %d (%s->%s batch=%lld [a %dD batch %lld, b %dD batch %lld] M=%lld N=%lld K=%lld act=%d "
                "c=%d%s bias=%d res=%d%s): %s\n",
                iter, ops_dtype_name((ops_dtype)dt), ops_dtype_name((ops_dtype)dt_out), (long long)eff_batch, a3 ? 3 : 2,
                (long long)ab, b3 ? 3 : 2, (long long)bb, (long long)m, (long long)n, (long long)k, p.activation, use_c,
                c_in_place ? " in place" : "", use_bias, use_res, res_in_place ? " in place" : "", why);
    fail();
  }
  assert_true(opst_untouched(&a) && opst_untouched(&b));
  free(ref);
  opst_free(&a), opst_free(&b), opst_free(&d);
  if (use_c && !c_in_place) opst_free(&c);
  if (use_bias) opst_free(&bias);
  if (use_res && !res_in_place) opst_free(&res);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 200; ++i) random_case(i);
}

/* The same on the panel kernel (the other CPU loop order), pinned. */
static void random_problems_on_the_panel_kernel(void **state) {
  (void)state;
  OPST_OK(ops_handle_pin_kernel(g_h, "cpu_gemm_panel"));
  for (int i = 0; i < 200; ++i) random_case(i);
  OPST_OK(ops_handle_pin_kernel(g_h, NULL));
}

/* The Hopper GEMM's L2 eviction priorities (gemm_shape.h; bits 0-1 A's, 2-3 B's: 0 normal, 1
 * first, 2 last): A kept wherever several column tiles read its rows; B first while at most
 * two tile rows read it and no other batch does. */
static void hopper_l2_hints_follow_reuse(void **state) {
  (void)state;
  const struct {
    int64_t m, n;
    int b_broadcast;
    int32_t want;
  } cases[] = {
      {16, 6144, 0, 2 | 1 << 2},  /* one tile row, 64 column tiles (128 x 96) */
      {256, 6144, 0, 2 | 1 << 2}, /* two tile rows */
      {300, 6144, 0, 2},          /* three: B normal */
      {16, 6144, 1, 2},           /* B shared by every batch */
      {4096, 96, 0, 0},           /* one column tile: A read once; 32 tile rows */
      {128, 96, 0, 1 << 2},       /* one tile */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t tm = (cases[i].m + OPSI_GEMM_SM90_BM - 1) / OPSI_GEMM_SM90_BM, tn = (cases[i].n + 95) / 96;
    assert_int_equal(opsi_gemm_sm90_l2_hints(tm, tn, cases[i].b_broadcast), cases[i].want);
  }
}

/* Last: every feature the capability rows of this test's kernels claim was exercised. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:gemm_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("gemm"));
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
      cmocka_unit_test(golden_small_product_with_epilogues),
      cmocka_unit_test(random_problems),
      cmocka_unit_test(random_problems_on_the_panel_kernel),
      cmocka_unit_test(hopper_l2_hints_follow_reuse),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("gemm_cpu", tests, setup, teardown);
}
