/* size_sweep: the overflow class every fuzz find so far belonged to, swept on purpose.
 *
 * An empty tensor (one extent 0) passes validation whatever its other extents, so a call may
 * carry extents near 2^63 into every size formula, plan, part count and cost term behind
 * ops_X_workspace_size and ops_X_explain. This program draws calls whose extents come from
 * {0, 1, 3, 64, 128, 2^31, 2^62, 2^63 - 2, 2^63 - 1} (sdpa with and without a contiguous or
 * paged KV cache, its backward on default and deterministic handles, gemm 2-D and batched,
 * the norms and their backward, softmax, reduce, broadcast binary, unary / scale / dropout / sin_affine, rope with and without k, the KV cache append with and without RoPE) on
 * a CPU handle and a described sm_90 one, and asks both questions; empty reductions with any
 * strides also run on the CPU (their output checked). Built
 * with AddressSanitizer and UBSan over the library's C sources (build.sh --plain), where any
 * overflow aborts; a run that ends prints the calls made and how many the library accepted.
 *
 *   size_sweep [CALLS] [SEED]      (SEED: OPSLIB_TEST_SEED, else random; printed first)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "opslib/opslib.h"

static const int64_t EXTENTS[] = {0,        1,          3, 64, 128, 2147483648LL, 4611686018427387904LL,
                                  INT64_MAX - 1, INT64_MAX};
#define N_EXTENTS (sizeof EXTENTS / sizeof EXTENTS[0])

static uint64_t state;

static uint64_t next(void) { /* xorshift64 */
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static int64_t extent(void) { return EXTENTS[next() % N_EXTENTS]; }

static int coin(void) { return (int)(next() & 1); }

/* A descriptor without data (size queries and explain take them); where contiguous strides
 * would not fit in int64, strides of 1 (the library then refuses or accepts the call itself). */
static ops_tensor *tensor(ops_tensor *t, ops_dtype dtype, ops_device dev, int ndim, const int64_t *shape) {
  if (ops_tensor_init(t, NULL, dtype, dev, ndim, shape, NULL) != OPS_OK) {
    const int64_t ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    if (ops_tensor_init(t, NULL, dtype, dev, ndim, shape, ones) != OPS_OK) {
      memset(t, 0, sizeof *t); /* an extent the descriptor refuses: the op refuses it too */
    }
  }
  return t;
}

typedef struct {
  ops_handle handle;
  ops_device dev;
  ops_dtype dtype;
  ops_explain explain;
  long accepted;
} sweep;

static void accepted(sweep *s, ops_status st) { s->accepted += st == OPS_OK; }

/* An attention call as sdpa and its backward draw it: q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D
 * / Dv], o [B, Sq, Hq, Dv], lse [B, Hq, Sq], and the params (causal, now and then a window). */
typedef struct {
  int64_t q[4], k[4], v[4], o[4], lse[3];
  ops_sdpa_params p;
} attention;

static void draw_attention(attention *a) {
  const int64_t b = extent(), sq = extent(), hq = extent(), d = coin() ? 128 : extent(), sk = extent();
  const int64_t hkv = coin() ? hq : extent(), dv = coin() ? d : extent();
  const attention shapes = {{b, sq, hq, d}, {b, sk, hkv, d}, {b, sk, hkv, dv}, {b, sq, hq, dv}, {b, hq, sq}};
  *a = shapes;
  ops_sdpa_params_init(&a->p);
  a->p.causal = coin();
  if (coin()) a->p.window_left = (int32_t)(next() % 100) - 1;
}

/* q, k, v, o and lse of a drawn call (k's and v's extents as the caller left them) */
static void attention_tensors(const sweep *s, const attention *a, ops_tensor t[5]) {
  tensor(&t[0], s->dtype, s->dev, 4, a->q), tensor(&t[1], s->dtype, s->dev, 4, a->k);
  tensor(&t[2], s->dtype, s->dev, 4, a->v), tensor(&t[3], s->dtype, s->dev, 4, a->o);
  tensor(&t[4], OPS_DTYPE_F32, s->dev, 3, a->lse);
}

static void sdpa(sweep *s) {
  attention a;
  draw_attention(&a);
  const int64_t lens[1] = {a.q[0]}, table[2] = {a.q[0], extent()};
  ops_tensor t[5], kv_lens, block_table;
  const int cache = (int)(next() % 3); /* none, contiguous, paged */
  if (cache) a.p.kv_lens = tensor(&kv_lens, OPS_DTYPE_I32, s->dev, 1, lens);
  if (cache == 2) {
    a.p.block_table = tensor(&block_table, OPS_DTYPE_I32, s->dev, 2, table);
    a.k[0] = a.v[0] = extent(); /* the pool's pages */
  }
  attention_tensors(s, &a, t);
  const ops_tensor *l = coin() ? &t[4] : NULL;
  size_t bytes;
  accepted(s, ops_sdpa_workspace_size(s->handle, &a.p, &t[0], &t[1], &t[2], &t[3], l, &bytes));
  ops_sdpa_explain(s->handle, &a.p, &t[0], &t[1], &t[2], &t[3], l, &s->explain);
}

/* The backward of a call without a KV cache (it has none), on a default handle or, every
 * other call, a deterministic one (the deterministic rows' workspace and launch order). */
static void sdpa_backward(sweep *s) {
  attention a;
  draw_attention(&a);
  ops_tensor t[5], dout, dq, dk, dv;
  attention_tensors(s, &a, t);
  tensor(&dout, s->dtype, s->dev, 4, a.o), tensor(&dq, s->dtype, s->dev, 4, a.q);
  tensor(&dk, s->dtype, s->dev, 4, a.k), tensor(&dv, s->dtype, s->dev, 4, a.v);
  const int det = coin();
  if (det) ops_handle_set_deterministic(s->handle, 1);
  size_t bytes;
  accepted(s, ops_sdpa_backward_workspace_size(s->handle, &a.p, &t[0], &t[1], &t[2], &t[3], &t[4], &dout, &dq, &dk,
                                               &dv, &bytes));
  ops_sdpa_backward_explain(s->handle, &a.p, &t[0], &t[1], &t[2], &t[3], &t[4], &dout, &dq, &dk, &dv, &s->explain);
  if (det) ops_handle_set_deterministic(s->handle, 0);
}

static void gemm(sweep *s) {
  const int64_t as[3] = {extent(), extent(), extent()};
  const int64_t bs[3] = {coin() ? as[0] : extent(), as[2], extent()}, ds[3] = {as[0], as[1], bs[2]};
  const int n = coin() ? 3 : 2;
  ops_tensor a, b, d;
  tensor(&a, s->dtype, s->dev, n, as + 3 - n), tensor(&b, s->dtype, s->dev, n, bs + 3 - n);
  tensor(&d, s->dtype, s->dev, n, ds + 3 - n);
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  size_t bytes;
  accepted(s, ops_gemm_workspace_size(s->handle, &p, &a, &b, &d, &bytes));
  ops_gemm_explain(s->handle, &p, &a, &b, &d, &s->explain);
}

static void rows(sweep *s) {
  const int64_t xs[2] = {extent(), extent()}, ns[1] = {xs[1]}, rs[1] = {xs[0]};
  ops_tensor x, w, y, mean, rstd, dweight;
  tensor(&x, s->dtype, s->dev, 2, xs), tensor(&y, s->dtype, s->dev, 2, xs), tensor(&w, s->dtype, s->dev, 1, ns);
  tensor(&mean, OPS_DTYPE_F32, s->dev, 1, rs), tensor(&rstd, OPS_DTYPE_F32, s->dev, 1, rs);
  tensor(&dweight, OPS_DTYPE_F32, s->dev, 1, ns);
  size_t bytes;
  ops_norm_params np;
  ops_norm_params_init(&np);
  ops_norm_backward_params bp;
  ops_norm_backward_params_init(&bp);
  bp.dweight = coin() ? &dweight : NULL;
  bp.dbias = coin() ? &dweight : NULL;
  ops_softmax_params sp;
  ops_softmax_params_init(&sp);
  switch (next() % 5) {
    case 0:
      np.rstd_out = coin() ? &rstd : NULL;
      accepted(s, ops_rmsnorm_workspace_size(s->handle, &np, &x, &w, &y, &bytes));
      ops_rmsnorm_explain(s->handle, &np, &x, &w, &y, &s->explain);
      break;
    case 1:
      accepted(s, ops_layernorm_workspace_size(s->handle, &np, &x, &w, &y, &bytes));
      ops_layernorm_explain(s->handle, &np, &x, &w, &y, &s->explain);
      break;
    case 2:
      accepted(s, ops_softmax_workspace_size(s->handle, &sp, &x, &y, &bytes));
      ops_softmax_explain(s->handle, &sp, &x, &y, &s->explain);
      break;
    case 3:
      accepted(s, ops_layernorm_backward_workspace_size(s->handle, &bp, &y, &x, &w, &mean, &rstd, &y, &bytes));
      ops_layernorm_backward_explain(s->handle, &bp, &y, &x, &w, &mean, &rstd, &y, &s->explain);
      break;
    default:
      accepted(s, ops_rmsnorm_backward_workspace_size(s->handle, &bp, &y, &x, &w, &rstd, &y, &bytes));
      ops_rmsnorm_backward_explain(s->handle, &bp, &y, &x, &w, &rstd, &y, &s->explain);
  }
}

static void reduce(sweep *s) {
  const int64_t xs[2] = {extent(), extent()};
  const int axis = coin();
  const int64_t ys[1] = {xs[1 - axis]};
  ops_tensor x, y;
  tensor(&x, OPS_DTYPE_F32, s->dev, 2, xs), tensor(&y, OPS_DTYPE_F32, s->dev, 1, ys);
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.axes = 1u << axis;
  size_t bytes;
  accepted(s, ops_reduce_workspace_size(s->handle, &p, &x, &y, &bytes));
  ops_reduce_explain(s->handle, &p, &x, &y, &s->explain);
}

/* An empty fold, run (CPU handle): x [k0, 0, e, k1] reduced over axes 1 and 2, its strides
 * drawn from the extents (x has no elements: any stride is a valid one), into a real y [k0, k1]
 * of up to 9 elements. Every element of y must get the fold's identity (sum 0, mean NaN, max
 * -inf, min +inf); the library may form no offset into x on the way (fc4607c's find). */
static void reduce_run(sweep *s) {
  if (s->dev.type != OPS_DEVICE_CPU) return;
  const int64_t k0 = 1 + (int64_t)(next() % 3), k1 = 1 + (int64_t)(next() % 3);
  const int64_t xs[4] = {k0, 0, extent(), k1}, ys[2] = {k0, k1};
  float out[9], dummy = 0.0f;
  ops_tensor x, y;
  memset(&x, 0, sizeof x);
  x.struct_size = sizeof x, x.dtype = OPS_DTYPE_F32, x.device = s->dev, x.ndim = 4, x.data = &dummy;
  for (int i = 0; i < 4; ++i) x.shape[i] = xs[i], x.strides[i] = extent();
  if (ops_tensor_init(&y, out, OPS_DTYPE_F32, s->dev, 2, ys, NULL) != OPS_OK) abort();
  for (int i = 0; i < 9; ++i) out[i] = 12345.0f;
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.op = (int32_t)(next() % 4), p.axes = 6u;
  const ops_status st = ops_reduce(s->handle, &p, &x, &y, NULL, 0);
  accepted(s, st);
  if (st != OPS_OK) return;
  for (int64_t i = 0; i < k0 * k1; ++i) {
    const float v = out[i];
    const int ok = p.op == OPS_REDUCE_SUM    ? v == 0.0f
                   : p.op == OPS_REDUCE_MEAN ? v != v
                   : p.op == OPS_REDUCE_MAX  ? v < 0.0f && v * 0.0f != 0.0f
                                             : v > 0.0f && v * 0.0f != 0.0f;
    if (!ok) {
      fprintf(stderr, "size_sweep: empty fold (op %d) wrote %g at %lld of y, not the identity\n", (int)p.op, v,
              (long long)i);
      abort();
    }
  }
}

static void binary(sweep *s) {
  const int64_t as[2] = {extent(), extent()}, bs[2] = {coin() ? 1 : as[0], as[1]};
  ops_tensor a, b, y;
  tensor(&a, s->dtype, s->dev, 2, as), tensor(&b, s->dtype, s->dev, 2, bs), tensor(&y, s->dtype, s->dev, 2, as);
  ops_binary_params p;
  ops_binary_params_init(&p);
  size_t bytes;
  accepted(s, ops_binary_workspace_size(s->handle, &p, &a, &b, &y, &bytes));
  ops_binary_explain(s->handle, &p, &a, &b, &y, &s->explain);
}

static void elementwise(sweep *s) { /* one input, x's shape out */
  const int64_t xs[3] = {extent(), extent(), extent()};
  ops_tensor x, y;
  tensor(&x, s->dtype, s->dev, 3, xs), tensor(&y, s->dtype, s->dev, 3, xs);
  size_t bytes;
  switch (next() % 4) {
    case 0: {
      ops_unary_params p;
      ops_unary_params_init(&p);
      p.fn = (int32_t)(next() % 11);
      accepted(s, ops_unary_workspace_size(s->handle, &p, &x, &y, &bytes));
      ops_unary_explain(s->handle, &p, &x, &y, &s->explain);
      break;
    }
    case 1: {
      ops_scale_params p;
      ops_scale_params_init(&p);
      accepted(s, ops_scale_workspace_size(s->handle, &p, &x, &y, &bytes));
      ops_scale_explain(s->handle, &p, &x, &y, &s->explain);
      break;
    }
    case 2: {
      ops_dropout_params p;
      ops_dropout_params_init(&p);
      p.p = 0.25f;
      accepted(s, ops_dropout_workspace_size(s->handle, &p, &x, &y, &bytes));
      ops_dropout_explain(s->handle, &p, &x, &y, &s->explain);
      break;
    }
    default: {
      ops_sin_affine_params p;
      ops_sin_affine_params_init(&p);
      accepted(s, ops_sin_affine_workspace_size(s->handle, &p, &x, &y, &bytes));
      ops_sin_affine_explain(s->handle, &p, &x, &y, &s->explain);
    }
  }
}

static void rope(sweep *s) {
  const int64_t t = extent(), d = coin() ? 128 : extent();
  const int64_t qs[3] = {t, extent(), d}, ks[3] = {t, extent(), d}, ps[1] = {t};
  ops_tensor pos, q, qo, k, ko;
  tensor(&pos, OPS_DTYPE_I32, s->dev, 1, ps), tensor(&q, s->dtype, s->dev, 3, qs), tensor(&qo, s->dtype, s->dev, 3, qs);
  ops_rope_params p;
  ops_rope_params_init(&p);
  p.style = coin();
  if (coin()) p.k = tensor(&k, s->dtype, s->dev, 3, ks), p.k_out = tensor(&ko, s->dtype, s->dev, 3, ks);
  size_t bytes;
  accepted(s, ops_rope_workspace_size(s->handle, &p, &pos, &q, &qo, &bytes));
  ops_rope_explain(s->handle, &p, &pos, &q, &qo, &s->explain);
}

static void kv_cache_append(sweep *s) {
  const int64_t t = extent(), h = extent(), d = coin() ? 128 : extent(), dv = coin() ? d : extent();
  const int64_t ks[3] = {t, h, d}, vs[3] = {t, h, dv}, ss[1] = {t};
  const int64_t kc[4] = {extent(), extent(), h, d}, vc[4] = {kc[0], kc[1], h, dv};
  ops_tensor k, v, slots, k_cache, v_cache, pos;
  tensor(&k, s->dtype, s->dev, 3, ks), tensor(&v, s->dtype, s->dev, 3, vs);
  tensor(&slots, OPS_DTYPE_I64, s->dev, 1, ss);
  tensor(&k_cache, s->dtype, s->dev, 4, kc), tensor(&v_cache, s->dtype, s->dev, 4, vc);
  ops_kv_cache_append_params p;
  ops_kv_cache_append_params_init(&p);
  ops_rope_params r;
  ops_rope_params_init(&r);
  if (coin()) p.rope = &r, p.positions = tensor(&pos, OPS_DTYPE_I32, s->dev, 1, ss);
  size_t bytes;
  accepted(s, ops_kv_cache_append_workspace_size(s->handle, &p, &k, &v, &slots, &k_cache, &v_cache, &bytes));
  ops_kv_cache_append_explain(s->handle, &p, &k, &v, &slots, &k_cache, &v_cache, &s->explain);
}

int main(int argc, char **argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 1000000;
  const char *env = getenv("OPSLIB_TEST_SEED");
  const uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10)
                        : env != NULL && *env ? strtoull(env, NULL, 10)
                                              : (uint64_t)time(NULL) ^ (uint64_t)clock();
  state = seed * 0x9E3779B97F4A7C15ull + 88172645463325252ull;
  printf("size_sweep: seed %llu (OPSLIB_TEST_SEED=%llu replays)\n", (unsigned long long)seed,
         (unsigned long long)seed);
  fflush(stdout);
  sweep cpu = {0}, hopper = {0};
  cpu.dev = (ops_device){OPS_DEVICE_CPU, 0}, cpu.dtype = OPS_DTYPE_F32;
  hopper.dev = (ops_device){OPS_DEVICE_CUDA, 0}, hopper.dtype = OPS_DTYPE_BF16;
  ops_device_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (ops_handle_create(&cpu.handle, cpu.dev) != OPS_OK || ops_device_info_for_sm(90, &info) != OPS_OK ||
      ops_handle_create_virtual(&hopper.handle, &info) != OPS_OK) {
    fprintf(stderr, "size_sweep: no handle: %s\n", ops_last_error());
    return 1;
  }
  static void (*const ops[])(sweep *) = {sdpa, sdpa,   sdpa_backward, gemm,           rows, rows, reduce, reduce_run,
                                         binary, elementwise, rope, kv_cache_append};
  for (long i = 0; i < calls; ++i) {
    sweep *s = coin() ? &hopper : &cpu;
    s->explain.struct_size = sizeof s->explain;
    ops[next() % (sizeof ops / sizeof ops[0])](s);
  }
  printf("size_sweep: %ld calls (a size query and an explain each, or an empty fold run), %ld accepted (CPU %ld, sm_90 %ld); "
         "no overflow\n",
         calls, cpu.accepted + hopper.accepted, cpu.accepted, hopper.accepted);
  ops_handle_destroy(cpu.handle);
  ops_handle_destroy(hopper.handle);
  return 0;
}
