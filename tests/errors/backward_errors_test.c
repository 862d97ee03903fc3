/* Error injection for the backward ops (ops_layernorm_backward, ops_rmsnorm_backward,
 * ops_softmax_backward) and for ops_dropout. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/errors/harness.h"

static opst_rng g_rng;

enum { LAYERNORM_BWD = 0, RMSNORM_BWD = 1, SOFTMAX_BWD = 2, DROPOUT = 3 };

static ops_status call_op(errs_fixture *f) {
  switch (f->op) {
    case LAYERNORM_BWD:
      return ops_layernorm_backward(f->h, &f->p.norm_bwd, errs_ptr(f, "dy"), errs_ptr(f, "x"), errs_ptr(f, "weight"),
                                    errs_ptr(f, "mean"), errs_ptr(f, "rstd"), errs_ptr(f, "dx"), f->workspace,
                                    f->workspace_bytes);
    case RMSNORM_BWD:
      return ops_rmsnorm_backward(f->h, &f->p.norm_bwd, errs_ptr(f, "dy"), errs_ptr(f, "x"), errs_ptr(f, "weight"),
                                  errs_ptr(f, "rstd"), errs_ptr(f, "dx"), f->workspace, f->workspace_bytes);
    case SOFTMAX_BWD:
      return ops_softmax_backward(f->h, &f->p.softmax, errs_ptr(f, "dy"), errs_ptr(f, "y"), errs_ptr(f, "dx"),
                                  f->workspace, f->workspace_bytes);
    default:
      return ops_dropout(f->h, &f->p.dropout, errs_ptr(f, "x"), errs_ptr(f, "y"), f->workspace, f->workspace_bytes);
  }
}

static void build(errs_fixture *f, opst_rng *r, int variant) {
  f->op = variant;
  f->call = call_op;
  const int64_t xs[3] = {2, 3, 40}, ws[1] = {40}, ss[2] = {2, 3};
  if (variant == DROPOUT) {
    ops_dropout_params_init(&f->p.dropout);
    f->p.dropout.p = 0.25f;
    f->p.dropout.seed = 7;
    errs_add(f, r, "x", ERRS_INPUT, OPS_DTYPE_BF16, 3, xs);
    errs_add(f, r, "y", ERRS_OUTPUT, OPS_DTYPE_BF16, 3, xs);
    return;
  }
  errs_add(f, r, "dy", ERRS_INPUT, OPS_DTYPE_BF16, 3, xs);
  if (variant == SOFTMAX_BWD) {
    ops_softmax_params_init(&f->p.softmax);
    errs_add(f, r, "y", ERRS_INPUT, OPS_DTYPE_BF16, 3, xs);
    errs_add(f, r, "dx", ERRS_OUTPUT, OPS_DTYPE_BF16, 3, xs);
    return;
  }
  ops_norm_backward_params_init(&f->p.norm_bwd);
  errs_add(f, r, "x", ERRS_INPUT, OPS_DTYPE_BF16, 3, xs);
  errs_add(f, r, "weight", ERRS_INPUT, OPS_DTYPE_F32, 1, ws);
  if (variant == LAYERNORM_BWD) errs_add(f, r, "mean", ERRS_INPUT, OPS_DTYPE_F32, 2, ss);
  errs_add(f, r, "rstd", ERRS_INPUT, OPS_DTYPE_F32, 2, ss);
  errs_add(f, r, "dx", ERRS_OUTPUT, OPS_DTYPE_BF16, 3, xs);
  f->p.norm_bwd.dweight = errs_add(f, r, "params->dweight", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 1, ws);
  f->p.norm_bwd.dbias = errs_add(f, r, "params->dbias", ERRS_OUTPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 1, ws);
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

static void dx_shape(errs_fixture *f) { T(f, "dx")->shape[2] = 39; }
static void dx_dtype(errs_fixture *f) { T(f, "dx")->dtype = OPS_DTYPE_F16; }
static void fwd_shape_x(errs_fixture *f) { T(f, "x")->shape[1] = 2; }
static void fwd_dtype_y(errs_fixture *f) { T(f, "y")->dtype = OPS_DTYPE_F16; }
static void dx_partially_on_dy(errs_fixture *f) {
  ops_tensor *dx = T(f, "dx"), *dy = T(f, "dy");
  *dx = *dy;
  dx->data = (uint16_t *)dy->data + dy->strides[2];
}
static void dx_on_x(errs_fixture *f) { *T(f, "dx") = *T(f, "x"); }
static void rstd_shape(errs_fixture *f) { T(f, "rstd")->shape[1] = 4; }
static void rstd_dtype(errs_fixture *f) { T(f, "rstd")->dtype = OPS_DTYPE_BF16; }
static void weight_shape(errs_fixture *f) { T(f, "weight")->shape[0] = 41; }
static void dweight_dtype(errs_fixture *f) { T(f, "params->dweight")->dtype = OPS_DTYPE_F16; }
static void dbias_shape(errs_fixture *f) { T(f, "params->dbias")->shape[0] = 8; }
static void dbias_on_dweight(errs_fixture *f) { *T(f, "params->dbias") = *T(f, "params->dweight"); }
static void softmax_scale_nan(errs_fixture *f) { f->p.softmax.scale = NAN; }
static void dropout_p_above_one(errs_fixture *f) { f->p.dropout.p = 1.5f; }
static void dropout_p_nan(errs_fixture *f) { f->p.dropout.p = NAN; }
static void y_shape(errs_fixture *f) { T(f, "y")->shape[2] = 39; }
static void y_partially_on_x(errs_fixture *f) {
  ops_tensor *y = T(f, "y"), *x = T(f, "x");
  *y = *x;
  y->data = (uint16_t *)x->data + x->strides[2];
}

static void valid_calls_succeed(void **state) {
  (void)state;
  for (int v = LAYERNORM_BWD; v <= DROPOUT; ++v) errs_check_valid_call(build, v, &g_rng);
}

static void descriptor_faults(void **state) {
  (void)state;
  for (int v = LAYERNORM_BWD; v <= DROPOUT; ++v) errs_run_descriptor_faults(build, v, &g_rng);
}

static void call_faults(void **state) {
  (void)state;
  errs_run_call_faults(build, LAYERNORM_BWD, &g_rng, "ops_layernorm_backward");
  errs_run_call_faults(build, RMSNORM_BWD, &g_rng, "ops_rmsnorm_backward");
  errs_run_call_faults(build, SOFTMAX_BWD, &g_rng, "ops_softmax_backward");
  errs_run_call_faults(build, DROPOUT, &g_rng, "ops_dropout");
}

static void shape_dtype_alias_param_faults(void **state) {
  (void)state;
  static const errs_case bwd[] = {
      {"dx shape", dx_shape, OPS_ERR_SHAPE_MISMATCH, {"dx: shape", "expected [2, 3, 40] (dy's shape)", "got [2, 3, 39]", NULL}},
      {"dx dtype", dx_dtype, OPS_ERR_DTYPE_MISMATCH, {"dx: dtype", "expected bf16 (dy's dtype)", "got f16", NULL}},
      {"dx partially on dy", dx_partially_on_dy, OPS_ERR_ALIASING, {"dx: expected no overlap with dy", "partial", NULL, NULL}},
  };
  static const errs_case norm[] = {
      {"x shape", fwd_shape_x, OPS_ERR_SHAPE_MISMATCH, {"x: shape", "(dy's shape)", "got [2, 2, 40]", NULL}},
      {"dx on x", dx_on_x, OPS_ERR_ALIASING, {"dx", "disjoint from input x", NULL, NULL}},
      {"rstd shape", rstd_shape, OPS_ERR_SHAPE_MISMATCH, {"rstd: shape", "expected [2, 3]", "got [2, 4]", NULL}},
      {"rstd dtype", rstd_dtype, OPS_ERR_DTYPE_MISMATCH, {"rstd: dtype", "expected f32", "got bf16", NULL}},
      {"weight shape", weight_shape, OPS_ERR_SHAPE_MISMATCH, {"weight: shape", "expected [40]", "got [41]", NULL}},
      {"dweight dtype", dweight_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->dweight: dtype", "f32, bf16", "got f16", NULL}},
      {"dbias shape", dbias_shape, OPS_ERR_SHAPE_MISMATCH, {"params->dbias: shape", "expected [40]", "got [8]", NULL}},
      {"dbias on dweight", dbias_on_dweight, OPS_ERR_ALIASING, {"params->dweight", "params->dbias", NULL, NULL}},
  };
  static const errs_case softmax_only[] = {
      {"y dtype", fwd_dtype_y, OPS_ERR_DTYPE_MISMATCH, {"y: dtype", "(dy's dtype)", "got f16", NULL}},
      {"scale nan", softmax_scale_nan, OPS_ERR_INVALID_ARGUMENT, {"params->scale", "finite", "got nan", NULL}},
  };
  static const errs_case dropout[] = {
      {"p above 1", dropout_p_above_one, OPS_ERR_INVALID_ARGUMENT, {"params->p", "[0, 1]", "got 1.5", NULL}},
      {"p nan", dropout_p_nan, OPS_ERR_INVALID_ARGUMENT, {"params->p", "[0, 1]", "got nan", NULL}},
      {"y shape", y_shape, OPS_ERR_SHAPE_MISMATCH, {"y: shape", "got [2, 3, 39]", NULL, NULL}},
      {"y partially on x", y_partially_on_x, OPS_ERR_ALIASING, {"y: expected no overlap with x", "partial", NULL, NULL}},
  };
  for (int v = LAYERNORM_BWD; v <= SOFTMAX_BWD; ++v) errs_run_cases(build, v, &g_rng, bwd, ERRS_COUNT(bwd));
  errs_run_cases(build, LAYERNORM_BWD, &g_rng, norm, ERRS_COUNT(norm));
  errs_run_cases(build, RMSNORM_BWD, &g_rng, norm, ERRS_COUNT(norm));
  errs_run_cases(build, SOFTMAX_BWD, &g_rng, softmax_only, ERRS_COUNT(softmax_only));
  errs_run_cases(build, DROPOUT, &g_rng, dropout, ERRS_COUNT(dropout));
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("backward_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_calls_succeed),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_faults),
  };
  return cmocka_run_group_tests_name("backward_errors", tests, setup, NULL);
}
