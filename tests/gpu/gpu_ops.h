/* gpu_ops_test's families (tests/gpu/ops_<family>.c): the cmocka tests main runs. */
#ifndef OPSLIB_TESTS_GPU_GPU_OPS_H_
#define OPSLIB_TESTS_GPU_GPU_OPS_H_

#include <stdint.h>

#include "tests/support/gpu_call.h"

void rows_forward(void **state);
void rows_backward(void **state);
void reductions(void **state);
void elementwise(void **state);
void dropout_is_reproducible(void **state);
void elementwise_chains(void **state);
void gemm(void **state);
void gemm_tf32(void **state);
void gemm_many_tiles(void **state);
void gemm_split_k(void **state);
void sdpa_many_tiles(void **state);
void sdpa_wide_windows(void **state);
void sdpa_kv_cache(void **state);
void sdpa_split_merge(void **state);
void sdpa(void **state);
void autotune_and_launch_plans(void **state);
void rope(void **state);
void rope_cache_append(void **state);

/* A dense attention call (autotune's and launch plans' tests reuse it). */
void sdpa_dense_call(gcall *c, opst_tensor t[5], int32_t dt, int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, int64_t dv, int layout);

#endif /* OPSLIB_TESTS_GPU_GPU_OPS_H_ */
