/*
 * Every reason code is reached: each rule of dispatch/rules.c against a synthetic CUDA row
 * (white-box, so that restrictions no real row of this build has yet can be exercised), and
 * OPS_REASON_NOT_PINNED through a handle's pin.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/rows.h"
#include "dispatch/dispatch.h"
#include "dispatch/rules.h"
#include "opslib/opslib.h"
#include "runtime/handle_internal.h"
#include "tests/support/opst.h"

static opsi_kernel_row g_row;
static opsi_problem g_p;
static ops_device_info g_dev;

static void reset(void) {
  memset(&g_row, 0, sizeof g_row);
  g_row.id = 99901;
  g_row.name = "synthetic_softmax_sm90";
  g_row.op = OPS_OP_SOFTMAX;
  g_row.backend = OPS_DEVICE_CUDA;
  g_row.sm_min = 90, g_row.sm_max = 90;
  g_row.dtypes = g_row.out_dtypes = OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16);
  g_row.variants = 1u << 0;
  g_row.flags = OPSI_F_STRIDED;
  g_row.align = 16;
  g_row.dim_min[OPSI_ROWS_COLS] = 64, g_row.dim_max[OPSI_ROWS_COLS] = 65536, g_row.dim_multiple[OPSI_ROWS_COLS] = 8;
  g_row.smem_bytes = 100 * 1024;
  g_row.threads = 256;
  memset(&g_p, 0, sizeof g_p);
  g_p.op = OPS_OP_SOFTMAX, g_p.backend = OPS_DEVICE_CUDA, g_p.sm = 90;
  g_p.dtype = g_p.out_dtype = OPS_DTYPE_BF16;
  g_p.align = 16;
  g_p.dims[OPSI_ROWS_ROWS] = 1024, g_p.dims[OPSI_ROWS_COLS] = 4096;
  OPST_OK(ops_device_info_for_sm(90, &g_dev));
}

static void expect(ops_reason want, const char *needle) {
  char msg[192];
  const ops_reason got = opsi_rules_check(&g_p, &g_row, &g_dev, msg, sizeof msg);
  if (got != want || (needle != NULL && strstr(msg, needle) == NULL)) {
    print_error("expected %s (\"%s\"), got %s: \"%s\"\n", ops_reason_name(want), needle ? needle : "",
                ops_reason_name(got), msg);
    fail();
  }
}

static void each_rule_reaches_its_reason(void **state) {
  (void)state;
  reset(); expect(OPS_REASON_ELIGIBLE, NULL);
  reset(); g_p.backend = OPS_DEVICE_CPU; expect(OPS_REASON_BACKEND, "runs on cuda, the handle's device is cpu");
  reset(); g_p.sm = 80; expect(OPS_REASON_SM_TOO_OLD, "needs sm_90 or newer, the device is sm_80");
  reset(); g_p.sm = 100; expect(OPS_REASON_SM_TOO_NEW, "built for sm_90..sm_90, the device is sm_100");
  reset(); g_p.dtype = OPS_DTYPE_F32; expect(OPS_REASON_DTYPE, "takes f16, bf16, the input is f32");
  reset(); g_p.out_dtype = OPS_DTYPE_F32; expect(OPS_REASON_OUT_DTYPE, "writes f16, bf16, the output is f32");
  reset(); g_p.variant = 3; expect(OPS_REASON_VARIANT, "variant 3");
  reset(); g_p.flags = OPSI_F_STRIDED | OPSI_F_CAUSAL | OPSI_F_VARLEN; expect(OPS_REASON_FEATURE, "does not support: causal, varlen");
  reset(); g_p.align = 4; expect(OPS_REASON_ALIGNMENT, "aligned to 16 bytes, the call's are aligned to 4");
  reset(); g_p.dims[OPSI_ROWS_COLS] = 32; expect(OPS_REASON_SHAPE, "needs cols >= 64, got 32");
  reset(); g_p.dims[OPSI_ROWS_COLS] = 70000; expect(OPS_REASON_SHAPE, "needs cols <= 65536, got 70000");
  reset(); g_p.dims[OPSI_ROWS_COLS] = 4100; expect(OPS_REASON_SHAPE, "needs cols a multiple of 8, got 4100");
  reset(); g_row.requires_tf32 = 1; g_p.dtype = g_p.out_dtype = OPS_DTYPE_F16; expect(OPS_REASON_MATH_MODE, "tf32");
  reset(); g_row.requires_tf32 = 1; g_p.math_mode = OPS_MATH_ALLOW_TF32; expect(OPS_REASON_ELIGIBLE, NULL);
  reset(); g_p.deterministic = 1; expect(OPS_REASON_DETERMINISM, "not deterministic");
  reset(); g_p.deterministic = 1; g_row.deterministic = 1; expect(OPS_REASON_ELIGIBLE, NULL);
  reset(); g_dev.smem_per_block_optin = 48 * 1024; expect(OPS_REASON_SMEM, "needs 102400 bytes of shared memory");
}

static void every_reason_has_a_name(void **state) {
  (void)state;
  size_t n = 0;
  const opsi_rule *rules = opsi_rules(&n);
  int seen[16] = {0};
  for (size_t i = 0; i < n; ++i) seen[rules[i].reason] = 1;
  for (int r = OPS_REASON_BACKEND; r <= OPS_REASON_SMEM; ++r) {
    assert_true(seen[r]); /* every rule reason has a rule */
  }
  for (int r = OPS_REASON_ELIGIBLE; r <= OPS_REASON_NOT_PINNED; ++r) {
    assert_string_not_equal(ops_reason_name((ops_reason)r), "unknown");
  }
  assert_string_equal(ops_reason_name(OPS_REASON_NOT_PINNED), "not_pinned");
  assert_int_equal(OPS_REASON_SMEM, 12); /* stable values */
  assert_int_equal(OPS_REASON_NOT_PINNED, 13);
}

/* A pin on a kernel the op does not have leaves every real row not_pinned: the call fails,
 * and nothing runs in its place. (A pin names a real kernel in public use; setting the id
 * directly is how this test reaches the reason with a catalog of one row per op.) */
static void a_pin_excludes_the_others(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  h->pinned[OPS_OP_SOFTMAX] = 99901;
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, y[8];
  memset(y, 0x7F, sizeof y);
  const int64_t s[1] = {8};
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  ops_explain e;
  e.struct_size = sizeof e;
  OPST_OK(ops_softmax_explain(h, NULL, &tx, &ty, &e));
  assert_int_equal(e.chosen, -1);
  assert_int_equal(e.verdicts[0].reason, OPS_REASON_NOT_PINNED);
  assert_non_null(strstr(e.verdicts[0].message, "kernel id 99901 is pinned"));
  assert_int_equal(ops_softmax(h, NULL, &tx, &ty, NULL, 0), OPS_ERR_UNSUPPORTED);
  assert_non_null(strstr(ops_last_error(), "cpu_softmax_ref [not_pinned]"));
  for (int i = 0; i < 8; ++i) assert_int_equal(((unsigned char *)y)[4 * i], 0x7F);
  ops_handle_destroy(h);
}

/* Launchers name what failed (core/launch.h); the dispatch layer writes the message. */
static ops_status fails_naming(const opsi_launch *ctx, const void *args) {
  (void)args;
  return opsi_launch_failed(ctx, OPS_ERR_CUDA, "the tensor map of k", "cuTensorMapEncodeTiled failed", 1);
}
static ops_status fails_plainly(const opsi_launch *ctx, const void *args) {
  (void)args;
  return opsi_launch_failed(ctx, OPS_ERR_INTERNAL, "the pair kernel got a call its row excludes", NULL, 0);
}
static ops_status succeeds(const opsi_launch *ctx, const void *args) {
  (void)ctx, (void)args;
  return OPS_OK;
}

static void launch_failures_become_messages(void **state) {
  (void)state;
  opsi_kernel_row row;
  memset(&row, 0, sizeof row);
  row.name = "fake_kernel";
  row.backend = OPS_DEVICE_CPU;
  opsi_launch_info info;
  memset(&info, 0, sizeof info);
  const opsi_launch ctx = {NULL, 0, NULL, NULL, 0, &info, 0};
  row.launch = fails_naming;
  assert_int_equal(opsi_run_row("ops_sdpa", &row, &ctx, NULL), OPS_ERR_CUDA);
  assert_string_equal(ops_last_error(),
                      "ops_sdpa: fake_kernel: the tensor map of k: cuTensorMapEncodeTiled failed (error 1)");
  row.launch = fails_plainly;
  assert_int_equal(opsi_run_row("ops_sdpa", &row, &ctx, NULL), OPS_ERR_INTERNAL);
  assert_string_equal(ops_last_error(), "ops_sdpa: fake_kernel: the pair kernel got a call its row excludes");
  row.launch = succeeds; /* a success leaves no stale failure behind */
  assert_int_equal(opsi_run_row("ops_sdpa", &row, &ctx, NULL), OPS_OK);
  assert_null(info.error.what);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(launch_failures_become_messages),
      cmocka_unit_test(each_rule_reaches_its_reason),
      cmocka_unit_test(every_reason_has_a_name),
      cmocka_unit_test(a_pin_excludes_the_others),
  };
  return cmocka_run_group_tests_name("rules", tests, NULL, NULL);
}
