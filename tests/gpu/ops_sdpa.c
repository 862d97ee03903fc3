/* gpu_ops_test: attention against the CPU reference (tests/support/gpu_call.h). */
#include <cuda_runtime_api.h>
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
#include "tests/gpu/cuda_check.h"
#include "tests/gpu/gpu_ops.h"
#include "tests/support/gpu_call.h"
#include "tests/support/opst.h"

/* ---- attention ----------------------------------------------------------------------- */

static ops_status run_sdpa(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 q, 1 k, 2 v, optional 3 mask, 4 cu_seqlens_q, 5 cu_seqlens_k, then 6 o, optional 7 lse,
   * optional 8 kv_lens, 9 block_table */
  ops_sdpa_params p = c->sdpa;
  p.attn_mask = c->has[3] ? &c->v[3] : NULL;
  p.cu_seqlens_q = c->has[4] ? &c->v[4] : NULL;
  p.cu_seqlens_k = c->has[5] ? &c->v[5] : NULL;
  p.kv_lens = c->n > 8 && c->has[8] ? &c->v[8] : NULL;
  p.block_table = c->n > 9 && c->has[9] ? &c->v[9] : NULL;
  const ops_tensor *lse = c->has[7] ? &c->v[7] : NULL;
  if (ex) return ops_sdpa_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[6], lse, ex);
  return q ? ops_sdpa_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[6], lse, q)
           : ops_sdpa(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[6], lse, ws, wsb);
}

/* A [B, S, H, D] operand (varlen: [T, H, D]) in one of the layouts attention operands come
 * in: 0 contiguous (BSHD), 1 BHSD memory through strides, 2 rows padded to a multiple of 8
 * elements and 8 more (16-byte aligned, not contiguous), 3 random strides, axis order and
 * offset (element loads). */
void alloc_seq(opst_tensor *t, int32_t dt, int nd, const int64_t *shape, int layout) {
  if (layout == 3) {
    opst_alloc(t, &g_rng, dt, nd, shape, OPST_STRIDED);
    return;
  }
  int64_t w[4];
  memcpy(w, shape, (size_t)nd * sizeof *w);
  const int s = nd - 3, hd = nd - 2; /* the S (or T) and H axes */
  if (layout == 1) w[s] = shape[hd], w[hd] = shape[s];
  if (layout == 2) w[nd - 1] = (shape[nd - 1] + 7) / 8 * 8 + 8;
  opst_alloc(t, &g_rng, dt, nd, w, OPST_CONTIGUOUS);
  if (layout == 1) {
    const int64_t ss = t->t.strides[hd];
    t->t.strides[hd] = t->t.strides[s], t->t.strides[s] = ss;
    t->t.shape[s] = shape[s], t->t.shape[hd] = shape[hd];
  }
  if (layout == 2) t->t.shape[nd - 1] = shape[nd - 1];
}

/* The optional LSE output (tensor 7): f32 [B, Hq, Sq], varlen [Hq, Tq]; absent without. */
static void add_lse(gcall *c, opst_tensor *tl, int with, int varlen, int64_t batch, int64_t hq, int64_t sq,
                    int64_t tot_q) {
  if (!with) {
    add_absent(c);
    return;
  }
  const int64_t ls3[3] = {batch, hq, sq}, ls2[2] = {hq, tot_q};
  if (varlen) opst_alloc(tl, &g_rng, OPS_DTYPE_F32, 2, ls2, OPST_CONTIGUOUS);
  else opst_alloc(tl, &g_rng, OPS_DTYPE_F32, 3, ls3, OPST_CONTIGUOUS);
  add_tensor(c, tl, OUT, -1);
}

/* Varlen lengths: 1 to 4 sequences of up to sq queries and sk keys (the second empty; with a
 * causal mask at least as many keys as queries; no_keys: none at all), and their bounds into
 * p (max_seqlen_q a loose upper bound now and then). */
void sdpa_draw_varlen(sdpa_varlen *vl, ops_sdpa_params *p, int64_t sq, int64_t sk, int no_keys) {
  opst_rng *r = &g_rng;
  memset(vl, 0, sizeof *vl);
  vl->batch = opst_int(r, 1, 4);
  for (int64_t b = 0; b < vl->batch; ++b) {
    vl->lens_q[b] = b == 1 ? 0 : opst_int(r, 0, sq);
    vl->lens_k[b] = no_keys ? 0 : p->causal ? vl->lens_q[b] + opst_int(r, 0, 40) : opst_int(r, 0, sk);
    vl->tot_q += vl->lens_q[b], vl->tot_k += vl->lens_k[b];
    if (vl->lens_q[b] > vl->max_q) vl->max_q = vl->lens_q[b];
    if (vl->lens_k[b] > vl->max_k) vl->max_k = vl->lens_k[b];
  }
  p->max_seqlen_q = (int32_t)(vl->max_q + opst_int(r, 0, 3));
  p->max_seqlen_k = (int32_t)vl->max_k;
}

/* cu_seqlens_q and _k (int32 [batch + 1]) of a varlen draw. */
void sdpa_cu_seqlens(opst_tensor *tcq, opst_tensor *tck, const sdpa_varlen *vl) {
  const int64_t n = vl->batch + 1;
  opst_alloc(tcq, &g_rng, OPS_DTYPE_I32, 1, &n, OPST_CONTIGUOUS);
  opst_alloc(tck, &g_rng, OPS_DTYPE_I32, 1, &n, OPST_CONTIGUOUS);
  int64_t aq = 0, ak = 0;
  for (int64_t b = 0; b <= vl->batch; ++b) {
    opst_set_flat(tcq, b, (double)aq);
    opst_set_flat(tck, b, (double)ak);
    if (b < vl->batch) aq += vl->lens_q[b], ak += vl->lens_k[b];
  }
}

/* An additive mask [B or 1, Hq or 1, Sq, Sk] (f32 or dt) from [-2, 2), some keys removed
 * (-inf), now and then a whole row. */
void sdpa_random_mask(opst_tensor *tm, int32_t dt, int64_t batch, int64_t hq, int64_t sq, int64_t sk) {
  opst_rng *r = &g_rng;
  const int64_t ms[4] = {opst_chance(r, 0.5) ? batch : 1, opst_chance(r, 0.5) ? hq : 1, sq, sk};
  opst_alloc(tm, r, opst_chance(r, 0.5) ? OPS_DTYPE_F32 : dt, 4, ms, OPST_CONTIGUOUS);
  opst_fill_uniform(tm, r, -2, 2);
  const int64_t n = opst_numel(tm);
  for (int64_t e = 0; e < n; ++e) {
    if (opst_chance(r, 0.1) || (e / sk) % 7 == 3) opst_set_flat(tm, e, -INFINITY);
  }
}

static const int64_t kSeq[] = {1, 2, 17, 63, 64, 100, 128, 129, 200, 255, 333};

/* Q, K and V filled from [-1, 1) and added to the call as its first three inputs. */
static void add_qkv(gcall *c, opst_tensor *q, opst_tensor *k, opst_tensor *v) {
  opst_tensor *t[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) opst_fill_uniform(t[i], &g_rng, -1, 1);
  for (int i = 0; i < 3; ++i) add_tensor(c, t[i], IN, -1);
}

/* One attention case. iter % 3 picks the head-dim class (<= 64, <= 128, <= 256) so that every
 * head-dim kernel sees each feature; j = iter / 3 walks the features deterministically. */
static void sdpa_case(int iter, int64_t big_seq) {
  opst_rng *r = &g_rng;
  const int cls = iter % 3, j = iter / 3;
  static const int64_t kD[3][4] = {{64, 32, 40, 17}, {128, 96, 80, 72}, {256, 200, 160, 136}};
  const int32_t dt = j % 2 == 0 ? OPS_DTYPE_BF16 : OPS_DTYPE_F16;
  /* with a window or a value head dim of its own, head dims from the class's 16-byte multiples,
   * so that the Hopper kernels see those features whatever the draws */
  const int64_t d = j % 3 != 0 ? kD[cls][j % 2] : kD[cls][opst_int(r, 0, 3)];
  const int64_t dv = j % 3 == 2 ? kD[cls][1 - j % 2] : d;
  const int varlen = j % 4 == 2, with_mask = j % 4 == 1 || j % 8 == 4, with_lse = j % 3 != 0;
  const int layout = j % 5 == 4 ? 3 : (int)(j % 3);
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_SDPA;
  c.run = run_sdpa;
  ops_sdpa_params_init(&c.sdpa);
  c.sdpa.causal = j % 2 == 1 || j % 8 == 6;
  if (j % 3 == 1) { /* a sliding window; with causal its right side is the diagonal */
    c.sdpa.window_left = (int32_t)opst_int(r, 0, 150);
    c.sdpa.window_right = c.sdpa.causal ? (opst_chance(r, 0.5) ? 0 : -1) : (int32_t)opst_int(r, -1, 40);
  }
  if (opst_chance(r, 0.3)) c.sdpa.scale = (float)opst_uniform(r, 0.02, 0.3);
  const int64_t hkv = big_seq > 0 ? 1 : opst_int(r, 1, 2);
  const int64_t group = j % 2 == 0 && big_seq == 0 ? opst_int(r, 2, 4) : 1, hq = hkv * group;
  int64_t batch = opst_int(r, 1, 2), sq = kSeq[opst_int(r, 0, 10)], sk = kSeq[opst_int(r, 0, 10)];
  if (big_seq > 0) batch = 1, sq = big_seq, sk = big_seq - (iter % 2) * 3;
  /* the CPU reference costs B Hq Sq Sk (D + Dv): keep a case under ~4e8 */
  while (big_seq == 0 && (double)batch * hq * sq * sk * (double)(d + dv) > 4e8) sq = sq / 2 + 1;

  opst_tensor tq, tk, tv, tm, tcq, tck, to, tl;
  sdpa_varlen vl = {0};
  if (varlen) {
    sdpa_draw_varlen(&vl, &c.sdpa, sq, sk, big_seq < 0);
    batch = vl.batch;
    const int64_t tot_q = vl.tot_q, tot_k = vl.tot_k;
    const int64_t qs[3] = {tot_q, hq, d}, ks[3] = {tot_k, hkv, d}, vs[3] = {tot_k, hkv, dv}, os[3] = {tot_q, hq, dv};
    alloc_seq(&tq, dt, 3, qs, layout);
    alloc_seq(&tk, dt, 3, ks, layout);
    alloc_seq(&tv, dt, 3, vs, layout);
    alloc_seq(&to, dt, 3, os, layout % 3);
  } else {
    const int64_t qs[4] = {batch, sq, hq, d}, ks[4] = {batch, sk, hkv, d}, vs[4] = {batch, sk, hkv, dv},
                  os[4] = {batch, sq, hq, dv};
    alloc_seq(&tq, dt, 4, qs, layout);
    alloc_seq(&tk, dt, 4, ks, layout);
    alloc_seq(&tv, dt, 4, vs, layout);
    alloc_seq(&to, dt, 4, os, layout % 3);
  }
  add_qkv(&c, &tq, &tk, &tv);
  if (with_mask) {
    sdpa_random_mask(&tm, dt, batch, hq, sq, sk);
    add_tensor(&c, &tm, IN, -1);
  } else {
    add_absent(&c);
  }
  if (varlen) {
    sdpa_cu_seqlens(&tcq, &tck, &vl);
    add_tensor(&c, &tcq, IN, -1);
    add_tensor(&c, &tck, IN, -1);
  } else {
    add_absent(&c);
    add_absent(&c);
  }
  add_tensor(&c, &to, OUT, -1);
  add_lse(&c, &tl, with_lse, varlen, batch, hq, sq, vl.tot_q);
  char label[240];
  snprintf(label, sizeof label,
           "sdpa case %d %s batch %lld Sq %lld Sk %lld Hq %lld Hkv %lld D %lld Dv %lld layout %d%s%s "
           "window (%d, %d)%s%s%s",
           iter, ops_dtype_name((ops_dtype)dt), (long long)batch, (long long)(varlen ? vl.max_q : sq),
           (long long)(varlen ? vl.max_k : sk), (long long)hq, (long long)hkv, (long long)d, (long long)dv, layout,
           varlen ? " varlen" : "", c.sdpa.causal ? " causal" : "", (int)c.sdpa.window_left,
           (int)c.sdpa.window_right, with_mask ? " mask" : "", with_lse ? " lse" : "",
           c.sdpa.scale != 0.0f ? " scaled" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

/* A dense call (no mask, no varlen) into c: q, k, v in alloc_seq's `layout`, o row-major (rows
 * padded with layout 2) and an f32 LSE, held in t[0 .. 4]. */
void sdpa_dense_call(gcall *c, opst_tensor t[5], int32_t dt, int64_t batch, int64_t sq, int64_t sk,
                            int64_t hq, int64_t hkv, int64_t d, int64_t dv, int layout) {
  memset(c, 0, sizeof *c);
  c->op = OPS_OP_SDPA;
  c->run = run_sdpa;
  ops_sdpa_params_init(&c->sdpa);
  const int64_t qs[4] = {batch, sq, hq, d}, ks[4] = {batch, sk, hkv, d}, vs[4] = {batch, sk, hkv, dv},
                os[4] = {batch, sq, hq, dv}, ls[3] = {batch, hq, sq};
  alloc_seq(&t[0], dt, 4, qs, layout);
  alloc_seq(&t[1], dt, 4, ks, layout);
  alloc_seq(&t[2], dt, 4, vs, layout);
  alloc_seq(&t[3], dt, 4, os, layout == 2 ? 2 : 0);
  opst_alloc(&t[4], &g_rng, OPS_DTYPE_F32, 3, ls, OPST_CONTIGUOUS);
  add_qkv(c, &t[0], &t[1], &t[2]);
  add_absent(c); /* mask */
  add_absent(c); /* cu_seqlens */
  add_absent(c);
  add_tensor(c, &t[3], OUT, -1);
  add_tensor(c, &t[4], OUT, -1);
}

/* More work tiles than SMs without a window or varlen: the Hopper kernels' persistent grid,
 * each block walking several (query tile, head, batch) tiles with the K / V ring, the Q
 * buffer and the ping-pong turns carried across them. 3 x 8 heads (GQA 4) x 1000 rows (a
 * tail) x 777 keys (a partial key tile); LSE; d 64 bf16 (6 query tiles of 192 a head, 144
 * work tiles), d 128 f16 with Dv 96 (8 of 128, 192 tiles): an even count a head, so the
 * blocks run in clusters of two that share K / V; then d 128 bf16 with 1100 rows (9 query
 * tiles a head, 216 tiles): an odd count, one block at a time; then d 64 with Dv 40 in pairs;
 * then d 128 with Dv 100 in rows padded to 16 bytes (O's last 16-byte vector a part one).
 * The _pair rows take the even counts; pinned on the odd one they refuse it. */
void sdpa_many_tiles(void **state) {
  (void)state;
  for (int v = 0; v < 5; ++v) {
    const int32_t dt = v == 1 ? OPS_DTYPE_F16 : OPS_DTYPE_BF16;
    const int64_t d = v == 0 || v == 3 ? 64 : 128, dv = v == 1 ? 96 : v == 3 ? 40 : v == 4 ? 100 : d;
    gcall c;
    opst_tensor t[5];
    sdpa_dense_call(&c, t, dt, 3, v == 2 ? 1100 : 1000, 777, 8, 2, d, dv, v == 4 ? 2 : v % 2);
    c.label = v == 0   ? "sdpa bf16 3 x 8 heads (GQA 4) x 1000 x 777, d 64, lse: 144 work tiles in pairs"
              : v == 1 ? "sdpa f16 3 x 8 heads (GQA 4) x 1000 x 777, d 128, Dv 96, BHSD, lse: 192 work tiles in pairs"
              : v == 2 ? "sdpa bf16 3 x 8 heads (GQA 4) x 1100 x 777, d 128, lse: 216 work tiles"
              : v == 3 ? "sdpa bf16 3 x 8 heads (GQA 4) x 1000 x 777, d 64, Dv 40, BHSD, lse: 144 work tiles in pairs"
                       : "sdpa bf16 3 x 8 heads (GQA 4) x 1000 x 777, d 128, Dv 100, padded rows, lse: 192 work tiles "
                         "in pairs";
    check_call(&c);
    free_call(&c);
  }
}

/* Causal and windowed calls with more work tiles than SMs: the Hopper kernels' persistent
 * grid over tiles of different lengths, every other pass in reverse; by length over all
 * heads where the call has few KV heads (2 x 4 here: 8 x 4 <= 132), head by head where it has
 * many (9 x 4: 144 > 132). Each launch's plan is explain's (check_call). Causal 2 x 16 heads
 * (GQA 4) x 1000 x 1000, d 128 bf16 (8 query tiles a head, 256 tiles); a sliding window
 * (300 left, 0 right) 3 x 8 heads (GQA 4) x 1000 x 1200, d 64 f16, Dv 40 (the _d64 row: 6
 * tiles of 192 a head, 144 tiles; the _d128 row: 8 of 128, 192); causal 9 x 8 heads (GQA 2) x
 * 300 x 300, d 128 bf16, BHSD (3 a head, 216). Every kernel runs each (check_call); explain's
 * choice prints its plan. */
void sdpa_causal_tiles(void **state) {
  (void)state;
  static const struct {
    int32_t dt;
    int64_t batch, sq, sk, hq, hkv, d, dv;
    int window_left, layout;
    const char *label;
  } kCase[3] = {
      {OPS_DTYPE_BF16, 2, 1000, 1000, 16, 4, 128, 128, -1, 0,
       "sdpa bf16 causal 2 x 16 heads (GQA 4) x 1000 x 1000, d 128, lse: 256 tiles by length"},
      {OPS_DTYPE_F16, 3, 1000, 1200, 8, 2, 64, 40, 300, 0,
       "sdpa f16 window (300, 0) 3 x 8 heads (GQA 4) x 1000 x 1200, d 64, Dv 40, lse: 144 / 192 tiles by "
       "length"},
      {OPS_DTYPE_BF16, 9, 300, 300, 8, 4, 128, 128, -1, 1,
       "sdpa bf16 causal 9 x 8 heads (GQA 2) x 300 x 300, d 128, BHSD, lse: 216 tiles head by head"},
  };
  for (int v = 0; v < 3; ++v) {
    gcall c;
    opst_tensor t[5];
    sdpa_dense_call(&c, t, kCase[v].dt, kCase[v].batch, kCase[v].sq, kCase[v].sk, kCase[v].hq, kCase[v].hkv,
                    kCase[v].d, kCase[v].dv, kCase[v].layout);
    if (kCase[v].window_left >= 0) {
      c.sdpa.window_left = kCase[v].window_left, c.sdpa.window_right = 0;
    } else {
      c.sdpa.causal = 1;
    }
    c.label = kCase[v].label;
    check_call(&c);
    { /* on a Hopper device (or the dry run's described H100), the walk explain names */
      ops_explain e;
      e.struct_size = sizeof e;
      OPST_OK(c.run(g_gpu, &c, NULL, 0, NULL, &e));
      assert_true(e.chosen >= 0);
      if (strncmp(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_sm90_", 15) == 0) {
        assert_non_null(e.plan[e.chosen]);
        const int by_length = strstr(e.plan[e.chosen], "longest first over all heads") != NULL;
        assert_int_equal(by_length, v < 2);
        printf("[ PLAN     ] %s: %s: %s\n", c.label, e.verdicts[e.chosen].kernel_name, e.plan[e.chosen]);
      }
    }
    free_call(&c);
  }
}

/* Window sides of up to 2^31 - 1 keys (wider than every key: the same as none) with Sq != Sk:
 * the kernels' window edges are int sums (i + (Sk - Sq) +- a side), which such a side would
 * overflow; the launchers pass those sides as unbounded. Both kernels run (no mask). */
void sdpa_wide_windows(void **state) {
  (void)state;
  static const int32_t kWin[3][2] = {{INT32_MAX, INT32_MAX}, {INT32_MAX, 0}, {INT32_MAX - 7, 5}};
  for (int v = 0; v < 3; ++v) {
    const int32_t dt = v == 1 ? OPS_DTYPE_F16 : OPS_DTYPE_BF16;
    const int64_t sq = v == 1 ? 200 : 300, sk = v == 1 ? 300 : 200;
    gcall c;
    opst_tensor t[5];
    sdpa_dense_call(&c, t, dt, 2, sq, sk, 4, 2, 128, 128, 0);
    c.sdpa.window_left = kWin[v][0], c.sdpa.window_right = kWin[v][1];
    char label[160];
    snprintf(label, sizeof label, "sdpa %s 2 x 4 heads x %lld x %lld, d 128, window (%d, %d), lse",
             ops_dtype_name((ops_dtype)dt), (long long)sq, (long long)sk, (int)kWin[v][0], (int)kWin[v][1]);
    c.label = label;
    check_call(&c);
    free_call(&c);
  }
}

/* How a split-KV call's parts are merged: decode (Hq 32 / Hkv 8, d 128, LSE), B1 with 1000
 * keys (8 parts: on sm_90 one cluster a KV head, merged over distributed shared memory, no
 * workspace), B1 with 4001 keys (24 parts, more than a cluster holds: the workspace and the
 * combine) and B8 with 1000 keys (on a 132-SM sm_90 the wave's 6 parts are more blocks than
 * clusters keep resident: 4 parts in clusters instead, a part 4 key tiles). Each is checked
 * against the CPU with every kernel; then, pinned to cuda_sdpa_split_d128_m16, its plan and
 * workspace are the merge's, and three runs over poisoned outputs give bitwise the same O and
 * LSE. */
void sdpa_split_merge(void **state) {
  (void)state;
  static const char *const labels[3] = {
      "sdpa decode bf16 1 x 32 heads (GQA 4) x 1 x 1000, d 128, lse: parts in a cluster",
      "sdpa decode bf16 1 x 32 heads (GQA 4) x 1 x 4001, d 128, lse: parts and the combine",
      "sdpa decode bf16 8 x 32 heads (GQA 4) x 1 x 1000, d 128, lse: a cluster's count for the wave's"};
  for (int v = 0; v < 3; ++v) {
    const int64_t sk = v == 1 ? 4001 : 1000;
    gcall c;
    opst_tensor t[5];
    sdpa_dense_call(&c, t, OPS_DTYPE_BF16, v == 2 ? 8 : 1, 1, sk, 32, 8, 128, 128, 0);
    c.label = labels[v];
    check_call(&c);
    if (!g_have_cuda) {
      free_call(&c);
      continue;
    }
    ops_device_info di;
    di.struct_size = sizeof di;
    OPST_OK(ops_handle_get_device_info(g_gpu, &di));
    void *mem[MAXT] = {NULL};
    for (int i = 0; i < c.n; ++i) {
      if (!c.has[i] || c.h[i]->bytes == 0) continue;
      CUDA_OK(cudaMalloc(&mem[i], c.h[i]->bytes));
      CUDA_OK(cudaMemcpy(mem[i], c.h[i]->buf, c.h[i]->bytes, cudaMemcpyHostToDevice));
      c.v[i] = relocated(c.h[i], mem[i]);
    }
    OPST_OK(ops_handle_pin_kernel(g_gpu, "cuda_sdpa_split_d128_m16"));
    ops_explain e;
    e.struct_size = sizeof e;
    size_t wsb = 0;
    if (c.run(g_gpu, &c, NULL, 0, NULL, &e) == OPS_OK && e.chosen >= 0) {
      const char *plan = e.plan[e.chosen];
      assert_non_null(plan);
      const int traded = di.code_sm >= 90 && di.sm_count == 132 && v == 2;
      const int clustered = di.code_sm >= 90 && (v == 0 || traded || (v == 2 && strstr(plan, "cluster") != NULL));
      assert_non_null(strstr(plan, clustered ? "merged in a cluster" : "+ combine"));
      if (traded) assert_non_null(strstr(plan, "keys split in 4 parts, merged in a cluster (the wave's count"));
      OPST_OK(c.run(g_gpu, &c, NULL, 0, &wsb, NULL));
      assert_true(clustered ? wsb == 0 : wsb > 0);
      void *ws = NULL;
      if (wsb > 0) CUDA_OK(cudaMalloc(&ws, wsb));
      unsigned char *first[2] = {malloc(c.h[6]->bytes), malloc(c.h[7]->bytes)}, *again = malloc(c.h[6]->bytes);
      assert_true(first[0] != NULL && first[1] != NULL && again != NULL);
      for (int run = 0; run < 3; ++run) {
        for (int k = 0; k < 2; ++k) {
          const int i = 6 + k;
          CUDA_OK(cudaMemset(mem[i], run % 2 ? 0x7f : 0xff, c.h[i]->bytes));
        }
        OPST_OK(c.run(g_gpu, &c, ws, wsb, NULL, NULL));
        for (int k = 0; k < 2; ++k) {
          const int i = 6 + k;
          CUDA_OK(cudaMemcpy(run == 0 ? first[k] : again, mem[i], c.h[i]->bytes, cudaMemcpyDeviceToHost));
          if (run > 0 && memcmp(first[k], again, c.h[i]->bytes) != 0) {
            print_error("%s: run %d's %s differs from run 0's\n", c.label, run, k == 0 ? "O" : "LSE");
            fail();
          }
        }
      }
      printf("[ MERGE    ] %s: %s, workspace %zu B, 3 runs bitwise identical\n", c.label, plan, wsb);
      cudaFree(ws);
      free(first[0]), free(first[1]), free(again);
    } else {
      printf("[ SKIPPED  ] %s: cuda_sdpa_split_d128_m16 does not run it here (%s)\n", c.label, ops_last_error());
    }
    OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
    for (int i = 0; i < c.n; ++i) cudaFree(mem[i]);
    free_call(&c);
  }
}

/* Attention over a KV cache: decode and short query blocks (Sq 1 to 16, dense or varlen)
 * against kv_lens keys of a dense [B, capacity, Hkv, D] cache or of a paged pool (pages of 16
 * to 256 keys, and of 24, 40 and 20, in random order with unused pages between them, partial
 * last pages, table entries past a sequence's pages set to ids that do not exist); the slots
 * past a sequence's keys hold NaN, which must not reach its output; GQA 1 / 4 / 8 / 16,
 * causal, windows, LSE. long_kv > 0: one sequence of that many keys (many key tiles a part). */
/* NaN in rows [from, to) of axis 1 of k and v (a cache's slots that hold no key), at index b of
 * axis 0 (a sequence, or a page). */
static void poison_rows(opst_tensor *k, opst_tensor *v, int64_t b, int64_t from, int64_t to) {
  opst_tensor *kv[2] = {k, v};
  for (int t = 0; t < 2; ++t) {
    const int64_t *sh = kv[t]->t.shape;
    for (int64_t j = from; j < to; ++j)
      for (int64_t h = 0; h < sh[2]; ++h)
        for (int64_t x = 0; x < sh[3]; ++x) {
          const int64_t idx[4] = {b, j, h, x};
          opst_set(kv[t], idx, NAN);
        }
  }
}

static void sdpa_cache_case(int iter, int64_t long_kv) {
  opst_rng *r = &g_rng;
  const int cls = iter % 3, j = iter / 3;
  static const int64_t kD[3][3] = {{64, 40, 56}, {128, 96, 80}, {256, 192, 136}};
  static const int64_t kGroup[4] = {1, 4, 8, 16}, kSq[5] = {1, 2, 4, 7, 16};
  static const int64_t kPage[8] = {16, 32, 64, 128, 256, 24, 40, 20}; /* 20: the cp.async path (not 8 | page) */
  const int32_t dt = j % 2 == 0 ? OPS_DTYPE_BF16 : OPS_DTYPE_F16;
  const int64_t d = kD[cls][opst_int(r, 0, 2)], dv = j % 4 == 3 ? kD[cls][opst_int(r, 0, 2)] : d;
  const int paged = j % 3 != 2, varlen = j % 4 == 1, with_lse = j % 3 != 1;
  const int layout = (int)(j % 3); /* unit-stride rows: the KV cache kernels' (a cache of any
                                      strides runs on the CPU only) */
  const int64_t group = kGroup[opst_int(r, 0, 3)], hkv = long_kv > 0 ? 1 : opst_int(r, 1, 2), hq = hkv * group;
  const int64_t sq = long_kv > 0 ? 1 : kSq[opst_int(r, 0, 4)], batch = long_kv > 0 ? 1 : opst_int(r, 1, 4);
  const int64_t ps = paged ? kPage[opst_int(r, 0, 7)] : 0;
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_SDPA;
  c.run = run_sdpa;
  ops_sdpa_params_init(&c.sdpa);
  c.sdpa.causal = j % 2 == 1;
  if (j % 5 == 3) c.sdpa.window_left = (int32_t)opst_int(r, 0, 300);
  int64_t lens[4], lens_q[4], max_len = 0, tot_q = 0;
  for (int64_t b = 0; b < batch; ++b) {
    lens[b] = long_kv > 0 ? long_kv : opst_chance(r, 0.1) ? 0 : opst_int(r, 1, 1500);
    /* the CPU reference costs Hq Sq keys (D + Dv) a sequence: keep a case under ~4e8 */
    while ((double)batch * hq * sq * lens[b] * (double)(d + dv) > 4e8) lens[b] /= 2;
    if (lens[b] > max_len) max_len = lens[b];
    lens_q[b] = varlen ? opst_int(r, 0, sq) : sq;
    tot_q += lens_q[b];
  }
  const int64_t cap_pages = paged ? (max_len + ps - 1) / ps + opst_int(r, 0, 2) : 0;
  const int64_t cap = paged ? cap_pages * ps : max_len + opst_int(r, 0, 40);

  opst_tensor tq, tk, tv, tcq, to, tl, tlen, tbt;
  int64_t pages = 0;
  if (paged) {
    for (int64_t b = 0; b < batch; ++b) pages += (lens[b] + ps - 1) / ps;
    pages += opst_int(r, 1, 5); /* pages no sequence uses, among the others */
    const int64_t ks[4] = {pages, ps, hkv, d}, vs[4] = {pages, ps, hkv, dv};
    alloc_seq(&tk, dt, 4, ks, layout);
    alloc_seq(&tv, dt, 4, vs, layout);
  } else {
    const int64_t ks[4] = {batch, cap, hkv, d}, vs[4] = {batch, cap, hkv, dv};
    alloc_seq(&tk, dt, 4, ks, layout);
    alloc_seq(&tv, dt, 4, vs, layout);
    for (int64_t b = 0; b < batch; ++b) poison_rows(&tk, &tv, b, lens[b], cap);
  }
  if (varlen) {
    const int64_t qs[3] = {tot_q, hq, d}, os[3] = {tot_q, hq, dv};
    alloc_seq(&tq, dt, 3, qs, layout);
    alloc_seq(&to, dt, 3, os, layout % 3);
    c.sdpa.max_seqlen_q = (int32_t)sq;
  } else {
    const int64_t qs[4] = {batch, sq, hq, d}, os[4] = {batch, sq, hq, dv};
    alloc_seq(&tq, dt, 4, qs, layout);
    alloc_seq(&to, dt, 4, os, layout % 3);
  }
  add_qkv(&c, &tq, &tk, &tv);
  add_absent(&c); /* mask */
  if (varlen) {
    const int64_t n = batch + 1;
    opst_alloc(&tcq, r, OPS_DTYPE_I32, 1, &n, OPST_CONTIGUOUS);
    int64_t aq = 0;
    for (int64_t b = 0; b <= batch; ++b) {
      opst_set_flat(&tcq, b, (double)aq);
      if (b < batch) aq += lens_q[b];
    }
    add_tensor(&c, &tcq, IN, -1);
  } else {
    add_absent(&c);
  }
  add_absent(&c); /* cu_seqlens_k */
  add_tensor(&c, &to, OUT, -1);
  add_lse(&c, &tl, with_lse, varlen, batch, hq, sq, tot_q);
  const int64_t nb = batch;
  opst_alloc(&tlen, r, OPS_DTYPE_I32, 1, &nb, OPST_CONTIGUOUS);
  for (int64_t b = 0; b < batch; ++b) opst_set_flat(&tlen, b, (double)lens[b]);
  add_tensor(&c, &tlen, IN, -1);
  if (paged) {
    const int64_t ts[2] = {batch, cap_pages};
    opst_alloc(&tbt, r, OPS_DTYPE_I32, 2, ts, opst_chance(r, 0.3) ? OPST_STRIDED : OPST_CONTIGUOUS);
    int64_t *perm = opst_permutation(r, pages);
    int64_t next = 0;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t pg = 0; pg < cap_pages; ++pg) {
        const int used = pg * ps < lens[b];
        opst_set_flat(&tbt, b * cap_pages + pg, used ? (double)perm[next++] : (double)(pages + 1000 + pg));
        if (used && (pg + 1) * ps > lens[b]) poison_rows(&tk, &tv, perm[next - 1], lens[b] - pg * ps, ps);
      }
    }
    free(perm);
    add_tensor(&c, &tbt, IN, -1);
  }
  char label[240];
  snprintf(label, sizeof label,
           "sdpa cache case %d %s batch %lld Sq %lld keys up to %lld (capacity %lld%s, page %lld) Hq %lld Hkv %lld "
           "D %lld Dv %lld layout %d%s%s window_left %d%s",
           iter, ops_dtype_name((ops_dtype)dt), (long long)batch, (long long)sq, (long long)max_len, (long long)cap,
           paged ? ", paged" : "", (long long)ps, (long long)hq, (long long)hkv, (long long)d, (long long)dv, layout,
           varlen ? " varlen" : "", c.sdpa.causal ? " causal" : "", (int)c.sdpa.window_left, with_lse ? " lse" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

void sdpa_kv_cache(void **state) {
  (void)state;
  for (int i = 0; i < 42; ++i) sdpa_cache_case(i, 0);
  sdpa_cache_case(1, 70001);  /* one long sequence: the keys in many parts, then the combine */
  sdpa_cache_case(4, 131072); /* d 128, paged: 128k keys (fewer with the widest groups) */
  sdpa_cache_case(9, 20000);
}

void sdpa(void **state) {
  (void)state;
  for (int i = 0; i < 48; ++i) sdpa_case(i, 0);
  sdpa_case(1, 4097); /* a long sequence: 65 key tiles, the tail of one query tile */
  sdpa_case(3, 1000);
  /* varlen batches without a single key (k and v have no rows: no tensor map can describe
     them; every row is 0, its LSE -inf): iterations 7 / 8 are varlen, not causal */
  sdpa_case(7, -1);
  sdpa_case(8, -1);
}
