/*
 * ops_fuzz: a libFuzzer target over opslib's public C ABI.
 *
 * One input is one short session of a careless caller: a handle (the CPU, a virtual sm_90
 * or sm_80 GPU, or NULL), sometimes handle settings and a pinned kernel, then one or two
 * calls picked from every op (its workspace query, explain and run), ops_fuse and plans,
 * the tensor and DLPack helpers and the kernel catalog. Operands start consistent (shapes
 * that agree, a layout from the input) and are then broken the way a caller breaks them:
 * a field of a descriptor, NULL, an alias, a misaligned pointer, hostile extents, params
 * with odd struct sizes and values, too little workspace. fuzz_support.c checks the promise
 * after every call; AddressSanitizer and UBSan, with the library's C sources instrumented
 * too, catch the rest.
 *
 * Build, run, replay: tests/fuzz/README.md.
 */
#define _POSIX_C_SOURCE 200809L /* getpid */

#include <dlpack/dlpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opslib/dlpack.h"
#include "opslib/opslib.h"
#include "tests/fuzz/fuzz_support.h"

typedef struct ctx {
  fz *f;
  ops_handle h;
  ops_device dev;
} ctx;

/* ---- shared pieces ------------------------------------------------------------------------ */

static int pick_float_dtype(fz *f) {
  static const int d[] = {OPS_DTYPE_F32, OPS_DTYPE_BF16, OPS_DTYPE_F16};
  return d[fz_range(f, 0, 2)];
}

static int pick_index_dtype(fz *f) { return fz_one_in(f, 3) ? OPS_DTYPE_I64 : OPS_DTYPE_I32; }

static int64_t pick_head_dim(fz *f) {
  static const int64_t d[] = {8, 16, 1, 2, 3, 4, 32, 64, 5, 128};
  const int i = fz_range(f, 0, 10);
  return i < 10 ? d[i] : fz_extent(f, 300);
}

static const ops_tensor *opt(const fz_operand *o) { return o->present ? &o->t : NULL; }

/* A params struct handed over as the caller had it: the right one (mostly), NULL (the
 * defaults), or with a struct_size from another release or from nowhere. */
static const void *params_as_given(fz *f, void *p, size_t size) {
  switch (fz_bits(f, 1) % 16) {
    case 0: return NULL;
    case 1: *(uint32_t *)p = (uint32_t)size - 8; return p;
    case 2: *(uint32_t *)p = (uint32_t)fz_bits(f, 4); return p;
    case 3: *(uint32_t *)p = (uint32_t)size + 8; return p;
    default: return p;
  }
}

/* With params == NULL the call never sees the tensors the params named. */
static void drop_if_defaults(const void *pp, fz_operand *o, const int *idx, int n) {
  for (int i = 0; i < n && pp == NULL; ++i) o[idx[i]].present = 0;
}

static void check_explain(const char *call, ops_status st, const ops_explain *e, const ops_explain *before,
                          fz *f) {
  if (st != OPS_OK) {
    if (memcmp(e, before, sizeof *e) != 0) {
      fz_die("%s failed (%s) but wrote its out", call, ops_status_name(st));
    }
    return;
  }
  if (e->count < 0 || e->count > OPS_EXPLAIN_MAX_CANDIDATES || e->chosen < -1 || e->chosen >= e->count) {
    fz_die("%s: count %d, chosen %d out of range", call, (int)e->count, (int)e->chosen);
  }
  if (memchr(e->problem, 0, sizeof e->problem) == NULL) {
    fz_die("%s: problem is not NUL-terminated", call);
  }
  for (int i = 0; i < e->count; ++i) {
    if (e->verdicts[i].kernel_name == NULL || memchr(e->verdicts[i].message, 0, sizeof e->verdicts[i].message) == NULL) {
      fz_die("%s: verdict %d has no kernel name or an unterminated message", call, i);
    }
  }
  /* the renderings: snprintf-style, never past n, always terminated */
  for (int json = 0; json < 2; ++json) {
    const size_t need = json ? ops_explain_to_json(e, NULL, 0) : ops_explain_to_text(e, NULL, 0);
    const size_t n = (size_t)fz_range(f, 0, 3) == 0 ? need + 1 : (size_t)fz_range(f, 0, 600);
    char *buf = (char *)malloc(n + 16);
    memset(buf, 0x5A, n + 16);
    const size_t got = json ? ops_explain_to_json(e, buf, n) : ops_explain_to_text(e, buf, n);
    if (got != need) {
      fz_die("%s: rendering into %zu bytes reported %zu, into none %zu", call, n, got, need);
    }
    for (size_t i = n; i < n + 16; ++i) {
      if (buf[i] != 0x5A) fz_die("%s: rendering wrote past its %zu bytes", call, n);
    }
    if (n > 0 && strlen(buf) != (need < n ? need : n - 1)) {
      fz_die("%s: rendering into %zu bytes is %zu long, expected %zu", call, n, strlen(buf), need < n ? need : n - 1);
    }
    free(buf);
  }
}

/* The three calls of an op: its workspace query, its explain, then a run with a workspace
 * the input picks (the size asked for, one byte less, none, a misaligned one). */
#define FZ_OP_CALLS(c, ops, count, fn, ...)                                                        \
  do {                                                                                            \
    size_t ws_ = 0, ws_before_ = 0;                                                                \
    fz_begin(ops, count);                                                                          \
    ops_status st_ = fn##_workspace_size((c)->h, __VA_ARGS__, fz_one_in((c)->f, 32) ? NULL : &ws_); \
    fz_end(#fn "_workspace_size", st_, 0);                                                         \
    if (st_ != OPS_OK && ws_ != ws_before_) fz_die(#fn "_workspace_size failed but wrote *bytes"); \
    const ops_status ws_st_ = st_;                                                                 \
    ops_explain *e_ = (ops_explain *)calloc(2, sizeof(ops_explain));                               \
    e_->struct_size = sizeof(ops_explain);                                                         \
    if (fz_one_in((c)->f, 8)) e_->struct_size = fz_one_in((c)->f, 2) ? OPS_EXPLAIN_SIZE_V1 : (uint32_t)fz_bits((c)->f, 2); \
    e_[1] = e_[0];                                                                                 \
    fz_begin(ops, count);                                                                          \
    st_ = fn##_explain((c)->h, __VA_ARGS__, fz_one_in((c)->f, 32) ? NULL : e_);                     \
    fz_end(#fn "_explain", st_, 0);                                                                \
    if (e_->struct_size == sizeof(ops_explain)) check_explain(#fn "_explain", st_, &e_[0], &e_[1], (c)->f); \
    free(e_);                                                                                      \
    size_t wb_ = ws_st_ == OPS_OK ? ws_ : (size_t)fz_range((c)->f, 0, 64);                         \
    if (wb_ > FZ_MAX_WORKSPACE) wb_ = FZ_MAX_WORKSPACE;                                            \
    const int wmode_ = fz_range((c)->f, 0, 15);                                                    \
    if (wmode_ == 1 && wb_ > 0) wb_ -= 1;                                                          \
    void *w_ = (wmode_ == 2 || wb_ == 0) ? NULL : fz_workspace((c)->f, wb_);                       \
    if (wmode_ == 3) w_ = NULL;                                                                    \
    if (wmode_ == 2) wb_ = 0;                                                                      \
    fz_begin(ops, count);                                                                          \
    st_ = fn((c)->h, __VA_ARGS__, w_, wb_);                                                        \
    fz_end(#fn, st_, 1);                                                                           \
  } while (0)

/* Shapes broadcast to `out`: each axis of the result is out's, or 1, or missing. */
static int broadcast_shape(fz *f, int nd, const int64_t *out, int64_t *shape) {
  const int drop = fz_one_in(f, 3) ? fz_range(f, 0, nd) : 0;
  const int bnd = nd - drop;
  for (int i = 0; i < bnd; ++i) {
    shape[i] = fz_one_in(f, 3) ? 1 : out[drop + i];
  }
  return bnd;
}

/* ---- ops -------------------------------------------------------------------------------- */

enum { Q, K, V, O, LSE, MASK, CUQ, CUK, KVLEN, TABLE, SDPA_N };

static void fuzz_sdpa(ctx *c) {
  fz *f = c->f;
  const int64_t B = fz_extent(f, 3), Sq = fz_extent(f, 9), Sk = fz_extent(f, 17);
  const int64_t Hkv = fz_extent(f, 3), G = fz_extent(f, 3), D = pick_head_dim(f);
  const int64_t Dv = fz_one_in(f, 4) ? pick_head_dim(f) : D;
  const int64_t Hq = fz_mul(Hkv, G);
  const int dt = pick_float_dtype(f);
  const int mode = fz_range(f, 0, 3); /* dense, varlen, cache, paged */
  fz_operand o[SDPA_N];
  memset(o, 0, sizeof o);
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.scale = fz_one_in(f, 4) ? fz_float(f, 0.5f) : 0.0f;
  p.causal = fz_one_in(f, 2) ? 1 : (fz_one_in(f, 16) ? fz_range(f, -2, 3) : 0);
  p.window_left = fz_one_in(f, 4) ? fz_range(f, -3, 20) : -1;
  p.window_right = fz_one_in(f, 4) ? fz_range(f, -3, 20) : -1;
  p.max_seqlen_q = (int32_t)Sq;
  p.max_seqlen_k = (int32_t)Sk;
  if (mode == 1) { /* varlen: q [Tq, Hq, D], lse [Hq, Tq] */
    const int64_t Tq = fz_mul(B, Sq), Tk = fz_mul(B, Sk);
    fz_tensor(&o[Q], "q", dt, c->dev, 3, (int64_t[]){Tq, Hq, D});
    fz_tensor(&o[K], "k", dt, c->dev, 3, (int64_t[]){Tk, Hkv, D});
    fz_tensor(&o[V], "v", dt, c->dev, 3, (int64_t[]){Tk, Hkv, Dv});
    fz_tensor(&o[O], "o", dt, c->dev, 3, (int64_t[]){Tq, Hq, Dv});
    fz_tensor(&o[LSE], "lse", OPS_DTYPE_F32, c->dev, 2, (int64_t[]){Hq, Tq});
    fz_tensor(&o[CUQ], "cu_seqlens_q", OPS_DTYPE_I32, c->dev, 1, (int64_t[]){B < INT64_MAX ? B + 1 : B});
    fz_tensor(&o[CUK], "cu_seqlens_k", OPS_DTYPE_I32, c->dev, 1, (int64_t[]){B < INT64_MAX ? B + 1 : B});
    o[CUQ].fill = o[CUK].fill = FZ_FILL_INDEX;
    o[CUQ].sorted = o[CUK].sorted = 1;
    o[CUQ].index_hi = Tq;
    o[CUK].index_hi = Tk;
    if (fz_one_in(f, 4)) p.max_seqlen_q = (int32_t)fz_int64(f);
    if (fz_one_in(f, 4)) p.max_seqlen_k = fz_range(f, 0, 40);
  } else {
    int64_t kshape[4] = {B, Sk, Hkv, D}, vshape[4] = {B, Sk, Hkv, Dv};
    if (mode == 3) { /* paged: k [pages, page_size, Hkv, D] */
      const int64_t page = fz_extent(f, 5), pages = fz_extent(f, 9), maxp = fz_extent(f, 4);
      kshape[0] = vshape[0] = pages;
      kshape[1] = vshape[1] = page;
      fz_tensor(&o[TABLE], "block_table", OPS_DTYPE_I32, c->dev, 2, (int64_t[]){B, maxp});
      o[TABLE].fill = FZ_FILL_INDEX;
      o[TABLE].index_hi = pages > INT64_MIN ? pages - 1 : pages;
      fz_tensor(&o[KVLEN], "kv_lens", OPS_DTYPE_I32, c->dev, 1, (int64_t[]){B});
      o[KVLEN].fill = FZ_FILL_INDEX;
      o[KVLEN].index_hi = fz_mul(maxp, page);
    } else if (mode == 2) {
      fz_tensor(&o[KVLEN], "kv_lens", OPS_DTYPE_I32, c->dev, 1, (int64_t[]){B});
      o[KVLEN].fill = FZ_FILL_INDEX;
      o[KVLEN].index_hi = Sk;
    }
    fz_tensor(&o[Q], "q", dt, c->dev, 4, (int64_t[]){B, Sq, Hq, D});
    fz_tensor(&o[K], "k", dt, c->dev, 4, kshape);
    fz_tensor(&o[V], "v", dt, c->dev, 4, vshape);
    fz_tensor(&o[O], "o", dt, c->dev, 4, (int64_t[]){B, Sq, Hq, Dv});
    fz_tensor(&o[LSE], "lse", OPS_DTYPE_F32, c->dev, 3, (int64_t[]){B, Hq, Sq});
    if (mode == 0 && fz_one_in(f, 3)) {
      int64_t full[4] = {B, Hq, Sq, Sk}, ms[4];
      const int mnd = broadcast_shape(f, 4, full, ms);
      fz_tensor(&o[MASK], "attn_mask", fz_one_in(f, 2) ? OPS_DTYPE_F32 : dt, c->dev, mnd, ms);
    }
  }
  for (int i = 0; i < SDPA_N; ++i) {
    if (o[i].name == NULL) {
      o[i].name = "(absent)";
      o[i].present = 0;
      o[i].alias = -1;
    }
  }
  o[O].output = o[LSE].output = 1;
  if (fz_one_in(f, 2)) o[LSE].present = 0;
  for (int i = 0; i < 4; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, SDPA_N);
  fz_place(f, o, SDPA_N);
  p.attn_mask = opt(&o[MASK]);
  p.cu_seqlens_q = opt(&o[CUQ]);
  p.cu_seqlens_k = opt(&o[CUK]);
  p.kv_lens = opt(&o[KVLEN]);
  p.block_table = opt(&o[TABLE]);
  const void *pp = params_as_given(f, &p, sizeof p);
  drop_if_defaults(pp, o, (const int[]){MASK, CUQ, CUK, KVLEN, TABLE}, 5);
  FZ_OP_CALLS(c, o, SDPA_N, ops_sdpa, (const ops_sdpa_params *)pp, opt(&o[Q]), opt(&o[K]), opt(&o[V]),
              opt(&o[O]), opt(&o[LSE]));
}

enum { GA, GB, GD, GC, GBIAS, GRES, GEMM_N };

static void fuzz_gemm(ctx *c) {
  fz *f = c->f;
  const int64_t M = fz_extent(f, 24), N = fz_extent(f, 24), K = fz_extent(f, 24);
  const int batched = fz_one_in(f, 3);
  const int64_t bt = batched ? fz_extent(f, 3) : 1;
  const int dt = pick_float_dtype(f);
  const int dd = fz_one_in(f, 4) ? OPS_DTYPE_F32 : dt;
  fz_operand o[GEMM_N];
  const int nd = batched ? 3 : 2;
  fz_tensor(&o[GA], "a", dt, c->dev, nd, batched ? (int64_t[]){bt, M, K} : (int64_t[]){M, K});
  fz_tensor(&o[GB], "b", dt, c->dev, nd,
            batched ? (int64_t[]){fz_one_in(f, 3) ? 1 : bt, K, N} : (int64_t[]){K, N});
  fz_tensor(&o[GD], "d", dd, c->dev, nd, batched ? (int64_t[]){bt, M, N} : (int64_t[]){M, N});
  int64_t full[3] = {bt, M, N}, bs[3];
  const int bnd = broadcast_shape(f, 3, full, bs);
  fz_tensor(&o[GC], "params->c", dd, c->dev, bnd, bs);
  fz_tensor(&o[GBIAS], "params->bias", dd, c->dev, 1, (int64_t[]){N});
  if (fz_one_in(f, 3)) fz_tensor(&o[GBIAS], "params->bias", dd, c->dev, 2, (int64_t[]){M, 1});
  fz_tensor(&o[GRES], "params->residual", dd, c->dev, nd, batched ? (int64_t[]){bt, M, N} : (int64_t[]){M, N});
  o[GD].output = 1;
  o[GC].present = fz_one_in(f, 3);
  o[GBIAS].present = fz_one_in(f, 2);
  o[GRES].present = fz_one_in(f, 3);
  for (int i = 0; i < GEMM_N; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, GEMM_N);
  fz_place(f, o, GEMM_N);
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  p.alpha = fz_one_in(f, 4) ? fz_float(f, 0.5f) : 1.0f;
  p.beta = o[GC].present && fz_one_in(f, 2) ? fz_float(f, 1.0f) : 0.0f;
  p.activation = fz_one_in(f, 2) ? fz_range(f, -1, 12) : 0;
  p.c = opt(&o[GC]);
  p.bias = opt(&o[GBIAS]);
  p.residual = opt(&o[GRES]);
  const void *pp = params_as_given(f, &p, sizeof p);
  drop_if_defaults(pp, o, (const int[]){GC, GBIAS, GRES}, 3);
  FZ_OP_CALLS(c, o, GEMM_N, ops_gemm, (const ops_gemm_params *)pp, opt(&o[GA]), opt(&o[GB]), opt(&o[GD]));
}

/* Rows of a last-axis op: [R0, R1?, N]. */
static int row_shape(fz *f, int64_t *shape, int64_t n) {
  const int nd = fz_range(f, 1, 3);
  for (int i = 0; i < nd - 1; ++i) shape[i] = fz_extent(f, 6);
  shape[nd - 1] = n;
  return nd;
}

enum { NX, NW, NY, NBIAS, NRES, NRESO, NMEAN, NRSTD, NORM_N };

static void fuzz_norm(ctx *c, int layer) {
  fz *f = c->f;
  const int64_t N = fz_extent(f, 40);
  int64_t xs[3];
  const int nd = row_shape(f, xs, N);
  const int dt = pick_float_dtype(f);
  const int wt = fz_one_in(f, 3) ? OPS_DTYPE_F32 : dt;
  fz_operand o[NORM_N];
  fz_tensor(&o[NX], "x", dt, c->dev, nd, xs);
  fz_tensor(&o[NW], "weight", wt, c->dev, 1, (int64_t[]){N});
  fz_tensor(&o[NY], "y", dt, c->dev, nd, xs);
  fz_tensor(&o[NBIAS], "params->bias", wt, c->dev, 1, (int64_t[]){N});
  fz_tensor(&o[NRES], "params->residual", dt, c->dev, nd, xs);
  fz_tensor(&o[NRESO], "params->residual_out", dt, c->dev, nd, xs);
  fz_tensor(&o[NMEAN], "params->mean_out", OPS_DTYPE_F32, c->dev, nd - 1, xs);
  fz_tensor(&o[NRSTD], "params->rstd_out", OPS_DTYPE_F32, c->dev, nd - 1, xs);
  o[NY].output = o[NRESO].output = o[NMEAN].output = o[NRSTD].output = 1;
  o[NBIAS].present = fz_one_in(f, 3);
  o[NRES].present = fz_one_in(f, 3);
  o[NRESO].present = o[NRES].present && fz_one_in(f, 2);
  o[NMEAN].present = fz_one_in(f, 3);
  o[NRSTD].present = fz_one_in(f, 3);
  for (int i = 0; i < NORM_N; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, NORM_N);
  fz_place(f, o, NORM_N);
  ops_norm_params p;
  ops_norm_params_init(&p);
  p.eps = fz_one_in(f, 4) ? fz_float(f, 1e-5f) : p.eps;
  p.bias = opt(&o[NBIAS]);
  p.residual = opt(&o[NRES]);
  p.residual_out = opt(&o[NRESO]);
  p.mean_out = opt(&o[NMEAN]);
  p.rstd_out = opt(&o[NRSTD]);
  const void *pp = params_as_given(f, &p, sizeof p);
  drop_if_defaults(pp, o, (const int[]){NBIAS, NRES, NRESO, NMEAN, NRSTD}, 5);
  if (layer) {
    FZ_OP_CALLS(c, o, NORM_N, ops_layernorm, (const ops_norm_params *)pp, opt(&o[NX]), opt(&o[NW]), opt(&o[NY]));
  } else {
    FZ_OP_CALLS(c, o, NORM_N, ops_rmsnorm, (const ops_norm_params *)pp, opt(&o[NX]), opt(&o[NW]), opt(&o[NY]));
  }
}

enum { BDY, BX, BW, BMEAN, BRSTD, BDX, BDW, BDB, NORMB_N };

static void fuzz_norm_backward(ctx *c, int layer) {
  fz *f = c->f;
  const int64_t N = fz_extent(f, 40);
  int64_t xs[3];
  const int nd = row_shape(f, xs, N);
  const int dt = pick_float_dtype(f);
  const int wt = fz_one_in(f, 3) ? OPS_DTYPE_F32 : dt;
  fz_operand o[NORMB_N];
  fz_tensor(&o[BDY], "dy", dt, c->dev, nd, xs);
  fz_tensor(&o[BX], "x", dt, c->dev, nd, xs);
  fz_tensor(&o[BW], "weight", wt, c->dev, 1, (int64_t[]){N});
  fz_tensor(&o[BMEAN], "mean", OPS_DTYPE_F32, c->dev, nd - 1, xs);
  fz_tensor(&o[BRSTD], "rstd", OPS_DTYPE_F32, c->dev, nd - 1, xs);
  fz_tensor(&o[BDX], "dx", dt, c->dev, nd, xs);
  fz_tensor(&o[BDW], "params->dweight", fz_one_in(f, 2) ? OPS_DTYPE_F32 : wt, c->dev, 1, (int64_t[]){N});
  fz_tensor(&o[BDB], "params->dbias", fz_one_in(f, 2) ? OPS_DTYPE_F32 : wt, c->dev, 1, (int64_t[]){N});
  o[BDX].output = o[BDW].output = o[BDB].output = 1;
  o[BDW].present = fz_one_in(f, 2);
  o[BDB].present = layer && fz_one_in(f, 2);
  if (!layer) o[BMEAN].present = 0;
  for (int i = 0; i < NORMB_N; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, NORMB_N);
  fz_place(f, o, NORMB_N);
  ops_norm_backward_params p;
  ops_norm_backward_params_init(&p);
  p.dweight = opt(&o[BDW]);
  p.dbias = opt(&o[BDB]);
  const void *pp = params_as_given(f, &p, sizeof p);
  drop_if_defaults(pp, o, (const int[]){BDW, BDB}, 2);
  if (layer) {
    FZ_OP_CALLS(c, o, NORMB_N, ops_layernorm_backward, (const ops_norm_backward_params *)pp, opt(&o[BDY]),
                opt(&o[BX]), opt(&o[BW]), opt(&o[BMEAN]), opt(&o[BRSTD]), opt(&o[BDX]));
  } else {
    FZ_OP_CALLS(c, o, NORMB_N, ops_rmsnorm_backward, (const ops_norm_backward_params *)pp, opt(&o[BDY]),
                opt(&o[BX]), opt(&o[BW]), opt(&o[BRSTD]), opt(&o[BDX]));
  }
}

static void fuzz_softmax(ctx *c, int backward) {
  fz *f = c->f;
  int64_t xs[3];
  const int nd = row_shape(f, xs, fz_extent(f, 40));
  const int dt = pick_float_dtype(f);
  fz_operand o[3];
  fz_tensor(&o[0], backward ? "dy" : "x", dt, c->dev, nd, xs);
  fz_tensor(&o[1], backward ? "y" : "y", dt, c->dev, nd, xs);
  fz_tensor(&o[2], "dx", dt, c->dev, nd, xs);
  o[backward ? 2 : 1].output = 1;
  if (!backward) o[2].present = 0;
  for (int i = 0; i < 3; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, 3);
  fz_place(f, o, 3);
  ops_softmax_params p;
  ops_softmax_params_init(&p);
  if (fz_one_in(f, 3)) p.scale = fz_float(f, 0.125f);
  const void *pp = params_as_given(f, &p, sizeof p);
  if (backward) {
    FZ_OP_CALLS(c, o, 3, ops_softmax_backward, (const ops_softmax_params *)pp, opt(&o[0]), opt(&o[1]), opt(&o[2]));
  } else {
    FZ_OP_CALLS(c, o, 3, ops_softmax, (const ops_softmax_params *)pp, opt(&o[0]), opt(&o[1]));
  }
}

/* Elementwise ops: y of a random shape, inputs broadcast to it. */
static void fuzz_elementwise(ctx *c, int which) {
  fz *f = c->f;
  const int nd = fz_range(f, 0, 4);
  int64_t ys[4];
  for (int i = 0; i < nd; ++i) ys[i] = fz_extent(f, 7);
  const int dt = pick_float_dtype(f);
  fz_operand o[4]; /* x (or a), b (or a_tensor), y, b_tensor */
  int64_t s1[4], s2[4];
  const int nd1 = which == 2 ? broadcast_shape(f, nd, ys, s1) : nd;
  if (which != 2) memcpy(s1, ys, sizeof ys);
  const int nd2 = broadcast_shape(f, nd, ys, s2);
  fz_tensor(&o[0], which == 2 ? "a" : "x", dt, c->dev, nd1, s1);
  fz_tensor(&o[1], which == 2 ? "b" : "params->a_tensor", dt, c->dev, nd2, s2);
  fz_tensor(&o[2], "y", dt, c->dev, nd, ys);
  const int nd3 = broadcast_shape(f, nd, ys, s2);
  fz_tensor(&o[3], "params->b_tensor", dt, c->dev, nd3, s2);
  o[2].output = 1;
  if (which != 2) o[1].present = which == 0 && fz_one_in(f, 3);
  o[3].present = which == 0 && fz_one_in(f, 3);
  for (int i = 0; i < 4; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, 4);
  fz_place(f, o, 4);
  switch (which) {
    case 0: {
      ops_sin_affine_params p;
      ops_sin_affine_params_init(&p);
      p.a = fz_float(f, 2.0f);
      p.b = fz_float(f, 0.5f);
      p.a_tensor = opt(&o[1]);
      p.b_tensor = opt(&o[3]);
      const void *pp = params_as_given(f, &p, sizeof p);
      drop_if_defaults(pp, o, (const int[]){1, 3}, 2);
      FZ_OP_CALLS(c, o, 4, ops_sin_affine, (const ops_sin_affine_params *)pp, opt(&o[0]), opt(&o[2]));
      break;
    }
    case 1: {
      ops_unary_params p;
      ops_unary_params_init(&p);
      p.fn = fz_range(f, -1, 12);
      const void *pp = params_as_given(f, &p, sizeof p);
      FZ_OP_CALLS(c, o, 4, ops_unary, (const ops_unary_params *)pp, opt(&o[0]), opt(&o[2]));
      break;
    }
    case 2: {
      ops_binary_params p;
      ops_binary_params_init(&p);
      p.op = fz_range(f, -1, 7);
      const void *pp = params_as_given(f, &p, sizeof p);
      FZ_OP_CALLS(c, o, 4, ops_binary, (const ops_binary_params *)pp, opt(&o[0]), opt(&o[1]), opt(&o[2]));
      break;
    }
    case 3: {
      ops_scale_params p;
      ops_scale_params_init(&p);
      p.alpha = fz_float(f, -1.5f);
      const void *pp = params_as_given(f, &p, sizeof p);
      FZ_OP_CALLS(c, o, 4, ops_scale, (const ops_scale_params *)pp, opt(&o[0]), opt(&o[2]));
      break;
    }
    default: {
      ops_dropout_params p;
      ops_dropout_params_init(&p);
      p.p = fz_float(f, 0.25f);
      p.seed = fz_bits(f, 8);
      p.offset = fz_one_in(f, 4) ? UINT64_MAX - fz_bits(f, 1) : fz_bits(f, 2);
      const void *pp = params_as_given(f, &p, sizeof p);
      FZ_OP_CALLS(c, o, 4, ops_dropout, (const ops_dropout_params *)pp, opt(&o[0]), opt(&o[2]));
      break;
    }
  }
}

static void fuzz_reduce(ctx *c) {
  fz *f = c->f;
  const int nd = fz_range(f, 0, 5);
  int64_t xs[5], ys[5];
  for (int i = 0; i < nd; ++i) xs[i] = fz_extent(f, 7);
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.op = fz_one_in(f, 8) ? fz_range(f, -2, 6) : fz_range(f, 0, 3);
  p.keepdim = fz_one_in(f, 8) ? fz_range(f, -1, 2) : fz_range(f, 0, 1);
  p.axes = fz_one_in(f, 3) ? OPS_REDUCE_ALL_AXES : (uint32_t)fz_bits(f, 1);
  if (fz_one_in(f, 16)) p.axes = (uint32_t)fz_bits(f, 4);
  int ynd = 0;
  for (int i = 0; i < nd; ++i) {
    const int reduced = (p.axes >> i) & 1u;
    if (!reduced) ys[ynd++] = xs[i];
    else if (p.keepdim) ys[ynd++] = 1;
  }
  const int dt = pick_float_dtype(f);
  fz_operand o[2];
  fz_tensor(&o[0], "x", dt, c->dev, nd, xs);
  fz_tensor(&o[1], "y", fz_one_in(f, 3) ? OPS_DTYPE_F32 : dt, c->dev, ynd, ys);
  o[1].output = 1;
  for (int i = 0; i < 2; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, 2);
  fz_place(f, o, 2);
  const void *pp = params_as_given(f, &p, sizeof p);
  FZ_OP_CALLS(c, o, 2, ops_reduce, (const ops_reduce_params *)pp, opt(&o[0]), opt(&o[1]));
}

static void fill_rope(fz *f, ops_rope_params *p, int64_t D) {
  ops_rope_params_init(p);
  if (fz_one_in(f, 2)) p->style = fz_one_in(f, 8) ? fz_range(f, -1, 3) : fz_range(f, 0, 1);
  if (fz_one_in(f, 4)) p->theta = fz_float(f, 500000.0f);
  if (fz_one_in(f, 3)) p->rotary_dim = fz_one_in(f, 4) ? fz_range(f, -3, 300) : (int32_t)(D / 2 * 2 / 2);
  if (fz_one_in(f, 3)) {
    p->scaling = fz_range(f, -1, 3);
    p->factor = fz_float(f, 8.0f);
    p->low_freq_factor = fz_float(f, 1.0f);
    p->high_freq_factor = fz_float(f, 4.0f);
    p->original_max_positions = fz_one_in(f, 4) ? (int32_t)fz_int64(f) : 8192;
  }
}

enum { RPOS, RQ, RQO, RK, RKO, ROPE_N };

static void fuzz_rope(ctx *c) {
  fz *f = c->f;
  const int bs = fz_one_in(f, 3); /* [B, S, H, D] instead of [T, H, D] */
  const int64_t B = fz_extent(f, 3), S = fz_extent(f, 9), H = fz_extent(f, 4), Hk = fz_extent(f, 3);
  const int64_t D = pick_head_dim(f);
  const int dt = pick_float_dtype(f);
  fz_operand o[ROPE_N];
  const int64_t T = fz_mul(B, S);
  if (bs) {
    fz_tensor(&o[RPOS], "positions", pick_index_dtype(f), c->dev, 2, (int64_t[]){B, S});
    fz_tensor(&o[RQ], "q", dt, c->dev, 4, (int64_t[]){B, S, H, D});
    fz_tensor(&o[RQO], "q_out", dt, c->dev, 4, (int64_t[]){B, S, H, D});
    fz_tensor(&o[RK], "params->k", dt, c->dev, 4, (int64_t[]){B, S, Hk, D});
    fz_tensor(&o[RKO], "params->k_out", dt, c->dev, 4, (int64_t[]){B, S, Hk, D});
  } else {
    fz_tensor(&o[RPOS], "positions", pick_index_dtype(f), c->dev, 1, (int64_t[]){T});
    fz_tensor(&o[RQ], "q", dt, c->dev, 3, (int64_t[]){T, H, D});
    fz_tensor(&o[RQO], "q_out", dt, c->dev, 3, (int64_t[]){T, H, D});
    fz_tensor(&o[RK], "params->k", dt, c->dev, 3, (int64_t[]){T, Hk, D});
    fz_tensor(&o[RKO], "params->k_out", dt, c->dev, 3, (int64_t[]){T, Hk, D});
  }
  o[RPOS].fill = FZ_FILL_INDEX;
  o[RPOS].index_hi = 100000;
  o[RQO].output = o[RKO].output = 1;
  o[RK].present = o[RKO].present = fz_one_in(f, 2);
  for (int i = 0; i < ROPE_N; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, ROPE_N);
  fz_place(f, o, ROPE_N);
  ops_rope_params p;
  fill_rope(f, &p, D);
  p.k = opt(&o[RK]);
  p.k_out = opt(&o[RKO]);
  const void *pp = params_as_given(f, &p, sizeof p);
  drop_if_defaults(pp, o, (const int[]){RK, RKO}, 2);
  FZ_OP_CALLS(c, o, ROPE_N, ops_rope, (const ops_rope_params *)pp, opt(&o[RPOS]), opt(&o[RQ]), opt(&o[RQO]));
}

enum { AK, AV, ASLOT, AKC, AVC, APOS, APPEND_N };

static void fuzz_append(ctx *c) {
  fz *f = c->f;
  const int64_t T = fz_extent(f, 9), Hkv = fz_extent(f, 3), D = pick_head_dim(f);
  const int64_t Dv = fz_one_in(f, 4) ? pick_head_dim(f) : D;
  const int64_t pages = fz_extent(f, 6), page = fz_extent(f, 8);
  const int dt = pick_float_dtype(f);
  fz_operand o[APPEND_N];
  fz_tensor(&o[AK], "k", dt, c->dev, 3, (int64_t[]){T, Hkv, D});
  fz_tensor(&o[AV], "v", dt, c->dev, 3, (int64_t[]){T, Hkv, Dv});
  fz_tensor(&o[ASLOT], "slot_mapping", pick_index_dtype(f), c->dev, 1, (int64_t[]){T});
  fz_tensor(&o[AKC], "k_cache", dt, c->dev, 4, (int64_t[]){pages, page, Hkv, D});
  fz_tensor(&o[AVC], "v_cache", dt, c->dev, 4, (int64_t[]){pages, page, Hkv, Dv});
  fz_tensor(&o[APOS], "params->positions", pick_index_dtype(f), c->dev, 1, (int64_t[]){T});
  o[ASLOT].fill = o[APOS].fill = FZ_FILL_INDEX;
  o[ASLOT].index_hi = fz_mul(pages, page) > INT64_MIN ? fz_mul(pages, page) - 1 : INT64_MIN;
  o[APOS].index_hi = 5000;
  o[AKC].output = o[AVC].output = 1;
  const int rope = fz_one_in(f, 3);
  o[APOS].present = rope;
  for (int i = 0; i < APPEND_N; ++i) fz_layout(f, &o[i]);
  if (fz_one_in(f, 2)) fz_mutate(f, o, APPEND_N);
  fz_place(f, o, APPEND_N);
  ops_rope_params rp;
  fill_rope(f, &rp, D);
  ops_kv_cache_append_params p;
  ops_kv_cache_append_params_init(&p);
  p.rope = rope || fz_one_in(f, 16) ? &rp : NULL;
  p.positions = opt(&o[APOS]);
  const void *pp = params_as_given(f, &p, sizeof p);
  drop_if_defaults(pp, o, (const int[]){APOS}, 1);
  FZ_OP_CALLS(c, o, APPEND_N, ops_kv_cache_append, (const ops_kv_cache_append_params *)pp, opt(&o[AK]),
              opt(&o[AV]), opt(&o[ASLOT]), opt(&o[AKC]), opt(&o[AVC]));
}

/* ---- fusion plans ------------------------------------------------------------------------- */

static void fuzz_fuse(ctx *c) {
  fz *f = c->f;
  const int64_t M = fz_extent(f, 12), N = fz_extent(f, 12), K = fz_extent(f, 12);
  const int dt = pick_float_dtype(f);
  /* a chain: [gemm] then up to three of unary, binary with a bias row, scale, norm, softmax */
  enum { T_A, T_B, T_BIAS, T_W, T_X0, T_X1, T_X2, T_X3, FUSE_N };
  fz_operand o[FUSE_N];
  fz_tensor(&o[T_A], "a", dt, c->dev, 2, (int64_t[]){M, K});
  fz_tensor(&o[T_B], "b", dt, c->dev, 2, (int64_t[]){K, N});
  fz_tensor(&o[T_BIAS], "bias", dt, c->dev, 1, (int64_t[]){N});
  fz_tensor(&o[T_W], "weight", dt, c->dev, 1, (int64_t[]){N});
  for (int i = T_X0; i <= T_X3; ++i) {
    fz_tensor(&o[i], "chain output", dt, c->dev, 2, (int64_t[]){M, N});
    o[i].output = 1;
  }
  if (fz_one_in(f, 3)) fz_mutate(f, o, FUSE_N);
  fz_place(f, o, FUSE_N);

  ops_gemm_params gp;
  ops_unary_params up;
  ops_binary_params bp;
  ops_scale_params sp;
  ops_norm_params np;
  ops_softmax_params xp;
  ops_sin_affine_params ap;
  ops_gemm_params_init(&gp);
  ops_unary_params_init(&up);
  ops_binary_params_init(&bp);
  ops_scale_params_init(&sp);
  ops_norm_params_init(&np);
  ops_softmax_params_init(&xp);
  ops_sin_affine_params_init(&ap);
  up.fn = fz_range(f, 0, 10);
  bp.op = fz_range(f, 0, 5);
  sp.alpha = fz_float(f, 0.5f);

  ops_node nodes[8];
  int count = 0;
  const ops_tensor *prev = NULL;
  if (fz_one_in(f, 2) || !fz_one_in(f, 4)) {
    ops_node_init(&nodes[count]);
    nodes[count].op = OPS_OP_GEMM;
    nodes[count].params = fz_one_in(f, 4) ? NULL : &gp;
    nodes[count].in[0] = opt(&o[T_A]);
    nodes[count].in[1] = opt(&o[T_B]);
    nodes[count].out = opt(&o[T_X0]);
    prev = nodes[count].out;
    count++;
  } else {
    prev = opt(&o[T_A]);
  }
  const int more = fz_range(f, 0, 3);
  for (int i = 0; i < more && count < 4; ++i) {
    ops_node *n = &nodes[count];
    ops_node_init(n);
    n->in[0] = prev;
    n->out = opt(&o[T_X0 + count]);
    switch (fz_range(f, 0, 7)) {
      case 0: n->op = OPS_OP_UNARY; n->params = &up; break;
      case 1: n->op = OPS_OP_BINARY; n->params = &bp; n->in[1] = opt(&o[T_BIAS]); break;
      case 2: n->op = OPS_OP_SCALE; n->params = &sp; break;
      case 3: n->op = OPS_OP_RMSNORM; n->params = &np; n->in[1] = opt(&o[T_W]); break;
      case 4: n->op = OPS_OP_LAYERNORM; n->params = &np; n->in[1] = opt(&o[T_W]); break;
      case 5: n->op = OPS_OP_SOFTMAX; n->params = &xp; break;
      default: n->op = OPS_OP_SIN_AFFINE; n->params = &ap; break;
    }
    n->keep_output = fz_one_in(f, 4);
    prev = n->out;
    count++;
  }
  if (count > 0 && fz_one_in(f, 3)) { /* a node broken: struct size, op id, a pointer, a link */
    ops_node *n = &nodes[fz_range(f, 0, count - 1)];
    switch (fz_range(f, 0, 5)) {
      case 0: n->struct_size = (uint32_t)fz_bits(f, 4); break;
      case 1: n->op = fz_range(f, -1, 20); break;
      case 2: n->in[0] = NULL; break;
      case 3: n->out = NULL; break;
      case 4: n->params = &sp; break; /* another op's params struct */
      default: n->in[0] = opt(&o[T_W]); break;
    }
  }
  int ncount = count;
  if (fz_one_in(f, 16)) ncount = fz_range(f, -2, 8); /* nodes[] has room for 8 */
  for (int i = count; i < 8; ++i) memset(&nodes[i], 0, sizeof nodes[i]);
  const uint32_t flags = fz_one_in(f, 3) ? (fz_one_in(f, 4) ? (uint32_t)fz_bits(f, 4) : OPS_FUSE_PRESERVE_ORDER) : 0;

  /* operands no node names are not the plan's: the checks look at the others alone */
  for (int i = 0; i < FUSE_N; ++i) {
    int named = 0;
    for (int k = 0; k < count && k < ncount; ++k) {
      const int32_t op = nodes[k].op; /* in[1] is read by the two-input ops alone */
      const int two = op == OPS_OP_GEMM || op == OPS_OP_BINARY || op == OPS_OP_RMSNORM || op == OPS_OP_LAYERNORM;
      named |= nodes[k].in[0] == &o[i].t || (two && nodes[k].in[1] == &o[i].t) || nodes[k].out == &o[i].t;
    }
    if (!named) o[i].present = 0;
  }
  ops_plan plan = NULL;
  fz_begin(o, FUSE_N);
  ops_status st = ops_fuse(c->h, fz_one_in(f, 32) ? NULL : nodes, ncount, flags, &plan);
  fz_end("ops_fuse", st, 0);
  if (st != OPS_OK) {
    if (plan != NULL) fz_die("ops_fuse failed (%s) but returned a plan", ops_status_name(st));
    return;
  }
  size_t ws = 0;
  fz_begin(o, FUSE_N);
  st = ops_plan_workspace_size(c->h, plan, &ws);
  fz_end("ops_plan_workspace_size", st, 0);
  const int steps = ops_plan_step_count(plan), decisions = ops_plan_decision_count(plan);
  if (steps < 0 || decisions < 0) fz_die("a plan with %d steps and %d decisions", steps, decisions);
  for (int i = -1; i <= decisions; ++i) {
    ops_fuse_decision d;
    memset(&d, 0, sizeof d);
    d.struct_size = fz_one_in(f, 16) ? (uint32_t)fz_bits(f, 2) : sizeof d;
    fz_begin(o, FUSE_N);
    st = ops_plan_decision(plan, i, &d);
    fz_end("ops_plan_decision", st, 0);
    if (st == OPS_OK && (d.rule == NULL || memchr(d.message, 0, sizeof d.message) == NULL)) {
      fz_die("ops_plan_decision %d: no rule name or an unterminated message", i);
    }
  }
  const size_t need = ops_plan_to_text(plan, NULL, 0);
  const size_t njson = ops_plan_to_json(plan, NULL, 0);
  const size_t n = (size_t)fz_range(f, 0, 300);
  char *buf = (char *)malloc(n + 1);
  if (ops_plan_to_text(plan, buf, n) != need || ops_plan_to_json(plan, buf, n) != njson) {
    fz_die("ops_plan_to_text / to_json: the length depends on the buffer");
  }
  free(buf);
  size_t wb = st == OPS_OK && ws <= FZ_MAX_WORKSPACE ? ws : 0;
  if (fz_one_in(f, 8) && wb > 0) wb -= 1;
  void *w = wb ? fz_workspace(f, wb) : NULL;
  fz_begin(o, FUSE_N);
  st = ops_plan_execute(c->h, plan, w, wb);
  fz_end("ops_plan_execute", st, 1);
  ops_plan_destroy(plan);
}

/* ---- tensors, DLPack ---------------------------------------------------------------------- */

static void fuzz_tensor_api(ctx *c) {
  fz *f = c->f;
  int64_t shape[OPS_MAX_DIMS + 4], strides[OPS_MAX_DIMS + 4];
  for (int i = 0; i < OPS_MAX_DIMS + 4; ++i) {
    shape[i] = fz_one_in(f, 4) ? fz_int64(f) : fz_range(f, 0, 9);
    strides[i] = fz_one_in(f, 4) ? fz_int64(f) : fz_range(f, -4, 40);
  }
  const int ndim = fz_range(f, -2, OPS_MAX_DIMS + 2);
  ops_tensor t, before;
  memset(&t, 0x7B, sizeof t);
  before = t;
  const int dtype = fz_range(f, -1, 10);
  ops_device dev = {fz_range(f, 0, 3), fz_range(f, -1, 1)};
  fz_begin(NULL, 0);
  ops_status st = ops_tensor_init(fz_one_in(f, 32) ? NULL : &t, (void *)(uintptr_t)(fz_bits(f, 1) * 2), (ops_dtype)dtype,
                                  dev, ndim, fz_one_in(f, 16) ? NULL : shape, fz_one_in(f, 2) ? NULL : strides);
  fz_end("ops_tensor_init", st, 0);
  if (st != OPS_OK && memcmp(&t, &before, sizeof t) != 0) fz_die("ops_tensor_init failed but wrote *t");
  if (st != OPS_OK) {
    memset(&t, 0, sizeof t);
    t.struct_size = fz_one_in(f, 4) ? (uint32_t)fz_bits(f, 4) : sizeof t;
    t.dtype = dtype;
    t.ndim = ndim;
    for (int i = 0; i < OPS_MAX_DIMS; ++i) {
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
    }
  }
  (void)ops_tensor_numel(fz_one_in(f, 32) ? NULL : &t);
  (void)ops_tensor_is_contiguous(fz_one_in(f, 32) ? NULL : &t);
  int perm[OPS_MAX_DIMS + 2];
  for (int i = 0; i < OPS_MAX_DIMS + 2; ++i) perm[i] = fz_one_in(f, 8) ? fz_range(f, -3, 12) : (ndim - 1 - i);
  ops_tensor out;
  memset(&out, 0x3C, sizeof out);
  const ops_tensor out_before = out;
  fz_begin(NULL, 0);
  st = ops_tensor_permute(&t, fz_one_in(f, 32) ? NULL : perm, &out);
  fz_end("ops_tensor_permute", st, 0);
  if (st != OPS_OK && memcmp(&out, &out_before, sizeof out) != 0) fz_die("ops_tensor_permute failed but wrote *out");
  if (st == OPS_OK && ops_tensor_numel(&out) != ops_tensor_numel(&t)) fz_die("ops_tensor_permute changed numel");

  /* DLPack: shape and strides arrays long enough for any ndim the input names */
  int64_t dshape[160], dstrides[160];
  for (int i = 0; i < 160; ++i) {
    dshape[i] = shape[i % (OPS_MAX_DIMS + 4)];
    dstrides[i] = strides[i % (OPS_MAX_DIMS + 4)];
  }
  DLTensor dl;
  memset(&dl, 0, sizeof dl);
  dl.data = (void *)(uintptr_t)(fz_bits(f, 2) * 2);
  dl.device.device_type = (DLDeviceType)fz_range(f, 0, 16);
  dl.device.device_id = fz_range(f, -1, 2);
  dl.ndim = fz_one_in(f, 8) ? fz_range(f, -4, 150) : fz_range(f, 0, 9);
  dl.dtype.code = (uint8_t)fz_range(f, 0, 6);
  dl.dtype.bits = (uint8_t)(fz_one_in(f, 4) ? fz_bits(f, 1) : 8u << fz_range(f, 0, 3));
  dl.dtype.lanes = (uint16_t)(fz_one_in(f, 8) ? fz_bits(f, 2) : 1);
  dl.shape = fz_one_in(f, 32) ? NULL : dshape;
  dl.strides = fz_one_in(f, 3) ? NULL : dstrides;
  dl.byte_offset = fz_one_in(f, 4) ? fz_bits(f, 8) : fz_bits(f, 1);
  memset(&out, 0x3C, sizeof out);
  fz_begin(NULL, 0);
  st = ops_tensor_from_dlpack(fz_one_in(f, 32) ? NULL : &dl, &out);
  fz_end("ops_tensor_from_dlpack", st, 0);
  if (st != OPS_OK && memcmp(&out, &out_before, sizeof out) != 0) fz_die("ops_tensor_from_dlpack failed but wrote *out");
  (void)c;
}

/* ---- the catalog and names ----------------------------------------------------------------- */

static void fuzz_catalog(ctx *c) {
  fz *f = c->f;
  const int count = ops_kernel_count();
  char name[80];
  const int len = fz_range(f, 0, 79);
  for (int i = 0; i < len; ++i) name[i] = (char)fz_range(f, 1, 127);
  name[len] = '\0';
  ops_kernel_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = fz_one_in(f, 8) ? (uint32_t)fz_bits(f, 2) : sizeof info;
  const int index = fz_one_in(f, 4) ? (int)fz_int64(f) : fz_range(f, 0, count);
  fz_begin(NULL, 0);
  ops_status st = ops_kernel_info_at(index, &info);
  fz_end("ops_kernel_info_at", st, 0);
  const char *kname = st == OPS_OK && fz_one_in(f, 2) ? info.name : name;
  fz_begin(NULL, 0);
  st = ops_kernel_info_by_name(fz_one_in(f, 32) ? NULL : kname, &info);
  fz_end("ops_kernel_info_by_name", st, 0);
  const int roles = ops_kernel_role_count(kname);
  ops_warp_role role;
  memset(&role, 0, sizeof role);
  role.struct_size = fz_one_in(f, 8) ? (uint32_t)fz_bits(f, 2) : sizeof role;
  fz_begin(NULL, 0);
  st = ops_kernel_role(kname, fz_range(f, -1, roles + 1), &role);
  fz_end("ops_kernel_role", st, 0);
  const int v = (int)fz_int64(f);
  if (ops_status_string((ops_status)v) == NULL || ops_status_name((ops_status)v) == NULL ||
      ops_dtype_name((ops_dtype)v) == NULL || ops_reason_name((ops_reason)v) == NULL ||
      ops_op_name((ops_op)v) == NULL || ops_act_name((ops_act)v) == NULL ||
      ops_binary_op_name((ops_binary_op)v) == NULL || ops_choice_name((ops_choice)v) == NULL ||
      ops_fuse_reason_name((ops_fuse_reason)v) == NULL) {
    fz_die("a name function returned NULL for %d", v);
  }
  (void)ops_dtype_size((ops_dtype)v);
  (void)ops_op_from_name(fz_one_in(f, 32) ? NULL : name);
  (void)c;
}

/* ---- handles --------------------------------------------------------------------------------- */

/* A tune cache file from the input: this build's header (as the handle writes it), entry lines
 * built from the input's bytes (real kernel names or junk, odd counts and times, hex keys whose
 * first word names an op), and a correct end line (count, FNV-1a checksum), so the parser reads
 * the entries rather than stopping at the checksum; sometimes the checksum or end line is off. */
static uint64_t fnv1a(const char *s, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
  return h;
}

static ops_status tune_file(ctx *c) {
  fz *f = c->f;
  char path[96];
  snprintf(path, sizeof path, "/tmp/ops_fuzz_tune_%ld", (long)getpid());
  remove(path);
  ops_status st = ops_handle_set_tune_cache(c->h, path); /* missing: nothing read */
  if (st != OPS_OK) return st;
  if (ops_handle_save_tune_cache(c->h) != OPS_OK) return ops_handle_set_tune_cache(c->h, NULL);
  static char text[1 << 16];
  FILE *in = fopen(path, "rb");
  size_t len = in != NULL ? fread(text, 1, sizeof text - 4096, in) : 0;
  if (in != NULL) fclose(in);
  text[len] = '\0';
  char *end = strstr(text, "\nend ");
  len = end != NULL ? (size_t)(end - text) + 1 : len; /* the header alone */
  const int entries = fz_range(f, 0, 4);
  for (int e = 0; e < entries && len < sizeof text - 1024; ++e) {
    len += (size_t)snprintf(text + len, sizeof text - len, "entry ");
    for (int w = 0; w < 16; ++w) {
      const uint64_t word = w == 0 ? (uint64_t)fz_range(f, 0, 18) | ((uint64_t)fz_range(f, 0, 2) << 32)
                                   : (fz_one_in(f, 2) ? 0 : fz_bits(f, 8));
      len += (size_t)snprintf(text + len, sizeof text - len, "%016llx%s", (unsigned long long)word, w < 15 ? "," : "");
    }
    ops_kernel_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    const int count = fz_range(f, -1, 5);
    const char *chosen = ops_kernel_info_at(fz_range(f, 0, ops_kernel_count()), &info) == OPS_OK ? info.name : "junk";
    len += (size_t)snprintf(text + len, sizeof text - len, " %s %d", chosen, count);
    for (int i = 0; i < count + fz_range(f, 0, 1); ++i) {
      const char *name = fz_one_in(f, 2) ? chosen
                         : ops_kernel_info_at(fz_range(f, 0, ops_kernel_count()), &info) == OPS_OK ? info.name : "x";
      len += (size_t)snprintf(text + len, sizeof text - len, " %s %g", name, (double)fz_float(f, 3.5f));
    }
    len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", fz_one_in(f, 8) ? "" : " |");
  }
  const uint64_t sum = fnv1a(text, len, 0xCBF29CE484222325ull) ^ (fz_one_in(f, 16) ? 1u : 0u);
  len += (size_t)snprintf(text + len, sizeof text - len, "end %d %llx\n", fz_one_in(f, 16) ? entries + 1 : entries,
                          (unsigned long long)sum);
  FILE *out = fopen(path, "wb");
  if (out != NULL) {
    fwrite(text, 1, fz_one_in(f, 32) ? len / 2 : len, out); /* sometimes torn */
    fclose(out);
  }
  st = ops_handle_set_tune_cache(c->h, path); /* read: a bad file is ignored with a line on stderr */
  remove(path);
  return st;
}

static void handle_settings(ctx *c) {
  fz *f = c->f;
  ops_status st;
  const int n = fz_range(f, 1, 3);
  for (int i = 0; i < n; ++i) {
    fz_begin(NULL, 0);
    switch (fz_range(f, 0, 7)) {
      case 0: st = ops_handle_set_math_mode(c->h, (ops_math_mode)fz_range(f, -1, 2)); break;
      case 1: st = ops_handle_set_deterministic(c->h, fz_range(f, -1, 2)); break;
      case 2: st = ops_handle_set_autotune(c->h, (ops_autotune_mode)fz_range(f, -1, 2)); break;
      case 3: { /* a pin: a real kernel's name (its op may differ from the call's), or none */
        ops_kernel_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        const int k = fz_range(f, 0, ops_kernel_count());
        st = ops_kernel_info_at(k, &info) == OPS_OK ? ops_handle_pin_kernel(c->h, info.name)
                                                    : ops_handle_pin_kernel(c->h, fz_one_in(f, 2) ? "" : "no_such_kernel");
        break;
      }
      case 4: st = ops_handle_set_stream(c->h, fz_one_in(f, 2) ? NULL : (void *)(uintptr_t)0x1000); break;
      case 5: {
        ops_device_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = fz_one_in(f, 4) ? (uint32_t)fz_bits(f, 2) : sizeof info;
        st = ops_handle_get_device_info(c->h, &info);
        break;
      }
      case 7: st = c->h != NULL ? tune_file(c) : ops_handle_set_tune_cache(c->h, "/tmp/x"); break;
      default: {
        int det = 0;
        ops_math_mode mm;
        ops_autotune_mode am;
        void *stream = NULL;
        st = ops_handle_get_deterministic(c->h, &det);
        if (st == OPS_OK) st = ops_handle_get_math_mode(c->h, &mm);
        if (st == OPS_OK) st = ops_handle_get_autotune(c->h, &am);
        if (st == OPS_OK) st = ops_handle_get_stream(c->h, &stream);
        break;
      }
    }
    fz_end("a handle setting", st, 0);
  }
}

static ops_handle make_handle(fz *f, ops_device *dev) {
  ops_handle h = NULL;
  const int kind = fz_range(f, 0, 7);
  ops_status st;
  if (kind <= 3) {
    st = ops_handle_create(&h, ops_device_cpu());
    *dev = ops_device_cpu();
  } else if (kind <= 6) {
    ops_device_info info;
    memset(&info, 0, sizeof info);
    static const int sms[] = {90, 80, 89, 0, 100, 75};
    const int sm = kind == 6 ? sms[fz_range(f, 0, 5)] : (kind == 4 ? 90 : 80);
    fz_begin(NULL, 0);
    st = ops_device_info_for_sm(sm, &info);
    fz_end("ops_device_info_for_sm", st, 0);
    if (fz_one_in(f, 8)) { /* a described device with odd numbers */
      info.sm_version = fz_range(f, -1, 130);
      info.sm_count = (int32_t)fz_int64(f);
      info.smem_per_block_optin = fz_int64(f);
      info.struct_size = fz_one_in(f, 4) ? (uint32_t)fz_bits(f, 4) : info.struct_size;
    }
    fz_begin(NULL, 0);
    st = ops_handle_create_virtual(&h, &info);
    fz_end("ops_handle_create_virtual", st, 0);
    *dev = info.device;
  } else {
    fz_begin(NULL, 0);
    st = ops_handle_create(&h, ops_device_cuda(fz_range(f, -1, 1)));
    fz_end("ops_handle_create(cuda)", st, 0);
    *dev = ops_device_cuda(0);
  }
  if (st != OPS_OK && h != NULL) {
    fz_die("handle creation failed (%s) but returned a handle", ops_status_name(st));
  }
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fz f = {data, size};
  ctx c;
  c.f = &f;
  c.h = make_handle(&f, &c.dev);
  fz_set_device(c.dev);
  if (c.h != NULL && fz_one_in(&f, 4)) {
    handle_settings(&c);
  }
  const int calls = fz_range(&f, 1, 2);
  for (int i = 0; i < calls; ++i) {
    switch (fz_range(&f, 0, 21)) {
      case 0: case 1: case 2: fuzz_sdpa(&c); break;
      case 3: case 4: fuzz_gemm(&c); break;
      case 5: fuzz_norm(&c, 1); break;
      case 6: fuzz_norm(&c, 0); break;
      case 7: fuzz_norm_backward(&c, 1); break;
      case 8: fuzz_norm_backward(&c, 0); break;
      case 9: fuzz_softmax(&c, 0); break;
      case 10: fuzz_softmax(&c, 1); break;
      case 11: fuzz_elementwise(&c, 0); break;
      case 12: fuzz_elementwise(&c, 1); break;
      case 13: fuzz_elementwise(&c, 2); break;
      case 14: fuzz_elementwise(&c, 3); break;
      case 15: fuzz_elementwise(&c, 4); break;
      case 16: fuzz_reduce(&c); break;
      case 17: fuzz_rope(&c); break;
      case 18: fuzz_append(&c); break;
      case 19: fuzz_fuse(&c); break;
      case 20: fuzz_tensor_api(&c); break;
      default: fuzz_catalog(&c); break;
    }
  }
  fz_begin(NULL, 0);
  const ops_status st = ops_handle_destroy(c.h);
  fz_end("ops_handle_destroy", st, 0);
  fz_regions_reset();
  return 0;
}
