/* gpu_ops_test: ops_rope and ops_kv_cache_append against the CPU reference
 * (tests/support/gpu_call.h): model head dims, partial rotary dims, both styles, every
 * scaling, int32 / int64 positions up to 2^20, in place, q and k as views of one fused QKV
 * buffer, and caches of 16- to 256-row pages filled in random slot order with skipped tokens. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/gpu/gpu_ops.h"
#include "tests/support/gpu_call.h"
#include "tests/support/opst.h"

/* tensors: 0 positions, 1 q, 2 q_out, 3 k, 4 k_out (3 and 4 absent without k) */
static ops_status run_rope(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  ops_rope_params p = c->rope;
  p.k = c->has[3] ? &c->v[3] : NULL;
  p.k_out = c->has[4] ? &c->v[4] : NULL;
  if (ex) return ops_rope_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], ex);
  return q ? ops_rope_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], q)
           : ops_rope(h, &p, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
}

static const int64_t kDims[][2] = {{128, 0}, {64, 0}, {128, 64}, {256, 0}, {80, 32}, {96, 0}, {128, 0}, {18, 10}, {7, 4}};

static void settings(opst_rng *r, ops_rope_params *p, int64_t rotary) {
  static const float thetas[3] = {10000.0f, 500000.0f, 1e6f};
  ops_rope_params_init(p);
  p->style = (int32_t)opst_int(r, 0, 1);
  p->theta = thetas[opst_int(r, 0, 2)];
  p->rotary_dim = (int32_t)rotary;
  p->scaling = (int32_t)opst_int(r, 0, 2);
  p->factor = p->scaling ? (float)opst_uniform(r, 1.0, 8.0) : 1.0f;
}

static void fill_positions(opst_tensor *pos, opst_rng *r) {
  for (int64_t i = 0; i < opst_numel(pos); ++i) {
    opst_set_flat(pos, i, (double)(opst_chance(r, 0.05) ? -opst_int(r, 1, 9) : opst_int(r, 0, opst_chance(r, 0.5) ? 4096 : 1 << 20)));
  }
  opst_snapshot(pos);
}

static void rope_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  const int64_t *dims = kDims[iter % (int)(sizeof kDims / sizeof kDims[0])];
  const int64_t d = dims[0];
  const int ndim = opst_chance(r, 0.5) ? 3 : 4;
  int64_t lead[2];
  if (ndim == 3) {
    lead[0] = opst_chance(r, 0.2) ? opst_int(r, 1000, 3000) : opst_int(r, opst_chance(r, 0.03) ? 0 : 1, 64);
  } else {
    lead[0] = opst_int(r, 1, 4);
    lead[1] = opst_int(r, 1, 300);
  }
  const int64_t hq = opst_int(r, 1, 32), hk = opst_int(r, 1, 8);
  int64_t qs[4], ks[4];
  memcpy(qs, lead, sizeof lead);
  memcpy(ks, lead, sizeof lead);
  qs[ndim - 2] = hq, qs[ndim - 1] = d, ks[ndim - 2] = hk, ks[ndim - 1] = d;
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_ROPE;
  c.run = run_rope;
  settings(r, &c.rope, dims[1]);
  const int with_k = opst_chance(r, 0.7), in_place = opst_chance(r, 0.3);
  opst_tensor pos, q, qo, k, ko;
  opst_alloc_any(&pos, r, opst_chance(r, 0.5) ? OPS_DTYPE_I32 : OPS_DTYPE_I64, ndim - 2, qs);
  fill_positions(&pos, r);
  alloc_x(&q, dt, ndim, qs);
  opst_fill_uniform(&q, r, -2, 2);
  if (in_place) clone_tensor(&qo, &q); else alloc_x(&qo, dt, ndim, qs);
  add_tensor(&c, &pos, IN, -1);
  add_tensor(&c, &q, IN, -1);
  add_tensor(&c, &qo, OUT, in_place ? 1 : -1);
  if (with_k) {
    alloc_x(&k, dt, ndim, ks);
    opst_fill_uniform(&k, r, -2, 2);
    if (in_place) clone_tensor(&ko, &k); else alloc_x(&ko, dt, ndim, ks);
    add_tensor(&c, &k, IN, -1);
    add_tensor(&c, &ko, OUT, in_place ? 3 : -1);
  }
  char label[200];
  snprintf(label, sizeof label, "rope case %d %s %dD tokens %lld hq %lld%s d %lld rotary %d style %d scaling %d layout %d%s",
           iter, ops_dtype_name((ops_dtype)dt), ndim, (long long)(opst_numel(&pos)), (long long)hq,
           with_k ? " with k" : "", (long long)d, (int)c.rope.rotary_dim, (int)c.rope.style, (int)c.rope.scaling,
           g_layout, in_place ? " in place" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

/* q and k with the strides of head ranges of one [T, Hq + 2 Hkv, D] buffer, in place: the
 * layout a runtime's QKV projection leaves (on the GPU each is its own copy of the buffer; the
 * CPU test runs the shared buffer through the aliasing check). */
static void fused_qkv_case(int iter) {
  opst_rng *r = &g_rng;
  const int32_t dt = iter % 2 ? OPS_DTYPE_BF16 : OPS_DTYPE_F16;
  const int64_t t = opst_int(r, 1, 2048), hq = 32, hk = 8, d = 128, all[3] = {t, hq + 2 * hk, d};
  opst_tensor qkv, pos, q, k, qo, ko;
  opst_alloc(&qkv, r, dt, 3, all, OPST_CONTIGUOUS);
  opst_fill_uniform(&qkv, r, -2, 2);
  opst_alloc(&pos, r, OPS_DTYPE_I64, 1, &t, OPST_CONTIGUOUS);
  fill_positions(&pos, r);
  /* q and k as views of their own copies of qkv's buffer (the harness owns each tensor) */
  clone_tensor(&q, &qkv);
  q.t.shape[1] = hq;
  clone_tensor(&k, &qkv);
  k.t.data = k.buf + hq * d * 2;
  k.t.shape[1] = hk;
  opst_free(&qkv);
  clone_tensor(&qo, &q);
  clone_tensor(&ko, &k);
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_ROPE;
  c.run = run_rope;
  settings(r, &c.rope, 0);
  add_tensor(&c, &pos, IN, -1);
  add_tensor(&c, &q, IN, -1);
  add_tensor(&c, &qo, OUT, 1);
  add_tensor(&c, &k, IN, -1);
  add_tensor(&c, &ko, OUT, 3);
  char label[120];
  snprintf(label, sizeof label, "rope fused qkv case %d %s tokens %lld", iter, ops_dtype_name((ops_dtype)dt), (long long)t);
  c.label = label;
  check_call(&c);
  free_call(&c);
}

void rope(void **state) {
  (void)state;
  for (int i = 0; i < 60; ++i) rope_case(i);
  for (int i = 0; i < 4; ++i) fused_qkv_case(i);
}

/* tensors: 0 k, 1 v, 2 slot_mapping, 3 k_cache, 4 v_cache, 5 positions (absent without RoPE) */
static ops_status run_append(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  ops_kv_cache_append_params p = c->append;
  p.rope = c->has[5] ? &c->rope : NULL;
  p.positions = c->has[5] ? &c->v[5] : NULL;
  if (ex) return ops_kv_cache_append_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], ex);
  return q ? ops_kv_cache_append_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], q)
           : ops_kv_cache_append(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], ws, wsb);
}

/* Every slot of the cache is named once (the harness checks whole outputs), in random order,
 * between tokens that skip (-1). */
static void append_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  /* every tenth case rows padded (aligned, a token's heads apart: the vec16 kernel's
   * heads_apart, exercised whatever the draws) */
  const int apart = iter % 10 == 3;
  if (apart) g_layout = 1;
  static const int64_t page_sizes[4] = {16, 64, 256, 5};
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  const int64_t *dims = kDims[iter % (int)(sizeof kDims / sizeof kDims[0])];
  const int64_t d = dims[0], dv = iter % 3 == 0 ? d : kDims[(iter + 1) % 9][0];
  const int64_t page = page_sizes[opst_int(r, 0, 3)], pages = opst_int(r, 1, page >= 64 ? 6 : 40);
  const int64_t heads = opst_int(r, apart ? 2 : 1, 8), capacity = pages * page;
  const int64_t skipped = opst_int(r, 0, 20), tokens = capacity + skipped;
  const int64_t ks[3] = {tokens, heads, d}, vs[3] = {tokens, heads, dv};
  const int64_t kcs[4] = {pages, page, heads, d}, vcs[4] = {pages, page, heads, dv};
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_KV_CACHE_APPEND;
  c.run = run_append;
  ops_kv_cache_append_params_init(&c.append);
  settings(r, &c.rope, dims[1]);
  const int rope = d % 2 == 0 || dims[1] > 0 ? opst_chance(r, 0.6) : 0;
  opst_tensor k, v, slots, kc, vc, pos;
  alloc_x(&k, dt, 3, ks);
  alloc_x(&v, dt, 3, vs);
  opst_fill_uniform(&k, r, -2, 2);
  opst_fill_uniform(&v, r, -2, 2);
  opst_alloc(&slots, r, opst_chance(r, 0.5) ? OPS_DTYPE_I32 : OPS_DTYPE_I64, 1, &tokens, OPST_CONTIGUOUS);
  int64_t *order = opst_permutation(r, tokens);
  for (int64_t t = 0; t < tokens; ++t) opst_set_flat(&slots, t, order[t] < capacity ? (double)order[t] : -1.0);
  free(order);
  opst_snapshot(&slots);
  alloc_x(&kc, dt, 4, kcs);
  alloc_x(&vc, dt, 4, vcs);
  add_tensor(&c, &k, IN, -1);
  add_tensor(&c, &v, IN, -1);
  add_tensor(&c, &slots, IN, -1);
  add_tensor(&c, &kc, OUT, -1);
  add_tensor(&c, &vc, OUT, -1);
  if (rope) {
    opst_alloc(&pos, r, opst_chance(r, 0.5) ? OPS_DTYPE_I32 : OPS_DTYPE_I64, 1, &tokens, OPST_CONTIGUOUS);
    fill_positions(&pos, r);
    add_tensor(&c, &pos, IN, -1);
  }
  char label[200];
  snprintf(label, sizeof label, "kv_cache_append case %d %s pages %lld x %lld heads %lld d %lld dv %lld%s layout %d", iter,
           ops_dtype_name((ops_dtype)dt), (long long)pages, (long long)page, (long long)heads, (long long)d,
           (long long)dv, rope ? " rope" : "", g_layout);
  c.label = label;
  check_call(&c);
  free_call(&c);
}

void rope_cache_append(void **state) {
  (void)state;
  for (int i = 0; i < 40; ++i) append_case(i);
}
