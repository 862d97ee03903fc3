/*
 * ops_sdpa on the CPU backend: hand-checked values (including the bottom-right alignment
 * of causal masks when seqlen_q != seqlen_k), then random problems against the naive
 * formulation below: the whole score matrix, a log-sum-exp, P V.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "tests/support/coverage.h"
#include "tests/support/opst.h"

static ops_handle g_h;
static opst_rng g_rng;

/* ---- golden ---------------------------------------------------------------------- */

static void run_f32(const ops_sdpa_params *p, int sq, int sk, const float *q, const float *k,
                    const float *v, float *o, float *lse) {
  const int64_t qs[4] = {1, sq, 1, 2}, ks[4] = {1, sk, 1, 2}, ls[3] = {1, 1, sq};
  ops_tensor tq, tk, tv, to, tl;
  OPST_OK(ops_tensor_init(&tq, (void *)q, OPS_DTYPE_F32, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&tk, (void *)k, OPS_DTYPE_F32, ops_device_cpu(), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&tv, (void *)v, OPS_DTYPE_F32, ops_device_cpu(), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&to, o, OPS_DTYPE_F32, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&tl, lse, OPS_DTYPE_F32, ops_device_cpu(), 3, ls, NULL));
  double ws[64];
  OPST_OK(ops_sdpa(g_h, p, &tq, &tk, &tv, &to, &tl, ws, sizeof ws));
}

static void golden_two_by_two(void **state) {
  (void)state;
  const float q[4] = {1, 0, 0, 1}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4};
  float o[4], lse[2];
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.scale = 1.0f;
  run_f32(&p, 2, 2, q, k, v, o, lse);
  /* row 0: softmax([1, 0]) = [e, 1] / (e + 1) */
  const double w = exp(1.0) / (exp(1.0) + 1.0);
  assert_float_equal(o[0], w * 1 + (1 - w) * 3, 1e-6);
  assert_float_equal(o[1], w * 2 + (1 - w) * 4, 1e-6);
  assert_float_equal(o[2], (1 - w) * 1 + w * 3, 1e-6);
  assert_float_equal(lse[0], log(exp(1.0) + 1.0), 1e-6);
  /* causal: row 0 sees key 0 only */
  p.causal = 1;
  run_f32(&p, 2, 2, q, k, v, o, lse);
  assert_float_equal(o[0], 1.0, 1e-7);
  assert_float_equal(o[1], 2.0, 1e-7);
  assert_float_equal(lse[0], 1.0, 1e-7);
  assert_float_equal(o[2], (1 - w) * 1 + w * 3, 1e-6);
}

static void golden_causal_is_bottom_right_aligned(void **state) {
  (void)state;
  const float k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4};
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.scale = 1.0f;
  p.causal = 1;
  /* Sq = 1, Sk = 2: the one query is the last row, so it sees both keys. */
  const float q1[2] = {0, 0};
  float o1[2], l1[1];
  run_f32(&p, 1, 2, q1, k, v, o1, l1);
  assert_float_equal(o1[0], 2.0, 1e-6);
  assert_float_equal(o1[1], 3.0, 1e-6);
  assert_float_equal(l1[0], log(2.0), 1e-6);
  /* Sq = 2, Sk = 1: row 0 sees no key (O = 0, LSE = -inf), row 1 sees key 0. */
  const float q2[4] = {1, 1, 1, 1};
  float o2[4], l2[2];
  run_f32(&p, 2, 1, q2, k, v, o2, l2);
  assert_true(o2[0] == 0.0f && o2[1] == 0.0f);
  assert_true(isinf(l2[0]) && l2[0] < 0);
  assert_float_equal(o2[2], 1.0, 1e-7);
  assert_float_equal(o2[3], 2.0, 1e-7);
  /* A sliding window of 0 keys to the left, 0 to the right: only the diagonal. */
  ops_sdpa_params_init(&p);
  p.scale = 1.0f;
  p.window_left = 0;
  p.window_right = 0;
  const float q3[4] = {5, 5, 5, 5};
  float o3[4], l3[2];
  run_f32(&p, 2, 2, q3, k, v, o3, l3);
  assert_float_equal(o3[0], 1.0, 1e-7);
  assert_float_equal(o3[3], 4.0, 1e-7);
}

/* ---- the naive formulation --------------------------------------------------------- */

typedef struct {
  int64_t batch, sq, sk, hq, hkv, d, dv; /* varlen: sq, sk are the packed totals */
  int causal, varlen, lse, mask;
  int64_t wl, wr;
  double scale;
  int32_t *cuq, *cuk; /* host copies of the offsets */
} problem;

/* Element (b, s, h, d) of a BSHD tensor, or of a packed [T, H, D] one (b unused). */
static double at4(const opst_tensor *t, int varlen, int64_t b, int64_t s, int64_t h, int64_t d) {
  if (varlen) {
    const int64_t idx[3] = {s, h, d};
    return opst_at(t, idx);
  }
  const int64_t idx[4] = {b, s, h, d};
  return opst_at(t, idx);
}

/* O and LSE in row-major order of o (and lse) as double. */
static void naive_sdpa(const problem *p, const opst_tensor *q, const opst_tensor *k,
                       const opst_tensor *v, const opst_tensor *mask, double *o, double *lse) {
  for (int64_t b = 0; b < p->batch; ++b) {
    const int64_t q0 = p->varlen ? p->cuq[b] : 0, k0 = p->varlen ? p->cuk[b] : 0;
    const int64_t n = p->varlen ? p->cuq[b + 1] - q0 : p->sq;
    const int64_t m = p->varlen ? p->cuk[b + 1] - k0 : p->sk;
    double *s = malloc(sizeof(double) * (size_t)(n * m + 1));
    char *seen = malloc((size_t)(n * m + 1));
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t g = h / (p->hq / p->hkv);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) {
          /* offset of key j from the query's diagonal, bottom-right aligned */
          const int64_t rel = j - i - (m - n);
          int ok = 1;
          if (p->causal && rel > 0) ok = 0;
          if (p->wl >= 0 && -rel > p->wl) ok = 0;
          if (p->wr >= 0 && rel > p->wr) ok = 0;
          double dot = 0;
          for (int64_t e = 0; e < p->d; ++e) dot += at4(q, p->varlen, b, q0 + i, h, e) * at4(k, p->varlen, b, k0 + j, g, e);
          double add = 0;
          if (p->mask) {
            /* the mask broadcasts from the right against [B, Hq, Sq, Sk] */
            int64_t full[4] = {b, h, i, j}, idx[4];
            const int nd = mask->t.ndim;
            for (int a = 0; a < nd; ++a) idx[a] = mask->t.shape[a] == 1 ? 0 : full[4 - nd + a];
            add = opst_at(mask, idx);
          }
          s[i * m + j] = p->scale * dot + add;
          seen[i * m + j] = (char)(ok && !(isinf(s[i * m + j]) && s[i * m + j] < 0));
        }
        double mx = -INFINITY;
        for (int64_t j = 0; j < m; ++j) if (seen[i * m + j] && s[i * m + j] > mx) mx = s[i * m + j];
        double l = -INFINITY;
        if (mx > -INFINITY) {
          double sum = 0;
          for (int64_t j = 0; j < m; ++j) if (seen[i * m + j]) sum += exp(s[i * m + j] - mx);
          l = mx + log(sum);
        }
        for (int64_t e = 0; e < p->dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < m && l > -INFINITY; ++j) {
            if (seen[i * m + j]) acc += exp(s[i * m + j] - l) * at4(v, p->varlen, b, k0 + j, g, e);
          }
          const int64_t row = p->varlen ? (q0 + i) : (b * p->sq + i);
          o[(row * p->hq + h) * p->dv + e] = acc;
        }
        if (lse != NULL) lse[p->varlen ? h * p->sq + q0 + i : (b * p->hq + h) * p->sq + i] = l;
      }
    }
    free(s);
    free(seen);
  }
}

/* ---- random problems ---------------------------------------------------------------- */

static int64_t pick_len(opst_rng *r) {
  static const int64_t odd[] = {1, 2, 3, 5, 7, 9, 16, 17};
  return odd[opst_int(r, 0, 7)];
}

/* The keys and values of a varlen problem (packed k, v) as a KV cache: kv_lens, and a dense
 * [batch, capacity, Hkv, D] cache or a paged pool whose pages are shuffled, with table entries
 * past each sequence's pages set to an id that does not exist (never read). */
typedef struct {
  opst_tensor lens, table, kc, vc;
  int paged;
} kv_cache;

static void copy_key_row(opst_tensor *dst, int64_t a0, int64_t a1, const opst_tensor *src, int64_t t, int64_t h) {
  const int64_t n = src->t.shape[2];
  for (int64_t e = 0; e < n; ++e) {
    const int64_t si[3] = {t, h, e}, di[4] = {a0, a1, h, e};
    opst_set(dst, di, opst_at(src, si));
  }
}

static void make_cache(kv_cache *c, opst_rng *r, const problem *p, const opst_tensor *k, const opst_tensor *v,
                       int64_t max_k, ops_sdpa_params *prm) {
  const int64_t nb = p->batch, bs[1] = {nb};
  opst_alloc_any(&c->lens, r, OPS_DTYPE_I32, 1, bs);
  for (int64_t b = 0; b < nb; ++b) opst_set_flat(&c->lens, b, p->cuk[b + 1] - p->cuk[b]);
  c->paged = opst_chance(r, 0.6);
  if (c->paged) {
    const int64_t ps = opst_int(r, 1, 4), per_seq = (max_k + ps - 1) / ps + opst_int(r, 0, 1);
    const int64_t pages = nb * per_seq + 2, ts[2] = {nb, per_seq};
    const int64_t ks[4] = {pages, ps, p->hkv, p->d}, vs[4] = {pages, ps, p->hkv, p->dv};
    opst_alloc_any(&c->kc, r, k->t.dtype, 4, ks);
    opst_alloc_any(&c->vc, r, v->t.dtype, 4, vs);
    opst_fill_uniform(&c->kc, r, -2, 2);
    opst_fill_uniform(&c->vc, r, -1, 1);
    opst_alloc_any(&c->table, r, OPS_DTYPE_I32, 2, ts);
    int64_t *perm = opst_permutation(r, pages);
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t len = p->cuk[b + 1] - p->cuk[b];
      for (int64_t pg = 0; pg < per_seq; ++pg) {
        const int64_t id = pg * ps < len ? perm[b * per_seq + pg] : pages + 3; /* past the end: unread */
        opst_set_flat(&c->table, b * per_seq + pg, (double)id);
      }
      for (int64_t j = 0; j < len; ++j) {
        const int64_t id = perm[b * per_seq + j / ps];
        for (int64_t h = 0; h < p->hkv; ++h) {
          copy_key_row(&c->kc, id, j % ps, k, p->cuk[b] + j, h);
          copy_key_row(&c->vc, id, j % ps, v, p->cuk[b] + j, h);
        }
      }
    }
    free(perm);
    opst_snapshot(&c->table);
    prm->block_table = &c->table.t;
  } else {
    const int64_t cap = max_k + opst_int(r, 0, 2);
    const int64_t ks[4] = {nb, cap, p->hkv, p->d}, vs[4] = {nb, cap, p->hkv, p->dv};
    opst_alloc_any(&c->kc, r, k->t.dtype, 4, ks);
    opst_alloc_any(&c->vc, r, v->t.dtype, 4, vs);
    opst_fill_uniform(&c->kc, r, -2, 2); /* rows past a sequence's length: never read */
    opst_fill_uniform(&c->vc, r, -1, 1);
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t j = 0; j < p->cuk[b + 1] - p->cuk[b]; ++j) {
        for (int64_t h = 0; h < p->hkv; ++h) {
          copy_key_row(&c->kc, b, j, k, p->cuk[b] + j, h);
          copy_key_row(&c->vc, b, j, v, p->cuk[b] + j, h);
        }
      }
    }
  }
  opst_snapshot(&c->lens);
  opst_snapshot(&c->kc);
  opst_snapshot(&c->vc);
  prm->kv_lens = &c->lens.t;
  prm->cu_seqlens_k = NULL;
}

static void free_cache(kv_cache *c) {
  assert_true(opst_untouched(&c->lens) && opst_untouched(&c->kc) && opst_untouched(&c->vc));
  opst_free(&c->lens), opst_free(&c->kc), opst_free(&c->vc);
  if (c->paged) {
    assert_true(opst_untouched(&c->table));
    opst_free(&c->table);
  }
}

/* force_varlen 2: a varlen problem whose keys come from a KV cache (kv_lens, paged or not). */
static void random_case(int iter, int force_varlen) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  problem p;
  memset(&p, 0, sizeof p);
  p.varlen = force_varlen != 0;
  const int cache = force_varlen == 2;
  p.batch = opst_int(r, 1, 3);
  p.hkv = opst_int(r, 1, 3);
  p.hq = p.hkv * opst_int(r, 1, 3);
  p.d = opst_int(r, 1, 9);
  p.dv = opst_chance(r, 0.7) ? p.d : opst_int(r, 1, 9);
  p.causal = opst_chance(r, 0.4);
  p.wl = opst_chance(r, 0.3) ? opst_int(r, 0, 4) : -1;
  p.wr = (!p.causal && opst_chance(r, 0.3)) ? opst_int(r, 0, 4) : -1;
  p.lse = opst_chance(r, 0.6);
  p.mask = !p.varlen && opst_chance(r, 0.3);
  ops_sdpa_params prm;
  ops_sdpa_params_init(&prm);
  prm.causal = p.causal;
  prm.window_left = (int32_t)p.wl;
  prm.window_right = (int32_t)p.wr;
  if (opst_chance(r, 0.5)) prm.scale = (float)opst_uniform(r, 0.1, 2.0);
  p.scale = prm.scale != 0.0f ? prm.scale : 1.0 / sqrt((double)p.d);

  opst_tensor cuq, cuk, mask;
  int64_t max_q = 0, max_k = 0;
  if (p.varlen) {
    const int64_t cs[1] = {p.batch + 1};
    opst_alloc_any(&cuq, r, OPS_DTYPE_I32, 1, cs);
    opst_alloc_any(&cuk, r, OPS_DTYPE_I32, 1, cs);
    p.cuq = calloc((size_t)p.batch + 1, sizeof(int32_t));
    p.cuk = calloc((size_t)p.batch + 1, sizeof(int32_t));
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t lq = opst_chance(r, 0.1) ? 0 : pick_len(r), lk = opst_chance(r, 0.1) ? 0 : pick_len(r);
      p.cuq[b + 1] = p.cuq[b] + (int32_t)lq;
      p.cuk[b + 1] = p.cuk[b] + (int32_t)lk;
      if (lq > max_q) max_q = lq;
      if (lk > max_k) max_k = lk;
    }
    for (int64_t b = 0; b <= p.batch; ++b) {
      opst_set_flat(&cuq, b, p.cuq[b]);
      opst_set_flat(&cuk, b, p.cuk[b]);
    }
    p.sq = p.cuq[p.batch];
    p.sk = p.cuk[p.batch];
    prm.cu_seqlens_q = &cuq.t;
    prm.cu_seqlens_k = &cuk.t;
    prm.max_seqlen_q = (int32_t)max_q + (int32_t)opst_int(r, 0, 2); /* an upper bound suffices */
    prm.max_seqlen_k = (int32_t)max_k + (int32_t)opst_int(r, 0, 2);
  } else {
    p.sq = pick_len(r);
    p.sk = opst_chance(r, 0.5) ? p.sq : pick_len(r);
  }

  opst_tensor q, k, v, o, lse;
  if (p.varlen) {
    const int64_t qs[3] = {p.sq, p.hq, p.d}, ks[3] = {p.sk, p.hkv, p.d}, vs[3] = {p.sk, p.hkv, p.dv},
                  os[3] = {p.sq, p.hq, p.dv}, ls[2] = {p.hq, p.sq};
    opst_alloc_any(&q, r, dt, 3, qs);
    opst_alloc_any(&k, r, dt, 3, ks);
    opst_alloc_any(&v, r, dt, 3, vs);
    opst_alloc_any(&o, r, dt, 3, os);
    opst_alloc_any(&lse, r, OPS_DTYPE_F32, 2, ls);
  } else {
    const int64_t qs[4] = {p.batch, p.sq, p.hq, p.d}, ks[4] = {p.batch, p.sk, p.hkv, p.d},
                  vs[4] = {p.batch, p.sk, p.hkv, p.dv}, os[4] = {p.batch, p.sq, p.hq, p.dv},
                  ls[3] = {p.batch, p.hq, p.sq};
    opst_alloc_any(&q, r, dt, 4, qs);
    opst_alloc_any(&k, r, dt, 4, ks);
    opst_alloc_any(&v, r, dt, 4, vs);
    opst_alloc_any(&o, r, dt, 4, os);
    opst_alloc_any(&lse, r, OPS_DTYPE_F32, 3, ls);
  }
  opst_fill_uniform(&q, r, -2, 2);
  opst_fill_uniform(&k, r, -2, 2);
  opst_fill_uniform(&v, r, -1, 1);
  if (p.mask) {
    const int64_t full[4] = {p.batch, p.hq, p.sq, p.sk};
    const int nd = (int)opst_int(r, 2, 4);
    int64_t ms[4];
    for (int a = 0; a < nd; ++a) ms[a] = opst_chance(r, 0.3) ? 1 : full[4 - nd + a];
    opst_alloc_any(&mask, r, opst_chance(r, 0.5) ? OPS_DTYPE_F32 : dt, nd, ms);
    opst_fill_uniform(&mask, r, -2, 2);
    for (int64_t i = 0; i < opst_numel(&mask); ++i) {
      if (opst_chance(r, 0.25)) opst_set_flat(&mask, i, -INFINITY);
    }
    opst_snapshot(&mask);
    prm.attn_mask = &mask.t;
  }

  kv_cache kvc;
  if (cache) make_cache(&kvc, r, &p, &k, &v, max_k, &prm);
  const ops_tensor *kt = cache ? &kvc.kc.t : &k.t, *vt = cache ? &kvc.vc.t : &v.t;
  size_t ws = 0;
  OPST_OK(ops_sdpa_workspace_size(g_h, &prm, &q.t, kt, vt, &o.t, p.lse ? &lse.t : NULL, &ws));
  void *w = opst_workspace(ws);
  OPST_OK(ops_sdpa(g_h, &prm, &q.t, kt, vt, &o.t, p.lse ? &lse.t : NULL, w, ws));
  free(w);

  double *ro = calloc((size_t)opst_numel(&o) + 1, sizeof(double));
  double *rl = calloc((size_t)opst_numel(&lse) + 1, sizeof(double));
  naive_sdpa(&p, &q, &k, &v, p.mask ? &mask : NULL, ro, rl);
  char why[256];
  if (!opst_fully_written(&o, why, sizeof why) || !opst_check_close(&o, ro, opst_rtol(dt), opst_atol(dt), why, sizeof why) ||
      (p.lse && (!opst_fully_written(&lse, why, sizeof why) ||
                 !opst_check_close(&lse, rl, opst_rtol(OPS_DTYPE_F32), opst_atol(OPS_DTYPE_F32), why, sizeof why)))) {
    print_error("case %d (%s B=%lld Sq=%lld Sk=%lld Hq=%lld Hkv=%lld D=%lld Dv=%lld causal=%d window=(%lld,%lld) "
                "mask=%d varlen=%d cache=%d paged=%d lse=%d): %s\n",
                iter, ops_dtype_name((ops_dtype)dt), (long long)p.batch, (long long)p.sq, (long long)p.sk,
                (long long)p.hq, (long long)p.hkv, (long long)p.d, (long long)p.dv, p.causal,
                (long long)p.wl, (long long)p.wr, p.mask, p.varlen, cache, cache && kvc.paged, p.lse, why);
    fail();
  }
  assert_true(opst_untouched(&q) && opst_untouched(&k) && opst_untouched(&v));
  if (!p.lse) assert_true(opst_untouched(&lse));
  free(ro);
  free(rl);
  opst_free(&q), opst_free(&k), opst_free(&v), opst_free(&o), opst_free(&lse);
  if (p.mask) opst_free(&mask);
  if (cache) free_cache(&kvc);
  if (p.varlen) {
    opst_free(&cuq), opst_free(&cuk);
    free(p.cuq), free(p.cuk);
  }
}

static void random_dense_problems(void **state) {
  (void)state;
  for (int i = 0; i < 150; ++i) random_case(i, 0);
}

static void random_varlen_problems(void **state) {
  (void)state;
  for (int i = 0; i < 100; ++i) random_case(i, 1);
}

static void random_kv_cache_problems(void **state) {
  (void)state;
  for (int i = 0; i < 100; ++i) random_case(i, 2);
}

static void bhsd_layout_through_strides(void **state) {
  (void)state;
  /* A BHSD buffer passed as a BSHD view gives the same result as a BSHD copy. */
  enum { B = 2, H = 3, S = 5, D = 4 };
  float bhsd[B * H * S * D], bshd[B * S * H * D], o1[B * S * H * D], o2[B * S * H * D];
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int s = 0; s < S; ++s)
        for (int d = 0; d < D; ++d) {
          const float x = (float)opst_uniform(&g_rng, -1, 1);
          bhsd[((b * H + h) * S + s) * D + d] = x;
          bshd[((b * S + s) * H + h) * D + d] = x;
        }
  const int64_t shape_bhsd[4] = {B, H, S, D}, shape_bshd[4] = {B, S, H, D};
  const int perm[4] = {0, 2, 1, 3};
  ops_tensor t_bhsd, view, t_bshd, to1, to2;
  OPST_OK(ops_tensor_init(&t_bhsd, bhsd, OPS_DTYPE_F32, ops_device_cpu(), 4, shape_bhsd, NULL));
  OPST_OK(ops_tensor_permute(&t_bhsd, perm, &view));
  OPST_OK(ops_tensor_init(&t_bshd, bshd, OPS_DTYPE_F32, ops_device_cpu(), 4, shape_bshd, NULL));
  OPST_OK(ops_tensor_init(&to1, o1, OPS_DTYPE_F32, ops_device_cpu(), 4, shape_bshd, NULL));
  OPST_OK(ops_tensor_init(&to2, o2, OPS_DTYPE_F32, ops_device_cpu(), 4, shape_bshd, NULL));
  double ws[64];
  OPST_OK(ops_sdpa(g_h, NULL, &view, &view, &view, &to1, NULL, ws, sizeof ws));
  OPST_OK(ops_sdpa(g_h, NULL, &t_bshd, &t_bshd, &t_bshd, &to2, NULL, ws, sizeof ws));
  assert_memory_equal(o1, o2, sizeof o1);
}

static void zero_size_calls_are_no_ops(void **state) {
  (void)state;
  const int64_t qs[4] = {2, 0, 4, 8}, ks[4] = {2, 3, 4, 8};
  ops_tensor q, k, o;
  OPST_OK(ops_tensor_init(&q, NULL, OPS_DTYPE_BF16, ops_device_cpu(), 4, qs, NULL));
  float kd[2 * 3 * 4 * 8] = {0};
  OPST_OK(ops_tensor_init(&k, kd, OPS_DTYPE_BF16, ops_device_cpu(), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&o, NULL, OPS_DTYPE_BF16, ops_device_cpu(), 4, qs, NULL));
  size_t ws = 1;
  OPST_OK(ops_sdpa_workspace_size(g_h, NULL, &q, &k, &k, &o, NULL, &ws));
  assert_int_equal(ws, 0);
  OPST_OK(ops_sdpa(g_h, NULL, &q, &k, &k, &o, NULL, NULL, 0));
}

/* Last: every feature the capability rows of this test's kernels claim was exercised. */
static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:sdpa_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("sdpa"));
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
      cmocka_unit_test(golden_two_by_two),
      cmocka_unit_test(golden_causal_is_bottom_right_aligned),
      cmocka_unit_test(random_dense_problems),
      cmocka_unit_test(random_varlen_problems),
      cmocka_unit_test(random_kv_cache_problems),
      cmocka_unit_test(bhsd_layout_through_strides),
      cmocka_unit_test(zero_size_calls_are_no_ops),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("sdpa_cpu", tests, setup, teardown);
}
