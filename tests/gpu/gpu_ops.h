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
void sdpa_causal_tiles(void **state);
void sdpa_kv_cache(void **state);
void sdpa_split_merge(void **state);
void sdpa(void **state);
void sdpa_backward(void **state);
void sdpa_backward_is_reproducible(void **state);
void autotune_and_launch_plans(void **state);
void rope(void **state);
void rope_cache_append(void **state);

/* A [B, S, H, D] (varlen [T, H, D]) attention operand in one of the layouts of ops_sdpa.c:
 * 0 contiguous, 1 BHSD through strides, 2 rows padded by 8 elements, 3 random strides. */
void alloc_seq(opst_tensor *t, int32_t dt, int nd, const int64_t *shape, int layout);

/* Varlen draws, their cu_seqlens and random masks (ops_sdpa.c), for the attention tests. */
typedef struct sdpa_varlen {
  int64_t batch, lens_q[4], lens_k[4], tot_q, tot_k, max_q, max_k;
} sdpa_varlen;
void sdpa_draw_varlen(sdpa_varlen *vl, ops_sdpa_params *p, int64_t sq, int64_t sk, int no_keys);
void sdpa_cu_seqlens(opst_tensor *tcq, opst_tensor *tck, const sdpa_varlen *vl);
void sdpa_random_mask(opst_tensor *tm, int32_t dt, int64_t batch, int64_t hq, int64_t sq, int64_t sk);

/* What a handle's profiler last recorded (ops_autotune.c's on_plan, the profiler callback
 * that fills it; the launch-plan checks of ops_autotune.c and ops_gemm.c): records counted, the
 * record's choice, kernel and launch plan. */
typedef struct plan_seen {
  int records, choice;
  char kernel[64], plan[192];
} plan_seen;
void on_plan(const ops_profile_record *r, void *user);

/* A dense attention call (autotune's and launch plans' tests reuse it). */
void sdpa_dense_call(gcall *c, opst_tensor t[5], int32_t dt, int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, int64_t dv, int layout);

#endif /* OPSLIB_TESTS_GPU_GPU_OPS_H_ */
