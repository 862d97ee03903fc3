/*
 * The plan a fusion pass builds: copies of the chain's nodes (descriptors and params, deep,
 * so the caller's descriptors need not outlive it), the decisions, and the steps to run.
 */
#ifndef OPSLIB_DISPATCH_FUSION_INTERNAL_H_
#define OPSLIB_DISPATCH_FUSION_INTERNAL_H_

#include "dispatch/op_ew_chain.h"
#include "opslib/explain.h"
#include "opslib/fusion.h"

#define OPSI_PLAN_MAX_NODES 32
#define OPSI_PLAN_MAX_DECISIONS 96
#define OPSI_MAX_PARAM_TENSORS 5

typedef union opsi_any_params {
  uint32_t struct_size;
  ops_gemm_params gemm;
  ops_norm_params norm;
  ops_softmax_params softmax;
  ops_unary_params unary;
  ops_binary_params binary;
  ops_scale_params scale;
  ops_sin_affine_params sin_affine;
  ops_sdpa_params sdpa;
} opsi_any_params;

/* A call of one op: its params (tensor pointers into extra[]), its operands by position. */
typedef struct opsi_call {
  int32_t op;
  opsi_any_params p;
  ops_tensor arg[4]; /* gemm: a b d; sdpa: q k v o; norms: x weight y; binary: a b y; others: x y */
  int nargs;
  ops_tensor extra[OPSI_MAX_PARAM_TENSORS]; /* what p's tensor pointers point at */
  opsi_chain chain;  /* OPS_OP_EW_CHAIN: pointers into arg[] (x, y) and extra[] (operands) */
} opsi_call;

typedef struct opsi_pnode {
  opsi_call call;       /* the node as its own op call */
  int has_in[2];
  int keep_output;
} opsi_pnode;

typedef struct opsi_step {
  const char *rule; /* NULL: one node, unfused */
  int first, count;
  opsi_call call;
} opsi_step;

struct ops_plan_s {
  int n_nodes;
  opsi_pnode nodes[OPSI_PLAN_MAX_NODES];
  int n_steps;
  opsi_step steps[OPSI_PLAN_MAX_NODES];
  int n_decisions;
  ops_fuse_decision decisions[OPSI_PLAN_MAX_DECISIONS];
  uint32_t flags;
};

/* The view of node k's input i (NULL when absent) and output. */
const ops_tensor *opsi_node_in(const struct ops_plan_s *plan, int k, int i);
const ops_tensor *opsi_node_out(const struct ops_plan_s *plan, int k);

/* Which input of node `reader` is node `writer`'s output (the same view); -1 if none. */
int opsi_plan_reads(const struct ops_plan_s *plan, int reader, int writer);

/* Runs, sizes (query != NULL) or explains (explain != NULL) one call on the handle. */
ops_status opsi_call_run(ops_handle h, opsi_call *c, void *workspace, size_t bytes, size_t *query,
                         ops_explain *explain);

/* Points c's params at its own extra[] copies (after c was copied or filled). */
void opsi_call_fix_pointers(opsi_call *c);

/* ---- the rule table (fusion_rules.c) ---- */

#define OPSI_ANY_VARIANT (-1)
#define OPSI_PAT_EW (-2) /* any elementwise op: unary, binary, scale, sin_affine */

typedef struct opsi_pattern_op {
  int32_t op;      /* ops_op, or OPSI_PAT_EW */
  int32_t variant; /* required variant (binary op), or OPSI_ANY_VARIANT */
  int32_t via;     /* which input of this node reads the previous output: 0, 1, or -1 either */
} opsi_pattern_op;

/* Builds the fused call for nodes first..first+count-1 of the plan, checking the rule's
 * own conditions; returns OPS_FUSE_APPLIED or the reason, with a message. */
typedef ops_fuse_reason (*opsi_fuse_build)(const struct ops_plan_s *plan, int first, int count, opsi_call *out,
                                           char *msg, size_t n);

typedef struct opsi_fusion_rule {
  const char *name;
  opsi_pattern_op pattern[5];
  int length;              /* 0 with pattern[0].op == OPSI_PAT_EW: a run of 2..8 elementwise nodes */
  int reorders_reductions; /* the fused kernel sums in another order than the chain */
  int sum_may_escape;      /* the first intermediate may have other consumers (the fused op writes it) */
  opsi_fuse_build build;
} opsi_fusion_rule;

const opsi_fusion_rule *opsi_fusion_rules(int *count);

#endif /* OPSLIB_DISPATCH_FUSION_INTERNAL_H_ */
