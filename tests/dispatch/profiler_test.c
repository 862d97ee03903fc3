/*
 * The profiling hook: one record per op call that runs a kernel, with the op's own byte
 * and flop counts and a time; OPSLIB_PROFILE writes one valid JSON object per line.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/json_check.h"
#include "tests/support/opst.h"

static ops_profile_record g_last;
static char g_problem[256];
static int g_count;

static void keep(const ops_profile_record *r, void *user) {
  (void)user;
  g_last = *r;
  snprintf(g_problem, sizeof g_problem, "%s", r->problem);
  ++g_count;
}

static void records_carry_the_ops_own_counts(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  OPST_OK(ops_handle_set_profiler(h, keep, NULL));
  enum { M = 48, N = 40, K = 32 };
  static float a[M * K], b[K * N], d[M * N];
  for (int i = 0; i < M * K; ++i) a[i] = 1.0f / (float)(1 + i % 7);
  for (int i = 0; i < K * N; ++i) b[i] = 1.0f / (float)(1 + i % 5);
  const int64_t as[2] = {M, K}, bs[2] = {K, N}, ds[2] = {M, N};
  ops_tensor ta, tb, td;
  OPST_OK(ops_tensor_init(&ta, a, OPS_DTYPE_F32, ops_device_cpu(), 2, as, NULL));
  OPST_OK(ops_tensor_init(&tb, b, OPS_DTYPE_F32, ops_device_cpu(), 2, bs, NULL));
  OPST_OK(ops_tensor_init(&td, d, OPS_DTYPE_F32, ops_device_cpu(), 2, ds, NULL));
  OPST_OK(ops_gemm(h, NULL, &ta, &tb, &td, NULL, 0));
  assert_int_equal(g_count, 1);
  assert_int_equal(g_last.struct_size, sizeof(ops_profile_record));
  assert_int_equal(g_last.op, OPS_OP_GEMM);
  assert_string_equal(g_last.op_name, "gemm");
  assert_string_equal(g_last.kernel_name, "cpu_gemm_ref");
  assert_int_equal(g_last.kernel_id, 200);
  assert_true(g_last.flops == 2.0 * M * N * K);
  assert_true(g_last.bytes == 4.0 * (M * K + K * N + M * N));
  assert_true(g_last.time_us > 0);
  assert_true(g_last.gbps > 0 && g_last.tflops > 0);
  assert_int_equal(g_last.grid[0], 0); /* no grid on the CPU */
  assert_int_equal(g_last.choice, OPS_CHOICE_MODEL);
  assert_null(g_last.launch_plan); /* a CPU kernel runs one way */
  assert_int_equal(g_last.cluster_blocks, 0); /* no clusters on the CPU */
  assert_non_null(strstr(g_problem, "gemm f32 -> f32 on cpu: batch=1 m=48 n=40 k=32"));
  /* Failed calls and empty calls run nothing, so they record nothing. */
  assert_int_equal(ops_gemm(h, NULL, &ta, &ta, &td, NULL, 0), OPS_ERR_SHAPE_MISMATCH);
  const int64_t zero[2] = {0, N};
  ops_tensor tz, tzd;
  OPST_OK(ops_tensor_init(&tz, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, (const int64_t[]){0, K}, NULL));
  OPST_OK(ops_tensor_init(&tzd, NULL, OPS_DTYPE_F32, ops_device_cpu(), 2, zero, NULL));
  OPST_OK(ops_gemm(h, NULL, &tz, &tb, &tzd, NULL, 0));
  assert_int_equal(g_count, 1);
  OPST_OK(ops_handle_set_profiler(h, NULL, NULL)); /* off */
  OPST_OK(ops_gemm(h, NULL, &ta, &tb, &td, NULL, 0));
  assert_int_equal(g_count, 1);
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(ops_handle_set_profiler(NULL, keep, NULL), OPS_ERR_NULL_POINTER);
  ops_handle_destroy(h);
}

static void opslib_profile_writes_json_lines(void **state) {
  (void)state;
  char path[] = "/tmp/opslib_profile_XXXXXX";
  const int fd = mkstemp(path);
  assert_true(fd >= 0);
  setenv("OPSLIB_PROFILE", path, 1);
  ops_handle h = opst_cpu_handle();
  unsetenv("OPSLIB_PROFILE");
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
  const int64_t s[2] = {2, 3}, r[1] = {2};
  ops_tensor tx, ty, tr;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 2, s, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 2, s, NULL));
  OPST_OK(ops_tensor_init(&tr, y, OPS_DTYPE_F32, ops_device_cpu(), 1, r, NULL));
  ops_reduce_params rp;
  ops_reduce_params_init(&rp);
  rp.axes = 1u << 1;
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  OPST_OK(ops_unary(h, NULL, &tx, &ty, NULL, 0));
  OPST_OK(ops_reduce(h, &rp, &tx, &tr, NULL, 0));
  ops_handle_destroy(h);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  char line[1024];
  int lines = 0;
  const char *kernels[3] = {"cpu_softmax_ref", "cpu_unary_ref", "cpu_reduce_ref"};
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    if (!opst_json_valid(line)) {
      print_error("line %d is not JSON: %s\n", lines, line);
      fail();
    }
    assert_true(lines < 3);
    assert_non_null(strstr(line, kernels[lines]));
    assert_non_null(strstr(line, "\"time_us\":"));
    assert_non_null(strstr(line, "\"gbps\":"));
    assert_non_null(strstr(line, "\"choice\":\"model\""));
    assert_non_null(strstr(line, "\"cluster\":0"));
    assert_null(strstr(line, "\"plan\":")); /* written only for kernels with launch variants */
    ++lines;
  }
  fclose(f);
  remove(path);
  assert_int_equal(lines, 3);
  setenv("OPSLIB_PROFILE", "/nonexistent-dir/profile.jsonl", 1);
  ops_handle bad = NULL;
  assert_int_equal(ops_handle_create(&bad, ops_device_cpu()), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "OPSLIB_PROFILE"));
  unsetenv("OPSLIB_PROFILE");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(records_carry_the_ops_own_counts),
      cmocka_unit_test(opslib_profile_writes_json_lines),
  };
  return cmocka_run_group_tests_name("profiler", tests, NULL, NULL);
}
