/* Error injection for ops_gemm: a batched call with C, bias and residual. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/errors/harness.h"

static opst_rng g_rng;

static ops_status call_gemm(errs_fixture *f) {
  return ops_gemm(f->h, &f->p.gemm, errs_ptr(f, "a"), errs_ptr(f, "b"), errs_ptr(f, "d"), f->workspace,
                  f->workspace_bytes);
}

static void build(errs_fixture *f, opst_rng *r, int variant) {
  (void)variant;
  ops_gemm_params_init(&f->p.gemm);
  f->call = call_gemm;
  const int64_t as[3] = {3, 5, 7}, bs[2] = {7, 6}, ds[3] = {3, 5, 6}, bias_s[1] = {6}, cs[2] = {5, 6};
  errs_add(f, r, "a", ERRS_INPUT, OPS_DTYPE_F16, 3, as);
  errs_add(f, r, "b", ERRS_INPUT, OPS_DTYPE_F16, 2, bs);
  errs_add(f, r, "d", ERRS_OUTPUT, OPS_DTYPE_F32, 3, ds);
  f->p.gemm.c = errs_add(f, r, "params->c", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 2, cs);
  f->p.gemm.bias = errs_add(f, r, "params->bias", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 1, bias_s);
  f->p.gemm.residual = errs_add(f, r, "params->residual", ERRS_INPUT | ERRS_OPTIONAL, OPS_DTYPE_F32, 3, ds);
  f->p.gemm.beta = 0.5f;
  f->p.gemm.activation = OPS_ACT_GELU_TANH;
}

static ops_tensor *T(errs_fixture *f, const char *name) { return &errs_find(f, name)->t.t; }

static void k_mismatch(errs_fixture *f) { T(f, "b")->shape[0] = 6; }
static void batch_mismatch(errs_fixture *f) {
  ops_tensor *b = T(f, "b"); /* a 3-D b with batch 2 against a's 3 */
  b->ndim = 3;
  b->shape[2] = b->shape[1], b->strides[2] = b->strides[1];
  b->shape[1] = b->shape[0], b->strides[1] = b->strides[0];
  b->shape[0] = 2, b->strides[0] = 0;
}
static void d_shape(errs_fixture *f) { T(f, "d")->shape[2] = 5; }
static void d_ndim(errs_fixture *f) { T(f, "d")->ndim = 2; }
static void a_ndim(errs_fixture *f) { T(f, "a")->ndim = 1; }
static void b_dtype(errs_fixture *f) { T(f, "b")->dtype = OPS_DTYPE_BF16; }
static void d_dtype(errs_fixture *f) { T(f, "d")->dtype = OPS_DTYPE_BF16; }
static void bias_dtype(errs_fixture *f) { T(f, "params->bias")->dtype = OPS_DTYPE_I32; }
static void bias_shape(errs_fixture *f) { T(f, "params->bias")->shape[0] = 4; }
static void residual_shape(errs_fixture *f) { T(f, "params->residual")->shape[1] = 4; }
static void c_partial_overlap(errs_fixture *f) {
  ops_tensor *c = T(f, "params->c"), *d = T(f, "d");
  *c = *d; /* same view as d would be fine (in place); one element off is not */
  c->ndim = 2;
  c->shape[0] = 5, c->shape[1] = 6, c->strides[0] = d->strides[1], c->strides[1] = d->strides[2];
  c->data = (float *)d->data + d->strides[2];
}
static void d_is_a(errs_fixture *f) {
  ops_tensor *d = T(f, "d"), *a = T(f, "a");
  d->data = (void *)((uintptr_t)a->data & ~(uintptr_t)3);
}
static void d_overlaps_itself(errs_fixture *f) { T(f, "d")->strides[0] = 0; }
static void beta_without_c(errs_fixture *f) { f->p.gemm.c = NULL; }
static void activation_unknown(errs_fixture *f) { f->p.gemm.activation = 42; }
static void alpha_inf(errs_fixture *f) { f->p.gemm.alpha = INFINITY; }
static void workspace_null(errs_fixture *f) { f->workspace_bytes = 64; }

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
  errs_run_call_faults(build, 0, &g_rng, "ops_gemm");
}

static void shape_dtype_alias_param_workspace_faults(void **state) {
  (void)state;
  static const errs_case cases[] = {
      {"K mismatch", k_mismatch, OPS_ERR_SHAPE_MISMATCH, {"b: axis 0 (k, from a)", "expected 7", "got 6", NULL}},
      {"batch mismatch", batch_mismatch, OPS_ERR_SHAPE_MISMATCH, {"b: axis 0 (batch)", "expected 1 or 3 (a's batch)", "got 2", NULL}},
      {"d shape", d_shape, OPS_ERR_SHAPE_MISMATCH, {"d: shape", "expected [3, 5, 6]", "got [3, 5, 5]", NULL}},
      {"d ndim", d_ndim, OPS_ERR_BAD_NDIM, {"d: shape", "expected [3, 5, 6]", "got [3, 5]", NULL}},
      {"a ndim", a_ndim, OPS_ERR_BAD_NDIM, {"a: ndim", "expected 2..3", "got 1", NULL}},
      {"b dtype", b_dtype, OPS_ERR_DTYPE_MISMATCH, {"b: dtype", "expected f16 (a's dtype)", "got bf16", NULL}},
      {"d dtype", d_dtype, OPS_ERR_DTYPE_MISMATCH, {"d: dtype", "expected one of f32, f16", "got bf16", NULL}},
      {"bias dtype", bias_dtype, OPS_ERR_DTYPE_MISMATCH, {"params->bias: dtype", "expected f32 (d's dtype)", "got i32", NULL}},
      {"bias shape", bias_shape, OPS_ERR_SHAPE_MISMATCH, {"params->bias", "broadcasts to [3, 5, 6]", "got [4]", NULL}},
      {"residual shape", residual_shape, OPS_ERR_SHAPE_MISMATCH, {"params->residual", "broadcasts to", NULL, NULL}},
      {"c partially on d", c_partial_overlap, OPS_ERR_ALIASING, {"d: expected no overlap with params->c", "same view", "partial", NULL}},
      {"d on a", d_is_a, OPS_ERR_ALIASING, {"d: expected memory disjoint from input a", NULL, NULL, NULL}},
      {"d overlaps itself", d_overlaps_itself, OPS_ERR_ALIASING, {"d: strides", "overlaps itself", NULL, NULL}},
      {"beta without c", beta_without_c, OPS_ERR_NULL_POINTER, {"params->c", "params->beta is 0.5", "got NULL", NULL}},
      {"unknown activation", activation_unknown, OPS_ERR_INVALID_ARGUMENT, {"params->activation", "got 42", NULL, NULL}},
      {"alpha inf", alpha_inf, OPS_ERR_INVALID_ARGUMENT, {"params->alpha", "finite", "got inf", NULL}},
      {"workspace NULL with bytes", workspace_null, OPS_ERR_NULL_POINTER, {"workspace", "64 bytes", "got NULL", NULL}},
  };
  errs_run_cases(build, 0, &g_rng, cases, ERRS_COUNT(cases));
}

static void zero_size_call_is_a_no_op(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  const int64_t as[2] = {0, 4}, bs[2] = {4, 3}, ds[2] = {0, 3};
  opst_tensor b;
  opst_alloc(&b, &g_rng, OPS_DTYPE_F32, 2, bs, OPST_CONTIGUOUS);
  opst_fill_uniform(&b, &g_rng, -1, 1);
  ops_tensor a, d;
  OPST_OK(ops_tensor_init(&a, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, as, NULL));
  OPST_OK(ops_tensor_init(&d, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, ds, NULL));
  OPST_OK(ops_gemm(h, NULL, &a, &b.t, &d, NULL, 0));
  assert_true(opst_untouched(&b));
  opst_free(&b);
  ops_handle_destroy(h);
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("gemm_errors"));
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(valid_call_succeeds),
      cmocka_unit_test(descriptor_faults),
      cmocka_unit_test(call_faults),
      cmocka_unit_test(shape_dtype_alias_param_workspace_faults),
      cmocka_unit_test(zero_size_call_is_a_no_op),
  };
  return cmocka_run_group_tests_name("gemm_errors", tests, setup, NULL);
}
