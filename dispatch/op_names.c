/* Op id <-> name, for the CLI, JSON and messages. Ids index the table directly. */
#include <string.h>

#include "dispatch/op_names.h"

static const char *const k_names[] = {
    [OPS_OP_SDPA] = "sdpa",       [OPS_OP_GEMM] = "gemm",   [OPS_OP_LAYERNORM] = "layernorm",
    [OPS_OP_RMSNORM] = "rmsnorm", [OPS_OP_SOFTMAX] = "softmax", [OPS_OP_SIN_AFFINE] = "sin_affine",
    [OPS_OP_UNARY] = "unary",     [OPS_OP_BINARY] = "binary", [OPS_OP_REDUCE] = "reduce",
    [OPS_OP_SCALE] = "scale",     [OPS_OP_EW_CHAIN] = "ew_chain", [OPS_OP_DROPOUT] = "dropout",
    [OPS_OP_LAYERNORM_BACKWARD] = "layernorm_backward", [OPS_OP_RMSNORM_BACKWARD] = "rmsnorm_backward",
    [OPS_OP_SOFTMAX_BACKWARD] = "softmax_backward", [OPS_OP_ROPE] = "rope",
    [OPS_OP_KV_CACHE_APPEND] = "kv_cache_append", [OPS_OP_SDPA_BACKWARD] = "sdpa_backward",
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

const char *ops_act_name(ops_act fn) {
  static const char *const names[] = {"none", "relu", "gelu_tanh", "gelu_erf", "silu", "sigmoid",
                                      "tanh", "exp",  "neg",       "abs",      "sin"};
  return fn >= 0 && fn < (int)(sizeof names / sizeof names[0]) ? names[fn] : "unknown";
}

const char *ops_binary_op_name(ops_binary_op op) {
  static const char *const names[] = {"add", "sub", "mul", "div", "max", "min"};
  return op >= 0 && op < (int)(sizeof names / sizeof names[0]) ? names[op] : "unknown";
}
