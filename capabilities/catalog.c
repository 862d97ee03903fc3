/* The op id -> rows index (O(1)) and the flat list of every row. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "capabilities/rows.h"
#include "opslib/ops.h"

#define DECLARE_ROWS(op)                        \
  extern const opsi_kernel_row opsi_##op##_rows[]; \
  extern const size_t opsi_##op##_row_count;

DECLARE_ROWS(sdpa)
DECLARE_ROWS(gemm)
DECLARE_ROWS(layernorm)
DECLARE_ROWS(rmsnorm)
DECLARE_ROWS(softmax)
DECLARE_ROWS(sin_affine)
DECLARE_ROWS(unary)
DECLARE_ROWS(binary)
DECLARE_ROWS(reduce)
DECLARE_ROWS(scale)
DECLARE_ROWS(ew_chain)
DECLARE_ROWS(dropout)
DECLARE_ROWS(layernorm_backward)
DECLARE_ROWS(rmsnorm_backward)
DECLARE_ROWS(softmax_backward)
DECLARE_ROWS(rope)
DECLARE_ROWS(kv_cache_append)
DECLARE_ROWS(sdpa_backward)

typedef struct {
  const opsi_kernel_row *rows;
  const size_t *count;
} op_rows;

/* Indexed by ops_op; 0 is unused. */
static const op_rows k_by_op[] = {
    [OPS_OP_SDPA] = {opsi_sdpa_rows, &opsi_sdpa_row_count},
    [OPS_OP_GEMM] = {opsi_gemm_rows, &opsi_gemm_row_count},
    [OPS_OP_LAYERNORM] = {opsi_layernorm_rows, &opsi_layernorm_row_count},
    [OPS_OP_RMSNORM] = {opsi_rmsnorm_rows, &opsi_rmsnorm_row_count},
    [OPS_OP_SOFTMAX] = {opsi_softmax_rows, &opsi_softmax_row_count},
    [OPS_OP_SIN_AFFINE] = {opsi_sin_affine_rows, &opsi_sin_affine_row_count},
    [OPS_OP_UNARY] = {opsi_unary_rows, &opsi_unary_row_count},
    [OPS_OP_BINARY] = {opsi_binary_rows, &opsi_binary_row_count},
    [OPS_OP_REDUCE] = {opsi_reduce_rows, &opsi_reduce_row_count},
    [OPS_OP_SCALE] = {opsi_scale_rows, &opsi_scale_row_count},
    [OPS_OP_EW_CHAIN] = {opsi_ew_chain_rows, &opsi_ew_chain_row_count},
    [OPS_OP_DROPOUT] = {opsi_dropout_rows, &opsi_dropout_row_count},
    [OPS_OP_LAYERNORM_BACKWARD] = {opsi_layernorm_backward_rows, &opsi_layernorm_backward_row_count},
    [OPS_OP_RMSNORM_BACKWARD] = {opsi_rmsnorm_backward_rows, &opsi_rmsnorm_backward_row_count},
    [OPS_OP_SOFTMAX_BACKWARD] = {opsi_softmax_backward_rows, &opsi_softmax_backward_row_count},
    [OPS_OP_ROPE] = {opsi_rope_rows, &opsi_rope_row_count},
    [OPS_OP_KV_CACHE_APPEND] = {opsi_kv_cache_append_rows, &opsi_kv_cache_append_row_count},
    [OPS_OP_SDPA_BACKWARD] = {opsi_sdpa_backward_rows, &opsi_sdpa_backward_row_count},
};

#define OP_SLOTS (sizeof k_by_op / sizeof k_by_op[0])

const opsi_kernel_row *opsi_rows_for_op(int32_t op, size_t *count) {
  if (op <= 0 || (size_t)op >= OP_SLOTS || k_by_op[op].rows == NULL) {
    *count = 0;
    return NULL;
  }
  *count = *k_by_op[op].count;
  return k_by_op[op].rows;
}

#define MAX_ROWS 256

static const opsi_kernel_row *g_all[MAX_ROWS];
static size_t g_all_count;
static pthread_once_t g_all_once = PTHREAD_ONCE_INIT;

static void build_all(void) {
  size_t k = 0;
  for (size_t op = 1; op < OP_SLOTS; ++op) {
    for (size_t i = 0; k_by_op[op].rows != NULL && i < *k_by_op[op].count && k < MAX_ROWS; ++i) {
      g_all[k++] = &k_by_op[op].rows[i];
    }
  }
  g_all_count = k;
}

const opsi_kernel_row *const *opsi_all_rows(size_t *count) {
  pthread_once(&g_all_once, build_all);
  *count = g_all_count;
  return g_all;
}

const opsi_kernel_row *opsi_row_named(const char *name) {
  size_t n = 0;
  const opsi_kernel_row *const *rows = opsi_all_rows(&n);
  for (size_t i = 0; i < n; ++i) {
    if (strcmp(rows[i]->name, name) == 0) return rows[i];
  }
  return NULL;
}
