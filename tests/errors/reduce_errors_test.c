/* Error injection for ops_reduce. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/errors/harness.h"

static opst_rng g_rng;

static ops_status call_reduce(errs_fixture *f) {
  return ops_reduce(f->h, &f->p.reduce, errs_ptr(f, "x"), errs_ptr(f, "y"), f->workspace, f->workspace_bytes);
}

static void build(errs_fixture *f, opst_rng *r, int variant) {
  (void)variant;
  ops_reduce_params_init(&f->p.reduce);
  f->call = call_reduce;
  f->p.reduce.op = OPS_REDUCE_MEAN;
  f->p.reduce.axes = (1u << 0) | (1u << 2);
  const int64_t xs[3] = {4, 6, 5}, ys[1] = {6};
  errs_add(f, r, "x", ERRS_INPUT, OPS_DTYPE_BF16, 3, xs);
  errs_add(f, r, "y", ERRS_OUTPUT, OPS_DTYPE_F32, 1, ys);
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

static void y_extent(errs_fixture *f) { T(f, "y")->shape[0] = 5; }
static void y_keepdim_shape(errs_fixture *f) { f->p.reduce.keepdim = 1; }
static void y_dtype(errs_fixture *f) { T(f, "y")->dtype = OPS_DTYPE_F16; }
static void x_int(errs_fixture *f) { T(f, "x")->dtype = OPS_DTYPE_U8; }
static void axes_beyond_ndim(errs_fixture *f) { f->p.reduce.axes = 1u << 3; }
static void op_unknown(errs_fixture *f) { f->p.reduce.op = 4; }
static void keepdim_two(errs_fixture *f) { f->p.reduce.keepdim = 2; }
static void y_on_x(errs_fixture *f) {
  ops_tensor *y = T(f, "y");
  y->data = (void *)((uintptr_t)T(f, "x")->data & ~(uintptr_t)3);
}

static void valid_call_succeeds(void **state) {
  (void)state;
  errs_check_valid_call(build, 0, &g_rng);
}

static void descriptor_faults(void **state) {
  (void)state;
  errs_run_descriptor_faults(build, 0, &g_rng);
}

static void call_faults(void **state) {
  (void)state;
  errs_run_call_faults(build, 0, &g_rng, "ops_reduce");
}

static void shape_dtype_alias_param_faults(void **state) {
  (void)state;
  static const errs_case cases[] = {
      {"y extent", y_extent, OPS_ERR_SHAPE_MISMATCH, {"y: shape", "expected [6] (x's shape without the reduced axes)", "got [5]", NULL}},
      {"keepdim shape", y_keepdim_shape, OPS_ERR_BAD_NDIM, {"y: shape", "expected [1, 6, 1]", "got [6]", NULL}},
      {"y dtype", y_dtype, OPS_ERR_DTYPE_MISMATCH, {"y: dtype", "expected one of f32, bf16", "got f16", NULL}},
      {"x integer", x_int, OPS_ERR_DTYPE_MISMATCH, {"x: dtype", "expected one of f32, f16, bf16", "got u8", NULL}},
      {"axes beyond ndim", axes_beyond_ndim, OPS_ERR_INVALID_ARGUMENT, {"params->axes", "axes 0..2", "got 0x8", NULL}},
      {"unknown op", op_unknown, OPS_ERR_INVALID_ARGUMENT, {"params->op", "got 4", NULL, NULL}},
      {"keepdim 2", keepdim_two, OPS_ERR_INVALID_ARGUMENT, {"params->keepdim", "got 2", NULL, NULL}},
      {"y on x", y_on_x, OPS_ERR_ALIASING, {"y: expected memory disjoint from input x", NULL, NULL, NULL}},
  };
  errs_run_cases(build, 0, &g_rng, cases, ERRS_COUNT(cases));
}

static void zero_size_call_is_a_no_op(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t xs[2] = {0, 3}, ys[1] = {0};
  ops_tensor x, y;
  OPST_OK(ops_tensor_init(&x, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, xs, NULL));
  OPST_OK(ops_tensor_init(&y, NULL, OPS_DTYPE_F32, ops_device_cpu(), 1, ys, NULL));
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.axes = 1u << 1;
  OPST_OK(ops_reduce(h, &p, &x, &y, NULL, 0));
  ops_handle_destroy(h);
}

/* An empty x whose reduced extents multiply past int64: a size error, not an overflow. */
static void reduced_count_overflow_is_refused(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t xs[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40}, xst[3] = {1, 1, 1}, ys[1] = {0};
  ops_tensor x, y;
  OPST_OK(ops_tensor_init(&x, NULL, OPS_DTYPE_F32, ops_device_cpu(), 3, xs, xst));
  OPST_OK(ops_tensor_init(&y, NULL, OPS_DTYPE_F32, ops_device_cpu(), 1, ys, NULL));
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.axes = (1u << 1) | (1u << 2);
  assert_int_equal(ops_reduce(h, &p, &x, &y, NULL, 0), OPS_ERR_BAD_SIZE);
  assert_non_null(strstr(ops_last_error(), "ops_reduce: x: the reduced axes' extents"));
  assert_non_null(strstr(ops_last_error(), "at axis 2 (extent 1099511627776)"));
  ops_handle_destroy(h);
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("reduce_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_call_succeeds),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_faults),
      cmocka_unit_test(zero_size_call_is_a_no_op),
      cmocka_unit_test(reduced_count_overflow_is_refused),
  };
  return cmocka_run_group_tests_name("reduce_errors", tests, setup, NULL);
}
