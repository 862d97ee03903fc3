/*
 * ops_sdpa_backward on the CPU backend, over random problems (f32 / f16 / bf16, GQA, causal,
 * windows, an additive mask, varlen, head dims 1 to 9 with Dv != D, any strides, poisoned
 * outputs). The forward's o and lse come from ops_sdpa. The reference is this test's own:
 * per (sequence, query head) the whole score matrix, its softmax (max-subtracted, not the
 * lse), and the gradients through the matrices
 *   dP = dO V^T,  dS = P o (dP - D) with D_i = dO_i . o_i (the op's definition, o as stored),
 *   dQ = scale dS K,  dK = scale dS^T Q (summed over a KV head's query heads),  dV = P^T dO.
 * A finite-difference check ties that formulation to the forward: for f32 inputs,
 * d/dx sum(dO * O(q, k, v)) by central differences of this test's double forward.
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

typedef struct {
  int64_t batch, hq, hkv, d, dv, sq, sk; /* varlen: sq, sk are the packed totals */
  int varlen, causal, mask;
  int64_t wl, wr;
  double scale;
  int32_t *cuq, *cuk;
  opst_tensor *q, *k, *v, *o, *dout, *m; /* m: [B, Hq, Sq, Sk] when mask */
} prob;

/* Element (b, s, h, c) of a 4-D tensor, or (s, h, c) of a packed one. */
static double at(const prob *p, const opst_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c) {
  if (p->varlen) {
    const int64_t idx[3] = {s, h, c};
    return opst_at(t, idx);
  }
  const int64_t idx[4] = {b, s, h, c};
  return opst_at(t, idx);
}

static int64_t flat(const prob *p, const opst_tensor *t, int64_t b, int64_t s, int64_t h, int64_t c) {
  const int64_t *sh = t->t.shape;
  return p->varlen ? (s * sh[1] + h) * sh[2] + c : ((b * sh[1] + s) * sh[2] + h) * sh[3] + c;
}

/* Scores of query i of head h against every key of the sequence, -inf where not visible. */
static void scores(const prob *p, const double *qx, const double *kx, int64_t b, int64_t h, int64_t q0,
                   int64_t k0, int64_t sq, int64_t sk, int64_t i, double *s) {
  const int64_t hk = h / (p->hq / p->hkv), diag = sk - sq;
  for (int64_t j = 0; j < sk; ++j) {
    const int vis = (p->causal ? j <= i + diag : 1) && (p->wl < 0 || j >= i + diag - p->wl) &&
                    (p->wr < 0 || j <= i + diag + p->wr);
    if (!vis) {
      s[j] = -INFINITY;
      continue;
    }
    double dot = 0.0;
    for (int64_t c = 0; c < p->d; ++c) {
      dot += qx[flat(p, p->q, b, q0 + i, h, c)] * kx[flat(p, p->k, b, k0 + j, hk, c)];
    }
    s[j] = p->scale * dot;
    if (p->mask) {
      const int64_t idx[4] = {b, h, i, j};
      s[j] += opst_at(p->m, idx);
    }
  }
}

/* softmax of s in place; 0 when no key is visible */
static void softmax(double *s, int64_t n) {
  double mx = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx);
    sum += s[j];
  }
  for (int64_t j = 0; j < n; ++j) s[j] = sum > 0.0 ? s[j] / sum : 0.0;
}

static void seq_of(const prob *p, int64_t b, int64_t *q0, int64_t *k0, int64_t *sq, int64_t *sk) {
  *q0 = p->varlen ? p->cuq[b] : 0, *k0 = p->varlen ? p->cuk[b] : 0;
  *sq = p->varlen ? p->cuq[b + 1] - *q0 : p->sq, *sk = p->varlen ? p->cuk[b + 1] - *k0 : p->sk;
}

/* The gradients (row-major logical order of dq, dk, dv) and, per element, the sum of the
 * magnitudes of its terms (the scale of the rounding they may lose). */
static void reference(const prob *p, const double *qx, const double *kx, const double *vx, double *gq,
                      double *gk, double *gv, double *aq, double *ak, double *av) {
  const int64_t group = p->hq / p->hkv;
  double *pr = malloc(sizeof(double) * (size_t)(p->sk + 1)),
         *dp = malloc(sizeof(double) * (size_t)(p->sk + 1));
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t q0, k0, sq, sk;
    seq_of(p, b, &q0, &k0, &sq, &sk);
    for (int64_t h = 0; h < p->hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < sq; ++i) {
        scores(p, qx, kx, b, h, q0, k0, sq, sk, i, pr);
        softmax(pr, sk);
        double dd = 0.0;
        for (int64_t c = 0; c < p->dv; ++c)
          dd += at(p, p->dout, b, q0 + i, h, c) * at(p, p->o, b, q0 + i, h, c);
        for (int64_t j = 0; j < sk; ++j) {
          dp[j] = 0.0;
          for (int64_t c = 0; c < p->dv; ++c)
            dp[j] += at(p, p->dout, b, q0 + i, h, c) * vx[flat(p, p->v, b, k0 + j, hk, c)];
        }
        for (int64_t j = 0; j < sk; ++j) {
          const double ds = pr[j] * (dp[j] - dd), mag = pr[j] * (fabs(dp[j]) + fabs(dd));
          for (int64_t c = 0; c < p->d; ++c) {
            const int64_t iq = flat(p, p->q, b, q0 + i, h, c), ik = flat(p, p->k, b, k0 + j, hk, c);
            gq[iq] += p->scale * ds * kx[ik], aq[iq] += p->scale * mag * fabs(kx[ik]);
            gk[ik] += p->scale * ds * qx[iq], ak[ik] += p->scale * mag * fabs(qx[iq]);
          }
          for (int64_t c = 0; c < p->dv; ++c) {
            const int64_t iv = flat(p, p->v, b, k0 + j, hk, c);
            const double g = at(p, p->dout, b, q0 + i, h, c);
            gv[iv] += pr[j] * g, av[iv] += pr[j] * fabs(g);
          }
        }
      }
    }
  }
  free(pr), free(dp);
}

/* sum(dO * O) of this test's forward over double copies of q, k, v */
static double loss(const prob *p, const double *qx, const double *kx, const double *vx) {
  const int64_t group = p->hq / p->hkv;
  double *pr = malloc(sizeof(double) * (size_t)(p->sk + 1)), l = 0.0;
  for (int64_t b = 0; b < p->batch; ++b) {
    int64_t q0, k0, sq, sk;
    seq_of(p, b, &q0, &k0, &sq, &sk);
    for (int64_t h = 0; h < p->hq; ++h) {
      for (int64_t i = 0; i < sq; ++i) {
        scores(p, qx, kx, b, h, q0, k0, sq, sk, i, pr);
        softmax(pr, sk);
        for (int64_t c = 0; c < p->dv; ++c) {
          double o = 0.0;
          for (int64_t j = 0; j < sk; ++j) o += pr[j] * vx[flat(p, p->v, b, k0 + j, h / group, c)];
          l += o * at(p, p->dout, b, q0 + i, h, c);
        }
      }
    }
  }
  free(pr);
  return l;
}

static double *values(const opst_tensor *t) {
  const int64_t n = opst_numel(t);
  double *x = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; ++i) x[i] = opst_at_flat(t, i);
  return x;
}

static void check(const opst_tensor *t, const double *ref, const double *mag, int32_t dt, const char *what,
                  int iter) {
  double mx = 0.0;
  for (int64_t i = 0; i < opst_numel(t); ++i) mx = mag[i] > mx ? mag[i] : mx;
  char why[256];
  if (!opst_fully_written(t, why, sizeof why) ||
      !opst_check_close(t, ref, opst_rtol(dt) + 1e-6, 1e-5 * mx + opst_atol(dt), why, sizeof why)) {
    print_error("case %d, %s: %s\n", iter, what, why);
    fail();
  }
}

static int64_t pick_len(opst_rng *r) { return opst_chance(r, 0.15) ? opst_int(r, 0, 1) : opst_int(r, 1, 13); }

/* One random problem; fd: f32, small, and the gradients checked by central differences too. */
static void random_case(int iter, int varlen, int fd) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  const int32_t dt = fd ? OPS_DTYPE_F32 : dtypes[opst_int(r, 0, 2)];
  prob p;
  memset(&p, 0, sizeof p);
  p.varlen = varlen;
  p.batch = opst_int(r, 1, fd ? 2 : 3);
  p.hkv = opst_int(r, 1, fd ? 2 : 3);
  p.hq = p.hkv * opst_int(r, 1, 3);
  p.d = opst_int(r, 1, fd ? 5 : 9);
  p.dv = opst_chance(r, 0.7) ? p.d : opst_int(r, 1, fd ? 5 : 9);
  p.causal = opst_chance(r, 0.4);
  p.wl = opst_chance(r, 0.3) ? opst_int(r, 0, 4) : -1;
  p.wr = !p.causal && opst_chance(r, 0.3) ? opst_int(r, 0, 4) : -1;
  p.mask = !varlen && opst_chance(r, 0.3);
  ops_sdpa_params prm;
  ops_sdpa_params_init(&prm);
  prm.causal = p.causal, prm.window_left = (int32_t)p.wl, prm.window_right = (int32_t)p.wr;
  if (opst_chance(r, 0.5)) prm.scale = (float)opst_uniform(r, 0.1, 2.0);
  p.scale = prm.scale != 0.0f ? prm.scale : 1.0 / sqrt((double)p.d);

  opst_tensor cuq, cuk, m, q, k, v, o, lse, dout, dq, dk, dv;
  if (varlen) {
    const int64_t cs[1] = {p.batch + 1};
    opst_alloc_any(&cuq, r, OPS_DTYPE_I32, 1, cs);
    opst_alloc_any(&cuk, r, OPS_DTYPE_I32, 1, cs);
    p.cuq = calloc((size_t)p.batch + 1, sizeof(int32_t));
    p.cuk = calloc((size_t)p.batch + 1, sizeof(int32_t));
    int64_t mq = 0, mk = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t lq = pick_len(r), lk = pick_len(r);
      p.cuq[b + 1] = p.cuq[b] + (int32_t)lq, p.cuk[b + 1] = p.cuk[b] + (int32_t)lk;
      mq = lq > mq ? lq : mq, mk = lk > mk ? lk : mk;
    }
    for (int64_t b = 0; b <= p.batch; ++b) opst_set_flat(&cuq, b, p.cuq[b]), opst_set_flat(&cuk, b, p.cuk[b]);
    p.sq = p.cuq[p.batch], p.sk = p.cuk[p.batch];
    prm.cu_seqlens_q = &cuq.t, prm.cu_seqlens_k = &cuk.t;
    prm.max_seqlen_q = (int32_t)mq, prm.max_seqlen_k = (int32_t)mk;
    const int64_t qs[3] = {p.sq, p.hq, p.d}, ks[3] = {p.sk, p.hkv, p.d}, vs[3] = {p.sk, p.hkv, p.dv},
                  os[3] = {p.sq, p.hq, p.dv}, ls[2] = {p.hq, p.sq};
    opst_alloc_any(&q, r, dt, 3, qs), opst_alloc_any(&dq, r, dt, 3, qs);
    opst_alloc_any(&k, r, dt, 3, ks), opst_alloc_any(&dk, r, dt, 3, ks);
    opst_alloc_any(&v, r, dt, 3, vs), opst_alloc_any(&dv, r, dt, 3, vs);
    opst_alloc_any(&o, r, dt, 3, os), opst_alloc_any(&dout, r, dt, 3, os);
    opst_alloc_any(&lse, r, OPS_DTYPE_F32, 2, ls);
  } else {
    p.sq = pick_len(r), p.sk = opst_chance(r, 0.5) ? p.sq : pick_len(r);
    const int64_t qs[4] = {p.batch, p.sq, p.hq, p.d}, ks[4] = {p.batch, p.sk, p.hkv, p.d},
                  vs[4] = {p.batch, p.sk, p.hkv, p.dv}, os[4] = {p.batch, p.sq, p.hq, p.dv},
                  ls[3] = {p.batch, p.hq, p.sq};
    opst_alloc_any(&q, r, dt, 4, qs), opst_alloc_any(&dq, r, dt, 4, qs);
    opst_alloc_any(&k, r, dt, 4, ks), opst_alloc_any(&dk, r, dt, 4, ks);
    opst_alloc_any(&v, r, dt, 4, vs), opst_alloc_any(&dv, r, dt, 4, vs);
    opst_alloc_any(&o, r, dt, 4, os), opst_alloc_any(&dout, r, dt, 4, os);
    opst_alloc_any(&lse, r, OPS_DTYPE_F32, 3, ls);
    if (p.mask) {
      const int64_t ms[4] = {p.batch, p.hq, p.sq, p.sk};
      opst_alloc_any(&m, r, dt, 4, ms);
      opst_fill_uniform(&m, r, -1, 1);
      for (int64_t i = 0; i < opst_numel(&m); ++i) { /* some keys removed, some rows wholly */
        if (opst_chance(r, 0.2)) opst_set_flat(&m, i, -INFINITY);
      }
      prm.attn_mask = &m.t;
      p.m = &m;
    }
  }
  opst_fill_uniform(&q, r, -2, 2), opst_fill_uniform(&k, r, -2, 2), opst_fill_uniform(&v, r, -1, 1);
  opst_fill_uniform(&dout, r, -1, 1);
  p.q = &q, p.k = &k, p.v = &v, p.o = &o, p.dout = &dout;

  size_t ws_bytes = 0;
  OPST_OK(ops_sdpa_workspace_size(g_h, &prm, &q.t, &k.t, &v.t, &o.t, &lse.t, &ws_bytes));
  void *ws = opst_workspace(ws_bytes);
  OPST_OK(ops_sdpa(g_h, &prm, &q.t, &k.t, &v.t, &o.t, &lse.t, ws, ws_bytes));
  free(ws);
  opst_snapshot(&q), opst_snapshot(&k), opst_snapshot(&v), opst_snapshot(&o), opst_snapshot(&lse);
  opst_snapshot(&dout), opst_snapshot(&dq), opst_snapshot(&dk), opst_snapshot(&dv);
  OPST_OK(ops_sdpa_backward_workspace_size(g_h, &prm, &q.t, &k.t, &v.t, &o.t, &lse.t, &dout.t, &dq.t, &dk.t,
                                           &dv.t, &ws_bytes));
  ws = opst_workspace(ws_bytes);
  OPST_OK(ops_sdpa_backward(g_h, &prm, &q.t, &k.t, &v.t, &o.t, &lse.t, &dout.t, &dq.t, &dk.t, &dv.t, ws,
                            ws_bytes));
  free(ws);
  assert_true(opst_untouched(&q) && opst_untouched(&k) && opst_untouched(&v) && opst_untouched(&o) &&
              opst_untouched(&lse) && opst_untouched(&dout));

  double *qx = values(&q), *kx = values(&k), *vx = values(&v);
  const int64_t nq = opst_numel(&q), nk = opst_numel(&k), nv = opst_numel(&v);
  double *g = calloc((size_t)(2 * (nq + nk + nv) + 1), sizeof(double));
  double *gq = g, *gk = gq + nq, *gv = gk + nk, *aq = gv + nv, *ak = aq + nq, *av = ak + nk;
  reference(&p, qx, kx, vx, gq, gk, gv, aq, ak, av);
  check(&dq, gq, aq, dt, "dq", iter);
  check(&dk, gk, ak, dt, "dk", iter);
  check(&dv, gv, av, dt, "dv", iter);

  if (fd) { /* the reference's formulation against the forward it differentiates */
    double *xs[3] = {qx, kx, vx}, *gs[3] = {gq, gk, gv};
    const int64_t ns[3] = {nq, nk, nv};
    for (int t = 0; t < 3; ++t) {
      for (int64_t i = 0; i < ns[t]; ++i) {
        const double x0 = xs[t][i], eps = 1e-4;
        xs[t][i] = x0 + eps;
        const double lp = loss(&p, qx, kx, vx);
        xs[t][i] = x0 - eps;
        const double lm = loss(&p, qx, kx, vx);
        xs[t][i] = x0;
        const double num = (lp - lm) / (2 * eps);
        if (fabs(num - gs[t][i]) > 1e-6 + 1e-6 * fabs(num)) {
          print_error("case %d: d%s[%lld]: central difference %.9g, formula %.9g\n", iter,
                      t == 0   ? "q"
                      : t == 1 ? "k"
                               : "v",
                      (long long)i, num, gs[t][i]);
          fail();
        }
      }
    }
  }
  free(g), free(qx), free(kx), free(vx);
  opst_free(&q), opst_free(&k), opst_free(&v), opst_free(&o), opst_free(&lse), opst_free(&dout);
  opst_free(&dq), opst_free(&dk), opst_free(&dv);
  if (p.mask) opst_free(&m);
  if (varlen) opst_free(&cuq), opst_free(&cuk), free(p.cuq), free(p.cuk);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 150; ++i) random_case(i, 0, 0);
}

static void random_varlen_problems(void **state) {
  (void)state;
  for (int i = 0; i < 100; ++i) random_case(i, 1, 0);
}

static void finite_differences(void **state) {
  (void)state;
  for (int i = 0; i < 20; ++i) random_case(i, i % 2, 1);
}

/* Rows that see no key (a causal query above the diagonal when Sq > Sk): dq = 0, no NaN;
 * and keys that no query sees get dk = dv = 0. */
static void unseen_rows_and_keys_get_zero(void **state) {
  (void)state;
  enum { SQ = 4, SK = 2, H = 1, D = 3 };
  const int64_t qs[4] = {1, SQ, H, D}, ks[4] = {1, SK, H, D}, ls[3] = {1, H, SQ};
  float q[SQ * D], k[SK * D], v[SK * D], o[SQ * D], lse[SQ], dout[SQ * D], dq[SQ * D], dk[SK * D], dv[SK * D];
  for (int i = 0; i < SQ * D; ++i)
    q[i] = (float)opst_uniform(&g_rng, -1, 1), dout[i] = (float)opst_uniform(&g_rng, -1, 1);
  for (int i = 0; i < SK * D; ++i)
    k[i] = (float)opst_uniform(&g_rng, -1, 1), v[i] = (float)opst_uniform(&g_rng, -1, 1);
  ops_tensor tq, tk, tv, to, tl, tdo, tdq, tdk, tdv;
  OPST_OK(ops_tensor_init(&tq, q, OPS_DTYPE_F32, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&tk, k, OPS_DTYPE_F32, ops_device_cpu(), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&tv, v, OPS_DTYPE_F32, ops_device_cpu(), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&to, o, OPS_DTYPE_F32, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&tl, lse, OPS_DTYPE_F32, ops_device_cpu(), 3, ls, NULL));
  OPST_OK(ops_tensor_init(&tdo, dout, OPS_DTYPE_F32, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&tdq, dq, OPS_DTYPE_F32, ops_device_cpu(), 4, qs, NULL));
  OPST_OK(ops_tensor_init(&tdk, dk, OPS_DTYPE_F32, ops_device_cpu(), 4, ks, NULL));
  OPST_OK(ops_tensor_init(&tdv, dv, OPS_DTYPE_F32, ops_device_cpu(), 4, ks, NULL));
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1,
  p.window_left = 0; /* query i sees key i - 2 only: queries 0, 1 see none; key 1 seen by query 3 */
  double ws[64];
  OPST_OK(ops_sdpa(g_h, &p, &tq, &tk, &tv, &to, &tl, ws, sizeof ws));
  memset(dq, 0xff, sizeof dq), memset(dk, 0xff, sizeof dk), memset(dv, 0xff, sizeof dv); /* NaN */
  OPST_OK(ops_sdpa_backward(g_h, &p, &tq, &tk, &tv, &to, &tl, &tdo, &tdq, &tdk, &tdv, ws, sizeof ws));
  for (int i = 0; i < 2 * D; ++i) assert_true(dq[i] == 0.0f); /* rows 0, 1 saw no key */
  for (int i = 0; i < SQ * D; ++i) assert_false(isnan(dq[i]));
  for (int i = 0; i < SK * D; ++i) assert_false(isnan(dk[i]) || isnan(dv[i]));
  /* one key a query: P = 1 (up to the f32 lse), so dv of key j is dout of the query that sees
   * it, and dS = P (dout . v - dout . o) = 0 with o = v: dk is 0 */
  for (int c = 0; c < D; ++c) {
    assert_true(fabsf(dv[0 * D + c] - dout[2 * D + c]) <= 1e-6f * fabsf(dout[2 * D + c]));
    assert_true(fabsf(dv[1 * D + c] - dout[3 * D + c]) <= 1e-6f * fabsf(dout[3 * D + c]));
    assert_true(dk[c] == 0.0f && dk[D + c] == 0.0f);
  }
}

/* Descriptions (no data) of a bf16 call on CUDA: q [B, Sq, Hq, D], k (and v) [B, Sk, Hkv, D],
 * lse [B, Hq, Sq] f32, for the explain and workspace queries of a described device. */
static void described_call(const int64_t qs[4], const int64_t ks[4], const int64_t ls[3], ops_tensor *q,
                           ops_tensor *k, ops_tensor *l) {
  OPST_OK(ops_tensor_init(q, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, qs, NULL));
  OPST_OK(ops_tensor_init(k, NULL, OPS_DTYPE_BF16, ops_device_cuda(0), 4, ks, NULL));
  OPST_OK(ops_tensor_init(l, NULL, OPS_DTYPE_F32, ops_device_cuda(0), 3, ls, NULL));
}

/* A described Hopper, deterministic: the order of walks and turns explain states, by shape
 * (sdpa_bwd_sm90_shape.h's walk_order): causal with a GQA group of 4 (walks 8 steps shorter a
 * key tile at d128), few key tiles, or MHA (2 steps shorter) in at most 4 waves of blocks (2 x
 * 16 heads x 16 key tiles), walks from the last query tile; causal with long MHA heads (1024
 * blocks), a call without a mask whose blocks exceed a wave (2 x 8 KV heads x 32 key tiles), and
 * causal key tiles in parts (2 x 8 KV heads x 4 key tiles: 64, 2 parts each), walks from the
 * first, as does one in a wave with more key tiles than steps (2 x 2 KV heads x 8 key tiles over
 * 2 query tiles); without a mask in one wave (2 x 16 heads x 4 key tiles: 128 blocks), walks
 * round. */
static void gpu_deterministic_walk_order(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  OPST_OK(ops_handle_set_deterministic(v, 1));
  static const char *const kWant[3] = {
      "walks from the first query tile, turns from the last key tile",
      "walks from the last query tile, turns from the first key tile",
      "walks from a place of their own, turns in the order the walks reach a query "
      "tile, every block resident"};
  static const struct {
    int64_t sq, sk, hq, hkv;
    int causal, order;
  } kCases[] = {{2048, 2048, 32, 8, 1, 1}, {4096, 4096, 16, 16, 1, 0}, {512, 512, 16, 16, 1, 1},
                {4096, 4096, 32, 8, 0, 0}, {512, 512, 32, 8, 1, 0},    {512, 512, 16, 16, 0, 2},
                {100, 1000, 2, 2, 0, 0},  {2048, 2048, 16, 16, 1, 1}};
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    const int64_t qs[4] = {2, kCases[i].sq, kCases[i].hq, 128}, ks[4] = {2, kCases[i].sk, kCases[i].hkv, 128};
    const int64_t ls[3] = {2, kCases[i].hq, kCases[i].sq};
    ops_tensor q, k, l;
    described_call(qs, ks, ls, &q, &k, &l);
    ops_sdpa_params p;
    ops_sdpa_params_init(&p);
    p.causal = kCases[i].causal;
    ops_explain e;
    e.struct_size = sizeof e;
    OPST_OK(ops_sdpa_backward_explain(v, &p, &q, &k, &k, &q, &l, &q, &q, &k, &k, &e));
    char text[8192];
    ops_explain_to_text(&e, text, sizeof text);
    assert_true(e.chosen >= 0);
    assert_string_equal(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_backward_sm90_det_d128");
    assert_non_null(strstr(text, kWant[kCases[i].order]));
  }
  ops_handle_destroy(v);
}

/* A described Hopper, a call whose 32 key tiles (1 x 8 KV heads x 512 / 128) fill too little
 * of 132 SMs: both Hopper d128 rows cut each walk in 4 parts, and their workspace after the
 * accumulators (default) or the accumulators and the turns (deterministic) holds the parts'
 * counters (an int32 a key tile), then from the next 256 bytes the parts' dK, dV sums (32 key
 * tiles x 4 parts x 256 threads x 128 floats). */
static void gpu_workspace_of_key_tiles_in_parts(void **state) {
  (void)state;
  ops_handle v = opst_virtual_handle(90);
  const int64_t qs[4] = {1, 512, 32, 128}, ks[4] = {1, 512, 8, 128}, ls[3] = {1, 32, 512};
  ops_tensor q, k, l;
  described_call(qs, ks, ls, &q, &k, &l);
  const size_t d_bytes = 512 * 32 * 4, acc_bytes = (size_t)512 * 32 * 128 * 4;
  const size_t turn_bytes = (size_t)(512 / 64 + 1 + 1) * 32 * 4, sums_bytes = (size_t)32 * 4 * 256 * 128 * 4;
  const size_t dflt = d_bytes + acc_bytes + 256 + sums_bytes;
  const size_t det = (d_bytes + acc_bytes + turn_bytes + 32 * 4 + 255) / 256 * 256 + sums_bytes;
  static const char *const kRows[2] = {"cuda_sdpa_backward_sm90_d128", "cuda_sdpa_backward_sm90_det_d128"};
  for (int r = 0; r < 2; ++r) {
    OPST_OK(ops_handle_pin_kernel(v, kRows[r]));
    size_t ws = 0;
    OPST_OK(ops_sdpa_backward_workspace_size(v, NULL, &q, &k, &k, &q, &l, &q, &q, &k, &k, &ws));
    assert_int_equal(ws, r == 0 ? dflt : det);
  }
  ops_handle_destroy(v);
}

/* A described Hopper, a call of a few waves (4 x 16 heads x 1024): every head dim goes to the
 * Hopper kernel of its padded head dim, whose workspace holds D (query rows x heads f32,
 * rounded up to 256 bytes) and dQ's f32 accumulators (query rows x heads x the padded head
 * dim); a deterministic handle gets the Hopper kernel whose atomics take turns (the same, then
 * a counter for each query tile of 64 rows (128 at d64) and head, the tiles numbered with room
 * for one more a sequence); a described sm_80 the sm_80-class kernel (its workspace: D alone),
 * and a described sm_89 the sm_80-class d256 kernel at d 256. */
static void gpu_handles_take_head_dims_up_to_256(void **state) {
  (void)state;
  static const int64_t kDim[3] = {64, 128, 256};
  static const char *const kHopper[3] = {"cuda_sdpa_backward_sm90_d64", "cuda_sdpa_backward_sm90_d128",
                                         "cuda_sdpa_backward_sm90_d256"};
  static const char *const kTurns[3] = {"cuda_sdpa_backward_sm90_det_d64", "cuda_sdpa_backward_sm90_det_d128",
                                        "cuda_sdpa_backward_sm90_det_d256"};
  static const char *const kMma[3] = {"cuda_sdpa_backward_mma_d64", "cuda_sdpa_backward_mma_d128",
                                      "cuda_sdpa_backward_mma_d256"};
  for (int hw = 0; hw < 3; ++hw) { /* Hopper, Hopper deterministic, sm_80 */
    ops_handle v = opst_virtual_handle(hw == 2 ? 80 : 90);
    if (hw == 1) OPST_OK(ops_handle_set_deterministic(v, 1));
    for (int i = 0; i < 3; ++i) {
      const int64_t qs[4] = {4, 1024, 16, kDim[i]}, ks[4] = {4, 1024, 4, kDim[i]}, ls[3] = {4, 16, 1024};
      const char *want = hw == 0 ? kHopper[i] : hw == 1 ? kTurns[i] : kMma[i];
      ops_tensor q, k, l;
      described_call(qs, ks, ls, &q, &k, &l);
      size_t ws = 0;
      OPST_OK(ops_sdpa_backward_workspace_size(v, NULL, &q, &k, &k, &q, &l, &q, &q, &k, &k, &ws));
      ops_explain e;
      e.struct_size = sizeof e;
      OPST_OK(ops_sdpa_backward_explain(v, NULL, &q, &k, &k, &q, &l, &q, &q, &k, &k, &e));
      char text[8192];
      ops_explain_to_text(&e, text, sizeof text);
      const size_t d_bytes = 4 * 1024 * 16 * 4;
      /* DET's turn counters: an int32 a (query tile, head); tiles of 128 rows at d64, 64 at d128 */
      const size_t acc_bytes = (size_t)4 * 1024 * 16 * kDim[i] * 4;
      const size_t turn_bytes = (size_t)(4096 / (kDim[i] == 64 ? 128 : 64) + 4 + 1) * 16 * 4;
      const int hopper_row = hw < 2;
      assert_int_equal(ws, !hopper_row ? d_bytes : hw == 0 ? d_bytes + acc_bytes : d_bytes + acc_bytes + turn_bytes);
      assert_true(e.chosen >= 0);
      assert_string_equal(e.verdicts[e.chosen].kernel_name, want);
      if (kDim[i] > 128) assert_non_null(strstr(text, "cuda_sdpa_backward_mma_d128"));
      /* on Hopper the sm_80-class d256 row is a candidate the Hopper row outranks */
      if (hw < 2 && kDim[i] > 128) assert_non_null(strstr(text, "cuda_sdpa_backward_mma_d256"));
    }
    ops_handle_destroy(v);
  }
  /* sm_89 gives a block 99 KB of shared memory: the d256 row's 72 KB fit there too */
  ops_handle l4 = opst_virtual_handle(89);
  const int64_t qs[4] = {4, 1024, 16, 256}, ks[4] = {4, 1024, 4, 256}, ls[3] = {4, 16, 1024};
  ops_tensor q, k, l;
  described_call(qs, ks, ls, &q, &k, &l);
  ops_explain e;
  e.struct_size = sizeof e;
  OPST_OK(ops_sdpa_backward_explain(l4, NULL, &q, &k, &k, &q, &l, &q, &q, &k, &k, &e));
  assert_true(e.chosen >= 0);
  assert_string_equal(e.verdicts[e.chosen].kernel_name, "cuda_sdpa_backward_mma_d256");
  ops_handle_destroy(l4);
}

static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:sdpa_backward_test");
}

static int setup(void **state) {
  (void)state;
  opst_rng_init(&g_rng, opst_seed("sdpa_backward"));
  g_h = opst_cpu_handle();
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
      cmocka_unit_test(random_problems),       cmocka_unit_test(random_varlen_problems),
      cmocka_unit_test(finite_differences),    cmocka_unit_test(unseen_rows_and_keys_get_zero),
      cmocka_unit_test(gpu_handles_take_head_dims_up_to_256), cmocka_unit_test(gpu_deterministic_walk_order),
      cmocka_unit_test(gpu_workspace_of_key_tiles_in_parts),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("sdpa_backward", tests, setup, teardown);
}
