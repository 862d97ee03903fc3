/*
 * The CUDA kernels against the CPU reference. Each random problem (random shapes with odd
 * sizes and extents of 1 and 0, random strides and offsets, broadcasting, in-place calls,
 * f32 / f16 / bf16) runs once on the CPU handle, and then on the GPU once per CUDA kernel
 * of its op, pinned by name: a kernel that refuses the problem must fail with
 * OPS_ERR_UNSUPPORTED and write nothing; one that accepts it must write every element of
 * every output (outputs start poisoned), nothing outside the views, and match the
 * reference: relative L2 error and a per-element bound scaled to the output (f32 1e-5,
 * f16 1e-3, bf16 5e-3 in L2). Then the dispatcher's own choice runs unpinned. At the end
 * every CUDA kernel naming this test must have run, with every feature its row claims.
 * Without a CUDA device (CI) it is a dry run: the same problems run on the CPU and are
 * explained on a described H100, and the coverage check asks which kernels would have
 * served them; the GPU-only test is skipped and says why.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_ops.h"
#include "tests/support/gpu_call.h"
#include "tests/support/opst.h"
#include "tests/support/coverage.h"

/* ---- the dispatcher's choices for rows of 64 to 65536 ------------------------------ */

static void every_row_length_has_a_kernel(void **state) {
  (void)state;
  for (int64_t cols = 64; cols <= 65536; cols *= 2) {
    const int64_t s[2] = {4, cols};
    ops_tensor x, w;
    OPST_OK(ops_tensor_init(&x, (void *)(uintptr_t)4096, OPS_DTYPE_BF16, ops_device_cuda(0), 2, s, NULL));
    OPST_OK(ops_tensor_init(&w, (void *)(uintptr_t)4096, OPS_DTYPE_BF16, ops_device_cuda(0), 1, &cols, NULL));
    ops_explain e;
    e.struct_size = sizeof e;
    OPST_OK(ops_rmsnorm_explain(g_gpu, NULL, &x, &w, &x, &e));
    assert_true(e.chosen >= 0);
    printf("[ ROWS     ] rmsnorm bf16 4 x %-6lld -> %s\n", (long long)cols, e.verdicts[e.chosen].kernel_name);
    OPST_OK(ops_softmax_explain(g_gpu, NULL, &x, &x, &e));
    assert_true(e.chosen >= 0);
  }
}

static void claimed_features_are_exercised(void **state) {
  (void)state;
  if (g_have_cuda) {
    OPST_OK(ops_handle_flush_profiler(g_gpu));
    printf("[ RUNS     ] %d kernel runs checked against the CPU, %d pinned refusals checked\n", g_runs, g_refusals);
  } else {
    printf("[ DRY RUN  ] no CUDA device: coverage below is of the kernels that would run (explain on a "
           "described sm_90 device); no result was checked on a GPU\n");
  }
  opst_coverage_check("//tests/gpu:gpu_ops_test");
}

static int setup(void **state) {
  (void)state;
  g_have_cuda = opst_have_cuda("gpu_ops");
  opst_rng_init(&g_rng, opst_seed("gpu_ops"));
  g_cpu = opst_cpu_handle();
  if (g_have_cuda) {
    if (ops_handle_create(&g_gpu, ops_device_cuda(0)) != OPS_OK) return -1;
    opst_coverage_start(g_gpu);
  } else { /* the dry run: problems generated and explained, nothing launched */
    ops_device_info h100;
    h100.struct_size = sizeof h100;
    if (ops_device_info_for_sm(90, &h100) != OPS_OK || ops_handle_create_virtual(&g_gpu, &h100) != OPS_OK) return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ops_handle_destroy(g_cpu);
  if (g_gpu) ops_handle_destroy(g_gpu);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rows_forward),
      cmocka_unit_test(rows_backward),
      cmocka_unit_test(reductions),
      cmocka_unit_test(elementwise),
      cmocka_unit_test(dropout_is_reproducible),
      cmocka_unit_test(elementwise_chains),
      cmocka_unit_test(gemm),
      cmocka_unit_test(gemm_many_tiles),
      cmocka_unit_test(gemm_split_k),
      cmocka_unit_test(gemm_tf32),
      cmocka_unit_test(sdpa_many_tiles),
      cmocka_unit_test(sdpa_wide_windows),
      cmocka_unit_test(sdpa_causal_tiles),
      cmocka_unit_test(sdpa_kv_cache),
      cmocka_unit_test(sdpa_split_merge),
      cmocka_unit_test(sdpa),
      cmocka_unit_test(sdpa_backward),
      cmocka_unit_test(sdpa_backward_is_reproducible),
      cmocka_unit_test(autotune_and_launch_plans),
      cmocka_unit_test(rope),
      cmocka_unit_test(rope_cache_append),
      cmocka_unit_test(every_row_length_has_a_kernel),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  /* OPSLIB_TEST_FILTER=sdpa*: only the tests whose names match (a sanitizer run of one
   * family; the coverage test then does not run) */
  const char *filter = getenv("OPSLIB_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0') cmocka_set_test_filter(filter);
  return cmocka_run_group_tests_name("gpu_ops", tests, setup, teardown);
}
