/*
 * Fusion plans: copying a chain, matching the rule table against it (longest pattern first
 * at each node, every decision recorded), running and rendering the plan.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch/dispatch.h"
#include "dispatch/fusion_internal.h"
#include "runtime/error.h"
#include "runtime/tensor_internal.h"

void ops_node_init(ops_node *node) {
  if (node == NULL) return;
  memset(node, 0, sizeof *node);
  node->struct_size = (uint32_t)sizeof *node;
}

const char *ops_fuse_reason_name(ops_fuse_reason reason) {
  static const char *const names[] = {"applied", "not_linked", "multiple_consumers", "shape",
                                      "dtype", "params", "reduction_order", "no_kernel"};
  return reason >= 0 && reason < (int)(sizeof names / sizeof names[0]) ? names[reason] : "unknown";
}

/* ---- calls ------------------------------------------------------------------------- */

/* Pointers to the tensor-pointer fields of c's params. */
static int param_tensor_fields(opsi_call *c, const ops_tensor ***fields) {
  switch (c->op) {
    case OPS_OP_GEMM:
      fields[0] = &c->p.gemm.c, fields[1] = &c->p.gemm.bias, fields[2] = &c->p.gemm.residual;
      return 3;
    case OPS_OP_RMSNORM:
    case OPS_OP_LAYERNORM:
      fields[0] = &c->p.norm.bias, fields[1] = &c->p.norm.residual, fields[2] = &c->p.norm.residual_out;
      fields[3] = &c->p.norm.mean_out, fields[4] = &c->p.norm.rstd_out;
      return 5;
    case OPS_OP_SIN_AFFINE:
      fields[0] = &c->p.sin_affine.a_tensor, fields[1] = &c->p.sin_affine.b_tensor;
      return 2;
    case OPS_OP_SDPA:
      fields[0] = &c->p.sdpa.attn_mask, fields[1] = &c->p.sdpa.cu_seqlens_q, fields[2] = &c->p.sdpa.cu_seqlens_k;
      return 3;
    default:
      return 0;
  }
}

void opsi_call_fix_pointers(opsi_call *c) {
  const ops_tensor **fields[OPSI_MAX_PARAM_TENSORS];
  const int n = param_tensor_fields(c, fields);
  for (int i = 0; i < n; ++i) {
    if (*fields[i] != NULL) *fields[i] = &c->extra[i];
  }
  if (c->op == OPS_OP_EW_CHAIN) {
    c->chain.x = &c->arg[0];
    c->chain.y = &c->arg[1];
    for (int k = 0; k < c->chain.n_operands; ++k) c->chain.operands[k] = &c->extra[k];
  }
}

static size_t params_size(int32_t op) {
  switch (op) {
    case OPS_OP_GEMM: return sizeof(ops_gemm_params);
    case OPS_OP_RMSNORM:
    case OPS_OP_LAYERNORM: return sizeof(ops_norm_params);
    case OPS_OP_SOFTMAX: return sizeof(ops_softmax_params);
    case OPS_OP_UNARY: return sizeof(ops_unary_params);
    case OPS_OP_BINARY: return sizeof(ops_binary_params);
    case OPS_OP_SCALE: return sizeof(ops_scale_params);
    case OPS_OP_SIN_AFFINE: return sizeof(ops_sin_affine_params);
    default: return 0;
  }
}

static void init_params(opsi_call *c) {
  switch (c->op) {
    case OPS_OP_GEMM: ops_gemm_params_init(&c->p.gemm); break;
    case OPS_OP_RMSNORM:
    case OPS_OP_LAYERNORM: ops_norm_params_init(&c->p.norm); break;
    case OPS_OP_SOFTMAX: ops_softmax_params_init(&c->p.softmax); break;
    case OPS_OP_UNARY: ops_unary_params_init(&c->p.unary); break;
    case OPS_OP_BINARY: ops_binary_params_init(&c->p.binary); break;
    case OPS_OP_SCALE: ops_scale_params_init(&c->p.scale); break;
    case OPS_OP_SIN_AFFINE: ops_sin_affine_params_init(&c->p.sin_affine); break;
    case OPS_OP_SDPA: ops_sdpa_params_init(&c->p.sdpa); break;
    default: break;
  }
}

ops_status opsi_call_run(ops_handle h, opsi_call *c, void *ws, size_t bytes, size_t *query, ops_explain *explain) {
  ops_tensor *a = c->arg;
#define DO(run, ...) \
  (explain ? run##_explain(h, __VA_ARGS__, explain) : query ? run##_workspace_size(h, __VA_ARGS__, query) : run(h, __VA_ARGS__, ws, bytes))
  switch (c->op) {
    case OPS_OP_GEMM: return DO(ops_gemm, &c->p.gemm, &a[0], &a[1], &a[2]);
    case OPS_OP_BINARY: return DO(ops_binary, &c->p.binary, &a[0], &a[1], &a[2]);
    case OPS_OP_UNARY: return DO(ops_unary, &c->p.unary, &a[0], &a[1]);
    case OPS_OP_SCALE: return DO(ops_scale, &c->p.scale, &a[0], &a[1]);
    case OPS_OP_SIN_AFFINE: return DO(ops_sin_affine, &c->p.sin_affine, &a[0], &a[1]);
    case OPS_OP_SOFTMAX: return DO(ops_softmax, &c->p.softmax, &a[0], &a[1]);
    case OPS_OP_RMSNORM: return DO(ops_rmsnorm, &c->p.norm, &a[0], &a[1], &a[2]);
    case OPS_OP_LAYERNORM: return DO(ops_layernorm, &c->p.norm, &a[0], &a[1], &a[2]);
    case OPS_OP_SDPA: return DO(ops_sdpa, &c->p.sdpa, &a[0], &a[1], &a[2], &a[3], NULL);
    case OPS_OP_EW_CHAIN: {
      const opsi_vctx vc = {"ops_plan_execute (ew_chain)", h,
                            explain ? OPSI_EXPLAIN : query ? OPSI_QUERY_WORKSPACE : OPSI_RUN, query, explain};
      return opsi_ew_chain_entry(&vc, &c->chain, ws, bytes);
    }
    default:
      return opsi_fail(OPS_ERR_INTERNAL, "fused plan: op %d has no runner", (int)c->op);
  }
#undef DO
}

/* ---- building a plan ---------------------------------------------------------------- */

const ops_tensor *opsi_node_in(const struct ops_plan_s *plan, int k, int i) {
  return plan->nodes[k].has_in[i] ? &plan->nodes[k].call.arg[i] : NULL;
}

const ops_tensor *opsi_node_out(const struct ops_plan_s *plan, int k) {
  const opsi_call *c = &plan->nodes[k].call;
  return &c->arg[c->nargs - 1];
}

static int chainable(int32_t op) { return params_size(op) > 0; }

static ops_status copy_node(const ops_node *src, int k, opsi_pnode *dst) {
  if (src->struct_size != sizeof(ops_node)) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE, "ops_fuse: nodes[%d].struct_size: expected %zu (ops_node_init), got %u", k,
                     sizeof(ops_node), (unsigned)src->struct_size);
  }
  if (!chainable(src->op)) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                     "ops_fuse: nodes[%d].op: expected gemm, binary, unary, scale, sin_affine, softmax, rmsnorm or "
                     "layernorm, got %d", k, (int)src->op);
  }
  const int two_inputs = src->op == OPS_OP_GEMM || src->op == OPS_OP_BINARY || src->op == OPS_OP_RMSNORM ||
                         src->op == OPS_OP_LAYERNORM;
  if (src->in[0] == NULL || (two_inputs && src->in[1] == NULL) || src->out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_fuse: nodes[%d]: expected in[0]%s and out, got NULL", k,
                     two_inputs ? ", in[1]" : "");
  }
  memset(dst, 0, sizeof *dst);
  opsi_call *c = &dst->call;
  c->op = src->op;
  init_params(c);
  if (src->params != NULL) {
    uint32_t size;
    memcpy(&size, src->params, sizeof size);
    if (size != params_size(c->op)) {
      return opsi_fail(OPS_ERR_STRUCT_SIZE, "ops_fuse: nodes[%d].params->struct_size: expected %zu, got %u", k,
                       params_size(c->op), (unsigned)size);
    }
    memcpy(&c->p, src->params, size);
  }
  const ops_tensor **fields[OPSI_MAX_PARAM_TENSORS];
  const int nf = param_tensor_fields(c, fields);
  for (int i = 0; i < nf; ++i) {
    if (*fields[i] != NULL) c->extra[i] = **fields[i];
  }
  opsi_call_fix_pointers(c);
  c->nargs = 0;
  for (int i = 0; i < 2; ++i) {
    if (src->in[i] != NULL && (i == 0 || two_inputs)) {
      c->arg[c->nargs++] = *src->in[i];
      dst->has_in[i] = 1;
    }
  }
  c->arg[c->nargs++] = *src->out;
  dst->keep_output = src->keep_output != 0;
  return OPS_OK;
}

/* A node's descriptors and params, checked as its op checks them (explain's validation:
 * everything but what needs memory), so that a malformed chain fails here with the op's
 * own error rather than when the plan runs. */
static ops_status check_node(ops_handle h, int k, opsi_call *c) {
  ops_explain e;
  e.struct_size = sizeof e;
  const ops_status st = opsi_call_run(h, c, NULL, 0, NULL, &e);
  if (st != OPS_OK) {
    char why[OPSI_ERROR_MESSAGE_BYTES];
    snprintf(why, sizeof why, "%s", ops_last_error());
    return opsi_fail(st, "ops_fuse: nodes[%d]: %s", k, why);
  }
  return OPS_OK;
}

int opsi_plan_reads(const struct ops_plan_s *plan, int reader, int writer) {
  const ops_tensor *out = opsi_node_out(plan, writer);
  for (int i = 0; i < 2; ++i) {
    const ops_tensor *in = opsi_node_in(plan, reader, i);
    if (in != NULL && opsi_same_view(in, out)) return i;
  }
  return -1;
}

static int is_ew(int32_t op) {
  return op == OPS_OP_UNARY || op == OPS_OP_BINARY || op == OPS_OP_SCALE || op == OPS_OP_SIN_AFFINE;
}

static int variant_of(const opsi_call *c) { return c->op == OPS_OP_BINARY ? c->p.binary.op : 0; }

/* The number of nodes the rule's pattern covers at `first` by op ids alone; 0: no match. */
static int structural_match(const struct ops_plan_s *plan, int first, const opsi_fusion_rule *r) {
  if (r->length == 0) { /* a run of elementwise nodes, as long as one chain kernel holds */
    int n = 0, operands = 0;
    while (first + n < plan->n_nodes && n < OPSI_CHAIN_MAX_STEPS && is_ew(plan->nodes[first + n].call.op)) {
      operands += plan->nodes[first + n].call.op == OPS_OP_BINARY;
      if (operands > OPSI_CHAIN_MAX_OPERANDS) break;
      ++n;
    }
    return n >= 2 ? n : 0;
  }
  if (first + r->length > plan->n_nodes) return 0;
  for (int k = 0; k < r->length; ++k) {
    const opsi_call *c = &plan->nodes[first + k].call;
    const opsi_pattern_op *pat = &r->pattern[k];
    if (pat->op == OPSI_PAT_EW ? !is_ew(c->op) : c->op != pat->op) return 0;
    if (pat->variant != OPSI_ANY_VARIANT && variant_of(c) != pat->variant) return 0;
  }
  return r->length;
}

/* The conditions every rule shares: linked, single consumer, reduction order. */
static ops_fuse_reason shared_conditions(const struct ops_plan_s *plan, int first, int count,
                                         const opsi_fusion_rule *r, char *msg, size_t n) {
  for (int k = first; k + 1 < first + count; ++k) {
    const int via = opsi_plan_reads(plan, k + 1, k);
    const int want = r->length == 0 ? -1 : r->pattern[k + 1 - first].via;
    if (via < 0 || (want >= 0 && via != want)) {
      snprintf(msg, n, "node %d does not read node %d's output%s", k + 1, k,
               via >= 0 ? " as the input the pattern needs" : "");
      return OPS_FUSE_NOT_LINKED;
    }
  }
  for (int k = first; k + 1 < first + count; ++k) {
    if (r->sum_may_escape && k == first) continue;
    int readers = 0;
    for (int j = 0; j < plan->n_nodes; ++j) {
      if (j != k && opsi_plan_reads(plan, j, k) >= 0) ++readers;
    }
    if (plan->nodes[k].keep_output || readers > 1) {
      snprintf(msg, n, "node %d's output is %s, so it must be written and cannot stay inside a fused kernel", k,
               plan->nodes[k].keep_output ? "kept by the caller (keep_output)" : "read by another node too");
      return OPS_FUSE_MULTIPLE_CONSUMERS;
    }
  }
  if ((plan->flags & OPS_FUSE_PRESERVE_ORDER) && r->reorders_reductions) {
    snprintf(msg, n, "the fused kernel sums in another order than the chain (OPS_FUSE_PRESERVE_ORDER)");
    return OPS_FUSE_REDUCTION_ORDER;
  }
  return OPS_FUSE_APPLIED;
}

/* Does some kernel on the handle take the fused call? Asked of the dispatcher itself. */
static ops_fuse_reason absorbed(ops_handle h, opsi_call *c, char *msg, size_t n) {
  ops_explain e;
  e.struct_size = sizeof e;
  const ops_status st = opsi_call_run(h, c, NULL, 0, NULL, &e);
  if (st != OPS_OK) {
    snprintf(msg, n, "the fused call is not valid: %s", ops_last_error());
    return OPS_FUSE_SHAPE;
  }
  if (e.chosen < 0) {
    const ops_verdict *v = e.count > 0 ? &e.verdicts[0] : NULL;
    snprintf(msg, n, "no kernel absorbs the fused %s%s%s%s%.120s", ops_op_name((ops_op)c->op), v ? ": " : "",
             v ? v->kernel_name : "", v ? " " : "", v ? v->message : "");
    return OPS_FUSE_NO_KERNEL;
  }
  snprintf(msg, n, "%s runs it (est %.2f us)", e.verdicts[e.chosen].kernel_name, e.verdicts[e.chosen].est_us);
  return OPS_FUSE_APPLIED;
}

static void record(struct ops_plan_s *plan, const char *rule, int first, int count, ops_fuse_reason reason,
                   const char *msg) {
  if (plan->n_decisions >= OPSI_PLAN_MAX_DECISIONS) return;
  ops_fuse_decision *d = &plan->decisions[plan->n_decisions++];
  d->struct_size = (uint32_t)sizeof *d;
  d->rule = rule;
  d->first_node = first;
  d->node_count = count;
  d->reason = reason;
  snprintf(d->message, sizeof d->message, "%s", msg);
}

static void add_step(struct ops_plan_s *plan, const char *rule, int first, int count, const opsi_call *c) {
  opsi_step *s = &plan->steps[plan->n_steps++];
  s->rule = rule;
  s->first = first;
  s->count = count;
  s->call = *c;
  opsi_call_fix_pointers(&s->call);
}

ops_status ops_fuse(ops_handle handle, const ops_node *nodes, int count, uint32_t flags, ops_plan *out) {
  opsi_clear_error();
  if (out == NULL || nodes == NULL || handle == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_fuse: %s: expected a pointer, got NULL",
                     out == NULL ? "out" : nodes == NULL ? "nodes" : "handle");
  }
  *out = NULL;
  if (count < 1 || count > OPSI_PLAN_MAX_NODES) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_fuse: count: expected 1..%d, got %d", OPSI_PLAN_MAX_NODES, count);
  }
  struct ops_plan_s *plan = (struct ops_plan_s *)calloc(1, sizeof *plan);
  if (plan == NULL) {
    return opsi_fail(OPS_ERR_OUT_OF_MEMORY, "ops_fuse: calloc(%zu) failed", sizeof *plan);
  }
  plan->flags = flags;
  plan->n_nodes = count;
  for (int k = 0; k < count; ++k) {
    ops_status st = copy_node(&nodes[k], k, &plan->nodes[k]);
    if (st == OPS_OK) {
      st = check_node(handle, k, &plan->nodes[k].call);
    }
    if (st != OPS_OK) {
      free(plan);
      return st;
    }
  }
  int n_rules = 0;
  const opsi_fusion_rule *rules = opsi_fusion_rules(&n_rules);
  char msg[192];
  for (int i = 0; i < count;) {
    int taken = 0;
    for (int r = 0; r < n_rules && !taken; ++r) {
      const int len = structural_match(plan, i, &rules[r]);
      if (len == 0) continue;
      opsi_call fused;
      memset(&fused, 0, sizeof fused);
      ops_fuse_reason why = shared_conditions(plan, i, len, &rules[r], msg, sizeof msg);
      if (why == OPS_FUSE_APPLIED) why = rules[r].build(plan, i, len, &fused, msg, sizeof msg);
      if (why == OPS_FUSE_APPLIED) {
        opsi_call_fix_pointers(&fused);
        why = absorbed(handle, &fused, msg, sizeof msg);
      }
      record(plan, rules[r].name, i, len, why, msg);
      if (why == OPS_FUSE_APPLIED) {
        add_step(plan, rules[r].name, i, len, &fused);
        i += len;
        taken = 1;
      }
    }
    if (!taken) {
      add_step(plan, NULL, i, 1, &plan->nodes[i].call);
      ++i;
    }
  }
  opsi_clear_error();
  *out = plan;
  return OPS_OK;
}

/* ---- running ---------------------------------------------------------------------- */

ops_status ops_plan_workspace_size(ops_handle handle, ops_plan plan, size_t *bytes) {
  opsi_clear_error();
  if (plan == NULL || bytes == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_plan_workspace_size: %s is NULL", plan == NULL ? "plan" : "bytes");
  }
  size_t most = 0;
  for (int s = 0; s < plan->n_steps; ++s) {
    size_t need = 0;
    OPSI_TRY(opsi_call_run(handle, &plan->steps[s].call, NULL, 0, &need, NULL));
    if (need > most) most = need;
  }
  *bytes = most;
  return OPS_OK;
}

ops_status ops_plan_execute(ops_handle handle, ops_plan plan, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  if (plan == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_plan_execute: plan is NULL");
  }
  /* every step checked before the first runs: a plan that fails writes nothing */
  opsi_set_check_only(1);
  for (int s = 0; s < plan->n_steps; ++s) {
    const ops_status st = opsi_call_run(handle, &plan->steps[s].call, workspace, workspace_bytes, NULL, NULL);
    if (st != OPS_OK) {
      opsi_set_check_only(0);
      return st;
    }
  }
  opsi_set_check_only(0);
  for (int s = 0; s < plan->n_steps; ++s) {
    OPSI_TRY(opsi_call_run(handle, &plan->steps[s].call, workspace, workspace_bytes, NULL, NULL));
  }
  return OPS_OK;
}

int ops_plan_step_count(ops_plan plan) { return plan != NULL ? plan->n_steps : 0; }

int ops_plan_decision_count(ops_plan plan) { return plan != NULL ? plan->n_decisions : 0; }

ops_status ops_plan_decision(ops_plan plan, int index, ops_fuse_decision *out) {
  opsi_clear_error();
  if (plan == NULL || out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_plan_decision: %s is NULL", plan == NULL ? "plan" : "out");
  }
  if (index < 0 || index >= plan->n_decisions) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "ops_plan_decision: index: expected 0..%d, got %d",
                     plan->n_decisions - 1, index);
  }
  *out = plan->decisions[index];
  return OPS_OK;
}

void ops_plan_destroy(ops_plan plan) { free(plan); }

/* ---- rendering -------------------------------------------------------------------- */

typedef struct {
  char *buf;
  size_t n, used;
} sink;

static void put(sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sink *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const size_t room = s->used < s->n ? s->n - s->used : 0;
  const int k = vsnprintf(room ? s->buf + s->used : NULL, room, fmt, ap);
  va_end(ap);
  if (k > 0) s->used += (size_t)k;
}

static size_t finish(sink *s) {
  if (s->n > 0) s->buf[s->used < s->n ? s->used : s->n - 1] = '\0';
  return s->used;
}

static void put_call_label(sink *s, const opsi_call *c) {
  put(s, "%s", ops_op_name((ops_op)c->op));
  if (c->op == OPS_OP_BINARY) put(s, "(%s)", ops_binary_op_name((ops_binary_op)c->p.binary.op));
  if (c->op == OPS_OP_UNARY) put(s, "(%s)", ops_act_name((ops_act)c->p.unary.fn));
  if (c->op == OPS_OP_GEMM && (c->p.gemm.bias || c->p.gemm.activation || c->p.gemm.residual)) {
    put(s, "(%s%s%s%s%s)", c->p.gemm.bias ? "bias" : "", c->p.gemm.bias && c->p.gemm.activation ? " + " : "",
        c->p.gemm.activation ? ops_act_name((ops_act)c->p.gemm.activation) : "",
        c->p.gemm.residual && (c->p.gemm.bias || c->p.gemm.activation) ? " + " : "",
        c->p.gemm.residual ? "residual" : "");
  }
  if ((c->op == OPS_OP_RMSNORM || c->op == OPS_OP_LAYERNORM) && c->p.norm.residual) {
    put(s, "(residual add%s)", c->p.norm.residual_out ? ", sum written" : "");
  }
  if (c->op == OPS_OP_EW_CHAIN) put(s, "(%d steps)", c->chain.n_steps);
  if (c->op == OPS_OP_SDPA) put(s, "(%s)", c->p.sdpa.attn_mask ? "scale + mask" : "scale");
}

size_t ops_plan_to_text(ops_plan plan, char *buf, size_t n) {
  sink s = {buf, n, 0};
  if (plan == NULL) return finish(&s);
  put(&s, "chain of %d node(s):", plan->n_nodes);
  for (int k = 0; k < plan->n_nodes; ++k) {
    put(&s, "%s", k ? " -> " : " ");
    put_call_label(&s, &plan->nodes[k].call);
  }
  put(&s, "\ndecisions:\n");
  if (plan->n_decisions == 0) put(&s, "  (no fusion rule matches)\n");
  for (int d = 0; d < plan->n_decisions; ++d) {
    const ops_fuse_decision *x = &plan->decisions[d];
    put(&s, "  %-8s %-24s nodes %d-%d  [%s] %s\n", x->reason == OPS_FUSE_APPLIED ? "applied" : "refused", x->rule,
        x->first_node, x->first_node + x->node_count - 1, ops_fuse_reason_name((ops_fuse_reason)x->reason),
        x->message);
  }
  put(&s, "steps (%d):\n", plan->n_steps);
  for (int i = 0; i < plan->n_steps; ++i) {
    const opsi_step *st = &plan->steps[i];
    put(&s, "  %d. ", i + 1);
    put_call_label(&s, &st->call);
    if (st->rule != NULL) {
      put(&s, "  <- fused %s (nodes %d-%d)\n", st->rule, st->first, st->first + st->count - 1);
    } else {
      put(&s, "  (node %d)\n", st->first);
    }
  }
  return finish(&s);
}

static void put_json_string(sink *s, const char *text) {
  put(s, "\"");
  for (const unsigned char *c = (const unsigned char *)text; c && *c; ++c) {
    if (*c == '"' || *c == '\\') put(s, "\\%c", *c);
    else if (*c < 0x20) put(s, "\\u%04x", *c);
    else put(s, "%c", *c);
  }
  put(s, "\"");
}

size_t ops_plan_to_json(ops_plan plan, char *buf, size_t n) {
  sink s = {buf, n, 0};
  if (plan == NULL) {
    put(&s, "null");
    return finish(&s);
  }
  put(&s, "{\"nodes\":[");
  for (int k = 0; k < plan->n_nodes; ++k) {
    char label[96];
    sink l = {label, sizeof label, 0};
    put_call_label(&l, &plan->nodes[k].call);
    finish(&l);
    put(&s, "%s", k ? "," : "");
    put_json_string(&s, label);
  }
  put(&s, "],\"decisions\":[");
  for (int d = 0; d < plan->n_decisions; ++d) {
    const ops_fuse_decision *x = &plan->decisions[d];
    put(&s, "%s{\"rule\":", d ? "," : "");
    put_json_string(&s, x->rule);
    put(&s, ",\"first_node\":%d,\"node_count\":%d,\"applied\":%s,\"reason\":", x->first_node, x->node_count,
        x->reason == OPS_FUSE_APPLIED ? "true" : "false");
    put_json_string(&s, ops_fuse_reason_name((ops_fuse_reason)x->reason));
    put(&s, ",\"message\":");
    put_json_string(&s, x->message);
    put(&s, "}");
  }
  put(&s, "],\"steps\":[");
  for (int i = 0; i < plan->n_steps; ++i) {
    const opsi_step *st = &plan->steps[i];
    char label[96];
    sink l = {label, sizeof label, 0};
    put_call_label(&l, &st->call);
    finish(&l);
    put(&s, "%s{\"call\":", i ? "," : "");
    put_json_string(&s, label);
    put(&s, ",\"fused_rule\":");
    if (st->rule) put_json_string(&s, st->rule); else put(&s, "null");
    put(&s, ",\"first_node\":%d,\"node_count\":%d}", st->first, st->count);
  }
  put(&s, "]}");
  return finish(&s);
}
