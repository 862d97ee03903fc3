/*
 * opslib/fusion.h: declarative fusion of short op chains.
 *
 * A chain is a list of op nodes in which each node reads the previous node's output. The
 * fusion rules (a table in dispatch/fusion_rules.c) match patterns of op ids in it:
 *   gemm -> add(bias) -> act [-> add(residual)]      => gemm with that epilogue
 *   gemm -> act [-> add(residual)],  gemm -> add      => gemm with that epilogue
 *   add -> rmsnorm,  add -> layernorm                 => the norm with a fused residual add
 *   unary / binary / scale / sin_affine, 2 or more    => one elementwise-chain kernel
 *   gemm(Q, K^T) -> scale [-> add(mask)] -> softmax -> gemm(P, V)  => sdpa
 * and fuse where their conditions hold: the intermediate has no other consumer, the shapes
 * and dtypes fit the fused form, the reduction order is kept when asked, and a kernel on
 * the handle absorbs the fused form (asked of the dispatcher itself). Each refused fusion
 * is reported with a reason, like a refused kernel. A plan's result equals the unfused
 * chain's up to the rounding of the intermediates it no longer stores.
 */
#ifndef OPSLIB_FUSION_H_
#define OPSLIB_FUSION_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/handle.h"
#include "opslib/ops.h"
#include "opslib/status.h"
#include "opslib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One op of a chain. Inputs by op:
 *   OPS_OP_GEMM: in[0] = a, in[1] = b, out = d      OPS_OP_BINARY: in[0] = a, in[1] = b
 *   OPS_OP_RMSNORM, OPS_OP_LAYERNORM: in[0] = x, in[1] = weight
 *   OPS_OP_UNARY, OPS_OP_SCALE, OPS_OP_SIN_AFFINE, OPS_OP_SOFTMAX: in[0] = x
 * Node i + 1 must read node i's output (the same view) as one of its inputs. */
typedef struct ops_node {
  uint32_t struct_size;    /* sizeof(ops_node), set by ops_node_init */
  int32_t op;              /* ops_op */
  const void *params;      /* the op's params struct (ops_gemm_params *, ...) or NULL */
  const ops_tensor *in[2];
  const ops_tensor *out;
  int32_t keep_output;     /* 1: the caller reads this output too, so it must be written */
} ops_node;

OPS_API void ops_node_init(ops_node *node);

/* Why a fusion was refused. Stable values; new ones are appended. */
typedef enum ops_fuse_reason {
  OPS_FUSE_APPLIED = 0,
  OPS_FUSE_NOT_LINKED = 1,         /* a node does not read the previous node's output as the pattern needs */
  OPS_FUSE_MULTIPLE_CONSUMERS = 2, /* an intermediate is also read elsewhere (another node, keep_output) */
  OPS_FUSE_SHAPE = 3,              /* shapes do not fit the fused form */
  OPS_FUSE_DTYPE = 4,              /* dtypes do not fit the fused form */
  OPS_FUSE_PARAMS = 5,             /* a node's params exclude it (a GEMM that has its own epilogue) */
  OPS_FUSE_REDUCTION_ORDER = 6,    /* the fused kernel reorders a reduction; OPS_FUSE_PRESERVE_ORDER forbids it */
  OPS_FUSE_NO_KERNEL = 7           /* no kernel on this handle absorbs the fused form */
} ops_fuse_reason;

OPS_API const char *ops_fuse_reason_name(ops_fuse_reason reason);

/* ops_fuse flags */
#define OPS_FUSE_PRESERVE_ORDER 1u /* refuse fusions whose kernel sums in another order than the chain */

typedef struct ops_plan_s *ops_plan;

/* One fusion decision of a plan: a rule that matched the ops at first_node..first_node +
 * node_count - 1, applied or refused. */
typedef struct ops_fuse_decision {
  uint32_t struct_size;
  const char *rule;   /* "gemm_bias_act" (static storage) */
  int32_t first_node;
  int32_t node_count;
  int32_t reason;     /* ops_fuse_reason */
  char message[192];
} ops_fuse_decision;

/* Plans the chain nodes[0..count) on the handle: applies the fusion rules (longest first at
 * each node), and records every decision. The plan copies the nodes' params and tensor
 * descriptors (not the data). Errors: OPS_ERR_NULL_POINTER, OPS_ERR_STRUCT_SIZE,
 * OPS_ERR_INVALID_ARGUMENT (count outside 1..32, a node op that chains cannot hold),
 * OPS_ERR_OUT_OF_MEMORY, and an op's own errors for malformed descriptors. */
OPS_API ops_status ops_fuse(ops_handle handle, const ops_node *nodes, int count, uint32_t flags,
                            ops_plan *out);

/* Runs the plan's steps in order on the handle's stream; one workspace serves every step.
 * Every step is checked before the first one runs, so a plan that fails its checks writes
 * nothing (a CUDA error at a later step's launch can still follow earlier steps' writes).
 * Errors: as the ops it runs. */
OPS_API ops_status ops_plan_execute(ops_handle handle, ops_plan plan, void *workspace,
                                    size_t workspace_bytes);

/* The workspace ops_plan_execute needs: the largest of its steps'. */
OPS_API ops_status ops_plan_workspace_size(ops_handle handle, ops_plan plan, size_t *bytes);

OPS_API int ops_plan_step_count(ops_plan plan);
OPS_API int ops_plan_decision_count(ops_plan plan);
OPS_API ops_status ops_plan_decision(ops_plan plan, int index, ops_fuse_decision *out);

/* The plan in words or as JSON (snprintf-style, like ops_explain_to_text). */
OPS_API size_t ops_plan_to_text(ops_plan plan, char *buf, size_t n);
OPS_API size_t ops_plan_to_json(ops_plan plan, char *buf, size_t n);

OPS_API void ops_plan_destroy(ops_plan plan);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_FUSION_H_ */
