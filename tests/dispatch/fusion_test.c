/*
 * Fusion on the CPU backend: each rule applies where its conditions hold, and the fused
 * plan computes what running every node as its own op computes (up to the rounding of the
 * intermediates the plan no longer stores); each refusal reason is reached; random chains.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/fusion.h"
#include "opslib/opslib.h"
#include "tests/support/coverage.h"
#include "tests/support/opst.h"

static ops_handle g_h;
static opst_rng g_rng;

/* ---- running a chain unfused, node by node, through the public ops -------------------- */

static ops_status run_node(const ops_node *n) {
  void *ws = NULL;
  switch (n->op) {
    case OPS_OP_GEMM: return ops_gemm(g_h, n->params, n->in[0], n->in[1], n->out, ws, 0);
    case OPS_OP_BINARY: return ops_binary(g_h, n->params, n->in[0], n->in[1], n->out, ws, 0);
    case OPS_OP_UNARY: return ops_unary(g_h, n->params, n->in[0], n->out, ws, 0);
    case OPS_OP_SCALE: return ops_scale(g_h, n->params, n->in[0], n->out, ws, 0);
    case OPS_OP_SIN_AFFINE: return ops_sin_affine(g_h, n->params, n->in[0], n->out, ws, 0);
    case OPS_OP_SOFTMAX: return ops_softmax(g_h, n->params, n->in[0], n->out, ws, 0);
    case OPS_OP_RMSNORM: return ops_rmsnorm(g_h, n->params, n->in[0], n->in[1], n->out, ws, 0);
    case OPS_OP_LAYERNORM: return ops_layernorm(g_h, n->params, n->in[0], n->in[1], n->out, ws, 0);
    default: return OPS_ERR_INTERNAL;
  }
}

static ops_plan plan_of(const ops_node *nodes, int n, uint32_t flags) {
  ops_plan plan = NULL;
  OPST_OK(ops_fuse(g_h, nodes, n, flags, &plan));
  return plan;
}

static void run_plan(ops_plan plan) {
  size_t ws = 0;
  OPST_OK(ops_plan_workspace_size(g_h, plan, &ws));
  void *w = opst_workspace(ws);
  OPST_OK(ops_plan_execute(g_h, plan, w, ws));
  free(w);
}

/* The decision of `rule` in the plan, or -1 when the rule never matched. */
static int decision_of(ops_plan plan, const char *rule, ops_fuse_decision *out) {
  for (int i = 0; i < ops_plan_decision_count(plan); ++i) {
    ops_fuse_decision d;
    d.struct_size = sizeof d;
    OPST_OK(ops_plan_decision(plan, i, &d));
    if (strcmp(d.rule, rule) == 0) {
      *out = d;
      return d.reason;
    }
  }
  return -1;
}

static void expect_decision(ops_plan plan, const char *rule, ops_fuse_reason want, const char *needle) {
  ops_fuse_decision d;
  const int got = decision_of(plan, rule, &d);
  if (got != (int)want || (needle != NULL && strstr(d.message, needle) == NULL)) {
    char text[4096];
    ops_plan_to_text(plan, text, sizeof text);
    print_error("rule %s: expected %s%s%s, got %s\n%s", rule, ops_fuse_reason_name(want), needle ? " with " : "",
                needle ? needle : "", got < 0 ? "no decision" : ops_fuse_reason_name((ops_fuse_reason)got), text);
    fail();
  }
}

/* ||a - b|| / ||b|| over the elements (NaN anywhere gives NaN, which fails every bound). */
static double rel_l2(const opst_tensor *a, const opst_tensor *b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < opst_numel(a); ++i) {
    const double x = opst_at_flat(a, i), y = opst_at_flat(b, i);
    num += (x - y) * (x - y);
    den += y * y;
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* ---- gemm epilogues ------------------------------------------------------------------- */

static void gemm_bias_gelu_becomes_one_gemm(void **state) {
  (void)state;
  const int64_t as[2] = {13, 24}, bs[2] = {24, 17}, ds[2] = {13, 17}, vs[1] = {17};
  opst_tensor a, b, t1, t2, y_unfused, y_fused, bias;
  opst_alloc_any(&a, &g_rng, OPS_DTYPE_F32, 2, as);
  opst_alloc_any(&b, &g_rng, OPS_DTYPE_F32, 2, bs);
  opst_alloc_any(&bias, &g_rng, OPS_DTYPE_F32, 1, vs);
  opst_alloc_any(&t1, &g_rng, OPS_DTYPE_F32, 2, ds);
  opst_alloc_any(&t2, &g_rng, OPS_DTYPE_F32, 2, ds);
  opst_alloc_any(&y_unfused, &g_rng, OPS_DTYPE_F32, 2, ds);
  opst_alloc_any(&y_fused, &g_rng, OPS_DTYPE_F32, 2, ds);
  opst_fill_uniform(&a, &g_rng, -1, 1);
  opst_fill_uniform(&b, &g_rng, -1, 1);
  opst_fill_uniform(&bias, &g_rng, -1, 1);
  ops_binary_params add;
  ops_binary_params_init(&add);
  ops_unary_params gelu;
  ops_unary_params_init(&gelu);
  gelu.fn = OPS_ACT_GELU_TANH;
  ops_node n[3];
  for (int i = 0; i < 3; ++i) ops_node_init(&n[i]);
  n[0].op = OPS_OP_GEMM, n[0].in[0] = &a.t, n[0].in[1] = &b.t, n[0].out = &t1.t;
  n[1].op = OPS_OP_BINARY, n[1].params = &add, n[1].in[0] = &bias.t, n[1].in[1] = &t1.t, n[1].out = &t2.t;
  n[2].op = OPS_OP_UNARY, n[2].params = &gelu, n[2].in[0] = &t2.t, n[2].out = &y_unfused.t;
  for (int i = 0; i < 3; ++i) OPST_OK(run_node(&n[i]));
  n[2].out = &y_fused.t;
  opst_snapshot(&t1), opst_snapshot(&t2);
  ops_plan plan = plan_of(n, 3, 0);
  assert_int_equal(ops_plan_step_count(plan), 1);
  expect_decision(plan, "gemm_bias_act", OPS_FUSE_APPLIED, "cpu_gemm_ref");
  run_plan(plan);
  assert_true(opst_untouched(&t1) && opst_untouched(&t2)); /* the intermediates were never written */
  char why[256];
  assert_true(opst_fully_written(&y_fused, why, sizeof why));
  assert_true(rel_l2(&y_fused, &y_unfused) < 1e-5);
  char text[2048], json[4096];
  ops_plan_to_text(plan, text, sizeof text);
  assert_non_null(strstr(text, "gemm(bias + gelu_tanh)  <- fused gemm_bias_act (nodes 0-2)"));
  ops_plan_to_json(plan, json, sizeof json);
  assert_non_null(strstr(json, "\"rule\":\"gemm_bias_act\",\"first_node\":0,\"node_count\":3,\"applied\":true"));
  ops_plan_destroy(plan);

  /* The GEMM's output is kept by the caller: no epilogue fusion; the add and gelu still
   * fuse into one elementwise kernel. */
  n[0].keep_output = 1;
  plan = plan_of(n, 3, 0);
  expect_decision(plan, "gemm_bias_act", OPS_FUSE_MULTIPLE_CONSUMERS, "keep_output");
  expect_decision(plan, "elementwise_chain", OPS_FUSE_APPLIED, NULL);
  assert_int_equal(ops_plan_step_count(plan), 2);
  run_plan(plan);
  assert_true(rel_l2(&y_fused, &y_unfused) < 1e-5);
  assert_true(rel_l2(&t1, &t1) == 0);
  ops_plan_destroy(plan);
  opst_free(&a), opst_free(&b), opst_free(&t1), opst_free(&t2), opst_free(&y_unfused), opst_free(&y_fused);
  opst_free(&bias);
}

static void gemm_refusals_say_why(void **state) {
  (void)state;
  const int64_t as[2] = {4, 8}, bs[2] = {8, 6}, ds[2] = {4, 6}, vs[1] = {6};
  opst_tensor a, b, t1, t2, bias, bias16;
  opst_alloc(&a, &g_rng, OPS_DTYPE_F32, 2, as, OPST_CONTIGUOUS);
  opst_alloc(&b, &g_rng, OPS_DTYPE_F32, 2, bs, OPST_CONTIGUOUS);
  opst_alloc(&t1, &g_rng, OPS_DTYPE_F32, 2, ds, OPST_CONTIGUOUS);
  opst_alloc(&t2, &g_rng, OPS_DTYPE_F32, 2, ds, OPST_CONTIGUOUS);
  opst_alloc(&bias, &g_rng, OPS_DTYPE_F32, 1, vs, OPST_CONTIGUOUS);
  opst_alloc(&bias16, &g_rng, OPS_DTYPE_F16, 1, vs, OPST_CONTIGUOUS);
  ops_gemm_params own;
  ops_gemm_params_init(&own);
  own.activation = OPS_ACT_RELU;
  ops_node n[2];
  ops_node_init(&n[0]), ops_node_init(&n[1]);
  n[0].op = OPS_OP_GEMM, n[0].params = &own, n[0].in[0] = &a.t, n[0].in[1] = &b.t, n[0].out = &t1.t;
  n[1].op = OPS_OP_BINARY, n[1].in[0] = &t1.t, n[1].in[1] = &bias.t, n[1].out = &t2.t;
  ops_plan plan = plan_of(n, 2, 0);
  expect_decision(plan, "gemm_bias", OPS_FUSE_PARAMS, "its own epilogue");
  ops_plan_destroy(plan);
  n[0].params = NULL;
  n[1].in[1] = &bias16.t; /* an f16 bias for an f32 output: the add itself is malformed */
  plan = (ops_plan)1;
  assert_int_equal(ops_fuse(g_h, n, 2, 0, &plan), OPS_ERR_DTYPE_MISMATCH);
  assert_null(plan);
  assert_non_null(strstr(ops_last_error(), "ops_fuse: nodes[1]: ops_binary"));
  /* valid nodes whose fused form would mix dtypes: bf16 Q and K, an f32 V after the f32 scores */
  {
    const int64_t qs[3] = {2, 3, 8}, ks[3] = {2, 5, 8}, ss[3] = {2, 3, 5}, vs3[3] = {2, 5, 4}, os[3] = {2, 3, 4};
    opst_tensor q, k, s1, s2, p, v, o;
    opst_alloc(&q, &g_rng, OPS_DTYPE_BF16, 3, qs, OPST_CONTIGUOUS);
    opst_alloc(&k, &g_rng, OPS_DTYPE_BF16, 3, ks, OPST_CONTIGUOUS);
    opst_alloc(&s1, &g_rng, OPS_DTYPE_F32, 3, ss, OPST_CONTIGUOUS);
    opst_alloc(&s2, &g_rng, OPS_DTYPE_F32, 3, ss, OPST_CONTIGUOUS);
    opst_alloc(&p, &g_rng, OPS_DTYPE_F32, 3, ss, OPST_CONTIGUOUS);
    opst_alloc(&v, &g_rng, OPS_DTYPE_F32, 3, vs3, OPST_CONTIGUOUS);
    opst_alloc(&o, &g_rng, OPS_DTYPE_F32, 3, os, OPST_CONTIGUOUS);
    const int perm[3] = {0, 2, 1};
    ops_tensor kt;
    OPST_OK(ops_tensor_permute(&k.t, perm, &kt));
    ops_scale_params sc;
    ops_scale_params_init(&sc);
    ops_node m[4];
    for (int i = 0; i < 4; ++i) ops_node_init(&m[i]);
    m[0].op = OPS_OP_GEMM, m[0].in[0] = &q.t, m[0].in[1] = &kt, m[0].out = &s1.t;
    m[1].op = OPS_OP_SCALE, m[1].params = &sc, m[1].in[0] = &s1.t, m[1].out = &s2.t;
    m[2].op = OPS_OP_SOFTMAX, m[2].in[0] = &s2.t, m[2].out = &p.t;
    m[3].op = OPS_OP_GEMM, m[3].in[0] = &p.t, m[3].in[1] = &v.t, m[3].out = &o.t;
    plan = plan_of(m, 4, 0);
    expect_decision(plan, "attention_scale", OPS_FUSE_DTYPE, "one dtype");
    ops_plan_destroy(plan);
    opst_free(&q), opst_free(&k), opst_free(&s1), opst_free(&s2), opst_free(&p), opst_free(&v), opst_free(&o);
  }
  n[1].in[1] = &bias.t;
  n[1].in[0] = &bias.t; /* the add reads neither of its inputs from the GEMM */
  n[1].in[1] = &bias.t;
  plan = plan_of(n, 2, 0);
  expect_decision(plan, "gemm_bias", OPS_FUSE_NOT_LINKED, NULL);
  ops_plan_destroy(plan);
  /* On a described sm_90 device, an f32 batch beyond the portable kernels' grid (65535)
   * has no CUDA kernel: the rule names the kernels' reasons. Descriptors only: nothing runs. */
  ops_handle v = opst_virtual_handle(90);
  const int64_t bas[3] = {70000, 4, 8}, bds[3] = {70000, 4, 6};
  void *fake = (void *)(uintptr_t)4096;
  ops_tensor ca, cb, c1, c2, cbias;
  OPST_OK(ops_tensor_init(&ca, fake, OPS_DTYPE_F32, ops_device_cuda(0), 3, bas, NULL));
  OPST_OK(ops_tensor_init(&cb, fake, OPS_DTYPE_F32, ops_device_cuda(0), 2, bs, NULL));
  OPST_OK(ops_tensor_init(&c1, fake, OPS_DTYPE_F32, ops_device_cuda(0), 3, bds, NULL));
  OPST_OK(ops_tensor_init(&c2, fake, OPS_DTYPE_F32, ops_device_cuda(0), 3, bds, NULL));
  OPST_OK(ops_tensor_init(&cbias, fake, OPS_DTYPE_F32, ops_device_cuda(0), 1, vs, NULL));
  n[0].in[0] = &ca, n[0].in[1] = &cb, n[0].out = &c1;
  n[1].in[0] = &c1, n[1].in[1] = &cbias, n[1].out = &c2;
  OPST_OK(ops_fuse(v, n, 2, 0, &plan));
  expect_decision(plan, "gemm_bias", OPS_FUSE_NO_KERNEL, "no kernel absorbs the fused gemm");
  ops_plan_destroy(plan);
  ops_handle_destroy(v);
  opst_free(&a), opst_free(&b), opst_free(&t1), opst_free(&t2), opst_free(&bias), opst_free(&bias16);
}

/* ---- add + norm ------------------------------------------------------------------------- */

static void add_norm_fuses_and_writes_the_sum_when_needed(void **state) {
  (void)state;
  const int64_t xs[3] = {3, 5, 33}, ws[1] = {33};
  for (int op = OPS_OP_LAYERNORM; op <= OPS_OP_RMSNORM; ++op) {
    for (int keep = 0; keep <= 1; ++keep) {
      opst_tensor x, r, w, s, y1, y2, s2;
      opst_alloc_any(&x, &g_rng, OPS_DTYPE_BF16, 3, xs);
      opst_alloc_any(&r, &g_rng, OPS_DTYPE_BF16, 3, xs);
      opst_alloc_any(&w, &g_rng, OPS_DTYPE_F32, 1, ws);
      opst_alloc_any(&s, &g_rng, OPS_DTYPE_BF16, 3, xs);
      opst_alloc_any(&y1, &g_rng, OPS_DTYPE_BF16, 3, xs);
      opst_alloc_any(&y2, &g_rng, OPS_DTYPE_BF16, 3, xs);
      opst_fill_uniform(&x, &g_rng, -2, 2);
      opst_fill_uniform(&r, &g_rng, -2, 2);
      opst_fill_uniform(&w, &g_rng, -1, 1);
      ops_node n[2];
      ops_node_init(&n[0]), ops_node_init(&n[1]);
      n[0].op = OPS_OP_BINARY, n[0].in[0] = &x.t, n[0].in[1] = &r.t, n[0].out = &s.t, n[0].keep_output = keep;
      n[1].op = op, n[1].in[0] = &s.t, n[1].in[1] = &w.t, n[1].out = &y1.t;
      OPST_OK(run_node(&n[0]));
      OPST_OK(run_node(&n[1]));
      s2 = s;
      opst_alloc_any(&s, &g_rng, OPS_DTYPE_BF16, 3, xs); /* a fresh, poisoned sum buffer */
      n[0].out = &s.t, n[1].in[0] = &s.t, n[1].out = &y2.t;
      ops_plan plan = plan_of(n, 2, 0);
      expect_decision(plan, op == OPS_OP_RMSNORM ? "add_rmsnorm" : "add_layernorm", OPS_FUSE_APPLIED, NULL);
      run_plan(plan);
      /* bf16 outputs normalized from an exact (fused) vs a bf16-rounded (unfused) sum */
      assert_true(rel_l2(&y2, &y1) < 2e-2);
      char why[256];
      if (keep) {
        assert_true(opst_fully_written(&s, why, sizeof why));
        assert_true(rel_l2(&s, &s2) == 0);
      } else {
        assert_true(opst_untouched(&s)); /* nobody needed it: never written */
      }
      ops_plan_destroy(plan);
      opst_free(&x), opst_free(&r), opst_free(&w), opst_free(&s), opst_free(&s2), opst_free(&y1), opst_free(&y2);
    }
  }
  /* x + a broadcast row does not fit a fused residual add */
  const int64_t row[1] = {33};
  opst_tensor x, b, w, s, y;
  opst_alloc(&x, &g_rng, OPS_DTYPE_F32, 3, xs, OPST_CONTIGUOUS);
  opst_alloc(&b, &g_rng, OPS_DTYPE_F32, 1, row, OPST_CONTIGUOUS);
  opst_alloc(&w, &g_rng, OPS_DTYPE_F32, 1, ws, OPST_CONTIGUOUS);
  opst_alloc(&s, &g_rng, OPS_DTYPE_F32, 3, xs, OPST_CONTIGUOUS);
  opst_alloc(&y, &g_rng, OPS_DTYPE_F32, 3, xs, OPST_CONTIGUOUS);
  ops_node n[2];
  ops_node_init(&n[0]), ops_node_init(&n[1]);
  n[0].op = OPS_OP_BINARY, n[0].in[0] = &x.t, n[0].in[1] = &b.t, n[0].out = &s.t;
  n[1].op = OPS_OP_RMSNORM, n[1].in[0] = &s.t, n[1].in[1] = &w.t, n[1].out = &y.t;
  ops_plan plan = plan_of(n, 2, 0);
  expect_decision(plan, "add_rmsnorm", OPS_FUSE_SHAPE, "broadcasts");
  assert_int_equal(ops_plan_step_count(plan), 2);
  ops_plan_destroy(plan);
  opst_free(&x), opst_free(&b), opst_free(&w), opst_free(&s), opst_free(&y);
}

/* ---- attention ------------------------------------------------------------------------ */

static void attention_chain_becomes_sdpa(void **state) {
  (void)state;
  enum { BH = 3, SQ = 7, SK = 9, D = 16, DV = 8 };
  const int64_t qs[3] = {BH, SQ, D}, ks[3] = {BH, SK, D}, vs[3] = {BH, SK, DV}, ss[3] = {BH, SQ, SK},
                os[3] = {BH, SQ, DV}, ms[2] = {SQ, SK};
  opst_tensor q, k, v, s1, s2, s3, p, o1, o2, mask;
  opst_alloc_any(&q, &g_rng, OPS_DTYPE_F32, 3, qs);
  opst_alloc_any(&k, &g_rng, OPS_DTYPE_F32, 3, ks);
  opst_alloc_any(&v, &g_rng, OPS_DTYPE_F32, 3, vs);
  opst_alloc_any(&mask, &g_rng, OPS_DTYPE_F32, 2, ms);
  opst_alloc_any(&s1, &g_rng, OPS_DTYPE_F32, 3, ss);
  opst_alloc_any(&s2, &g_rng, OPS_DTYPE_F32, 3, ss);
  opst_alloc_any(&s3, &g_rng, OPS_DTYPE_F32, 3, ss);
  opst_alloc_any(&p, &g_rng, OPS_DTYPE_F32, 3, ss);
  opst_alloc_any(&o1, &g_rng, OPS_DTYPE_F32, 3, os);
  opst_alloc_any(&o2, &g_rng, OPS_DTYPE_F32, 3, os);
  opst_fill_uniform(&q, &g_rng, -1, 1);
  opst_fill_uniform(&k, &g_rng, -1, 1);
  opst_fill_uniform(&v, &g_rng, -1, 1);
  opst_fill_uniform(&mask, &g_rng, -1, 1);
  for (int i = 0; i < SQ; ++i) { /* a causal mask */
    for (int j = i + 3; j < SK; ++j) {
      const int64_t idx[2] = {i, j};
      opst_set(&mask, idx, -INFINITY);
    }
  }
  opst_snapshot(&mask);
  const int perm[3] = {0, 2, 1};
  ops_tensor kt;
  OPST_OK(ops_tensor_permute(&k.t, perm, &kt)); /* K^T as a view */
  ops_scale_params sc;
  ops_scale_params_init(&sc);
  sc.alpha = 0.25f;
  ops_node n[5];
  for (int i = 0; i < 5; ++i) ops_node_init(&n[i]);
  n[0].op = OPS_OP_GEMM, n[0].in[0] = &q.t, n[0].in[1] = &kt, n[0].out = &s1.t;
  n[1].op = OPS_OP_SCALE, n[1].params = &sc, n[1].in[0] = &s1.t, n[1].out = &s2.t;
  n[2].op = OPS_OP_BINARY, n[2].in[0] = &s2.t, n[2].in[1] = &mask.t, n[2].out = &s3.t;
  n[3].op = OPS_OP_SOFTMAX, n[3].in[0] = &s3.t, n[3].out = &p.t;
  n[4].op = OPS_OP_GEMM, n[4].in[0] = &p.t, n[4].in[1] = &v.t, n[4].out = &o1.t;
  for (int i = 0; i < 5; ++i) OPST_OK(run_node(&n[i]));
  n[4].out = &o2.t;
  opst_snapshot(&s1), opst_snapshot(&p);
  ops_plan plan = plan_of(n, 5, 0);
  expect_decision(plan, "attention_scale_mask", OPS_FUSE_APPLIED, "cpu_sdpa_ref");
  assert_int_equal(ops_plan_step_count(plan), 1);
  run_plan(plan);
  assert_true(opst_untouched(&s1) && opst_untouched(&p));
  assert_true(rel_l2(&o2, &o1) < 1e-5);
  ops_plan_destroy(plan);
  /* Without the mask node, and with the order preserved on request. */
  n[2] = n[3], n[2].in[0] = &s2.t;
  n[3] = n[4];
  plan = plan_of(n, 4, 0);
  expect_decision(plan, "attention_scale", OPS_FUSE_APPLIED, NULL);
  ops_plan_destroy(plan);
  plan = plan_of(n, 4, OPS_FUSE_PRESERVE_ORDER);
  expect_decision(plan, "attention_scale", OPS_FUSE_REDUCTION_ORDER, "PRESERVE_ORDER");
  ops_plan_destroy(plan);
  opst_free(&q), opst_free(&k), opst_free(&v), opst_free(&s1), opst_free(&s2), opst_free(&s3), opst_free(&p);
  opst_free(&o1), opst_free(&o2), opst_free(&mask);
}

/* ---- random elementwise and GEMM-epilogue chains -------------------------------------- */

static void random_chains_equal_unfused(void **state) {
  (void)state;
  for (int iter = 0; iter < 120; ++iter) {
    const int gemm_first = opst_chance(&g_rng, 0.4);
    const int len = (int)opst_int(&g_rng, 2, 5);
    const int64_t m = opst_int(&g_rng, 1, 9), nn = opst_int(&g_rng, 1, 9), kk = opst_int(&g_rng, 1, 9);
    const int64_t ys[2] = {m, nn}, as[2] = {m, kk}, bs[2] = {kk, nn}, row[1] = {nn};
    opst_tensor inter[6], other[6], y1, y2, a, b;
    ops_node n[6];
    ops_unary_params up[6];
    ops_binary_params bp[6];
    ops_scale_params sp[6];
    opst_alloc_any(&a, &g_rng, OPS_DTYPE_F32, 2, as);
    opst_alloc_any(&b, &g_rng, OPS_DTYPE_F32, 2, bs);
    opst_fill_uniform(&a, &g_rng, -1, 1);
    opst_fill_uniform(&b, &g_rng, -1, 1);
    opst_alloc_any(&inter[0], &g_rng, OPS_DTYPE_F32, 2, ys);
    opst_fill_uniform(&inter[0], &g_rng, -1, 1); /* the chain input when it starts elementwise */
    for (int i = 0; i < len; ++i) {
      ops_node_init(&n[i]);
      opst_alloc_any(&inter[i + 1], &g_rng, OPS_DTYPE_F32, 2, ys);
      const int as_row = opst_chance(&g_rng, 0.5);
      opst_alloc_any(&other[i], &g_rng, OPS_DTYPE_F32, as_row ? 1 : 2, as_row ? row : ys);
      opst_fill_uniform(&other[i], &g_rng, 0.5, 1.5);
      n[i].in[0] = &inter[i].t;
      n[i].out = &inter[i + 1].t;
      if (i == 0 && gemm_first) {
        n[i].op = OPS_OP_GEMM, n[i].in[0] = &a.t, n[i].in[1] = &b.t;
        continue;
      }
      switch (opst_int(&g_rng, 0, 2)) {
        case 0:
          ops_unary_params_init(&up[i]);
          up[i].fn = (int32_t)opst_int(&g_rng, OPS_ACT_RELU, OPS_ACT_SIN);
          if (up[i].fn == OPS_ACT_EXP) up[i].fn = OPS_ACT_TANH; /* keep values bounded */
          n[i].op = OPS_OP_UNARY, n[i].params = &up[i];
          break;
        case 1:
          ops_binary_params_init(&bp[i]);
          bp[i].op = (int32_t)opst_int(&g_rng, OPS_BINARY_ADD, OPS_BINARY_MIN);
          n[i].op = OPS_OP_BINARY, n[i].params = &bp[i], n[i].in[1] = &other[i].t;
          /* the intermediate on the right; never as a divisor, which can be near 0 (a gemm's
           * sum), where the fused and unfused roundings then differ by far more than 1e-4 */
          if (opst_chance(&g_rng, 0.5) && other[i].t.ndim == 2 && bp[i].op != OPS_BINARY_DIV) {
            n[i].in[1] = n[i].in[0];
            n[i].in[0] = &other[i].t;
          }
          break;
        default:
          ops_scale_params_init(&sp[i]);
          sp[i].alpha = (float)opst_uniform(&g_rng, -2, 2);
          n[i].op = OPS_OP_SCALE, n[i].params = &sp[i];
          break;
      }
    }
    opst_alloc_any(&y1, &g_rng, OPS_DTYPE_F32, 2, ys);
    opst_alloc_any(&y2, &g_rng, OPS_DTYPE_F32, 2, ys);
    n[len - 1].out = &y1.t;
    for (int i = 0; i < len; ++i) OPST_OK(run_node(&n[i]));
    n[len - 1].out = &y2.t;
    ops_plan plan = plan_of(n, len, 0);
    /* Linked elementwise nodes fuse into one kernel, which holds 4 operand tensors. */
    int binaries = 0;
    for (int i = 0; i < len; ++i) binaries += n[i].op == OPS_OP_BINARY;
    if (!gemm_first && ops_plan_step_count(plan) != (binaries > 4 ? 2 : 1)) {
      char text[4096];
      ops_plan_to_text(plan, text, sizeof text);
      print_error("chain %d: %d elementwise nodes gave %d steps\n%s", iter, len, ops_plan_step_count(plan), text);
      fail();
    }
    run_plan(plan);
    char why[256];
    assert_true(opst_fully_written(&y2, why, sizeof why));
    const double diff = rel_l2(&y2, &y1);
    if (diff > 1e-4) {
      char text[4096];
      ops_plan_to_text(plan, text, sizeof text);
      print_error("chain %d: fused differs from unfused by %g\n%s", iter, diff, text);
      fail();
    }
    ops_plan_destroy(plan);
    for (int i = 0; i <= len; ++i) opst_free(&inter[i]);
    for (int i = 0; i < len; ++i) opst_free(&other[i]);
    opst_free(&y1), opst_free(&y2), opst_free(&a), opst_free(&b);
  }
}

static void bad_chains_are_rejected(void **state) {
  (void)state;
  ops_plan plan = (ops_plan)1;
  ops_node n;
  ops_node_init(&n);
  assert_int_equal(ops_fuse(g_h, &n, 0, 0, &plan), OPS_ERR_INVALID_ARGUMENT);
  assert_null(plan);
  n.op = OPS_OP_REDUCE;
  assert_int_equal(ops_fuse(g_h, &n, 1, 0, &plan), OPS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(ops_last_error(), "nodes[0].op"));
  n.op = OPS_OP_UNARY;
  assert_int_equal(ops_fuse(g_h, &n, 1, 0, &plan), OPS_ERR_NULL_POINTER);
  n.struct_size = 4;
  assert_int_equal(ops_fuse(g_h, &n, 1, 0, &plan), OPS_ERR_STRUCT_SIZE);
  assert_int_equal(ops_fuse(g_h, NULL, 1, 0, &plan), OPS_ERR_NULL_POINTER);
}

/* A malformed descriptor fails ops_fuse with the op's own error; a plan whose later step
 * fails its checks writes nothing, not even the steps before it. */
static void plans_check_before_they_write(void **state) {
  (void)state;
  const int64_t xs[2] = {5, 12}, ws[1] = {12};
  opst_tensor x, y1, y2, w;
  opst_alloc(&x, &g_rng, OPS_DTYPE_F32, 2, xs, OPST_CONTIGUOUS);
  opst_alloc(&y1, &g_rng, OPS_DTYPE_F32, 2, xs, OPST_CONTIGUOUS);
  opst_alloc(&y2, &g_rng, OPS_DTYPE_F32, 2, xs, OPST_CONTIGUOUS);
  opst_alloc(&w, &g_rng, OPS_DTYPE_F32, 1, ws, OPST_CONTIGUOUS);
  opst_fill_uniform(&x, &g_rng, -1, 1);
  opst_fill_uniform(&w, &g_rng, -1, 1);
  ops_unary_params up;
  ops_unary_params_init(&up);
  up.fn = OPS_ACT_RELU;
  ops_node nodes[2];
  ops_node_init(&nodes[0]);
  ops_node_init(&nodes[1]);
  nodes[0].op = OPS_OP_UNARY, nodes[0].params = &up, nodes[0].in[0] = &x.t, nodes[0].out = &y1.t;
  nodes[1].op = OPS_OP_RMSNORM, nodes[1].in[0] = &y1.t, nodes[1].in[1] = &w.t, nodes[1].out = &y2.t;

  ops_plan plan = (ops_plan)1;
  y2.t.reserved = 3;
  assert_int_equal(ops_fuse(g_h, nodes, 2, 0, &plan), OPS_ERR_INVALID_ARGUMENT);
  assert_null(plan);
  assert_non_null(strstr(ops_last_error(), "ops_fuse: nodes[1]: ops_rmsnorm_explain: y: reserved"));
  y2.t.reserved = 0;

  w.t.data = NULL; /* ops_fuse reads descriptors only; running needs the weight */
  plan = plan_of(nodes, 2, 0);
  assert_int_equal(ops_plan_step_count(plan), 2);
  opst_snapshot(&x);
  opst_snapshot(&y1);
  opst_snapshot(&y2);
  assert_int_equal(ops_plan_execute(g_h, plan, NULL, 0), OPS_ERR_NULL_POINTER);
  assert_non_null(strstr(ops_last_error(), "weight"));
  assert_true(opst_untouched(&x));
  assert_true(opst_untouched(&y1)); /* the first step did not run */
  assert_true(opst_untouched(&y2));
  ops_plan_destroy(plan);
  opst_free(&x);
  opst_free(&y1);
  opst_free(&y2);
  opst_free(&w);
}

/* Last: the elementwise-chain kernel exercised every feature its row claims. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/dispatch:fusion_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("fusion"));
  opst_coverage_start(g_h);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ops_handle_destroy(g_h);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gemm_bias_gelu_becomes_one_gemm),
      cmocka_unit_test(gemm_refusals_say_why),
      cmocka_unit_test(add_norm_fuses_and_writes_the_sum_when_needed),
      cmocka_unit_test(attention_chain_becomes_sdpa),
      cmocka_unit_test(random_chains_equal_unfused),
      cmocka_unit_test(bad_chains_are_rejected),
      cmocka_unit_test(plans_check_before_they_write),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("fusion", tests, setup, teardown);
}
