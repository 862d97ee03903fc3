/* Op id <-> name, for the CLI, JSON and messages. Ids index the table directly. */
#include <string.h>

#include "dispatch/op_names.h"

static const char *const k_names[] = {
    [OPS_OP_SDPA] = "sdpa",       [OPS_OP_GEMM] = "gemm",   [OPS_OP_LAYERNORM] = "layernorm",
    [OPS_OP_RMSNORM] = "rmsnorm", [OPS_OP_SOFTMAX] = "softmax", [OPS_OP_SIN_AFFINE] = "sin_affine",
    [OPS_OP_UNARY] = "unary",     [OPS_OP_BINARY] = "binary", [OPS_OP_REDUCE] = "reduce",
};

#define SLOTS ((int)(sizeof k_names / sizeof k_names[0]))

const char *ops_op_name(ops_op op) {
  return op > 0 && op < SLOTS && k_names[op] != NULL ? k_names[op] : "unknown";
}

ops_op ops_op_from_name(const char *name) {
  for (int op = 1; name != NULL && op < SLOTS; ++op) {
    if (k_names[op] != NULL && strcmp(k_names[op], name) == 0) return (ops_op)op;
  }
  return (ops_op)0;
}

int ops_op_count(void) { return SLOTS - 1; }
