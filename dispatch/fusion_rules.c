/*
 * The fusion rules: patterns over op ids (with the binary op where it matters, and which
 * input reads the previous node's output), and for each a builder that checks the rule's
 * own conditions (shapes, dtypes, params) and writes the fused call. The conditions all
 * rules share (linked, single consumer, reduction order) and "a kernel absorbs it" are
 * checked by the planner (fusion_plan.c), the last by asking the dispatcher.
 */
#include <stdio.h>
#include <string.h>

#include "dispatch/fusion_internal.h"

static const opsi_call *node(const struct ops_plan_s *plan, int k) { return &plan->nodes[k].call; }

static int same_shape(const ops_tensor *a, const ops_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int i = 0; i < a->ndim; ++i) {
    if (a->shape[i] != b->shape[i]) return 0;
  }
  return 1;
}

/* A per-column [N] / [1, N] or per-row [M, 1] vector: what a GEMM epilogue calls a bias. */
static int bias_shaped(const ops_tensor *t) {
  if (t->ndim == 1) return 1;
  return t->ndim == 2 && (t->shape[0] == 1 || t->shape[1] == 1);
}

/* gemm [-> add] [-> act] [-> add]: the chain's adds and activation become the epilogue. */
static ops_fuse_reason build_gemm_epilogue(const struct ops_plan_s *plan, int first, int count, opsi_call *out,
                                           char *msg, size_t n) {
  const opsi_call *g = node(plan, first);
  if (g->p.gemm.bias != NULL || g->p.gemm.residual != NULL || g->p.gemm.activation != OPS_ACT_NONE) {
    snprintf(msg, n, "the GEMM (node %d) has its own epilogue; the chain's cannot be appended to it", first);
    return OPS_FUSE_PARAMS;
  }
  *out = *g;
  const ops_tensor *d = &node(plan, first + count - 1)->arg[node(plan, first + count - 1)->nargs - 1];
  int after_act = 0;
  for (int k = first + 1; k < first + count; ++k) {
    const opsi_call *c = node(plan, k);
    if (c->op == OPS_OP_UNARY) {
      out->p.gemm.activation = c->p.unary.fn;
      after_act = 1;
      continue;
    }
    const int via = opsi_plan_reads(plan, k, k - 1);
    const ops_tensor *other = &c->arg[1 - via];
    if (other->dtype != d->dtype) {
      snprintf(msg, n, "node %d adds a %s tensor; the fused epilogue reads it as the output's dtype, %s", k,
               ops_dtype_name((ops_dtype)other->dtype), ops_dtype_name((ops_dtype)d->dtype));
      return OPS_FUSE_DTYPE;
    }
    const int act_follows = k + 1 < first + count && node(plan, k + 1)->op == OPS_OP_UNARY;
    if (!after_act && (act_follows || bias_shaped(other))) {
      out->extra[1] = *other; /* before the activation: the bias */
      out->p.gemm.bias = &out->extra[1];
    } else {
      out->extra[2] = *other; /* after it, or a full tensor with nothing after: the residual */
      out->p.gemm.residual = &out->extra[2];
    }
  }
  out->arg[2] = *d;
  snprintf(msg, n, "ok");
  return OPS_FUSE_APPLIED;
}

/* add -> norm: the norm adds the residual itself, and writes the sum when it is needed. */
static ops_fuse_reason build_add_norm(const struct ops_plan_s *plan, int first, int count, opsi_call *out, char *msg,
                                      size_t n) {
  (void)count;
  const opsi_call *add = node(plan, first), *norm = node(plan, first + 1);
  if (norm->p.norm.residual != NULL) {
    snprintf(msg, n, "the norm (node %d) already adds a residual", first + 1);
    return OPS_FUSE_PARAMS;
  }
  const ops_tensor *a = &add->arg[0], *b = &add->arg[1], *sum = &add->arg[2];
  if (!same_shape(a, sum) || !same_shape(b, sum)) {
    snprintf(msg, n, "the add broadcasts one input; the fused norm adds two tensors of the row shape");
    return OPS_FUSE_SHAPE;
  }
  if (a->dtype != sum->dtype || b->dtype != sum->dtype) {
    snprintf(msg, n, "the add mixes dtypes; the fused norm reads x and the residual in x's dtype");
    return OPS_FUSE_DTYPE;
  }
  *out = *norm;
  out->arg[0] = *a;
  out->extra[1] = *b;
  out->p.norm.residual = &out->extra[1];
  int sum_needed = plan->nodes[first].keep_output;
  for (int j = 0; j < plan->n_nodes; ++j) {
    if (j != first + 1 && opsi_plan_reads(plan, j, first) >= 0) sum_needed = 1;
  }
  if (sum_needed) {
    out->extra[2] = *sum;
    out->p.norm.residual_out = &out->extra[2];
  }
  snprintf(msg, n, "ok");
  return OPS_FUSE_APPLIED;
}

/* 2..8 elementwise nodes: one pass, intermediates never stored. */
static ops_fuse_reason build_ew_chain(const struct ops_plan_s *plan, int first, int count, opsi_call *out, char *msg,
                                      size_t n) {
  const opsi_call *last = node(plan, first + count - 1);
  const ops_tensor *y = &last->arg[last->nargs - 1];
  memset(out, 0, sizeof *out);
  out->op = OPS_OP_EW_CHAIN;
  out->nargs = 2;
  out->arg[0] = node(plan, first)->arg[0];
  out->arg[1] = *y;
  opsi_chain *ch = &out->chain;
  for (int k = first; k < first + count; ++k) {
    const opsi_call *c = node(plan, k);
    for (int i = 0; i < c->nargs; ++i) {
      if (c->arg[i].dtype != y->dtype) {
        snprintf(msg, n, "node %d mixes dtypes (%s, %s); the chain kernel has one dtype", k,
                 ops_dtype_name((ops_dtype)c->arg[i].dtype), ops_dtype_name((ops_dtype)y->dtype));
        return OPS_FUSE_DTYPE;
      }
    }
    opsi_chain_step *st = &ch->steps[ch->n_steps++];
    memset(st, 0, sizeof *st);
    switch (c->op) {
      case OPS_OP_UNARY:
        st->kind = OPSI_STEP_UNARY;
        st->fn = c->p.unary.fn;
        break;
      case OPS_OP_SCALE:
        st->kind = OPSI_STEP_SCALE;
        st->a = c->p.scale.alpha;
        break;
      case OPS_OP_SIN_AFFINE:
        if (c->p.sin_affine.a_tensor != NULL || c->p.sin_affine.b_tensor != NULL) {
          snprintf(msg, n, "node %d takes a and b as tensors; the chain kernel takes them as scalars", k);
          return OPS_FUSE_PARAMS;
        }
        st->kind = OPSI_STEP_SIN_AFFINE;
        st->a = c->p.sin_affine.a;
        st->b = c->p.sin_affine.b;
        break;
      default: { /* binary: the other input is an operand tensor */
        const int via = k == first ? 0 : opsi_plan_reads(plan, k, k - 1);
        if (ch->n_operands == OPSI_CHAIN_MAX_OPERANDS) {
          snprintf(msg, n, "more than %d operand tensors", OPSI_CHAIN_MAX_OPERANDS);
          return OPS_FUSE_PARAMS;
        }
        st->kind = OPSI_STEP_BINARY;
        st->fn = c->p.binary.op;
        st->operand = ch->n_operands;
        st->operand_first = via == 1;
        out->extra[ch->n_operands++] = c->arg[1 - via];
        break;
      }
    }
  }
  snprintf(msg, n, "ok");
  return OPS_FUSE_APPLIED;
}

/* A [BH, S, D] (or [S, D]) operand as a BSHD view [BH, S, 1, D]; kt: K^T [BH, D, S]. */
static ops_tensor as_bshd(const ops_tensor *t, int transposed) {
  ops_tensor r = *t;
  const int b3 = t->ndim == 3;
  const int64_t sb = b3 ? t->strides[0] : 0, eb = b3 ? t->shape[0] : 1;
  const int i = b3 ? 1 : 0;
  const int s_axis = transposed ? i + 1 : i, d_axis = transposed ? i : i + 1;
  r.ndim = 4;
  r.shape[0] = eb, r.strides[0] = sb;
  r.shape[1] = t->shape[s_axis], r.strides[1] = t->strides[s_axis];
  r.shape[2] = 1, r.strides[2] = 0;
  r.shape[3] = t->shape[d_axis], r.strides[3] = t->strides[d_axis];
  return r;
}

static int plain_gemm(const opsi_call *g) {
  const ops_gemm_params *p = &g->p.gemm;
  return p->alpha == 1.0f && p->c == NULL && p->bias == NULL && p->residual == NULL && p->activation == OPS_ACT_NONE;
}

/* gemm(Q, K^T) -> scale [-> add(mask)] -> softmax -> gemm(P, V)  =>  sdpa. */
static ops_fuse_reason build_attention(const struct ops_plan_s *plan, int first, int count, opsi_call *out,
                                       char *msg, size_t n) {
  const int has_mask = count == 5;
  const opsi_call *g1 = node(plan, first), *sc = node(plan, first + 1);
  const opsi_call *mk = has_mask ? node(plan, first + 2) : NULL;
  const opsi_call *sm = node(plan, first + count - 2), *g2 = node(plan, first + count - 1);
  if (!plain_gemm(g1) || !plain_gemm(g2)) {
    snprintf(msg, n, "a GEMM of the pattern has alpha, C, bias, activation or residual; attention's are plain");
    return OPS_FUSE_PARAMS;
  }
  if (has_mask && sm->p.softmax.scale != 1.0f) {
    snprintf(msg, n, "the softmax scales its input after the mask was added; sdpa adds the mask after scaling");
    return OPS_FUSE_PARAMS;
  }
  const ops_tensor *q = &g1->arg[0], *kt = &g1->arg[1], *v = &g2->arg[1], *o = &g2->arg[2];
  if (q->ndim != kt->ndim || q->ndim != v->ndim || q->ndim != o->ndim ||
      (q->ndim == 3 && (kt->shape[0] != q->shape[0] || v->shape[0] != q->shape[0]))) {
    snprintf(msg, n, "Q, K^T, V and O must share their batch (no broadcast) for sdpa");
    return OPS_FUSE_SHAPE;
  }
  if (kt->dtype != q->dtype || v->dtype != q->dtype || o->dtype != q->dtype) {
    snprintf(msg, n, "sdpa takes Q, K, V and O of one dtype");
    return OPS_FUSE_DTYPE;
  }
  memset(out, 0, sizeof *out);
  out->op = OPS_OP_SDPA;
  ops_sdpa_params_init(&out->p.sdpa);
  out->p.sdpa.scale = sc->p.scale.alpha * sm->p.softmax.scale;
  out->nargs = 4;
  out->arg[0] = as_bshd(q, 0);
  out->arg[1] = as_bshd(kt, 1);
  out->arg[2] = as_bshd(v, 0);
  out->arg[3] = as_bshd(o, 0);
  if (has_mask) {
    const int via = opsi_plan_reads(plan, first + 2, first + 1);
    const ops_tensor *m = &mk->arg[1 - via];
    if (m->ndim > q->ndim) {
      snprintf(msg, n, "the mask has more axes than the scores");
      return OPS_FUSE_SHAPE;
    }
    ops_tensor m4 = *m; /* right-aligned to [BH, Sq, Sk], then a head axis of 1 */
    m4.ndim = 4;
    const int lead = 3 - m->ndim;
    for (int i = 2; i >= 0; --i) {
      const int j = i - lead;
      m4.shape[i + (i > 0)] = j >= 0 ? m->shape[j] : 1;
      m4.strides[i + (i > 0)] = j >= 0 ? m->strides[j] : 0;
    }
    m4.shape[1] = 1, m4.strides[1] = 0;
    out->extra[0] = m4;
    out->p.sdpa.attn_mask = &out->extra[0];
  }
  snprintf(msg, n, "ok");
  return OPS_FUSE_APPLIED;
}

#define ANY OPSI_ANY_VARIANT
#define G {OPS_OP_GEMM, ANY, -1}
#define ADD {OPS_OP_BINARY, OPS_BINARY_ADD, -1}
#define ACT {OPS_OP_UNARY, ANY, 0}

static const opsi_fusion_rule k_rules[] = {
    /* longest first: the planner takes the first rule that applies at each node */
    {"attention_scale_mask",
     {G, {OPS_OP_SCALE, ANY, 0}, ADD, {OPS_OP_SOFTMAX, ANY, 0}, {OPS_OP_GEMM, ANY, 0}}, 5, 1, 0, build_attention},
    {"attention_scale", {G, {OPS_OP_SCALE, ANY, 0}, {OPS_OP_SOFTMAX, ANY, 0}, {OPS_OP_GEMM, ANY, 0}}, 4, 1, 0,
     build_attention},
    {"gemm_bias_act_residual", {G, ADD, ACT, ADD}, 4, 0, 0, build_gemm_epilogue},
    {"gemm_bias_act", {G, ADD, ACT}, 3, 0, 0, build_gemm_epilogue},
    {"gemm_act_residual", {G, ACT, ADD}, 3, 0, 0, build_gemm_epilogue},
    {"gemm_bias", {G, ADD}, 2, 0, 0, build_gemm_epilogue},
    {"gemm_act", {G, ACT}, 2, 0, 0, build_gemm_epilogue},
    {"add_rmsnorm", {ADD, {OPS_OP_RMSNORM, ANY, 0}}, 2, 0, 1, build_add_norm},
    {"add_layernorm", {ADD, {OPS_OP_LAYERNORM, ANY, 0}}, 2, 0, 1, build_add_norm},
    {"elementwise_chain", {{OPSI_PAT_EW, ANY, -1}}, 0, 0, 0, build_ew_chain},
};

const opsi_fusion_rule *opsi_fusion_rules(int *count) {
  *count = (int)(sizeof k_rules / sizeof k_rules[0]);
  return k_rules;
}
