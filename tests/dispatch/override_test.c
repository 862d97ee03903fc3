#define _POSIX_C_SOURCE 200809L /* setenv */
/*
 * Kernel overrides: ops_handle_pin_kernel and OPSLIB_FORCE_KERNEL pin a kernel by name; a
 * pinned kernel that cannot serve a call fails it with the kernel's reasons and nothing
 * else runs; unknown names are refused with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/opst.h"

static void pins_by_name(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  OPST_OK(ops_handle_pin_kernel(h, "cpu_softmax_ref"));
  float x[4] = {1, 2, 3, 4}, y[4];
  const int64_t s[1] = {4};
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  assert_int_equal(ops_handle_pin_kernel(h, "cuda_softmax_imaginary"), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "got 'cuda_softmax_imaginary'"));
  assert_non_null(strstr(ops_last_error(), "opsctl list"));
  assert_int_equal(ops_handle_pin_kernel(NULL, "cpu_softmax_ref"), OPS_ERR_NULL_POINTER);
  OPST_OK(ops_handle_pin_kernel(h, NULL)); /* clears */
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  ops_handle_destroy(h);
}

/* On a described GPU the pinned CPU kernel is the only candidate, and it cannot serve. */
static void a_pinned_kernel_that_cannot_serve_fails_the_call(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  OPST_OK(ops_handle_pin_kernel(v, "cpu_rmsnorm_ref"));
  const int64_t xs[2] = {16, 4096}, ws[1] = {4096};
  ops_tensor x, w;
  OPST_OK(ops_tensor_init(&x, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 2, xs, NULL));
  OPST_OK(ops_tensor_init(&w, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 1, ws, NULL));
  ops_explain e;
  e.struct_size = sizeof e;
  OPST_OK(ops_rmsnorm_explain(v, NULL, &x, &w, &x, &e));
  assert_int_equal(e.chosen, -1);
  assert_int_equal(e.verdicts[0].reason, OPS_REASON_BACKEND);
  size_t bytes = 0;
  assert_int_equal(ops_rmsnorm_workspace_size(v, NULL, &x, &w, &x, &bytes), OPS_ERR_UNSUPPORTED);
  assert_non_null(strstr(ops_last_error(), "cpu_rmsnorm_ref [backend]"));
  ops_handle_destroy(v);
}

static void the_environment_pins_at_creation(void **state) {
  (void)state;
  setenv("OPSLIB_FORCE_KERNEL", "cpu_gemm_ref,cpu_sdpa_ref", 1);
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cpu()));
  ops_handle_destroy(h);
  setenv("OPSLIB_FORCE_KERNEL", "cpu_gemm_ref,not_a_kernel", 1);
  h = (ops_handle)1;
  assert_int_equal(ops_handle_create(&h, ops_device_cpu()), OPS_ERR_INVALID_ARGUMENT);
  assert_null(h);
  assert_non_null(strstr(ops_last_error(), "OPSLIB_FORCE_KERNEL"));
  assert_non_null(strstr(ops_last_error(), "'not_a_kernel'"));
  unsetenv("OPSLIB_FORCE_KERNEL");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pins_by_name),
      cmocka_unit_test(a_pinned_kernel_that_cannot_serve_fails_the_call),
      cmocka_unit_test(the_environment_pins_at_creation),
  };
  return cmocka_run_group_tests_name("override", tests, NULL, NULL);
}
