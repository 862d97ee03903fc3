/* Error injection for the elementwise ops: ops_sin_affine (with tensor a and b),
 * ops_unary, ops_binary. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/errors/harness.h"

static opst_rng g_rng;

enum { SIN_AFFINE = 0, UNARY = 1, BINARY = 2 };

static ops_status call_ew(errs_fixture *f) {
  switch (f->op) {
    case SIN_AFFINE:
      return ops_sin_affine(f->h, &f->p.sin_affine, errs_ptr(f, "x"), errs_ptr(f, "y"), f->workspace,
                            f->workspace_bytes);
    case UNARY:
      return ops_unary(f->h, &f->p.unary, errs_ptr(f, "x"), errs_ptr(f, "y"), f->workspace, f->workspace_bytes);
    default:
      return ops_binary(f->h, &f->p.binary, errs_ptr(f, "a"), errs_ptr(f, "b"), errs_ptr(f, "y"), f->workspace,
                        f->workspace_bytes);
  }
}

static void build(errs_fixture *f, opst_rng *r, int variant) {
  f->op = variant;
  f->call = call_ew;
  const int64_t ys[3] = {4, 3, 5}, row[1] = {5}, col[2] = {3, 1}, mat[2] = {3, 5};
  if (variant == BINARY) {
    ops_binary_params_init(&f->p.binary);
    f->p.binary.op = OPS_BINARY_MUL;
    errs_add(f, r, "a", ERRS_INPUT, OPS_DTYPE_F32, 2, mat);
    errs_add(f, r, "b", ERRS_INPUT, OPS_DTYPE_F32, 3, ys);
  } else {
    errs_add(f, r, "x", ERRS_INPUT, OPS_DTYPE_F32, 2, col);
  }
  errs_add(f, r, "y", ERRS_OUTPUT, OPS_DTYPE_F32, 3, ys);
  if (variant == SIN_AFFINE) {
    ops_sin_affine_params_init(&f->p.sin_affine);
    f->p.sin_affine.a_tensor = errs_add(f, r, "params->a_tensor", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 1, row);
    f->p.sin_affine.b_tensor = errs_add(f, r, "params->b_tensor", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 3, ys);
  } else if (variant == UNARY) {
    ops_unary_params_init(&f->p.unary);
    f->p.unary.fn = OPS_ACT_GELU_ERF;
  }
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

static void x_not_broadcastable(errs_fixture *f) { T(f, "x")->shape[0] = 2; }
static void x_too_many_axes(errs_fixture *f) {
  ops_tensor *x = T(f, "x");
  x->ndim = 4;
  x->shape[2] = 1, x->shape[3] = 1, x->strides[2] = 1, x->strides[3] = 1;
}
static void y_dtype(errs_fixture *f) { T(f, "y")->dtype = OPS_DTYPE_BF16; }
static void y_int(errs_fixture *f) { T(f, "y")->dtype = OPS_DTYPE_I32; }
static void a_tensor_shape(errs_fixture *f) { T(f, "params->a_tensor")->shape[0] = 4; }
static void y_on_x(errs_fixture *f) {
  ops_tensor *y = T(f, "y");
  y->data = T(f, "x")->data;
}
/* y is b shifted by one element: it overlaps b (and only b), without being the same view. */
static void y_on_b(errs_fixture *f) {
  ops_tensor *y = T(f, "y"), *b = T(f, "b");
  *y = *b;
  y->data = (float *)b->data + 1;
}
static void y_broadcasts(errs_fixture *f) { T(f, "y")->strides[1] = 0; }
static void fn_unknown(errs_fixture *f) { f->p.unary.fn = 11; }
static void op_unknown(errs_fixture *f) { f->p.binary.op = -1; }
static void b_dtype(errs_fixture *f) { T(f, "b")->dtype = OPS_DTYPE_I32; }

static void valid_calls_succeed(void **state) {
  (void)state;
  for (int v = SIN_AFFINE; v <= BINARY; ++v) errs_check_valid_call(build, v, &g_rng);
}

static void descriptor_faults(void **state) {
  (void)state;
  for (int v = SIN_AFFINE; v <= BINARY; ++v) errs_run_descriptor_faults(build, v, &g_rng);
}

static void call_faults(void **state) {
  (void)state;
  errs_run_call_faults(build, SIN_AFFINE, &g_rng, "ops_sin_affine");
  errs_run_call_faults(build, UNARY, &g_rng, "ops_unary");
  errs_run_call_faults(build, BINARY, &g_rng, "ops_binary");
}

static void shape_dtype_alias_param_faults(void **state) {
  (void)state;
  static const errs_case x_cases[] = {
      {"x does not broadcast", x_not_broadcastable, OPS_ERR_SHAPE_MISMATCH, {"x: shape", "broadcasts to [4, 3, 5] (y's shape)", "got [2, 1]", NULL}},
      {"x has more axes than y", x_too_many_axes, OPS_ERR_BAD_NDIM, {"x: expected at most 3 axes", NULL, NULL, NULL}},
      {"y dtype", y_dtype, OPS_ERR_DTYPE_MISMATCH, {"x: dtype", "expected bf16 (y's dtype)", "got f32", NULL}},
      {"y integer", y_int, OPS_ERR_DTYPE_MISMATCH, {"y: dtype", "expected one of f32, f16, bf16", "got i32", NULL}},
      {"y on x", y_on_x, OPS_ERR_ALIASING, {"y: expected no overlap with x", "same view", NULL, NULL}},
      {"y broadcasts", y_broadcasts, OPS_ERR_ALIASING, {"y: strides", "overlaps itself", NULL, NULL}},
  };
  static const errs_case sin_cases[] = {
      {"a_tensor shape", a_tensor_shape, OPS_ERR_SHAPE_MISMATCH, {"params->a_tensor: shape", "got [4]", NULL, NULL}},
  };
  static const errs_case unary_cases[] = {
      {"unknown fn", fn_unknown, OPS_ERR_INVALID_ARGUMENT, {"params->fn", "got 11", NULL, NULL}},
  };
  static const errs_case binary_cases[] = {
      {"unknown op", op_unknown, OPS_ERR_INVALID_ARGUMENT, {"params->op", "got -1", NULL, NULL}},
      {"b dtype", b_dtype, OPS_ERR_DTYPE_MISMATCH, {"b: dtype", "expected f32 (y's dtype)", "got i32", NULL}},
      {"y on b", y_on_b, OPS_ERR_ALIASING, {"y: expected no overlap with b", NULL, NULL, NULL}},
  };
  errs_run_cases(build, SIN_AFFINE, &g_rng, x_cases, ERRS_COUNT(x_cases));
  errs_run_cases(build, UNARY, &g_rng, x_cases, ERRS_COUNT(x_cases));
  errs_run_cases(build, SIN_AFFINE, &g_rng, sin_cases, ERRS_COUNT(sin_cases));
  errs_run_cases(build, UNARY, &g_rng, unary_cases, ERRS_COUNT(unary_cases));
  errs_run_cases(build, BINARY, &g_rng, binary_cases, ERRS_COUNT(binary_cases));
}

static void zero_size_calls_are_no_ops(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t s[2] = {3, 0};
  ops_tensor x;
  OPST_OK(ops_tensor_init(&x, NULL, OPS_DTYPE_F16, ops_device_cpu(), 2, s, NULL));
  OPST_OK(ops_sin_affine(h, NULL, &x, &x, NULL, 0));
  OPST_OK(ops_unary(h, NULL, &x, &x, NULL, 0));
  OPST_OK(ops_binary(h, NULL, &x, &x, &x, NULL, 0));
  ops_handle_destroy(h);
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("elementwise_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_calls_succeed),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_faults),
      cmocka_unit_test(zero_size_calls_are_no_ops),
  };
  return cmocka_run_group_tests_name("elementwise_errors", tests, setup, NULL);
}
