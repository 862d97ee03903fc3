/*
 * ops_rope and ops_kv_cache_append on the CPU backend. Hand-checked values first (a unit
 * vector turned by one radian, NeoX and GPT-J pairs), then random problems (f32 / f16 / bf16,
 * [T, H, D] and [B, S, H, D], any strides, in place, partial rotary dims, odd head dims,
 * int32 and int64 positions up to 2^20 and negative, linear and Llama-3 scaling) against this
 * test's own formulation: each pair as a complex number times exp(i a). Then the properties
 * a model relies on: position 0 is the identity, rotations compose (p then q is p + q), the
 * q and k heads of one fused QKV buffer rotate in place in one call. The append: random
 * paged caches with slots in random order, skipped tokens (-1), partial pages, RoPE fused or
 * not; every slot not named keeps its value.
 */
#include <complex.h>
#include <float.h>
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

static const int32_t k_dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};

/* f_i as the header states it: theta^(-2i / r), then the scaling. */
static double freq(const ops_rope_params *p, int r, int i) {
  double f = 1.0 / pow((double)p->theta, (double)(2 * i) / (double)r);
  if (p->scaling == OPS_ROPE_SCALING_LINEAR) return f / (double)p->factor;
  if (p->scaling != OPS_ROPE_SCALING_LLAMA3) return f;
  const double wavelength = 2.0 * 3.14159265358979323846 / f, orig = (double)p->original_max_positions;
  if (wavelength < orig / (double)p->high_freq_factor) return f;
  if (wavelength > orig / (double)p->low_freq_factor) return f / (double)p->factor;
  const double s = (orig / wavelength - (double)p->low_freq_factor) /
                   ((double)p->high_freq_factor - (double)p->low_freq_factor);
  return (1.0 - s) * f / (double)p->factor + s * f;
}

/* One head of `in` (values x[0..dim)) turned as the op should, into y. */
static void rotate_head(const ops_rope_params *p, int r, double position, const double *x, double *y, int dim) {
  for (int d = 0; d < dim; ++d) y[d] = x[d];
  for (int i = 0; i < r / 2; ++i) {
    const int a = p->style == OPS_ROPE_GPTJ ? 2 * i : i, b = p->style == OPS_ROPE_GPTJ ? 2 * i + 1 : i + r / 2;
    const double complex z = (x[a] + I * x[b]) * cexp(I * position * freq(p, r, i));
    y[a] = creal(z);
    y[b] = cimag(z);
  }
}

static void golden_values(void **state) {
  (void)state;
  const int64_t shape[3] = {1, 1, 4}, ps = 1;
  for (int style = 0; style < 2; ++style) {
    opst_tensor q, out, pos;
    opst_alloc(&q, &g_rng, OPS_DTYPE_F32, 3, shape, OPST_CONTIGUOUS);
    opst_alloc(&out, &g_rng, OPS_DTYPE_F32, 3, shape, OPST_CONTIGUOUS);
    opst_alloc(&pos, &g_rng, OPS_DTYPE_I32, 1, &ps, OPST_CONTIGUOUS);
    const double x[4] = {1, 0, 0, 0};
    for (int d = 0; d < 4; ++d) opst_set_flat(&q, d, x[d]);
    opst_set_flat(&pos, 0, 1);
    ops_rope_params p;
    ops_rope_params_init(&p);
    p.style = style;
    OPST_OK(ops_rope(g_h, &p, &pos.t, &q.t, &out.t, NULL, 0));
    /* f_0 = 1: (1, 0) turns by one radian; NeoX pairs dims 0 and 2, GPT-J dims 0 and 1 */
    const double want_neox[4] = {cos(1.0), 0, sin(1.0), 0}, want_gptj[4] = {cos(1.0), sin(1.0), 0, 0};
    char why[256];
    assert_true(opst_check_close(&out, style ? want_gptj : want_neox, 1e-7, 1e-7, why, sizeof why));
    opst_free(&q), opst_free(&out), opst_free(&pos);
  }
}

static void random_settings(opst_rng *r, ops_rope_params *p, int dim) {
  static const float thetas[4] = {10000.0f, 500000.0f, 1e6f, 3.5f};
  ops_rope_params_init(p);
  p->style = (int32_t)opst_int(r, 0, 1);
  p->theta = thetas[opst_int(r, 0, 3)];
  p->rotary_dim = dim % 2 == 0 && opst_chance(r, 0.5) ? 0 : 2 * (int32_t)opst_int(r, 1, dim / 2);
  p->scaling = (int32_t)opst_int(r, 0, 2);
  p->factor = (float)opst_uniform(r, 0.5, 8.0);
  if (p->scaling == OPS_ROPE_SCALING_LLAMA3) {
    p->low_freq_factor = (float)opst_uniform(r, 0.5, 2.0);
    p->high_freq_factor = p->low_freq_factor + (float)opst_uniform(r, 0.5, 4.0);
    p->original_max_positions = (int32_t)opst_int(r, 16, 8192);
  }
}

static int64_t random_position(opst_rng *r) {
  return opst_chance(r, 0.1) ? -opst_int(r, 1, 100) : opst_int(r, 0, opst_chance(r, 0.5) ? 64 : 1 << 20);
}

/* Expected values of every element of `out` (row-major), `x` turned at its token's position. */
static double *expected(const ops_rope_params *p, int r, const opst_tensor *x, const opst_tensor *pos) {
  const int nd = x->t.ndim;
  const int64_t heads = x->t.shape[nd - 2], dim = x->t.shape[nd - 1];
  const int64_t tokens = opst_numel(x) / (heads * dim > 0 ? heads * dim : 1);
  double *want = calloc((size_t)opst_numel(x) + 1, sizeof(double));
  double *in = calloc((size_t)dim + 1, sizeof(double)), *y = calloc((size_t)dim + 1, sizeof(double));
  for (int64_t t = 0; t < tokens && heads * dim > 0; ++t) {
    const double position = opst_at_flat(pos, t);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = (t * heads + h) * dim;
      for (int64_t d = 0; d < dim; ++d) in[d] = opst_at_flat(x, base + d);
      rotate_head(p, r, position, in, y, (int)dim);
      for (int64_t d = 0; d < dim; ++d) want[base + d] = y[d];
    }
  }
  free(in), free(y);
  return want;
}

static void rope_case(int iter) {
  opst_rng *r = &g_rng;
  const int32_t dt = k_dtypes[opst_int(r, 0, 2)];
  const int ndim = (int)opst_int(r, 3, 4);
  const int64_t dim = opst_int(r, 2, 24), hq = opst_int(r, 1, 4), hk = opst_int(r, 1, 3);
  int64_t qs[4], ks[4];
  if (ndim == 3) {
    qs[0] = opst_int(r, opst_chance(r, 0.05) ? 0 : 1, 12);
  } else {
    qs[0] = opst_int(r, 1, 3);
    qs[1] = opst_int(r, opst_chance(r, 0.05) ? 0 : 1, 5);
  }
  memcpy(ks, qs, sizeof qs);
  qs[ndim - 2] = hq, qs[ndim - 1] = dim;
  ks[ndim - 2] = hk, ks[ndim - 1] = dim;
  ops_rope_params p;
  random_settings(r, &p, (int)dim);
  const int r_dim = p.rotary_dim ? p.rotary_dim : (int)dim;
  const int with_k = opst_chance(r, 0.6), in_place = opst_chance(r, 0.3);
  opst_tensor pos, q, qo, k, ko;
  opst_alloc_any(&pos, r, opst_chance(r, 0.5) ? OPS_DTYPE_I32 : OPS_DTYPE_I64, ndim - 2, qs);
  for (int64_t t = 0; t < opst_numel(&pos); ++t) opst_set_flat(&pos, t, (double)random_position(r));
  opst_snapshot(&pos);
  opst_alloc_any(&q, r, dt, ndim, qs);
  opst_fill_uniform(&q, r, -2, 2);
  double *want_q = expected(&p, r_dim, &q, &pos), *want_k = NULL;
  if (in_place) qo = q; else opst_alloc_any(&qo, r, dt, ndim, qs);
  if (with_k) {
    opst_alloc_any(&k, r, dt, ndim, ks);
    opst_fill_uniform(&k, r, -2, 2);
    want_k = expected(&p, r_dim, &k, &pos);
    if (in_place) ko = k; else opst_alloc_any(&ko, r, dt, ndim, ks);
    p.k = &k.t;
    p.k_out = &ko.t;
  }
  OPST_OK(ops_rope(g_h, &p, &pos.t, &q.t, &qo.t, NULL, 0));
  char why[256];
  /* an output x cos - y sin of inputs up to 2 may cancel to near 0: it carries the rounding of
   * its terms (|term| <= 2), a few f32 ulps of 2, not a relative error of itself */
  const double atol = dt == OPS_DTYPE_F32 ? fmax(opst_atol(dt), 4.0 * 2.0 * FLT_EPSILON) : opst_atol(dt);
  int ok = opst_fully_written(&qo, why, sizeof why) && opst_check_close(&qo, want_q, opst_rtol(dt), atol, why, sizeof why);
  if (ok && with_k) {
    ok = opst_fully_written(&ko, why, sizeof why) && opst_check_close(&ko, want_k, opst_rtol(dt), atol, why, sizeof why);
  }
  if (!ok) {
    print_error("case %d (%s %dD dim %lld rotary %d style %d scaling %d theta %g%s%s): %s\n", iter,
                ops_dtype_name((ops_dtype)dt), ndim, (long long)dim, r_dim, (int)p.style, (int)p.scaling,
                (double)p.theta, with_k ? " with k" : "", in_place ? " in place" : "", why);
    fail();
  }
  assert_true(opst_untouched(&pos));
  if (!in_place) assert_true(opst_untouched(&q));
  if (with_k && !in_place) assert_true(opst_untouched(&k));
  free(want_q), free(want_k);
  opst_free(&pos), opst_free(&q);
  if (!in_place) opst_free(&qo);
  if (with_k) {
    opst_free(&k);
    if (!in_place) opst_free(&ko);
  }
}

static void random_rope_problems(void **state) {
  (void)state;
  for (int i = 0; i < 300; ++i) rope_case(i);
}

/* Position 0 leaves every element as it was, bit for bit; turning by p then by q is turning
 * by p + q (f32, to rounding). */
static void identity_and_composition(void **state) {
  (void)state;
  const int64_t shape[3] = {5, 3, 16}, ts = 5;
  opst_tensor x, a, b, c, pos, pos2, pos3;
  opst_alloc(&x, &g_rng, OPS_DTYPE_F32, 3, shape, OPST_CONTIGUOUS);
  opst_alloc(&a, &g_rng, OPS_DTYPE_F32, 3, shape, OPST_CONTIGUOUS);
  opst_alloc(&b, &g_rng, OPS_DTYPE_F32, 3, shape, OPST_CONTIGUOUS);
  opst_alloc(&c, &g_rng, OPS_DTYPE_F32, 3, shape, OPST_CONTIGUOUS);
  opst_alloc(&pos, &g_rng, OPS_DTYPE_I64, 1, &ts, OPST_CONTIGUOUS);
  opst_alloc(&pos2, &g_rng, OPS_DTYPE_I64, 1, &ts, OPST_CONTIGUOUS);
  opst_alloc(&pos3, &g_rng, OPS_DTYPE_I64, 1, &ts, OPST_CONTIGUOUS);
  opst_fill_uniform(&x, &g_rng, -1, 1);
  for (int style = 0; style < 2; ++style) {
    ops_rope_params p;
    ops_rope_params_init(&p);
    p.style = style;
    for (int t = 0; t < 5; ++t) opst_set_flat(&pos, t, 0);
    OPST_OK(ops_rope(g_h, &p, &pos.t, &x.t, &a.t, NULL, 0));
    assert_memory_equal(a.t.data, x.t.data, 5 * 3 * 16 * sizeof(float));
    for (int t = 0; t < 5; ++t) {
      const int64_t u = opst_int(&g_rng, 0, 50000), v = opst_int(&g_rng, -100, 50000);
      opst_set_flat(&pos, t, (double)u), opst_set_flat(&pos2, t, (double)v), opst_set_flat(&pos3, t, (double)(u + v));
    }
    OPST_OK(ops_rope(g_h, &p, &pos.t, &x.t, &a.t, NULL, 0));
    OPST_OK(ops_rope(g_h, &p, &pos2.t, &a.t, &b.t, NULL, 0));
    OPST_OK(ops_rope(g_h, &p, &pos3.t, &x.t, &c.t, NULL, 0));
    double want[5 * 3 * 16];
    for (int i = 0; i < 5 * 3 * 16; ++i) want[i] = opst_at_flat(&c, i);
    char why[256];
    assert_true(opst_check_close(&b, want, 1e-5, 1e-5, why, sizeof why));
  }
  opst_free(&x), opst_free(&a), opst_free(&b), opst_free(&c), opst_free(&pos), opst_free(&pos2), opst_free(&pos3);
}

/* q and k as head ranges of one [T, Hq + 2 Hk, D] buffer, both in place in one call; the v
 * heads between and after are not touched. */
static void fused_qkv_in_place(void **state) {
  (void)state;
  const int64_t t = 7, hq = 4, hk = 2, d = 32, all[3] = {t, hq + 2 * hk, d};
  opst_tensor qkv, pos;
  opst_alloc(&qkv, &g_rng, OPS_DTYPE_BF16, 3, all, OPST_CONTIGUOUS);
  opst_fill_uniform(&qkv, &g_rng, -1, 1);
  opst_alloc(&pos, &g_rng, OPS_DTYPE_I32, 1, &t, OPST_CONTIGUOUS);
  for (int64_t i = 0; i < t; ++i) opst_set_flat(&pos, i, (double)(100 + 3 * i));
  double *before = malloc(sizeof(double) * (size_t)(t * (hq + 2 * hk) * d));
  for (int64_t i = 0; i < t * (hq + 2 * hk) * d; ++i) before[i] = opst_at_flat(&qkv, i);
  ops_tensor q = qkv.t, k = qkv.t;
  q.shape[1] = hq;
  k.shape[1] = hk;
  k.data = (uint16_t *)qkv.t.data + hq * d;
  ops_rope_params p;
  ops_rope_params_init(&p);
  p.k = &k;
  p.k_out = &k;
  OPST_OK(ops_rope(g_h, &p, &pos.t, &q, &q, NULL, 0));
  double x[32], y[32];
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t h = 0; h < hq + 2 * hk; ++h) {
      const int64_t base = (i * (hq + 2 * hk) + h) * d;
      for (int64_t j = 0; j < d; ++j) x[j] = before[base + j];
      if (h < hq + hk) rotate_head(&p, (int)d, (double)(100 + 3 * i), x, y, (int)d); else memcpy(y, x, sizeof y);
      for (int64_t j = 0; j < d; ++j) {
        const double got = opst_at_flat(&qkv, base + j), want = opst_round(y[j], OPS_DTYPE_BF16);
        if (fabs(got - want) > 1e-2 * fabs(want) + 1e-2) {
          print_error("token %lld head %lld dim %lld: got %g, want %g\n", (long long)i, (long long)h, (long long)j, got, want);
          fail();
        }
        if (h >= hq + hk) assert_true(got == x[j]);
      }
    }
  }
  free(before);
  opst_free(&qkv), opst_free(&pos);
}

static void append_case(int iter) {
  opst_rng *r = &g_rng;
  const int32_t dt = k_dtypes[opst_int(r, 0, 2)];
  const int64_t pages = opst_int(r, 1, 5), page = opst_int(r, 1, 8), heads = opst_int(r, 1, 3);
  const int64_t dim = opst_int(r, 1, 20), dim_v = opst_int(r, 1, 20), capacity = pages * page;
  const int64_t tokens = opst_int(r, 0, capacity + 2);
  const int64_t ks[3] = {tokens, heads, dim}, vs[3] = {tokens, heads, dim_v};
  const int64_t kcs[4] = {pages, page, heads, dim}, vcs[4] = {pages, page, heads, dim_v};
  ops_kv_cache_append_params ap;
  ops_kv_cache_append_params_init(&ap);
  ops_rope_params rp;
  const int rope = dim >= 2 && opst_chance(r, 0.5);
  random_settings(r, &rp, (int)(dim >= 2 ? dim : 2));
  if (dim % 2 != 0 && rp.rotary_dim == 0) rp.rotary_dim = (int32_t)dim - 1;
  const int r_dim = rp.rotary_dim ? rp.rotary_dim : (int)dim;
  opst_tensor k, v, slots, pos, kc, vc;
  opst_alloc_any(&k, r, dt, 3, ks);
  opst_alloc_any(&v, r, dt, 3, vs);
  opst_fill_uniform(&k, r, -2, 2);
  opst_fill_uniform(&v, r, -2, 2);
  opst_alloc_any(&slots, r, opst_chance(r, 0.5) ? OPS_DTYPE_I32 : OPS_DTYPE_I64, 1, &tokens);
  opst_alloc_any(&pos, r, opst_chance(r, 0.5) ? OPS_DTYPE_I32 : OPS_DTYPE_I64, 1, &tokens);
  int64_t *order = opst_permutation(r, capacity);
  for (int64_t t = 0; t < tokens; ++t) {
    opst_set_flat(&slots, t, t < capacity && !opst_chance(r, 0.2) ? (double)order[t] : -1.0);
    opst_set_flat(&pos, t, (double)random_position(r));
  }
  free(order);
  opst_snapshot(&slots), opst_snapshot(&pos);
  opst_alloc_any(&kc, r, dt, 4, kcs);
  opst_alloc_any(&vc, r, dt, 4, vcs);
  opst_fill_uniform(&kc, r, -3, 3);
  opst_fill_uniform(&vc, r, -3, 3);
  double *want_k = malloc(sizeof(double) * (size_t)(capacity * heads * dim + 1));
  double *want_v = malloc(sizeof(double) * (size_t)(capacity * heads * dim_v + 1));
  for (int64_t i = 0; i < capacity * heads * dim; ++i) want_k[i] = opst_at_flat(&kc, i);
  for (int64_t i = 0; i < capacity * heads * dim_v; ++i) want_v[i] = opst_at_flat(&vc, i);
  double x[24], y[24];
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t s = (int64_t)opst_at_flat(&slots, t);
    if (s < 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < dim; ++d) x[d] = opst_at_flat(&k, (t * heads + h) * dim + d);
      if (rope) rotate_head(&rp, r_dim, opst_at_flat(&pos, t), x, y, (int)dim); else memcpy(y, x, sizeof y);
      for (int64_t d = 0; d < dim; ++d) want_k[(s * heads + h) * dim + d] = y[d];
      for (int64_t d = 0; d < dim_v; ++d) want_v[(s * heads + h) * dim_v + d] = opst_at_flat(&v, (t * heads + h) * dim_v + d);
    }
  }
  if (rope) {
    ap.rope = &rp;
    ap.positions = &pos.t;
  }
  OPST_OK(ops_kv_cache_append(g_h, &ap, &k.t, &v.t, &slots.t, &kc.t, &vc.t, NULL, 0));
  char why[256];
  if (!opst_fully_written(&kc, why, sizeof why) || !opst_fully_written(&vc, why, sizeof why) ||
      !opst_check_close(&kc, want_k, opst_rtol(dt), opst_atol(dt), why, sizeof why) ||
      !opst_check_close(&vc, want_v, opst_rtol(dt), opst_atol(dt), why, sizeof why)) {
    print_error("case %d (%s pages %lld x %lld heads %lld dim %lld / %lld tokens %lld%s): %s\n", iter,
                ops_dtype_name((ops_dtype)dt), (long long)pages, (long long)page, (long long)heads, (long long)dim,
                (long long)dim_v, (long long)tokens, rope ? " rope" : "", why);
    fail();
  }
  assert_true(opst_untouched(&k) && opst_untouched(&v) && opst_untouched(&slots) && opst_untouched(&pos));
  free(want_k), free(want_v);
  opst_free(&k), opst_free(&v), opst_free(&slots), opst_free(&pos), opst_free(&kc), opst_free(&vc);
}

static void random_append_problems(void **state) {
  (void)state;
  for (int i = 0; i < 300; ++i) append_case(i);
}

static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:rope_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("rope"));
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
      cmocka_unit_test(golden_values),
      cmocka_unit_test(random_rope_problems),
      cmocka_unit_test(identity_and_composition),
      cmocka_unit_test(fused_qkv_in_place),
      cmocka_unit_test(random_append_problems),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("rope_cpu", tests, setup, teardown);
}
