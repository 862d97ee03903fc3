/* Error injection for the row-wise ops: ops_layernorm, ops_rmsnorm (with every optional
 * operand) and ops_softmax. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/errors/harness.h"

static opst_rng g_rng;

enum { LAYERNORM = 0, RMSNORM = 1, SOFTMAX = 2 };

static ops_status call_rows(errs_fixture *f) {
  switch (f->op) {
    case LAYERNORM:
      return ops_layernorm(f->h, &f->p.norm, errs_ptr(f, "x"), errs_ptr(f, "weight"), errs_ptr(f, "y"),
                           f->workspace, f->workspace_bytes);
    case RMSNORM:
      return ops_rmsnorm(f->h, &f->p.norm, errs_ptr(f, "x"), errs_ptr(f, "weight"), errs_ptr(f, "y"),
                         f->workspace, f->workspace_bytes);
    default:
      return ops_softmax(f->h, &f->p.softmax, errs_ptr(f, "x"), errs_ptr(f, "y"), f->workspace,
                         f->workspace_bytes);
  }
}

static void build(errs_fixture *f, opst_rng *r, int variant) {
  f->op = variant;
  f->call = call_rows;
  const int64_t xs[3] = {2, 3, 40}, ws[1] = {40}, ss[2] = {2, 3};
  errs_add(f, r, "x", ERRS_INPUT, OPS_DTYPE_BF16, 3, xs);
  errs_add(f, r, "y", ERRS_OUTPUT, OPS_DTYPE_BF16, 3, xs);
  if (variant == SOFTMAX) {
    ops_softmax_params_init(&f->p.softmax);
    f->p.softmax.scale = 0.5f;
    return;
  }
  ops_norm_params_init(&f->p.norm);
  errs_add(f, r, "weight", ERRS_INPUT, OPS_DTYPE_F32, 1, ws);
  f->p.norm.bias = errs_add(f, r, "params->bias", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 1, ws);
  f->p.norm.residual = errs_add(f, r, "params->residual", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_BF16, 3, xs);
  f->p.norm.residual_out = errs_add(f, r, "params->residual_out", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_BF16, 3, xs);
  if (variant == LAYERNORM) {
    f->p.norm.mean_out = errs_add(f, r, "params->mean_out", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 2, ss);
  }
  f->p.norm.rstd_out = errs_add(f, r, "params->rstd_out", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 2, ss);
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

static void y_shape(errs_fixture *f) { T(f, "y")->shape[2] = 39; }
static void y_ndim(errs_fixture *f) { T(f, "y")->ndim = 2; }
static void x_scalar(errs_fixture *f) { T(f, "x")->ndim = 0; }
static void y_dtype(errs_fixture *f) { T(f, "y")->dtype = OPS_DTYPE_F16; }
static void weight_shape(errs_fixture *f) { T(f, "weight")->shape[0] = 41; }
static void weight_dtype(errs_fixture *f) { T(f, "weight")->dtype = OPS_DTYPE_F16; }
static void bias_dtype(errs_fixture *f) { T(f, "params->bias")->dtype = OPS_DTYPE_BF16; }
static void residual_shape(errs_fixture *f) { T(f, "params->residual")->shape[0] = 1; }
static void rstd_shape(errs_fixture *f) { T(f, "params->rstd_out")->shape[1] = 4; }
static void rstd_dtype(errs_fixture *f) { T(f, "params->rstd_out")->dtype = OPS_DTYPE_BF16; }
static void residual_out_without_residual(errs_fixture *f) { f->p.norm.residual = NULL; }
static void mean_out_for_rms(errs_fixture *f) { f->p.norm.mean_out = T(f, "params->rstd_out"); }
static void eps_negative(errs_fixture *f) { f->p.norm.eps = -1e-5f; }
static void y_partially_on_x(errs_fixture *f) {
  ops_tensor *y = T(f, "y"), *x = T(f, "x");
  *y = *x;
  y->data = (uint16_t *)x->data + x->strides[2];
}
static void residual_out_on_x(errs_fixture *f) { *T(f, "params->residual_out") = *T(f, "x"); }
static void rstd_on_mean(errs_fixture *f) { *T(f, "params->rstd_out") = *T(f, "params->mean_out"); }
static void scale_inf(errs_fixture *f) { f->p.softmax.scale = INFINITY; }
static void y_overlaps_itself(errs_fixture *f) { T(f, "y")->strides[0] = 0; }

static void valid_calls_succeed(void **state) {
  (void)state;
  for (int v = LAYERNORM; v <= SOFTMAX; ++v) errs_check_valid_call(build, v, &g_rng);
}

static void descriptor_faults(void **state) {
  (void)state;
  for (int v = LAYERNORM; v <= SOFTMAX; ++v) errs_run_descriptor_faults(build, v, &g_rng);
}

static void call_faults(void **state) {
  (void)state;
  errs_run_call_faults(build, LAYERNORM, &g_rng, "ops_layernorm");
  errs_run_call_faults(build, RMSNORM, &g_rng, "ops_rmsnorm");
  errs_run_call_faults(build, SOFTMAX, &g_rng, "ops_softmax");
}

static void shape_dtype_alias_param_faults(void **state) {
  (void)state;
  static const errs_case common[] = {
      {"y shape", y_shape, OPS_ERR_SHAPE_MISMATCH, {"y: shape", "expected [2, 3, 40] (x's shape)", "got [2, 3, 39]", NULL}},
      {"y ndim", y_ndim, OPS_ERR_BAD_NDIM, {"y: shape", "got [2, 3]", NULL, NULL}},
      {"x scalar", x_scalar, OPS_ERR_BAD_NDIM, {"x: ndim", "expected 1..8", "got 0", NULL}},
      {"y dtype", y_dtype, OPS_ERR_DTYPE_MISMATCH, {"y: dtype", "expected bf16 (x's dtype)", "got f16", NULL}},
      {"y partially on x", y_partially_on_x, OPS_ERR_ALIASING, {"y: expected no overlap with x", "partial", NULL, NULL}},
      {"y overlaps itself", y_overlaps_itself, OPS_ERR_ALIASING, {"y: strides", "overlaps itself", NULL, NULL}},
  };
  static const errs_case norm[] = {
      {"weight shape", weight_shape, OPS_ERR_SHAPE_MISMATCH, {"weight: shape", "expected [40]", "got [41]", NULL}},
      {"weight dtype", weight_dtype, OPS_ERR_DTYPE_MISMATCH, {"weight: dtype", "f32, bf16", "got f16", NULL}},
      {"bias dtype", bias_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->bias: dtype", "expected f32 (weight's dtype)", "got bf16", NULL}},
      {"residual shape", residual_shape, OPS_ERR_SHAPE_MISMATCH, {"params->residual: shape", "got [1, 3, 40]", NULL, NULL}},
      {"rstd shape", rstd_shape, OPS_ERR_SHAPE_MISMATCH, {"params->rstd_out: shape", "expected [2, 3]", "got [2, 4]", NULL}},
      {"rstd dtype", rstd_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->rstd_out: dtype", "expected f32", "got bf16", NULL}},
      {"residual_out without residual", residual_out_without_residual, OPS_ERR_NULL_POINTER, {"params->residual", "residual_out is set", "got NULL", NULL}},
      {"eps negative", eps_negative, OPS_ERR_INVALID_ARGUMENT, {"params->eps", ">= 0", "got -1e-05", NULL}},
      {"residual_out on x", residual_out_on_x, OPS_ERR_ALIASING, {"params->residual_out", "disjoint from input x", NULL, NULL}},
  };
  static const errs_case layernorm_only[] = {
      {"rstd_out on mean_out", rstd_on_mean, OPS_ERR_ALIASING, {"params->mean_out", "disjoint from output params->rstd_out", NULL, NULL}},
  };
  static const errs_case rmsnorm_only[] = {
      {"mean_out for rmsnorm", mean_out_for_rms, OPS_ERR_INVALID_ARGUMENT, {"params->mean_out", "RMSNorm", NULL, NULL}},
  };
  static const errs_case softmax_only[] = {
      {"scale inf", scale_inf, OPS_ERR_INVALID_ARGUMENT, {"params->scale", "finite", "got inf", NULL}},
  };
  for (int v = LAYERNORM; v <= SOFTMAX; ++v) errs_run_cases(build, v, &g_rng, common, ERRS_COUNT(common));
  errs_run_cases(build, LAYERNORM, &g_rng, norm, ERRS_COUNT(norm));
  errs_run_cases(build, RMSNORM, &g_rng, norm, ERRS_COUNT(norm));
  errs_run_cases(build, LAYERNORM, &g_rng, layernorm_only, ERRS_COUNT(layernorm_only));
  errs_run_cases(build, RMSNORM, &g_rng, rmsnorm_only, ERRS_COUNT(rmsnorm_only));
  errs_run_cases(build, SOFTMAX, &g_rng, softmax_only, ERRS_COUNT(softmax_only));
}

static void zero_size_calls_are_no_ops(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t xs[2] = {0, 16}, ws[1] = {16};
  opst_tensor w;
  opst_alloc(&w, &g_rng, OPS_DTYPE_F32, 1, ws, OPST_CONTIGUOUS);
  opst_fill_uniform(&w, &g_rng, -1, 1);
  ops_tensor x;
  OPST_OK(ops_tensor_init(&x, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, xs, NULL));
  OPST_OK(ops_layernorm(h, NULL, &x, &w.t, &x, NULL, 0));
  OPST_OK(ops_rmsnorm(h, NULL, &x, &w.t, &x, NULL, 0));
  OPST_OK(ops_softmax(h, NULL, &x, &x, NULL, 0));
  assert_true(opst_untouched(&w));
  opst_free(&w);
  ops_handle_destroy(h);
}

/* An empty x (no columns) whose leading extents multiply past int64: a size error. */
static void row_count_overflow_is_refused(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t xs[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0}, st[3] = {1, 1, 1};
  ops_tensor x, y;
  OPST_OK(ops_tensor_init(&x, NULL, OPS_DTYPE_F32, ops_device_cpu(), 3, xs, st));
  OPST_OK(ops_tensor_init(&y, NULL, OPS_DTYPE_F32, ops_device_cpu(), 3, xs, st));
  assert_int_equal(ops_softmax(h, NULL, &x, &y, NULL, 0), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "ops_softmax: x's leading extents (its rows): expected a product"));
  ops_handle_destroy(h);
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("rows_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_calls_succeed),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_faults),
      cmocka_unit_test(zero_size_calls_are_no_ops),
      cmocka_unit_test(row_count_overflow_is_refused),
  };
  return cmocka_run_group_tests_name("rows_errors", tests, setup, NULL);
}
