/* The rule table: one small predicate per property of a capability row. */
#include "dispatch/rules.h"

#include <stdio.h>
#include <string.h>

#include "opslib/ops.h"
#include "runtime/tensor_internal.h"

static const char *const k_flag_names[] = {
    "causal", "window", "gqa", "varlen", "lse", "mask", "bias", "residual", "residual_out",
    "beta_c", "batched", "stats_out", "broadcast", "strided", "keepdim", "dv_ne_d",
    "reduce_not_inner", "reduce_not_columns", "dweight", "a_m_major", "b_n_major",
    "kv_cache", "paged", "rope", "heads_apart",
};

const char *opsi_flag_names(uint32_t flags, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof k_flag_names / sizeof k_flag_names[0] && used < n; ++i) {
    if (flags & (1u << i)) {
      used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", k_flag_names[i]);
    }
  }
  return buf;
}

const char *opsi_dim_name(int32_t op, int index) {
  static const char *const sdpa[] = {"batch",    "seqlen_q", "seqlen_k",   "heads_q",
                                     "heads_kv", "head_dim", "head_dim_v", "tokens_q"};
  static const char *const gemm[] = {"batch", "m", "n", "k"};
  static const char *const rows[] = {"rows", "cols"};
  static const char *const ew[] = {"numel", "ndim", "inputs"};
  static const char *const reduce[] = {"outputs", "reduced", "ndim"};
  static const char *const rope[] = {"tokens", "heads", "head_dim", "rotary_dim", "heads_v", "head_dim_v"};
  static _Thread_local char fallback[16];
  const char *const *names = NULL;
  int count = 0;
  switch (op) {
    case OPS_OP_SDPA:
    case OPS_OP_SDPA_BACKWARD: names = sdpa; count = 8; break;
    case OPS_OP_GEMM: names = gemm; count = 4; break;
    case OPS_OP_LAYERNORM:
    case OPS_OP_RMSNORM:
    case OPS_OP_SOFTMAX:
    case OPS_OP_LAYERNORM_BACKWARD:
    case OPS_OP_RMSNORM_BACKWARD:
    case OPS_OP_SOFTMAX_BACKWARD: names = rows; count = 2; break;
    case OPS_OP_SIN_AFFINE:
    case OPS_OP_UNARY:
    case OPS_OP_BINARY:
    case OPS_OP_SCALE:
    case OPS_OP_EW_CHAIN:
    case OPS_OP_DROPOUT: names = ew; count = 3; break;
    case OPS_OP_REDUCE: names = reduce; count = 3; break;
    case OPS_OP_ROPE: names = rope; count = 4; break;
    case OPS_OP_KV_CACHE_APPEND: names = rope; count = 6; break;
    default: break;
  }
  if (index >= 0 && index < count) return names[index];
  snprintf(fallback, sizeof fallback, "dims[%d]", index);
  return fallback;
}

static const char *backend_name(int32_t b) {
  return b == OPS_DEVICE_CPU ? "cpu" : b == OPS_DEVICE_CUDA ? "cuda" : "unknown";
}

static int rule_backend(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                        char *msg, size_t n) {
  (void)d;
  if (r->backend == p->backend) return 1;
  snprintf(msg, n, "runs on %s, the handle's device is %s", backend_name(r->backend), backend_name(p->backend));
  return 0;
}

static int rule_sm_old(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                       char *msg, size_t n) {
  (void)d;
  if (r->backend != OPS_DEVICE_CUDA || p->sm >= r->sm_min) return 1;
  snprintf(msg, n, "needs sm_%d or newer, the device is sm_%d", r->sm_min, p->sm);
  return 0;
}

static int rule_sm_new(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                       char *msg, size_t n) {
  (void)d;
  if (r->backend != OPS_DEVICE_CUDA || p->sm <= r->sm_max) return 1;
  snprintf(msg, n, "built for sm_%d..sm_%d, the device is sm_%d", r->sm_min, r->sm_max, p->sm);
  return 0;
}

static int rule_dtype(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                      char *msg, size_t n) {
  (void)d;
  if (r->dtypes & OPSI_DTYPE_BIT(p->dtype)) return 1;
  char list[96];
  snprintf(msg, n, "takes %s, the input is %s", opsi_format_dtype_mask(r->dtypes, list, sizeof list),
           ops_dtype_name((ops_dtype)p->dtype));
  return 0;
}

static int rule_out_dtype(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                          char *msg, size_t n) {
  (void)d;
  if (r->out_dtypes & OPSI_DTYPE_BIT(p->out_dtype)) return 1;
  char list[96];
  snprintf(msg, n, "writes %s, the output is %s", opsi_format_dtype_mask(r->out_dtypes, list, sizeof list),
           ops_dtype_name((ops_dtype)p->out_dtype));
  return 0;
}

static int rule_variant(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                        char *msg, size_t n) {
  (void)d;
  if (p->variant >= 0 && p->variant < 32 && (r->variants & (1u << p->variant))) return 1;
  snprintf(msg, n, "does not implement variant %d (activation / binary op / reduce op)", p->variant);
  return 0;
}

static int rule_feature(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                        char *msg, size_t n) {
  (void)d;
  const uint32_t missing = p->flags & ~r->flags;
  if (missing == 0) return 1;
  char names[160];
  snprintf(msg, n, "does not support: %s", opsi_flag_names(missing, names, sizeof names));
  return 0;
}

static int rule_alignment(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                          char *msg, size_t n) {
  (void)d;
  if (p->align >= r->align) return 1;
  snprintf(msg, n, "needs operand rows aligned to %d bytes, the call's are aligned to %d",
           r->align, p->align);
  return 0;
}

static int rule_shape(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                      char *msg, size_t n) {
  (void)d;
  for (int i = 0; i < 8; ++i) {
    const int64_t v = p->dims[i];
    const char *name = opsi_dim_name(p->op, i);
    if (r->dim_min[i] > 0 && v < r->dim_min[i]) {
      snprintf(msg, n, "needs %s >= %lld, got %lld", name, (long long)r->dim_min[i], (long long)v);
      return 0;
    }
    if (r->dim_max[i] > 0 && v > r->dim_max[i]) {
      snprintf(msg, n, "needs %s <= %lld, got %lld", name, (long long)r->dim_max[i], (long long)v);
      return 0;
    }
    if (r->dim_multiple[i] > 1 && v % r->dim_multiple[i] != 0) {
      snprintf(msg, n, "needs %s a multiple of %lld, got %lld", name, (long long)r->dim_multiple[i],
               (long long)v);
      return 0;
    }
  }
  if (r->decode_sq_max > 0 && !(p->flags & OPSI_F_KV_CACHE) && p->dims[OPSI_SDPA_SQ] > r->decode_sq_max) {
    snprintf(msg, n, "is a decode kernel: without a KV cache it takes seqlen_q <= %d, got %lld (prefill)",
             r->decode_sq_max, (long long)p->dims[OPSI_SDPA_SQ]);
    return 0;
  }
  if (r->parts != NULL && r->parts(p) <= 1) {
    snprintf(msg, n, "splits the reduction in 1 part here (tiles fill the device, or K is short): the "
                     "unsplit kernel runs it");
    return 0;
  }
  return 1;
}

static int rule_math(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                     char *msg, size_t n) {
  (void)d;
  if (!r->requires_tf32 || p->math_mode == OPS_MATH_ALLOW_TF32) return 1;
  snprintf(msg, n, "rounds f32 inputs to tf32, the handle's math mode is strict");
  return 0;
}

static int rule_determinism(const opsi_problem *p, const opsi_kernel_row *r,
                            const ops_device_info *d, char *msg, size_t n) {
  (void)d;
  if (!p->deterministic || r->deterministic) return 1;
  snprintf(msg, n, "is not deterministic, the handle asks for determinism");
  return 0;
}

static int rule_smem(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                     char *msg, size_t n) {
  if (p->backend != OPS_DEVICE_CUDA || r->smem_bytes <= d->smem_per_block_optin) return 1;
  snprintf(msg, n, "needs %d bytes of shared memory per block, the device allows %lld",
           r->smem_bytes, (long long)d->smem_per_block_optin);
  return 0;
}

static int rule_cluster(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *d,
                        char *msg, size_t n) {
  (void)d;
  if (r->cluster <= 1) return 1;
  if (!opsi_uniform_work(p)) {
    snprintf(msg, n, "runs clusters of %d blocks that share each load, the call's tiles read different ranges",
             r->cluster);
    return 0;
  }
  const int dim = r->tiling.tile_dim[0];
  const int64_t tile = r->tiling.tile[0];
  const int64_t extent = dim >= 0 ? p->dims[dim] : 0; /* >= 0; near 2^63 in an empty call */
  const int64_t tiles = dim >= 0 && tile > 0 ? extent / tile + (extent % tile != 0) : 0;
  if (tiles % r->cluster != 0) {
    snprintf(msg, n, "runs clusters of %d blocks on neighbouring tiles, %s=%lld makes %lld tiles of %lld",
             r->cluster, opsi_dim_name(p->op, dim), (long long)p->dims[dim], (long long)tiles, (long long)tile);
    return 0;
  }
  return 1;
}

static const opsi_rule k_rules[] = {
    {OPS_REASON_BACKEND, "backend", rule_backend},
    {OPS_REASON_SM_TOO_OLD, "sm_too_old", rule_sm_old},
    {OPS_REASON_SM_TOO_NEW, "sm_too_new", rule_sm_new},
    {OPS_REASON_DTYPE, "dtype", rule_dtype},
    {OPS_REASON_OUT_DTYPE, "out_dtype", rule_out_dtype},
    {OPS_REASON_VARIANT, "variant", rule_variant},
    {OPS_REASON_FEATURE, "feature", rule_feature},
    {OPS_REASON_ALIGNMENT, "alignment", rule_alignment},
    {OPS_REASON_SHAPE, "shape", rule_shape},
    {OPS_REASON_MATH_MODE, "math_mode", rule_math},
    {OPS_REASON_DETERMINISM, "determinism", rule_determinism},
    {OPS_REASON_SMEM, "smem", rule_smem},
    {OPS_REASON_CLUSTER, "cluster", rule_cluster},
};

const opsi_rule *opsi_rules(size_t *count) {
  *count = sizeof k_rules / sizeof k_rules[0];
  return k_rules;
}

ops_reason opsi_rules_check(const opsi_problem *p, const opsi_kernel_row *r,
                             const ops_device_info *dev, char *msg, size_t n) {
  for (size_t i = 0; i < sizeof k_rules / sizeof k_rules[0]; ++i) {
    if (!k_rules[i].check(p, r, dev, msg, n)) return k_rules[i].reason;
  }
  msg[0] = '\0';
  return OPS_REASON_ELIGIBLE;
}

const char *ops_reason_name(ops_reason reason) {
  if (reason == OPS_REASON_ELIGIBLE) return "eligible";
  if (reason == OPS_REASON_NOT_PINNED) return "not_pinned";
  for (size_t i = 0; i < sizeof k_rules / sizeof k_rules[0]; ++i) {
    if (k_rules[i].reason == reason) return k_rules[i].name;
  }
  return "unknown";
}
