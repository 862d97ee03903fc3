/* Handles: creation per device, settings, device properties, and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/opst.h"

static void cpu_handle_reports_the_cpu(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  ops_device_info info;
  memset(&info, 0xFF, sizeof info);
  info.struct_size = sizeof info;
  OPST_OK(ops_handle_get_device_info(h, &info));
  assert_string_equal(info.name, "cpu");
  assert_int_equal(info.device.type, OPS_DEVICE_CPU);
  assert_int_equal(info.sm_version, 0);
  assert_int_equal(info.code_sm, 0);
  assert_int_equal(info.sm_count, 0);
  OPST_OK(ops_handle_destroy(h));
}

static void settings_round_trip(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  ops_math_mode m;
  OPST_OK(ops_handle_get_math_mode(h, &m));
  assert_int_equal(m, OPS_MATH_STRICT);
  OPST_OK(ops_handle_set_math_mode(h, OPS_MATH_ALLOW_TF32));
  OPST_OK(ops_handle_get_math_mode(h, &m));
  assert_int_equal(m, OPS_MATH_ALLOW_TF32);
  assert_int_equal(ops_handle_set_math_mode(h, (ops_math_mode)7), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "got 7"));

  int det = -1;
  OPST_OK(ops_handle_get_deterministic(h, &det));
  assert_int_equal(det, 0);
  OPST_OK(ops_handle_set_deterministic(h, 5));
  OPST_OK(ops_handle_get_deterministic(h, &det));
  assert_int_equal(det, 1);

  void *stream = (void *)1;
  OPST_OK(ops_handle_get_stream(h, &stream));
  assert_null(stream);
  int dummy;
  assert_int_equal(ops_handle_set_stream(h, &dummy), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "CPU handle"));
  OPST_OK(ops_handle_set_stream(h, NULL));
  OPST_OK(ops_handle_destroy(h));
}

static void bad_arguments_are_named(void **state) {
  (void)state;
  assert_int_equal(ops_handle_create(NULL, ops_device_cpu()), OPS_ERR_NULL_POINTER);
  ops_handle h = (ops_handle)1;
  ops_device weird = {7, 0};
  assert_int_equal(ops_handle_create(&h, weird), OPS_ERR_UNSUPPORTED_DEVICE);
  assert_null(h);
  assert_non_null(strstr(ops_last_error(), "got 7"));
  ops_device cpu1 = {OPS_DEVICE_CPU, 1};
  assert_int_equal(ops_handle_create(&h, cpu1), OPS_ERR_UNSUPPORTED_DEVICE);
  assert_int_equal(ops_handle_set_math_mode(NULL, OPS_MATH_STRICT), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_handle_get_stream(NULL, NULL), OPS_ERR_NULL_POINTER);
  OPST_OK(ops_handle_destroy(NULL));

  h = opst_cpu_handle();
  ops_device_info info;
  info.struct_size = 12;
  assert_int_equal(ops_handle_get_device_info(h, &info), OPS_ERR_STRUCT_SIZE);
  assert_non_null(strstr(ops_last_error(), "got 12"));
  assert_int_equal(ops_handle_get_device_info(h, NULL), OPS_ERR_NULL_POINTER);
  assert_int_equal(ops_handle_get_deterministic(h, NULL), OPS_ERR_NULL_POINTER);
  OPST_OK(ops_handle_destroy(h));
}

/* Without a usable GPU a CUDA handle is refused with a message that says why; with one,
 * its properties are read. Both branches assert, so the test is meaningful on either host. */
static void cuda_handle_matches_the_machine(void **state) {
  (void)state;
  ops_handle h = NULL;
  const ops_status st = ops_handle_create(&h, ops_device_cuda(0));
  if (ops_cuda_device_count() == 0) {
    assert_int_equal(st, OPS_ERR_UNSUPPORTED_DEVICE);
    assert_non_null(strstr(ops_last_error(), "cuda:0"));
    assert_null(h);
    return;
  }
  OPST_OK(st);
  ops_device_info info;
  info.struct_size = sizeof info;
  OPST_OK(ops_handle_get_device_info(h, &info));
  assert_true(info.sm_version >= 50);
  assert_true(info.code_sm > 0 && info.code_sm <= info.sm_version);
  assert_true(info.sm_count > 0);
  assert_true(info.smem_per_block_optin >= 48 * 1024);
  OPST_OK(ops_handle_destroy(h));
  const ops_status far = ops_handle_create(&h, ops_device_cuda(ops_cuda_device_count()));
  assert_int_equal(far, OPS_ERR_UNSUPPORTED_DEVICE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cpu_handle_reports_the_cpu),
      cmocka_unit_test(settings_round_trip),
      cmocka_unit_test(bad_arguments_are_named),
      cmocka_unit_test(cuda_handle_matches_the_machine),
  };
  return cmocka_run_group_tests_name("handle", tests, NULL, NULL);
}
