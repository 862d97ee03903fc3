/* gpu_ops_test: GEMM and GEMV, f32 (strict and tf32), f16, bf16 against the CPU reference (tests/support/gpu_call.h). */
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

/* ---- GEMM ---------------------------------------------------------------------------- */

static ops_status run_gemm(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 a, 1 b, then optional 2 c, 3 bias, 4 residual, then 5 d */
  ops_gemm_params p = c->gemm;
  p.c = c->has[2] ? &c->v[2] : NULL;
  p.bias = c->has[3] ? &c->v[3] : NULL;
  p.residual = c->has[4] ? &c->v[4] : NULL;
  /* in place (alias): on the GPU, v[2] or v[4] and v[5] are one view of one buffer */
  if (ex) return ops_gemm_explain(h, &p, &c->v[0], &c->v[1], &c->v[5], ex);
  return q ? ops_gemm_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[5], q)
           : ops_gemm(h, &p, &c->v[0], &c->v[1], &c->v[5], ws, wsb);
}

/* A [batch,] rows x cols operand (batch 0: 2-D) in one of the layouts GEMM operands come in:
 * 0 row-major, 1 rows padded by 8 elements (aligned, not contiguous), 2 column-major (a
 * transpose), 3 random strides and axis order, 5 as 3 but drawn until neither matrix axis is
 * unit-stride (the dispatcher's "strided" GEMM: some of 3's draws, not all). */
static void alloc_mat(opst_tensor *t, int32_t dt, int64_t batch, int64_t rows, int64_t cols, int layout) {
  const int nd = batch > 0 ? 3 : 2;
  int64_t s[3] = {batch, rows, cols};
  int64_t *rc = batch > 0 ? s + 1 : s;
  if (batch == 0) s[0] = rows, s[1] = cols;
  if (layout == 1 || layout == 2) {
    int64_t w[3];
    memcpy(w, s, sizeof w);
    int64_t *wrc = batch > 0 ? w + 1 : w;
    if (layout == 1) wrc[1] = rc[1] + 8;
    else wrc[0] = rc[1], wrc[1] = rc[0];
    opst_alloc(t, &g_rng, dt, nd, w, OPST_CONTIGUOUS);
    int64_t *shape = t->t.shape + nd - 2, *str = t->t.strides + nd - 2;
    if (layout == 1) {
      shape[1] = rc[1];
    } else {
      const int64_t s0 = str[0];
      shape[0] = rc[0], shape[1] = rc[1];
      str[0] = str[1], str[1] = s0;
    }
    return;
  }
  opst_alloc(t, &g_rng, dt, nd, s, layout == 0 ? OPST_CONTIGUOUS : OPST_STRIDED);
  for (int tries = 0; layout == 5 && rows > 1 && cols > 1; ++tries) {
    const int64_t *st = t->t.strides + nd - 2;
    if (st[0] != 1 && st[1] != 1) break;
    assert_true(tries < 1000);
    opst_free(t);
    opst_alloc(t, &g_rng, dt, nd, s, OPST_STRIDED);
  }
}

static const int64_t kGemmK[] = {1, 7, 8, 16, 40, 63, 64, 72, 100, 128, 200, 256, 520, 1000, 1024};

/* One GEMM case: its shape and layouts (alloc_mat's), and what the epilogue holds. */
typedef struct gemm_spec {
  int32_t dt, ddt;
  int64_t batch, m, n, k;
  int bcast;      /* with a batch: 1 A is 2-D, 2 B is 2-D */
  int la, lb, ld; /* alloc_mat layouts; 4 (A only): a [1, K] row read at a stride of 2 */
  int epi, all;   /* a random epilogue; all of its operands */
  int32_t act;    /* with epi: this activation (0: a random one) */
} gemm_spec;

static void gemm_run_spec(const gemm_spec *sp, int iter) {
  opst_rng *r = &g_rng;
  const int32_t dt = sp->dt, ddt = sp->ddt;
  const int64_t batch = sp->batch, m = sp->m, n = sp->n, k = sp->k;
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_GEMM;
  c.run = run_gemm;
  ops_gemm_params_init(&c.gemm);
  opst_tensor a, b, cc, bias, res, d;
  if (sp->la == 4) { /* A [1, K] as every other element of a row of 2 K */
    alloc_mat(&a, dt, sp->bcast == 1 ? 0 : batch, m, 2 * k, 0);
    a.t.shape[a.t.ndim - 1] = k;
    a.t.strides[a.t.ndim - 1] = 2;
  } else {
    alloc_mat(&a, dt, sp->bcast == 1 ? 0 : batch, m, k, sp->la);
  }
  alloc_mat(&b, dt, sp->bcast == 2 ? 0 : batch, k, n, sp->lb);
  /* A in [-1, 1) / sqrt(K): the products' sums stay O(1) whatever K, as after a norm layer.
   * Unscaled, a sum of K terms is O(sqrt K) and its f32 rounding (~1e-6 relative) passes
   * through a periodic or steep activation (sin, tanh) as absolute error on an output of
   * |y| <= 1: an f32 FFMA case with sin at K = 1024 missed the 1e-5 bound by 1.4x, the
   * bound being right for the output and wrong for the amplified input. */
  const double amp = 1.0 / sqrt((double)(k > 0 ? k : 1));
  opst_fill_uniform(&a, r, -amp, amp);
  opst_fill_uniform(&b, r, -1, 1);
  add_tensor(&c, &a, IN, -1);
  add_tensor(&c, &b, IN, -1);
  const int has_c = sp->epi && (sp->all || opst_chance(r, 0.4));
  const int has_bias = sp->epi && (sp->all || opst_chance(r, 0.6));
  const int has_res = sp->epi && (sp->all || opst_chance(r, 0.4));
  const int in_place = (has_c || has_res) && sp->ld == 0 && opst_chance(r, 0.3);
  if (sp->epi) {
    c.gemm.alpha = opst_chance(r, 0.5) ? 1.0f : (float)opst_uniform(r, -2, 2);
    c.gemm.activation = opst_chance(r, 0.3) ? OPS_ACT_NONE : (int32_t)opst_int(r, 1, OPS_ACT_SIN);
    if (c.gemm.activation == OPS_ACT_EXP) c.gemm.activation = OPS_ACT_GELU_ERF; /* exp(sum of K terms) overflows */
    if (sp->act != 0) c.gemm.activation = sp->act;
  }
  if (has_c) {
    c.gemm.beta = (float)opst_uniform(r, -1, 1);
    alloc_mat(&cc, ddt, batch, m, n, 0);
    opst_fill_uniform(&cc, r, -1, 1);
    add_tensor(&c, &cc, IN, -1);
  } else {
    add_absent(&c);
  }
  if (has_bias) {
    const int per_row = opst_chance(r, 0.3);
    const int64_t bs[2] = {m, 1};
    if (per_row) opst_alloc(&bias, r, ddt, 2, bs, OPST_CONTIGUOUS);
    else opst_alloc(&bias, r, ddt, 1, &n, opst_chance(r, 0.8) ? OPST_CONTIGUOUS : OPST_STRIDED);
    opst_fill_uniform(&bias, r, -1, 1);
    add_tensor(&c, &bias, IN, -1);
  } else {
    add_absent(&c);
  }
  if (has_res) {
    alloc_mat(&res, ddt, batch, m, n, 0);
    opst_fill_uniform(&res, r, -1, 1);
    add_tensor(&c, &res, IN, -1);
  } else {
    add_absent(&c);
  }
  const int alias = in_place ? (has_c ? 2 : 4) : -1;
  if (in_place) clone_tensor(&d, has_c ? &cc : &res);
  else alloc_mat(&d, ddt, batch, m, n, sp->ld);
  add_tensor(&c, &d, OUT, alias);
  char label[200];
  snprintf(label, sizeof label,
           "gemm case %d %s->%s batch %lld%s %lld x %lld x %lld, layouts a%d b%d d%d, alpha %g%s%s act %d%s%s",
           iter, ops_dtype_name((ops_dtype)dt), ops_dtype_name((ops_dtype)ddt), (long long)batch,
           sp->bcast == 1 ? " (a 2-D)" : sp->bcast == 2 ? " (b 2-D)" : "", (long long)m, (long long)n, (long long)k,
           sp->la, sp->lb, sp->ld, (double)c.gemm.alpha, has_c ? " +beta C" : "", has_bias ? " +bias" : "",
           (int)c.gemm.activation, has_res ? " +residual" : "", in_place ? " in place" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

/* f32 outputs and f32 inputs are held to 1e-5: keep their sums of f32 roundings short. */
static void gemm_pick_dtypes(gemm_spec *sp) {
  sp->dt = kDtypes[opst_int(&g_rng, 0, 2)];
  sp->ddt = sp->dt != OPS_DTYPE_F32 && sp->k <= 2048 && opst_chance(&g_rng, 0.2) ? OPS_DTYPE_F32 : sp->dt;
  if ((sp->dt == OPS_DTYPE_F32 || sp->ddt == OPS_DTYPE_F32) && sp->k > 2048) sp->k = 2048 - (sp->k % 7);
}

static void gemm_case(int iter) {
  opst_rng *r = &g_rng;
  gemm_spec sp;
  memset(&sp, 0, sizeof sp);
  const int shape_kind = iter % 4;
  if (shape_kind == 0) { /* long K: the accumulation over many K blocks */
    sp.m = opst_int(r, 1, 48), sp.n = opst_int(r, 1, 48);
    sp.k = opst_chance(r, 0.5) ? 16384 : 4096 + 8 * opst_int(r, 0, 64) + (opst_chance(r, 0.3) ? 3 : 0);
  } else if (shape_kind == 1) { /* whole and partial 128 x 256 tiles */
    sp.m = 128 * opst_int(r, 1, 2) + (opst_chance(r, 0.5) ? opst_int(r, 1, 100) : 0);
    sp.n = 256 * opst_int(r, 1, 2) + (opst_chance(r, 0.5) ? opst_int(r, 1, 200) : 0);
    sp.k = kGemmK[opst_int(r, 4, 10)];
  } else if (shape_kind == 2) { /* skinny */
    sp.m = opst_int(r, 2, 64), sp.n = opst_int(r, 1, 700);
    sp.k = kGemmK[opst_int(r, 0, 14)] + (opst_chance(r, 0.2) ? 2048 : 0);
  } else {
    sp.m = opst_int(r, 1, 300), sp.n = opst_int(r, 1, 300), sp.k = kGemmK[opst_int(r, 0, 14)];
  }
  sp.batch = iter % 5 == 4 || opst_chance(r, 0.15) ? opst_int(r, 2, 3) : 0;
  sp.bcast = sp.batch > 0 ? (int)opst_int(r, 0, 2) : 0;
  gemm_pick_dtypes(&sp);
  /* two cases in three are what the Hopper kernels take (A row-major with 16-byte rows, B
   * K-major or row-major, D row-major), the third any layout */
  const int fast = iter % 3 != 2;
  sp.epi = iter % 2 == 1, sp.all = iter % 4 == 3;
  if (fast && sp.all && iter % 8 == 3 && sp.dt == OPS_DTYPE_F32) {
    /* some whole epilogues (C, bias, residual) on every 16-bit kernel, whatever the draw */
    sp.dt = sp.ddt = iter % 16 == 3 ? OPS_DTYPE_BF16 : OPS_DTYPE_F16;
  }
  if (!fast && iter % 9 == 8) { /* f32 at random strides: the FFMA kernel's strided reads */
    sp.dt = sp.ddt = OPS_DTYPE_F32;
    if (sp.k > 2048) sp.k = 2048 - (sp.k % 7);
  }
  if (fast && sp.dt != OPS_DTYPE_F32) sp.k = (sp.k + 7) / 8 * 8;
  sp.la = fast ? 0 : (int)opst_int(r, 0, 3);
  sp.lb = fast ? (iter % 2 == 0 ? 2 : 0) : (int)opst_int(r, 0, 3);
  sp.ld = fast ? 0 : (int)opst_int(r, 0, 3);
  if (!fast && iter % 9 == 8) sp.la = 3;
  if (iter == 5) { /* whatever the draws: a 16-bit GEMM whose A is strided both ways (mma.sync, any layout) */
    sp.dt = sp.ddt = OPS_DTYPE_BF16;
    sp.la = 5;
  }
  /* an N-major B's rows are 16-byte multiples only when N is a multiple of 8 */
  if (fast && sp.lb == 0 && sp.dt != OPS_DTYPE_F32) sp.n = (sp.n + 7) / 8 * 8;
  gemm_run_spec(&sp, iter);
}

/* Matrix-vector shapes: N == 1 (B a column: contiguous, or every 9th element of a padded
 * matrix's column) and M == 1 (A a row: contiguous or at a stride of 2; B K-major), each
 * with and without a batch and the whole epilogue. */
static void gemv_case(int iter) {
  opst_rng *r = &g_rng;
  gemm_spec sp;
  memset(&sp, 0, sizeof sp);
  const int by_rows = iter % 2 == 0, strided = (iter / 2) % 2 == 1;
  sp.k = opst_chance(r, 0.5) ? 8 * opst_int(r, 1, 600) : opst_int(r, 1, 5000);
  sp.m = by_rows ? opst_int(r, 1, 3000) : 1;
  sp.n = by_rows ? 1 : opst_int(r, 1, 3000);
  sp.batch = (iter / 4) % 2 == 1 ? opst_int(r, 2, 3) : 0;
  sp.bcast = sp.batch > 0 ? (int)opst_int(r, 0, 2) : 0;
  gemm_pick_dtypes(&sp);
  sp.la = by_rows ? (int)opst_int(r, 0, 1) : strided ? 4 : 0;
  sp.lb = by_rows ? (strided ? 1 : 0) : 2;
  sp.ld = 0;
  sp.epi = (iter / 8) % 2 == 1, sp.all = sp.epi;
  gemm_run_spec(&sp, iter);
}

void gemm(void **state) {
  (void)state;
  for (int i = 0; i < 60; ++i) gemm_case(i);
  for (int i = 0; i < 16; ++i) gemv_case(i);
}

/* f32 GEMMs with the handle allowing tf32: the tf32 kernel runs (strict ones still may, and
 * are held to the same bound). A row-major with 16-byte rows (K a multiple of 4, now and
 * then not: the tf32 kernel must refuse, writing nothing), B K-major or N-major, K tails
 * inside a step, every epilogue, batches. */
void gemm_tf32(void **state) {
  (void)state;
  opst_rng *r = &g_rng;
  OPST_OK(ops_handle_set_math_mode(g_gpu, OPS_MATH_ALLOW_TF32));
  g_tf32 = 1;
  for (int iter = 0; iter < 16; ++iter) {
    gemm_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.dt = OPS_DTYPE_F32;
    sp.ddt = OPS_DTYPE_F32; /* f32 inputs give f32 outputs */
    if (iter % 3 == 0) {
      sp.m = 128 * opst_int(r, 1, 2) + opst_int(r, 0, 100), sp.n = 128 * opst_int(r, 1, 2) + opst_int(r, 0, 100);
    } else {
      sp.m = opst_int(r, 1, 200), sp.n = opst_int(r, 1, 300);
    }
    sp.k = 4 * opst_int(r, 1, 300) + (iter % 8 == 5 ? 1 : 0); /* K odd: rows not 16-byte multiples */
    sp.batch = iter % 4 == 1 ? opst_int(r, 2, 3) : 0;
    sp.bcast = sp.batch > 0 ? (int)opst_int(r, 0, 2) : 0;
    sp.la = 0, sp.lb = iter % 2 == 0 ? 2 : 0, sp.ld = iter % 5 == 4 ? 1 : 0;
    if (sp.lb == 0) sp.n = (sp.n + 3) / 4 * 4; /* an N-major B's rows: 16-byte multiples too */
    sp.epi = iter % 2 == 1, sp.all = iter % 4 == 3;
    gemm_run_spec(&sp, iter);
  }
  g_tf32 = 0;
  OPST_OK(ops_handle_set_math_mode(g_gpu, OPS_MATH_STRICT));
}

/* More tiles than SMs: each persistent CTA of the Hopper kernels walks several tiles, the
 * stage ring carried across them, whole tiles (register epilogue) and partial ones (the
 * staged epilogue, or TMA stores when plain) following each other with a short K between
 * them. N = 2100: D's rows are not 16-byte multiples and the threads store D; N = 2104: D
 * is stored by TMA from the buffers that the partial tiles' staged epilogue shares, and the
 * last tile row's second half lies wholly past M (2100 = 16 x 128 + 52): its stores are
 * skipped. The fused variants take each narrow epilogue mode: a column bias + activation
 * (the bias loaded before the mainloop), the activation alone; bf16 and f16. Then a batch of
 * 3 with every epilogue operand (the general mode; D rows padded by 8: TMA stores at a row
 * stride that is not N, one map a batch). */
void gemm_many_tiles(void **state) {
  (void)state;
  opst_rng *r = &g_rng;
  static const struct {
    int64_t n;
    int bias;
    int32_t act, dt;
  } kVariants[] = {
      {2100, 0, OPS_ACT_NONE, OPS_DTYPE_BF16},      {2100, 1, OPS_ACT_GELU_TANH, OPS_DTYPE_BF16},
      {2104, 0, OPS_ACT_NONE, OPS_DTYPE_BF16},      {2104, 1, OPS_ACT_GELU_TANH, OPS_DTYPE_BF16},
      {2104, 0, OPS_ACT_SILU, OPS_DTYPE_F16},       {2104, 1, OPS_ACT_GELU_ERF, OPS_DTYPE_F16},
  };
  for (size_t v = 0; v < sizeof kVariants / sizeof kVariants[0]; ++v) {
    const int32_t dt = kVariants[v].dt;
    gcall c;
    memset(&c, 0, sizeof c);
    c.op = OPS_OP_GEMM;
    c.run = run_gemm;
    ops_gemm_params_init(&c.gemm);
    const int64_t m = 2100, n = kVariants[v].n, k = 40;
    opst_tensor a, b, bias, d;
    alloc_mat(&a, dt, 0, m, k, 0);
    alloc_mat(&b, dt, 0, k, n, 2);
    opst_fill_uniform(&a, r, -1, 1);
    opst_fill_uniform(&b, r, -1, 1);
    add_tensor(&c, &a, IN, -1);
    add_tensor(&c, &b, IN, -1);
    add_absent(&c);
    if (kVariants[v].bias) {
      opst_alloc(&bias, r, dt, 1, &n, OPST_CONTIGUOUS);
      opst_fill_uniform(&bias, r, -1, 1);
      add_tensor(&c, &bias, IN, -1);
    } else {
      add_absent(&c);
    }
    c.gemm.activation = kVariants[v].act;
    add_absent(&c);
    alloc_mat(&d, dt, 0, m, n, 0);
    add_tensor(&c, &d, OUT, -1);
    char label[120];
    snprintf(label, sizeof label, "gemm %s 2100 x %lld x 40%s, act %d (153 or more tiles of 128 x 128 / 128 x 256)",
             ops_dtype_name((ops_dtype)dt), (long long)n, kVariants[v].bias ? " + bias" : "", (int)c.gemm.activation);
    c.label = label;
    check_call(&c);
    free_call(&c);
  }
  gemm_spec sp;
  memset(&sp, 0, sizeof sp);
  sp.dt = sp.ddt = OPS_DTYPE_F16;
  sp.batch = 3, sp.m = 300, sp.n = 520, sp.k = 72;
  sp.la = 0, sp.lb = 2, sp.ld = 1;
  sp.epi = 1, sp.all = 1, sp.act = OPS_ACT_GELU_TANH;
  gemm_run_spec(&sp, 0);
}

/* The plan a pinned Hopper row's launch reports (its profiler record) is the one explain
 * predicts for the call, and names `words`: the K split, one consumer warpgroup a tile, or the
 * two 64-row consumers. */
static void launch_plan_is_explains(const char *row, const ops_tensor *a, const ops_tensor *b, const ops_tensor *d,
                                    const char *words) {
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  plan_seen seen;
  memset(&seen, 0, sizeof seen);
  OPST_OK(ops_handle_set_profiler(h, on_plan, &seen));
  OPST_OK(ops_handle_pin_kernel(h, row));
  ops_explain e;
  e.struct_size = sizeof e;
  OPST_OK(ops_gemm_explain(h, NULL, a, b, d, &e));
  assert_true(e.chosen >= 0);
  assert_non_null(e.plan[e.chosen]);
  OPST_OK(ops_gemm(h, NULL, a, b, d, NULL, 0));
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(seen.records, 1);
  assert_string_equal(seen.kernel, row);
  if (strcmp(seen.plan, e.plan[e.chosen]) != 0 || strstr(seen.plan, words) == NULL) {
    print_error("%s, M %lld: explain predicts '%s', the launch reports '%s' (expected '%s')\n", row,
                (long long)a->shape[0], e.plan[e.chosen], seen.plan, words);
    fail();
  }
  printf("[ PLAN     ] %s, M %lld: %s\n", row, (long long)a->shape[0], seen.plan);
  ops_handle_destroy(h);
}

/* A split row, pinned, on one call: explain's plan is a K split with no workspace, and five
 * runs into a poisoned D give bitwise identical results. Returns explain's status (a row
 * that does not run here is no failure: the caller reports the skip). */
static ops_status split_runs_identical(const char *row, const ops_tensor *a, const ops_tensor *b,
                                       const ops_tensor *d, ops_explain *e) {
  OPST_OK(ops_handle_pin_kernel(g_gpu, row));
  const ops_status st = ops_gemm_explain(g_gpu, NULL, a, b, d, e);
  if (st != OPS_OK || e->chosen < 0) return st;
  assert_non_null(e->plan[e->chosen]);
  assert_non_null(strstr(e->plan[e->chosen], "K split in"));
  size_t wsb = 1;
  OPST_OK(ops_gemm_workspace_size(g_gpu, NULL, a, b, d, &wsb));
  assert_int_equal(wsb, 0); /* the parts meet in a cluster's shared memory */
  const size_t nd = (size_t)(d->shape[0] * d->shape[1]);
  uint16_t *out = malloc(2 * nd * sizeof *out);
  assert_non_null(out);
  for (int run = 0; run < 5; ++run) {
    CUDA_OK(cudaMemset(d->data, 0xff, nd * 2));
    OPST_OK(ops_gemm(g_gpu, NULL, a, b, d, NULL, 0));
    CUDA_OK(cudaMemcpy(run == 0 ? out : out + nd, d->data, nd * 2, cudaMemcpyDeviceToHost));
    if (run > 0 && memcmp(out, out + nd, nd * 2) != 0) {
      print_error("%s %lld x %lld x %lld: run %d differs from run 0\n", row, (long long)a->shape[0],
                  (long long)d->shape[1], (long long)a->shape[1], run);
      fail();
    }
  }
  free(out);
  printf("[ SPLIT-K  ] %s %lld x %lld x %lld bf16: %s, 5 runs bitwise identical\n", row, (long long)a->shape[0],
         (long long)d->shape[1], (long long)a->shape[1], e->plan[e->chosen]);
  return st;
}

/* Split-K (the cuda_gemm_sm90_*_splitk rows, and every other kernel on the same calls): few
 * output tiles over a long K. One tile row of 16 rows (A's box 16 rows, the second consumer
 * half idle); two tile rows, the second partial (its second half wholly past M), N and K
 * tails; a batch with A broadcast and an f32 D; one tile in many parts; a batch with B
 * K-major (the rows that take only a K-major B, whose batched calls the random cases reach on
 * some seeds only). Whole epilogues on some. Then two split
 * rows (a boxed width and a K-major-only one), pinned, five times each on one call: no
 * workspace, bitwise identical D (the parts are added in rank order); and the Hopper rows'
 * launch plans on that call and a taller one. */
void gemm_split_k(void **state) {
  (void)state;
  static const struct {
    int64_t batch, m, n, k;
    int bcast, epi, lb;
    int32_t dt, ddt;
  } kShapes[] = {
      {0, 16, 4096, 4096, 0, 0, 2, OPS_DTYPE_BF16, OPS_DTYPE_BF16},
      {0, 200, 520, 4104, 0, 1, 2, OPS_DTYPE_F16, OPS_DTYPE_F16},
      {2, 72, 304, 2000, 1, 1, 0, OPS_DTYPE_BF16, OPS_DTYPE_F32},
      {0, 5, 40, 16384, 0, 1, 2, OPS_DTYPE_BF16, OPS_DTYPE_BF16},
      {3, 40, 560, 3000, 0, 0, 2, OPS_DTYPE_BF16, OPS_DTYPE_BF16},
  };
  for (size_t i = 0; i < sizeof kShapes / sizeof kShapes[0]; ++i) {
    gemm_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.batch = kShapes[i].batch, sp.m = kShapes[i].m, sp.n = kShapes[i].n, sp.k = kShapes[i].k;
    sp.bcast = kShapes[i].bcast, sp.epi = sp.all = kShapes[i].epi, sp.lb = kShapes[i].lb;
    sp.dt = kShapes[i].dt, sp.ddt = kShapes[i].ddt;
    gemm_run_spec(&sp, (int)i);
  }
  if (!g_have_cuda) return;
  const int64_t m = 48, n = 1000, k = 8192;
  const size_t na = (size_t)(m * k), nb = (size_t)(k * n), nd = (size_t)(m * n);
  uint16_t *host = malloc((na + nb) * sizeof *host);
  assert_non_null(host);
  for (size_t j = 0; j < na + nb; ++j) {
    const float f = (float)opst_uniform(&g_rng, -1, 1);
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    host[j] = (uint16_t)(bits >> 16); /* bf16 */
  }
  void *a, *b, *d;
  CUDA_OK(cudaMalloc(&a, na * 2));
  CUDA_OK(cudaMalloc(&b, nb * 2));
  CUDA_OK(cudaMalloc(&d, nd * 2));
  CUDA_OK(cudaMemcpy(a, host, na * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, host + na, nb * 2, cudaMemcpyHostToDevice));
  ops_tensor ta, tb, td;
  const ops_device dev = ops_device_cuda(0);
  const int64_t sa[2] = {m, k}, sb[2] = {k, n}, sbs[2] = {1, k}, sd[2] = {m, n};
  OPST_OK(ops_tensor_init(&ta, a, OPS_DTYPE_BF16, dev, 2, sa, NULL));
  OPST_OK(ops_tensor_init(&tb, b, OPS_DTYPE_BF16, dev, 2, sb, sbs));
  OPST_OK(ops_tensor_init(&td, d, OPS_DTYPE_BF16, dev, 2, sd, NULL));
  /* 8 tiles of 128 x 128 (9 of 128 x 112), 128 K blocks */
  static const char *const kSplitRows[] = {"cuda_gemm_sm90_128x128_splitk", "cuda_gemm_sm90_128x112_splitk"};
  ops_explain e;
  e.struct_size = sizeof e;
  ops_status st = OPS_OK;
  for (size_t row = 0; row < sizeof kSplitRows / sizeof kSplitRows[0] && st == OPS_OK; ++row) {
    st = split_runs_identical(kSplitRows[row], &ta, &tb, &td, &e);
  }
  if (st == OPS_OK && e.chosen >= 0) {
    /* the same rows' plans as they ran: split; unsplit at M 48 (the first 64-row consumer
     * alone); unsplit at M 200 (a tile a warpgroup; two 64-row consumers at 256 columns) */
    launch_plan_is_explains("cuda_gemm_sm90_128x128_splitk", &ta, &tb, &td, "K split in");
    launch_plan_is_explains("cuda_gemm_sm90_128x128", &ta, &tb, &td, "64 rows alone, the second idle; D stored");
    launch_plan_is_explains("cuda_gemm_sm90_128x112", &ta, &tb, &td, "the second idle; D stored by the threads");
    void *a2, *d2;
    const int64_t m2 = 200, sa2[2] = {m2, k}, sd2[2] = {m2, n};
    CUDA_OK(cudaMalloc(&a2, (size_t)(m2 * k) * 2));
    CUDA_OK(cudaMalloc(&d2, (size_t)(m2 * n) * 2));
    CUDA_OK(cudaMemcpy(a2, host, (size_t)(m2 * k) * 2, cudaMemcpyHostToDevice));
    ops_tensor ta2, td2;
    OPST_OK(ops_tensor_init(&ta2, a2, OPS_DTYPE_BF16, dev, 2, sa2, NULL));
    OPST_OK(ops_tensor_init(&td2, d2, OPS_DTYPE_BF16, dev, 2, sd2, NULL));
    /* both consumer warpgroups' rows live: blocks 0 and 1 of each cluster of 4 own them */
    OPST_OK(split_runs_identical("cuda_gemm_sm90_128x128_splitk", &ta2, &tb, &td2, &e));
    assert_true(e.chosen >= 0); /* the row ran at M 48, so it runs here: no silent skip */
    launch_plan_is_explains("cuda_gemm_sm90_128x128", &ta2, &tb, &td2, "a 128-row tile a consumer warpgroup");
    launch_plan_is_explains("cuda_gemm_sm90_128x64", &ta2, &tb, &td2, "a 128-row tile a consumer warpgroup");
    launch_plan_is_explains("cuda_gemm_sm90_128x256", &ta2, &tb, &td2, "persistent; D stored");
    launch_plan_is_explains("cuda_gemm_sm90_128x96", &ta2, &tb, &td2,
                            "consumer warpgroup, the two in turn; D stored by the threads");
    cudaFree(a2), cudaFree(d2);
  } else {
    printf("[ SKIPPED  ] split-K determinism: the split kernel does not run on this device (%s)\n",
           ops_last_error());
  }
  OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
  cudaFree(a), cudaFree(b), cudaFree(d);
  free(host);
}
