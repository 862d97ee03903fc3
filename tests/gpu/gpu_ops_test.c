/*
 * The CUDA kernels against the CPU reference. Each random problem (random shapes with odd
 * sizes and extents of 1 and 0, random strides and offsets, broadcasting, in-place calls,
 * f32 / f16 / bf16) runs once on the CPU handle, and then on the GPU once per CUDA kernel
 * of its op, pinned by name: a kernel that refuses the problem must fail with
 * OPS_ERR_UNSUPPORTED and write nothing; one that accepts it must write every element of
 * every output (outputs start poisoned), nothing outside the views, and match the
 * reference: relative L2 error and a per-element bound scaled to the output (f32 1e-5,
 * f16 1e-3, bf16 5e-3 in L2). Then the dispatcher's own choice runs unpinned. At the end
 * every CUDA kernel naming this test must have run, with every feature its row claims.
 * Without a CUDA device (CI) it is a dry run: the same problems run on the CPU and are
 * explained on a described H100, and the coverage check asks which kernels would have
 * served them; the GPU-only test is skipped and says why.
 */
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
#include "tests/support/coverage.h"
#include "tests/gpu/cuda_check.h"
#include "tests/support/opst.h"

static int g_have_cuda;
static ops_handle g_cpu, g_gpu;
static opst_rng g_rng;
static int g_runs, g_refusals;

static const int32_t kDtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};

/* ---- one call, run on both backends ----------------------------------------------- */

enum { MAXT = 12 };
enum { IN = 0, OUT = 1, SCRATCH = 2 }; /* SCRATCH: may be written (unfused chains), not checked */

typedef struct gcall gcall;
/* Runs the op on h with the descriptors c->v; with `query`, asks its workspace size instead;
 * with `ex`, explains it instead. */
typedef ops_status (*run_fn)(ops_handle h, gcall *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *ex);

struct gcall {
  int32_t op;
  const char *label;
  int n;
  opst_tensor *h[MAXT];      /* what the GPU sees; an in-place output is a clone of its input */
  int role[MAXT];
  int alias[MAXT];           /* an output in place on input alias[i]; else -1 */
  opst_tensor ref[MAXT];     /* outputs: the CPU's, contiguous */
  const double *scale[MAXT]; /* outputs: per-element error scale; NULL: max |ref| */
  int no_l2[MAXT];           /* outputs whose sums may cancel (reductions): element bound only */
  ops_tensor v[MAXT];
  run_fn run;
  /* op parameters */
  ops_norm_params norm;
  ops_norm_backward_params norm_bwd;
  ops_softmax_params softmax;
  ops_reduce_params reduce;
  ops_sin_affine_params sin;
  ops_unary_params unary;
  ops_binary_params binary;
  ops_scale_params scale_p;
  ops_dropout_params dropout;
  ops_gemm_params gemm;
  ops_sdpa_params sdpa;
  int has[MAXT]; /* optional operands present */
};

static void add_tensor(gcall *c, opst_tensor *t, int role, int alias) {
  assert_true(c->n < MAXT);
  const int i = c->n++;
  c->h[i] = t;
  c->role[i] = role;
  c->alias[i] = alias;
  c->has[i] = 1;
  if (role != IN) {
    opst_alloc(&c->ref[i], &g_rng, t->t.dtype, t->t.ndim, t->t.shape, OPST_CONTIGUOUS);
  }
}

/* A copy of x (buffer and view) for an output in place on x. */
static void clone_tensor(opst_tensor *dst, const opst_tensor *src) {
  *dst = *src;
  dst->buf = malloc(src->bytes ? src->bytes : 1);
  dst->snap = malloc(src->bytes ? src->bytes : 1);
  memcpy(dst->buf, src->buf, src->bytes);
  memcpy(dst->snap, src->buf, src->bytes);
  dst->t.data = dst->buf + ((unsigned char *)src->t.data - src->buf);
}

static ops_tensor relocated(const opst_tensor *x, void *mem) {
  ops_tensor d = x->t;
  d.data = (unsigned char *)mem + ((unsigned char *)x->t.data - x->buf);
  d.device = ops_device_cuda(0);
  return d;
}

/* Set while the GPU handle allows tf32: f32 results are then held to tf32's precision (inputs
 * rounded to 10-bit mantissas: ~5e-4 relative a product). */
static int g_tf32;

static double l2_tol(int32_t dt) {
  if (dt == OPS_DTYPE_F32) return g_tf32 ? 2e-3 : 1e-5;
  return dt == OPS_DTYPE_F16 ? 1e-3 : 5e-3;
}
static double elem_tol(int32_t dt) {
  if (dt == OPS_DTYPE_F32) return g_tf32 ? 4e-3 : 1e-5;
  return dt == OPS_DTYPE_F16 ? 2e-3 : 1.6e-2;
}

/* out vs ref: |o - r| <= tol (|r| + s) per element, s the element's scale or max |ref|,
 * and the relative L2 error; NaN only where the reference has NaN. */
static int compare(const opst_tensor *out, const opst_tensor *ref, const double *scale, int use_l2, char *why,
                   size_t n) {
  const int64_t count = opst_numel(out);
  const int32_t dt = out->t.dtype;
  double max_ref = 0.0, num = 0.0, den = 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const double r = opst_at_flat(ref, i);
    if (isfinite(r) && fabs(r) > max_ref) max_ref = fabs(r);
  }
  for (int64_t i = 0; i < count; ++i) {
    const double o = opst_at_flat(out, i), r = opst_at_flat(ref, i);
    if (isnan(r) || isnan(o) || isinf(r) || isinf(o)) {
      if (!((isnan(r) && isnan(o)) || o == r)) {
        snprintf(why, n, "element %lld: got %g, want %g", (long long)i, o, r);
        return 0;
      }
      continue;
    }
    const double s = scale ? scale[i] : max_ref;
    /* f16 results below 2^-14 are subnormal: their spacing is a fixed 2^-24 */
    const double bound = elem_tol(dt) * (fabs(r) + s) + (dt == OPS_DTYPE_F16 ? 0x1p-24 : 1e-30);
    if (fabs(o - r) > bound) {
      snprintf(why, n, "element %lld: got %.9g, want %.9g (|diff| %.3g > bound %.3g)", (long long)i, o, r,
               fabs(o - r), bound);
      return 0;
    }
    num += (o - r) * (o - r);
    den += scale ? (fabs(r) + s) * (fabs(r) + s) : r * r; /* with scales: relative to what cancelled */
  }
  if (use_l2 && den > 0.0 && sqrt(num / den) > l2_tol(dt)) {
    snprintf(why, n, "relative L2 error %.3g > %.3g", sqrt(num / den), l2_tol(dt));
    return 0;
  }
  return 1;
}

/* One GPU run of c on the current pin; returns 0 when the pinned kernel refused it. */
static int gpu_run(gcall *c, void **mem, const char *kernel) {
  /* fresh inputs, poisoned outputs */
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != IN && c->alias[i] < 0) memcpy(c->h[i]->buf, c->h[i]->snap, c->h[i]->bytes);
  }
  for (int i = 0; i < c->n; ++i) {
    if (c->alias[i] >= 0) continue;
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(mem[i], c->h[i]->buf, c->h[i]->bytes, cudaMemcpyHostToDevice));
    c->v[i] = relocated(c->h[i], mem[i]);
  }
  for (int i = 0; i < c->n; ++i) {
    if (c->alias[i] >= 0) c->v[i] = relocated(c->h[i], mem[c->alias[i]]);
  }
  size_t ws = 0;
  ops_status st = c->run(g_gpu, c, NULL, 0, &ws, NULL);
  if (st == OPS_ERR_UNSUPPORTED && kernel != NULL) {
    /* refused: the message names the kernel's reason, and the call itself writes nothing */
    if (c->op != OPS_OP_EW_CHAIN) assert_non_null(strstr(ops_last_error(), kernel));
    assert_int_equal(c->run(g_gpu, c, NULL, 0, NULL, NULL), OPS_ERR_UNSUPPORTED);
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < c->n; ++i) {
      if (c->role[i] == IN || c->alias[i] >= 0 || c->h[i]->bytes == 0) continue;
      CUDA_OK(cudaMemcpy(c->h[i]->buf, mem[i], c->h[i]->bytes, cudaMemcpyDeviceToHost));
      assert_true(opst_untouched(c->h[i]));
    }
    ++g_refusals;
    return 0;
  }
  if (st != OPS_OK) {
    print_error("%s [%s]: workspace query: %s: %s\n", c->label, kernel ? kernel : "dispatcher", ops_status_name(st),
                ops_last_error());
    fail();
  }
  void *dws = NULL;
  if (ws > 0) {
    CUDA_OK(cudaMalloc(&dws, ws));
    CUDA_OK(cudaMemset(dws, 0xFF, ws)); /* NaN-filled: a kernel that reads before writing shows it */
  }
  st = c->run(g_gpu, c, dws, ws, NULL, NULL);
  if (st != OPS_OK) {
    print_error("%s [%s]: %s: %s\n", c->label, kernel ? kernel : "dispatcher", ops_status_name(st), ops_last_error());
    fail();
  }
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaGetLastError());
  cudaFree(dws);
  char why[256];
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != OUT) continue;
    void *src = c->alias[i] >= 0 ? mem[c->alias[i]] : mem[i];
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(c->h[i]->buf, src, c->h[i]->bytes, cudaMemcpyDeviceToHost));
    if ((c->alias[i] < 0 && !opst_fully_written(c->h[i], why, sizeof why)) ||
        !compare(c->h[i], &c->ref[i], c->scale[i], !c->no_l2[i], why, sizeof why)) {
      print_error("%s [%s], output %d: %s\n", c->label, kernel ? kernel : "dispatcher's choice", i, why);
      fail();
    }
  }
  ++g_runs;
  return 1;
}

static int is_contiguous(const ops_tensor *t) { return ops_tensor_is_contiguous(t); }

/* Without a device: which CUDA kernels would accept c on a described H100 (explain on a
 * virtual handle), noted for the coverage check; nothing runs on a GPU. */
static void dry_call(gcall *c) {
  for (int i = 0; i < c->n; ++i) {
    c->v[i] = relocated(c->h[i], c->alias[i] >= 0 ? c->h[c->alias[i]]->buf : c->h[i]->buf);
  }
  ops_explain e;
  e.struct_size = sizeof e;
  if (c->op != OPS_OP_EW_CHAIN) {
    OPST_OK(c->run(g_gpu, c, NULL, 0, NULL, &e));
    if (e.chosen < 0) {
      print_error("%s: no CUDA kernel would accept it: %s\n", c->label, e.problem);
      fail();
    }
    for (int k = 0; k < e.count; ++k) {
      if (e.verdicts[k].reason == OPS_REASON_ELIGIBLE) opst_coverage_note(e.verdicts[k].kernel_name, e.problem);
    }
    return;
  }
  /* chains: each chain kernel pinned in turn; the features as the dispatcher derives them */
  const ops_tensor *y = &c->v[4], *b = &c->v[2];
  int bcast = b->ndim != y->ndim;
  for (int d = 0; !bcast && d < y->ndim; ++d) bcast = b->shape[d] != y->shape[d];
  const int strided = !is_contiguous(&c->v[0]) || !is_contiguous(b) || !is_contiguous(y);
  char problem[64];
  snprintf(problem, sizeof problem, "ew_chain [%s%s%s]", bcast ? "broadcast" : "", bcast && strided ? ", " : "",
           strided ? "strided" : "");
  for (int k = 0; k < ops_kernel_count(); ++k) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    OPST_OK(ops_kernel_info_at(k, &info));
    if (info.op != c->op || info.backend != OPS_DEVICE_CUDA) continue;
    OPST_OK(ops_handle_pin_kernel(g_gpu, info.name));
    OPST_OK(c->run(g_gpu, c, NULL, 0, NULL, &e));
    if (e.chosen >= 0) opst_coverage_note(info.name, problem);
  }
  OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
}

/* The CPU reference, then every CUDA kernel of the op pinned, then the dispatcher's pick. */
static void check_call(gcall *c) {
  for (int i = 0; i < c->n; ++i) c->v[i] = c->role[i] == IN ? c->h[i]->t : c->ref[i].t;
  size_t ws = 0;
  OPST_OK(c->run(g_cpu, c, NULL, 0, &ws, NULL));
  void *hws = opst_workspace(ws);
  OPST_OK(c->run(g_cpu, c, hws, ws, NULL, NULL));
  free(hws);
  if (!g_have_cuda) {
    dry_call(c);
    return;
  }

  void *mem[MAXT] = {0};
  for (int i = 0; i < c->n; ++i) {
    if (c->alias[i] < 0 && c->h[i]->bytes > 0) CUDA_OK(cudaMalloc(&mem[i], c->h[i]->bytes));
  }
  int ran = 0;
  for (int k = 0; k < ops_kernel_count(); ++k) {
    ops_kernel_info info;
    info.struct_size = sizeof info;
    OPST_OK(ops_kernel_info_at(k, &info));
    if (info.op != c->op || info.backend != OPS_DEVICE_CUDA) continue;
    OPST_OK(ops_handle_pin_kernel(g_gpu, info.name));
    ran += gpu_run(c, mem, info.name);
  }
  OPST_OK(ops_handle_pin_kernel(g_gpu, NULL));
  if (ran == 0) {
    print_error("%s: no CUDA kernel accepted it\n", c->label);
    fail();
  }
  assert_int_equal(gpu_run(c, mem, NULL), 1);
  for (int i = 0; i < c->n; ++i) cudaFree(mem[i]);
}

/* Frees the call's references and every tensor the case handed it (add_tensor). */
static void free_call(gcall *c) {
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != IN) opst_free(&c->ref[i]);
    if (c->has[i]) opst_free(c->h[i]);
  }
}

/* ---- random shapes ----------------------------------------------------------------- */

/* `nd` leading extents whose product stays <= cap; now and then an extent of 0. */
static void lead_shape(opst_rng *r, int nd, int64_t cap, int64_t *s) {
  int64_t left = cap < 1 ? 1 : cap;
  for (int i = 0; i < nd; ++i) {
    s[i] = opst_int(r, 1, left < 1 ? 1 : (left < 40 ? left : 40));
    if (i == nd - 1 && opst_chance(r, 0.5)) s[i] = opst_int(r, 1, left);
    left /= s[i];
  }
  if (nd > 0 && opst_chance(r, 0.03)) s[opst_int(r, 0, nd - 1)] = 0;
}

static const int64_t kCols[] = {1, 3, 8, 17, 64, 100, 256, 1000, 1024, 1032, 2048,
                                4096, 4104, 8192, 8200, 12000, 16384, 16392, 40000};

static int64_t pick_cols(opst_rng *r) { return kCols[opst_int(r, 0, (int64_t)(sizeof kCols / sizeof kCols[0]) - 1)]; }

/* The case's layouts: 0 contiguous (the vec16 kernels' case), 1 rows padded by 8 elements
 * (aligned, not contiguous), 2 each tensor contiguous or randomly strided, 3 every other
 * element of the last axis (a stride of 2: the scalar kernels' case). */
static int g_layout;

static void pick_layout(void) {
  const double u = opst_uniform(&g_rng, 0, 1);
  g_layout = u < 0.4 ? 0 : u < 0.55 ? 1 : u < 0.8 ? 2 : 3;
}

static void alloc_x(opst_tensor *t, int32_t dt, int nd, const int64_t *s) {
  if ((g_layout == 1 || g_layout == 3) && nd > 0) {
    int64_t wide[OPS_MAX_DIMS];
    memcpy(wide, s, (size_t)nd * sizeof s[0]);
    wide[nd - 1] = g_layout == 1 ? s[nd - 1] + 8 : 2 * s[nd - 1];
    opst_alloc(t, &g_rng, dt, nd, wide, OPST_CONTIGUOUS);
    t->t.shape[nd - 1] = s[nd - 1]; /* the view: part of each wide row */
    if (g_layout == 3) t->t.strides[nd - 1] = 2;
    return;
  }
  const int contiguous = g_layout == 0 || opst_chance(&g_rng, 0.5);
  opst_alloc(t, &g_rng, dt, nd, s, contiguous ? OPST_CONTIGUOUS : OPST_STRIDED);
}

/* ---- row-wise ops: LayerNorm, RMSNorm, softmax, forward --------------------------- */

static ops_status run_norm(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 x, 1 weight, 2 y, then optional: 3 bias, 4 residual, 5 residual_out, 6 mean, 7 rstd */
  ops_norm_params p = c->norm;
  p.bias = c->has[3] ? &c->v[3] : NULL;
  p.residual = c->has[4] ? &c->v[4] : NULL;
  p.residual_out = c->has[5] ? &c->v[5] : NULL;
  p.mean_out = c->has[6] ? &c->v[6] : NULL;
  p.rstd_out = c->has[7] ? &c->v[7] : NULL;
  if (ex) {
    return c->op == OPS_OP_LAYERNORM ? ops_layernorm_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], ex)
                                     : ops_rmsnorm_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], ex);
  }
  if (c->op == OPS_OP_LAYERNORM) {
    return q ? ops_layernorm_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], q)
             : ops_layernorm(h, &p, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
  }
  return q ? ops_rmsnorm_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], q)
           : ops_rmsnorm(h, &p, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
}

static ops_status run_softmax(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  if (ex) return ops_softmax_explain(h, &c->softmax, &c->v[0], &c->v[1], ex);
  return q ? ops_softmax_workspace_size(h, &c->softmax, &c->v[0], &c->v[1], q)
           : ops_softmax(h, &c->softmax, &c->v[0], &c->v[1], ws, wsb);
}

/* Placeholder slots keep the tensor indices of run_norm fixed. */
static opst_tensor g_none;
static void add_absent(gcall *c) {
  c->h[c->n] = &g_none;
  c->role[c->n] = IN;
  c->alias[c->n] = -1;
  c->has[c->n] = 0;
  ++c->n;
}

static const int64_t kSmallCols[] = {1, 8, 17, 64, 100, 256, 1000, 1024};

/* Half the cases have rows a warp holds; half have every optional operand. */
static int64_t pick_case_cols(opst_rng *r, int iter) {
  return (iter / 3) % 2 == 0 ? kSmallCols[opst_int(r, 0, 7)] : pick_cols(r);
}

/* A row case's shape into s: 0..3 leading extents, at most `cells` / cols (and `max_rows`)
 * rows in all, then cols. Returns the number of leading axes. */
static int row_case_shape(opst_rng *r, int64_t cols, int64_t cells, int64_t max_rows, int64_t *s) {
  const int nd = (int)opst_int(r, 0, 3);
  const int64_t fit = cells / cols;
  lead_shape(r, nd, fit > 1 ? (fit < max_rows ? fit : max_rows) : 1, s);
  s[nd] = cols;
  return nd;
}

static void rows_forward_case(int iter) {
  opst_rng *r = &g_rng;
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  const int kind = iter % 3; /* layernorm, rmsnorm, softmax */
  /* four norm cases in twelve have every optional operand on 16-byte rows whatever the draws
   * (feature coverage must not depend on the seed): rows a warp holds, a block holds, or
   * split across blocks */
  const int full_vec = iter % 12 == 0 || iter % 12 == 1 || iter % 12 == 3 || iter % 12 == 4;
  const int64_t cols = !full_vec ? pick_case_cols(r, iter)
                       : iter % 12 < 2 ? 64 << opst_int(r, 0, 4)
                                       : iter % 24 < 12 ? 4096 : 32768;
  const int all = full_vec || opst_chance(r, 0.5);
  pick_layout();
  if (full_vec) g_layout = 0;
  int64_t s[4];
  const int nd = row_case_shape(r, cols, 300000, 257, s);
  gcall c;
  memset(&c, 0, sizeof c);
  char label[160];
  opst_tensor x, w, y, b, res, res_out, mean, rstd;
  alloc_x(&x, dt, nd + 1, s);
  opst_fill_uniform(&x, r, -3, 3);
  if (kind == 2 && opst_chance(r, 0.2)) { /* -inf entries, sometimes a whole row */
    const int64_t n = opst_numel(&x);
    const int whole = opst_chance(r, 0.5);
    for (int64_t i = 0; i < n; ++i) {
      if ((whole && i < cols) || opst_chance(r, 0.05)) opst_set_flat(&x, i, -INFINITY);
    }
    opst_snapshot(&x);
  } else if (kind == 0 && opst_chance(r, 0.3)) { /* a large common offset: the centring must hold */
    const int64_t n = opst_numel(&x);
    for (int64_t i = 0; i < n; ++i) opst_set_flat(&x, i, opst_at_flat(&x, i) + 40.0);
    opst_snapshot(&x);
  }
  const int in_place = opst_chance(r, 0.25);
  if (kind == 2) {
    c.op = OPS_OP_SOFTMAX;
    c.run = run_softmax;
    ops_softmax_params_init(&c.softmax);
    c.softmax.scale = (float)opst_uniform(r, 0.1, 2.0);
    add_tensor(&c, &x, IN, -1);
    if (in_place) clone_tensor(&y, &x);
    else alloc_x(&y, dt, nd + 1, s);
    add_tensor(&c, &y, OUT, in_place ? 0 : -1);
    snprintf(label, sizeof label, "softmax case %d %s %lld rows x %lld%s", iter, ops_dtype_name((ops_dtype)dt),
             (long long)(opst_numel(&x) / cols), (long long)cols, in_place ? " in place" : "");
  } else {
    c.op = kind == 0 ? OPS_OP_LAYERNORM : OPS_OP_RMSNORM;
    c.run = run_norm;
    ops_norm_params_init(&c.norm);
    c.norm.eps = opst_chance(r, 0.5) ? 1e-5f : 1e-2f;
    const int32_t wdt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
    alloc_x(&w, wdt, 1, &cols);
    opst_fill_uniform(&w, r, 0.5, 1.5);
    add_tensor(&c, &x, IN, -1);
    add_tensor(&c, &w, IN, -1);
    if (in_place) clone_tensor(&y, &x);
    else alloc_x(&y, dt, nd + 1, s);
    add_tensor(&c, &y, OUT, in_place ? 0 : -1);
    const int has_b = all || opst_chance(r, 0.5), has_res = all || opst_chance(r, 0.4);
    const int has_ro = has_res && (all || opst_chance(r, 0.6)), ro_in_place = has_ro && opst_chance(r, 0.3);
    const int has_mean = kind == 0 && (all || opst_chance(r, 0.4)), has_rstd = all || opst_chance(r, 0.4);
    if (has_b) {
      alloc_x(&b, wdt, 1, &cols);
      opst_fill_uniform(&b, r, -1, 1);
      add_tensor(&c, &b, IN, -1);
    } else {
      add_absent(&c);
    }
    if (has_res) {
      alloc_x(&res, dt, nd + 1, s);
      opst_fill_uniform(&res, r, -1, 1);
      add_tensor(&c, &res, IN, -1);
    } else {
      add_absent(&c);
    }
    if (has_ro) {
      if (ro_in_place) clone_tensor(&res_out, &res);
      else alloc_x(&res_out, dt, nd + 1, s);
      add_tensor(&c, &res_out, OUT, ro_in_place ? 4 : -1);
    } else {
      add_absent(&c);
    }
    if (has_mean) {
      opst_alloc_any(&mean, r, OPS_DTYPE_F32, nd, s);
      add_tensor(&c, &mean, OUT, -1);
    } else {
      add_absent(&c);
    }
    if (has_rstd) {
      opst_alloc_any(&rstd, r, OPS_DTYPE_F32, nd, s);
      add_tensor(&c, &rstd, OUT, -1);
    } else {
      add_absent(&c);
    }
    snprintf(label, sizeof label, "%s case %d %s %lld rows x %lld%s%s%s%s%s", kind ? "rmsnorm" : "layernorm", iter,
             ops_dtype_name((ops_dtype)dt), (long long)(opst_numel(&x) / cols), (long long)cols,
             in_place ? " in place" : "", has_b ? " bias" : "", has_res ? " residual" : "",
             has_ro ? (ro_in_place ? " residual_out(in place)" : " residual_out") : "",
             has_mean || has_rstd ? " stats" : "");
  }
  /* Error scales of the norm outputs, per row of v = x (+ residual): y = (v - mean) rstd w + b
     cancels in v - mean, so a near-constant row (rstd large) turns the rounding of v (summed
     in f32) and of the mean (a sum of |v|) into an error of (|v| + mean |v|) rstd |w|; the
     mean output (tensor 6) cancels too, its scale is mean |v|. Tensors: 0 x, 1 w, 2 y, 3 b,
     4 residual, 5 residual_out, 6 mean, 7 rstd. */
  double *sy = NULL, *smean = NULL;
  if (kind != 2) {
    const int64_t rows = cols > 0 ? opst_numel(&x) / cols : 0;
    double *v = calloc((size_t)cols + 1, sizeof(double));
    sy = calloc((size_t)(rows * cols) + 1, sizeof(double));
    smean = calloc((size_t)rows + 1, sizeof(double));
    for (int64_t row = 0; row < rows; ++row) {
      double mu = 0.0, var = 0.0;
      for (int64_t j = 0; j < cols; ++j) {
        v[j] = opst_at_flat(&x, row * cols + j) + (c.has[4] ? opst_at_flat(&res, row * cols + j) : 0.0);
        mu += kind == 0 ? v[j] : 0.0;
        smean[row] += fabs(v[j]);
      }
      mu /= (double)cols;
      smean[row] /= (double)cols;
      for (int64_t j = 0; j < cols; ++j) var += (v[j] - mu) * (v[j] - mu);
      const double rs = 1.0 / sqrt(var / (double)cols + (double)c.norm.eps);
      for (int64_t j = 0; j < cols; ++j) {
        sy[row * cols + j] = (fabs(v[j]) + smean[row]) * rs * fabs(opst_at_flat(&w, j)) +
                             (c.has[3] ? fabs(opst_at_flat(&b, j)) : 0.0);
      }
    }
    free(v);
    c.scale[2] = sy;
    if (c.has[6]) c.scale[6] = smean;
  }
  c.label = label;
  check_call(&c);
  free(smean);
  free(sy);
  free_call(&c);
}

static void rows_forward(void **state) {
  (void)state;
  for (int i = 0; i < 120; ++i) rows_forward_case(i);
}

/* ---- backward ------------------------------------------------------------------- */

static ops_status run_norm_bwd(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 dy, 1 x, 2 weight, 3 mean (layernorm) or absent, 4 rstd, 5 dx, 6 dweight, 7 dbias */
  ops_norm_backward_params p = c->norm_bwd;
  p.dweight = c->has[6] ? &c->v[6] : NULL;
  p.dbias = c->has[7] ? &c->v[7] : NULL;
  if (ex) {
    return c->op == OPS_OP_LAYERNORM_BACKWARD
               ? ops_layernorm_backward_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], &c->v[5], ex)
               : ops_rmsnorm_backward_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[4], &c->v[5], ex);
  }
  if (c->op == OPS_OP_LAYERNORM_BACKWARD) {
    return q ? ops_layernorm_backward_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4],
                                                     &c->v[5], q)
             : ops_layernorm_backward(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[3], &c->v[4], &c->v[5], ws, wsb);
  }
  return q ? ops_rmsnorm_backward_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[4], &c->v[5], q)
           : ops_rmsnorm_backward(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[4], &c->v[5], ws, wsb);
}

static ops_status run_softmax_bwd(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  if (ex) return ops_softmax_backward_explain(h, &c->softmax, &c->v[0], &c->v[1], &c->v[2], ex);
  return q ? ops_softmax_backward_workspace_size(h, &c->softmax, &c->v[0], &c->v[1], &c->v[2], q)
           : ops_softmax_backward(h, &c->softmax, &c->v[0], &c->v[1], &c->v[2], ws, wsb);
}

/* many_rows > 0: a [many_rows, many_cols] norm case in a 16-bit dtype with dweight and dbias,
 * rows enough that every block of the staged kernel walks several batches through its stages. */
static void rows_backward_case(int iter, int64_t many_rows, int64_t many_cols) {
  opst_rng *r = &g_rng;
  const int32_t dt = many_rows > 0 ? (iter % 2 ? OPS_DTYPE_F16 : OPS_DTYPE_BF16) : kDtypes[opst_int(r, 0, 2)];
  const int kind = many_rows > 0 ? iter % 2 : iter % 3; /* layernorm, rmsnorm, softmax */
  /* four norm cases in twelve have every optional operand on 16-byte rows whatever the draws
   * (feature coverage must not depend on the seed): rows a warp holds, a block holds, or
   * split across blocks */
  const int full_vec = many_rows > 0 || iter % 12 == 0 || iter % 12 == 1 || iter % 12 == 3 || iter % 12 == 4;
  /* and six in twelve read every other element (the strided kernels), rows a block holds or
   * streamed */
  const int strided = many_rows == 0 && iter % 12 >= 6;
  const int64_t cols = many_rows > 0  ? many_cols
                       : strided      ? (iter % 12 < 9 ? 1000 : 32768)
                       : !full_vec    ? pick_case_cols(r, iter)
                       : iter % 12 < 2 ? 64 << opst_int(r, 0, 4)
                                       : (const int64_t[]){4096, 16384, 32768}[(iter / 12) % 3];
  const int all = full_vec || opst_chance(r, 0.5);
  pick_layout();
  if (full_vec) g_layout = 0;
  if (strided) g_layout = 3;
  int64_t s[4];
  int nd = 1;
  if (many_rows > 0) s[0] = many_rows, s[1] = cols;
  else nd = row_case_shape(r, cols, 200000, 300, s);
  gcall c;
  memset(&c, 0, sizeof c);
  char label[160];
  opst_tensor dy, x, w, mean, rstd, dx, dw, db;
  alloc_x(&dy, dt, nd + 1, s);
  opst_fill_uniform(&dy, r, -1, 1);
  alloc_x(&x, dt, nd + 1, s);
  opst_fill_uniform(&x, r, -3, 3);
  const int in_place = opst_chance(r, 0.25);
  if (kind == 2) {
    /* y: a real softmax output (the CPU's), stored in x's layout */
    ops_softmax_params_init(&c.softmax);
    c.softmax.scale = (float)opst_uniform(r, 0.2, 2.0);
    OPST_OK(ops_softmax(g_cpu, &c.softmax, &x.t, &x.t, NULL, 0));
    opst_snapshot(&x);
    c.op = OPS_OP_SOFTMAX_BACKWARD;
    c.run = run_softmax_bwd;
    add_tensor(&c, &dy, IN, -1);
    add_tensor(&c, &x, IN, -1);
    if (in_place) clone_tensor(&dx, &dy);
    else alloc_x(&dx, dt, nd + 1, s);
    add_tensor(&c, &dx, OUT, in_place ? 0 : -1);
    snprintf(label, sizeof label, "softmax_backward case %d %s %lld rows x %lld%s", iter,
             ops_dtype_name((ops_dtype)dt), (long long)(opst_numel(&x) / cols), (long long)cols,
             in_place ? " in place" : "");
  } else {
    c.op = kind == 0 ? OPS_OP_LAYERNORM_BACKWARD : OPS_OP_RMSNORM_BACKWARD;
    c.run = run_norm_bwd;
    ops_norm_backward_params_init(&c.norm_bwd);
    const int32_t wdt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
    alloc_x(&w, wdt, 1, &cols);
    opst_fill_uniform(&w, r, 0.5, 1.5);
    /* the statistics the forward saves, from the CPU forward */
    opst_alloc_any(&mean, r, OPS_DTYPE_F32, nd, s);
    opst_alloc_any(&rstd, r, OPS_DTYPE_F32, nd, s);
    opst_tensor y;
    opst_alloc(&y, r, dt, nd + 1, s, OPST_CONTIGUOUS);
    ops_norm_params fp;
    ops_norm_params_init(&fp);
    fp.rstd_out = &rstd.t;
    fp.mean_out = kind == 0 ? &mean.t : NULL;
    OPST_OK(kind == 0 ? ops_layernorm(g_cpu, &fp, &x.t, &w.t, &y.t, NULL, 0)
                      : ops_rmsnorm(g_cpu, &fp, &x.t, &w.t, &y.t, NULL, 0));
    opst_free(&y);
    opst_snapshot(&mean);
    opst_snapshot(&rstd);
    add_tensor(&c, &dy, IN, -1);
    add_tensor(&c, &x, IN, -1);
    add_tensor(&c, &w, IN, -1);
    if (kind == 0) add_tensor(&c, &mean, IN, -1);
    else add_absent(&c);
    add_tensor(&c, &rstd, IN, -1);
    if (in_place) clone_tensor(&dx, &dy);
    else alloc_x(&dx, dt, nd + 1, s);
    add_tensor(&c, &dx, OUT, in_place ? 0 : -1);
    const int has_dw = all || opst_chance(r, 0.6), has_db = all || opst_chance(r, 0.5);
    if (has_dw) {
      opst_alloc_any(&dw, r, opst_chance(r, 0.5) ? wdt : OPS_DTYPE_F32, 1, &cols);
      add_tensor(&c, &dw, OUT, -1);
    } else {
      add_absent(&c);
    }
    if (has_db) {
      opst_alloc_any(&db, r, opst_chance(r, 0.5) ? wdt : OPS_DTYPE_F32, 1, &cols);
      add_tensor(&c, &db, OUT, -1);
    } else {
      add_absent(&c);
    }
    snprintf(label, sizeof label, "%s case %d %s %lld rows x %lld%s%s%s", kind ? "rmsnorm_backward" : "layernorm_backward",
             iter, ops_dtype_name((ops_dtype)dt), (long long)(opst_numel(&x) / cols), (long long)cols,
             in_place ? " in place" : "", has_dw ? " dweight" : "", has_db ? " dbias" : "");
  }
  /* error scales: the magnitudes of the pieces each result sums before they cancel */
  const int64_t total = opst_numel(&x), rows = cols > 0 ? total / cols : 0;
  double *sdx = calloc((size_t)total + 1, sizeof(double));
  double *sdw = calloc((size_t)cols + 1, sizeof(double)), *sdb = calloc((size_t)cols + 1, sizeof(double));
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t o = row * cols;
    double a1 = 0.0, a2 = 0.0;
    const double mu = kind == 0 ? opst_at_flat(&mean, row) : 0.0, rs = kind != 2 ? opst_at_flat(&rstd, row) : 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = opst_at_flat(&dy, o + j), v = opst_at_flat(&x, o + j);
      if (kind == 2) {
        a1 += fabs(d) * v;
      } else {
        const double xh = (v - mu) * rs, gj = d * opst_at_flat(&w, j);
        a1 += fabs(gj), a2 += fabs(gj * xh);
        sdw[j] += fabs(d * xh), sdb[j] += fabs(d);
      }
    }
    for (int64_t j = 0; j < cols; ++j) {
      const double d = opst_at_flat(&dy, o + j), v = opst_at_flat(&x, o + j);
      sdx[o + j] = kind == 2 ? (double)c.softmax.scale * v * (fabs(d) + a1)
                             : rs * (fabs(d * opst_at_flat(&w, j)) + a1 / (double)cols +
                                     fabs((v - mu) * rs) * a2 / (double)cols);
    }
  }
  for (int i = 0; i < c.n; ++i) {
    if (c.h[i] == &dx) c.scale[i] = sdx;
    if (kind != 2 && c.has[i] && c.h[i] == &dw) c.scale[i] = sdw;
    if (kind != 2 && c.has[i] && c.h[i] == &db) c.scale[i] = sdb;
  }
  c.label = label;
  check_call(&c);
  free(sdx), free(sdw), free(sdb);
  if (kind == 1) opst_free(&mean);
  free_call(&c);
}

static void rows_backward(void **state) {
  (void)state;
  for (int i = 0; i < 90; ++i) rows_backward_case(i, 0, 0);
  /* the staged kernel (132 blocks on the H100) walks 4 or more batches a block: its stages
     wrap around; 520 columns leave most of a row's threads one vector, lane 0 two */
  rows_backward_case(0, 20000, 64);
  rows_backward_case(1, 600, 16384);
  rows_backward_case(0, 10000, 520);
  rows_backward_case(1, 2400, 4096);
}

/* ---- reductions -------------------------------------------------------------------- */

static ops_status run_reduce(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  if (ex) return ops_reduce_explain(h, &c->reduce, &c->v[0], &c->v[1], ex);
  return q ? ops_reduce_workspace_size(h, &c->reduce, &c->v[0], &c->v[1], q)
           : ops_reduce(h, &c->reduce, &c->v[0], &c->v[1], ws, wsb);
}

static void reduce_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  int nd;
  int64_t s[4];
  /* every 4th case reduces the rows of [R, K], every 4th the columns; some are large */
  const int big = iter % 4 == 0 ? 1 : iter % 4 == 1 ? 2 : 0;
  if (big == 1) {
    nd = 2, s[0] = opst_int(r, 1, 40), s[1] = opst_chance(r, 0.5) ? opst_int(r, 10000, 70000) : opst_int(r, 1, 3000);
  } else if (big == 2) {
    nd = 2, s[0] = opst_chance(r, 0.5) ? opst_int(r, 1000, 9000) : opst_int(r, 1, 500), s[1] = opst_int(r, 1, 300);
    /* wide and tall enough for the sm_90 cluster kernel (>= 4096 columns, >= 1024 rows), in the
     * padded (iter % 16 == 1) and keepdim (== 5) classes below and one more */
    if (iter % 16 == 1 || iter % 16 == 5 || iter % 32 == 9) s[0] = opst_int(r, 1024, 1600), s[1] = opst_int(r, 4096, 4700);
  } else {
    nd = (int)opst_int(r, 1, 4);
    for (int i = 0; i < nd; ++i) s[i] = opst_int(r, opst_chance(r, 0.03) ? 0 : 1, nd == 1 ? 5000 : 40);
  }
  /* every 16th row or column case is padded with whole vectors: the strided input of the vec16 kernels */
  const int padded_vec = big != 0 && iter % 16 < 2;
  if (padded_vec) g_layout = 1;
  /* and every 16th row or column case keeps the reduced dim on the vec16 kernels, whatever the
   * draws (feature coverage must not depend on the seed) */
  const int keep_vec = iter % 16 == 4 || iter % 16 == 5;
  if (keep_vec) g_layout = 0;
  if (iter % 16 == 4) s[0] = 1; /* the [R, 1] output's rows are 16-byte aligned only for R == 1 */
  if (padded_vec || keep_vec || opst_chance(r, 0.5)) s[nd - 1] = (s[nd - 1] + 7) / 8 * 8; /* whole 16-byte vectors per row */
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_REDUCE;
  c.run = run_reduce;
  ops_reduce_params_init(&c.reduce);
  c.reduce.op = (int32_t)opst_int(r, 0, 3);
  c.reduce.keepdim = keep_vec || opst_chance(r, 0.3);
  uint32_t axes = 0;
  if (!padded_vec && !keep_vec && opst_chance(r, 0.15)) {
    axes = OPS_REDUCE_ALL_AXES;
  } else if (big == 1) {
    axes = 2;
  } else if (big == 2) {
    axes = 1;
  } else {
    for (int i = 0; i < nd; ++i) axes |= opst_chance(r, 0.5) ? 1u << i : 0u;
    if (axes == 0) axes = 1u << opst_int(r, 0, nd - 1);
  }
  c.reduce.axes = axes;
  int64_t ys[4];
  int ynd = 0;
  for (int i = 0; i < nd; ++i) {
    if (axes & (1u << i)) {
      if (c.reduce.keepdim) ys[ynd++] = 1;
    } else {
      ys[ynd++] = s[i];
    }
  }
  opst_tensor x, y, xa;
  alloc_x(&x, dt, nd, s);
  opst_fill_uniform(&x, r, -2, 2);
  const int32_t ydt = opst_chance(r, 0.5) ? dt : OPS_DTYPE_F32;
  alloc_x(&y, ydt, ynd, ys);
  add_tensor(&c, &x, IN, -1);
  add_tensor(&c, &y, OUT, -1);
  /* the error scale of sum and mean: the same reduction of |x| */
  double *scale = NULL;
  if (c.reduce.op == OPS_REDUCE_SUM || c.reduce.op == OPS_REDUCE_MEAN) {
    opst_alloc(&xa, r, dt, nd, s, OPST_CONTIGUOUS);
    const int64_t n = opst_numel(&x);
    for (int64_t i = 0; i < n; ++i) opst_set_flat(&xa, i, fabs(opst_at_flat(&x, i)));
    opst_tensor sa;
    opst_alloc(&sa, r, OPS_DTYPE_F32, ynd, ys, OPST_CONTIGUOUS);
    OPST_OK(ops_reduce(g_cpu, &c.reduce, &xa.t, &sa.t, NULL, 0));
    const int64_t m = opst_numel(&sa);
    scale = calloc((size_t)m + 1, sizeof(double));
    for (int64_t i = 0; i < m; ++i) scale[i] = isfinite(opst_at_flat(&sa, i)) ? opst_at_flat(&sa, i) : 0.0;
    opst_free(&sa);
    opst_free(&xa);
  }
  c.scale[1] = scale;
  c.no_l2[1] = 1;
  char label[160];
  snprintf(label, sizeof label, "reduce case %d %s op %d axes 0x%x keepdim %d, %d-d x of %lld -> %s", iter,
           ops_dtype_name((ops_dtype)dt), c.reduce.op, axes, c.reduce.keepdim, nd, (long long)opst_numel(&x),
           ops_dtype_name((ops_dtype)ydt));
  c.label = label;
  check_call(&c);
  free(scale);
  free_call(&c);
}

static void reductions(void **state) {
  (void)state;
  for (int i = 0; i < 120; ++i) reduce_case(i);
}

/* ---- elementwise ------------------------------------------------------------------- */

static ops_status run_ew(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 x (a), 1 y, 2 second operand (binary b, sin_affine a), 3 sin_affine b */
  switch (c->op) {
    case OPS_OP_SIN_AFFINE: {
      ops_sin_affine_params p = c->sin;
      p.a_tensor = c->has[2] ? &c->v[2] : NULL;
      p.b_tensor = c->has[3] ? &c->v[3] : NULL;
      if (ex) return ops_sin_affine_explain(h, &p, &c->v[0], &c->v[1], ex);
      return q ? ops_sin_affine_workspace_size(h, &p, &c->v[0], &c->v[1], q)
               : ops_sin_affine(h, &p, &c->v[0], &c->v[1], ws, wsb);
    }
    case OPS_OP_UNARY:
      if (ex) return ops_unary_explain(h, &c->unary, &c->v[0], &c->v[1], ex);
      return q ? ops_unary_workspace_size(h, &c->unary, &c->v[0], &c->v[1], q)
               : ops_unary(h, &c->unary, &c->v[0], &c->v[1], ws, wsb);
    case OPS_OP_BINARY:
      if (ex) return ops_binary_explain(h, &c->binary, &c->v[0], &c->v[2], &c->v[1], ex);
      return q ? ops_binary_workspace_size(h, &c->binary, &c->v[0], &c->v[2], &c->v[1], q)
               : ops_binary(h, &c->binary, &c->v[0], &c->v[2], &c->v[1], ws, wsb);
    case OPS_OP_SCALE:
      if (ex) return ops_scale_explain(h, &c->scale_p, &c->v[0], &c->v[1], ex);
      return q ? ops_scale_workspace_size(h, &c->scale_p, &c->v[0], &c->v[1], q)
               : ops_scale(h, &c->scale_p, &c->v[0], &c->v[1], ws, wsb);
    default:
      if (ex) return ops_dropout_explain(h, &c->dropout, &c->v[0], &c->v[1], ex);
      return q ? ops_dropout_workspace_size(h, &c->dropout, &c->v[0], &c->v[1], q)
               : ops_dropout(h, &c->dropout, &c->v[0], &c->v[1], ws, wsb);
  }
}

/* A random shape that broadcasts to y: some leading axes dropped, some extents set to 1. */
static int bcast_shape(opst_rng *r, int ndim, const int64_t *y, int64_t *out) {
  const int nd = opst_chance(r, 0.3) ? (int)opst_int(r, 0, ndim) : ndim;
  for (int i = 0; i < nd; ++i) out[i] = opst_chance(r, 0.3) ? 1 : y[ndim - nd + i];
  return nd;
}

static void elementwise_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  static const int32_t ops[5] = {OPS_OP_SIN_AFFINE, OPS_OP_UNARY, OPS_OP_BINARY, OPS_OP_SCALE, OPS_OP_DROPOUT};
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = ops[iter % 5];
  c.run = run_ew;
  /* every op gets x broadcast to y in 4 of each 20 cases, and at random besides */
  const int bcast_x = c.op != OPS_OP_DROPOUT && (iter % 20 >= 15 || opst_chance(r, 0.2));
  int ndim;
  int64_t ys[OPS_MAX_DIMS];
  if (opst_chance(r, 0.25)) { /* long flat runs: vector tails */
    ndim = 1, ys[0] = opst_int(r, 1, 300000);
  } else {
    ndim = (int)opst_int(r, 0, 4);
    for (int i = 0; i < ndim; ++i) ys[i] = opst_int(r, opst_chance(r, 0.03) ? 0 : 1, 40);
  }
  if (bcast_x && ndim == 0) ndim = 1, ys[0] = opst_int(r, 2, 40); /* something to broadcast over */
  opst_tensor x, y, a2, b2;
  int64_t s[OPS_MAX_DIMS];
  int xnd = bcast_x ? bcast_shape(r, ndim, ys, s) : ndim;
  if (bcast_x && xnd == ndim && ndim > 0) { /* make sure x really broadcasts */
    int same_shape = 1;
    for (int i = 0; i < ndim; ++i) same_shape = same_shape && s[i] == ys[i];
    if (same_shape && ys[0] > 1) s[0] = 1;
    else if (same_shape) xnd = 0;
  }
  alloc_x(&x, dt, xnd, bcast_x ? s : ys);
  opst_fill_uniform(&x, r, -2, 2);
  const int same = xnd == ndim && !bcast_x;
  const int in_place = same && opst_chance(r, 0.25);
  if (in_place) clone_tensor(&y, &x);
  else alloc_x(&y, dt, ndim, ys);
  add_tensor(&c, &x, IN, -1);
  add_tensor(&c, &y, OUT, in_place ? 0 : -1);
  const char *what = "";
  switch (c.op) {
    case OPS_OP_SIN_AFFINE:
      what = "sin_affine";
      ops_sin_affine_params_init(&c.sin);
      c.sin.a = (float)opst_uniform(r, -3, 3);
      c.sin.b = (float)opst_uniform(r, -3, 3);
      for (int k = 0; k < 2; ++k) {
        if (opst_chance(r, 0.3)) {
          const int nd = bcast_shape(r, ndim, ys, s);
          opst_tensor *t = k == 0 ? &a2 : &b2;
          opst_alloc_any(t, r, dt, nd, s);
          opst_fill_uniform(t, r, -2, 2);
          add_tensor(&c, t, IN, -1);
        } else {
          add_absent(&c);
        }
      }
      break;
    case OPS_OP_UNARY:
      what = "unary";
      ops_unary_params_init(&c.unary);
      c.unary.fn = (int32_t)opst_int(r, 0, OPS_ACT_SIN);
      break;
    case OPS_OP_BINARY: {
      what = "binary";
      ops_binary_params_init(&c.binary);
      c.binary.op = (int32_t)opst_int(r, 0, OPS_BINARY_MIN);
      const int nd = bcast_x ? ndim : bcast_shape(r, ndim, ys, s);
      alloc_x(&a2, dt, nd, bcast_x ? ys : s);
      opst_fill_uniform(&a2, r, -2, 2);
      if (c.binary.op == OPS_BINARY_DIV) { /* divisors away from 0 */
        const int64_t n = opst_numel(&a2);
        for (int64_t e = 0; e < n; ++e) {
          const double v = opst_at_flat(&a2, e);
          opst_set_flat(&a2, e, v < 0 ? v - 0.5 : v + 0.5);
        }
        opst_snapshot(&a2);
      }
      add_tensor(&c, &a2, IN, -1);
      break;
    }
    case OPS_OP_SCALE:
      what = "scale";
      ops_scale_params_init(&c.scale_p);
      c.scale_p.alpha = (float)opst_uniform(r, -3, 3);
      break;
    default: {
      what = "dropout";
      static const float ps[5] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
      ops_dropout_params_init(&c.dropout);
      c.dropout.p = ps[opst_int(r, 0, 4)];
      c.dropout.seed = opst_u64(r);
      c.dropout.offset = opst_u64(r) >> (opst_int(r, 0, 1) ? 0 : 40);
      break;
    }
  }
  char label[160];
  snprintf(label, sizeof label, "%s case %d %s %d-d y of %lld%s%s", what, iter, ops_dtype_name((ops_dtype)dt), ndim,
           (long long)opst_numel(&y), in_place ? " in place" : "", bcast_x ? " x broadcast" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

static void elementwise(void **state) {
  (void)state;
  for (int i = 0; i < 150; ++i) elementwise_case(i);
}

/* Dropout's mask is a function of (seed, offset, element): the GPU's equals the CPU's bit
 * for bit (checked above through the values), and the same call twice gives the same bits. */
static void dropout_is_reproducible(void **state) {
  (void)state;
  if (!g_have_cuda) skip();
  const int64_t n = 1 << 20;
  float *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, 3 * n * sizeof(float)));
  float *hx = malloc(n * sizeof(float)), *h1 = malloc(n * sizeof(float)), *h2 = malloc(n * sizeof(float));
  for (int64_t i = 0; i < n; ++i) hx[i] = 1.0f + (float)(i % 7);
  CUDA_OK(cudaMemcpy(d, hx, n * sizeof(float), cudaMemcpyHostToDevice));
  ops_tensor x, y1, y2;
  OPST_OK(ops_tensor_init(&x, d, OPS_DTYPE_F32, ops_device_cuda(0), 1, &n, NULL));
  OPST_OK(ops_tensor_init(&y1, d + n, OPS_DTYPE_F32, ops_device_cuda(0), 1, &n, NULL));
  OPST_OK(ops_tensor_init(&y2, d + 2 * n, OPS_DTYPE_F32, ops_device_cuda(0), 1, &n, NULL));
  ops_dropout_params p;
  ops_dropout_params_init(&p);
  p.p = 0.3f, p.seed = 0x1234567890abcdefULL, p.offset = 77;
  OPST_OK(ops_dropout(g_gpu, &p, &x, &y1, NULL, 0));
  OPST_OK(ops_dropout(g_gpu, &p, &x, &y2, NULL, 0));
  CUDA_OK(cudaMemcpy(h1, d + n, n * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(h2, d + 2 * n, n * sizeof(float), cudaMemcpyDeviceToHost));
  assert_memory_equal(h1, h2, n * sizeof(float));
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) dropped += h1[i] == 0.0f;
  /* 0.3 of 2^20, 5 standard deviations */
  assert_true(fabs((double)dropped - 0.3 * n) < 5.0 * sqrt(0.21 * n));
  cudaFree(d);
  free(hx), free(h1), free(h2);
}

/* ---- the fused elementwise chain --------------------------------------------------- */

static ops_status run_chain(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 x, 1 t1 = unary(x), 2 b, 3 t2 = t1 * b, 4 y = sin(a t2 + b) */
  ops_node n[3];
  for (int i = 0; i < 3; ++i) ops_node_init(&n[i]);
  n[0].op = OPS_OP_UNARY, n[0].params = &c->unary, n[0].in[0] = &c->v[0], n[0].out = &c->v[1];
  n[1].op = OPS_OP_BINARY, n[1].params = &c->binary, n[1].in[0] = &c->v[1], n[1].in[1] = &c->v[2];
  n[1].out = &c->v[3];
  n[2].op = OPS_OP_SIN_AFFINE, n[2].params = &c->sin, n[2].in[0] = &c->v[3], n[2].out = &c->v[4];
  ops_plan plan = NULL;
  ops_status st = ops_fuse(h, n, 3, 0, &plan);
  if (st != OPS_OK) return st;
  if (ex) { /* a dry run: chosen >= 0 when the chain fused into one kernel */
    ex->chosen = ops_plan_step_count(plan) == 1 ? 0 : -1;
    ops_plan_destroy(plan);
    return OPS_OK;
  }
  if (h == g_gpu && ops_plan_step_count(plan) != 1) {
    /* the pinned chain kernel refused the fused form (the plan says why): nothing runs */
    ops_plan_destroy(plan);
    return OPS_ERR_UNSUPPORTED;
  }
  if (q) {
    st = ops_plan_workspace_size(h, plan, q);
  } else {
    st = ops_plan_execute(h, plan, ws, wsb);
  }
  ops_plan_destroy(plan);
  return st;
}

static void chain_case(int iter) {
  opst_rng *r = &g_rng;
  pick_layout();
  const int32_t dt = kDtypes[opst_int(r, 0, 2)];
  const int ndim = (int)opst_int(r, 1, 3);
  int64_t ys[3], bs[3];
  for (int i = 0; i < ndim; ++i) ys[i] = opst_int(r, 1, i == ndim - 1 ? 3000 : 30);
  gcall c;
  memset(&c, 0, sizeof c);
  c.op = OPS_OP_EW_CHAIN;
  c.run = run_chain;
  ops_unary_params_init(&c.unary);
  c.unary.fn = (int32_t)opst_int(r, 0, OPS_ACT_SIN);
  ops_binary_params_init(&c.binary);
  c.binary.op = OPS_BINARY_MUL;
  ops_sin_affine_params_init(&c.sin);
  c.sin.a = 2.0f, c.sin.b = 1.0f;
  opst_tensor x, t1, b, t2, y;
  alloc_x(&x, dt, ndim, ys);
  opst_fill_uniform(&x, r, -2, 2);
  const int bnd = bcast_shape(r, ndim, ys, bs);
  alloc_x(&b, dt, bnd, bs);
  opst_fill_uniform(&b, r, -1, 1);
  opst_alloc(&t1, r, dt, ndim, ys, OPST_CONTIGUOUS);
  opst_alloc(&t2, r, dt, ndim, ys, OPST_CONTIGUOUS);
  alloc_x(&y, dt, ndim, ys);
  add_tensor(&c, &x, IN, -1);
  add_tensor(&c, &t1, SCRATCH, -1);
  add_tensor(&c, &b, IN, -1);
  add_tensor(&c, &t2, SCRATCH, -1);
  add_tensor(&c, &y, OUT, -1);
  char label[160];
  snprintf(label, sizeof label, "ew_chain case %d %s unary %d * b(%d-d) -> sin, y of %lld", iter,
           ops_dtype_name((ops_dtype)dt), c.unary.fn, bnd, (long long)opst_numel(&y));
  c.label = label;
  check_call(&c);
  free_call(&c);
}

static void elementwise_chains(void **state) {
  (void)state;
  for (int i = 0; i < 30; ++i) chain_case(i);
}

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

static void gemm(void **state) {
  (void)state;
  for (int i = 0; i < 60; ++i) gemm_case(i);
  for (int i = 0; i < 16; ++i) gemv_case(i);
}

/* f32 GEMMs with the handle allowing tf32: the tf32 kernel runs (strict ones still may, and
 * are held to the same bound). A row-major with 16-byte rows (K a multiple of 4, now and
 * then not: the tf32 kernel must refuse, writing nothing), B K-major or N-major, K tails
 * inside a step, every epilogue, batches. */
static void gemm_tf32(void **state) {
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
static void gemm_many_tiles(void **state) {
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

/* ---- attention ----------------------------------------------------------------------- */

static ops_status run_sdpa(ops_handle h, gcall *c, void *ws, size_t wsb, size_t *q, ops_explain *ex) {
  /* tensors: 0 q, 1 k, 2 v, optional 3 mask, 4 cu_seqlens_q, 5 cu_seqlens_k, then 6 o, optional 7 lse */
  ops_sdpa_params p = c->sdpa;
  p.attn_mask = c->has[3] ? &c->v[3] : NULL;
  p.cu_seqlens_q = c->has[4] ? &c->v[4] : NULL;
  p.cu_seqlens_k = c->has[5] ? &c->v[5] : NULL;
  const ops_tensor *lse = c->has[7] ? &c->v[7] : NULL;
  if (ex) return ops_sdpa_explain(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[6], lse, ex);
  return q ? ops_sdpa_workspace_size(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[6], lse, q)
           : ops_sdpa(h, &p, &c->v[0], &c->v[1], &c->v[2], &c->v[6], lse, ws, wsb);
}

/* A [B, S, H, D] operand (varlen: [T, H, D]) in one of the layouts attention operands come
 * in: 0 contiguous (BSHD), 1 BHSD memory through strides, 2 rows padded by 8 elements
 * (16-byte aligned, not contiguous), 3 random strides, axis order and offset (element loads). */
static void alloc_seq(opst_tensor *t, int32_t dt, int nd, const int64_t *shape, int layout) {
  if (layout == 3) {
    opst_alloc(t, &g_rng, dt, nd, shape, OPST_STRIDED);
    return;
  }
  int64_t w[4];
  memcpy(w, shape, (size_t)nd * sizeof *w);
  const int s = nd - 3, hd = nd - 2; /* the S (or T) and H axes */
  if (layout == 1) w[s] = shape[hd], w[hd] = shape[s];
  if (layout == 2) w[nd - 1] = shape[nd - 1] + 8;
  opst_alloc(t, &g_rng, dt, nd, w, OPST_CONTIGUOUS);
  if (layout == 1) {
    const int64_t ss = t->t.strides[hd];
    t->t.strides[hd] = t->t.strides[s], t->t.strides[s] = ss;
    t->t.shape[s] = shape[s], t->t.shape[hd] = shape[hd];
  }
  if (layout == 2) t->t.shape[nd - 1] = shape[nd - 1];
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
  int64_t lens_q[4], lens_k[4], tot_q = 0, tot_k = 0, max_q = 0, max_k = 0;
  if (varlen) {
    batch = opst_int(r, 1, 4);
    for (int64_t b = 0; b < batch; ++b) {
      lens_q[b] = b == 1 ? 0 : opst_int(r, 0, sq); /* an empty sequence now and then */
      lens_k[b] = big_seq < 0 ? 0 : c.sdpa.causal ? lens_q[b] + opst_int(r, 0, 40) : opst_int(r, 0, sk);
      tot_q += lens_q[b], tot_k += lens_k[b];
      if (lens_q[b] > max_q) max_q = lens_q[b];
      if (lens_k[b] > max_k) max_k = lens_k[b];
    }
    c.sdpa.max_seqlen_q = (int32_t)(max_q + opst_int(r, 0, 3)); /* an upper bound, not always tight */
    c.sdpa.max_seqlen_k = (int32_t)max_k;
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
  if (with_mask) { /* broadcast over batch and / or heads; some keys removed, now and then a whole row */
    const int64_t ms[4] = {opst_chance(r, 0.5) ? batch : 1, opst_chance(r, 0.5) ? hq : 1, sq, sk};
    opst_alloc(&tm, r, opst_chance(r, 0.5) ? OPS_DTYPE_F32 : dt, 4, ms, OPST_CONTIGUOUS);
    opst_fill_uniform(&tm, r, -2, 2);
    const int64_t n = opst_numel(&tm);
    for (int64_t e = 0; e < n; ++e) {
      if (opst_chance(r, 0.1) || (e / sk) % 7 == 3) opst_set_flat(&tm, e, -INFINITY);
    }
    add_tensor(&c, &tm, IN, -1);
  } else {
    add_absent(&c);
  }
  if (varlen) {
    const int64_t n = batch + 1;
    opst_alloc(&tcq, r, OPS_DTYPE_I32, 1, &n, OPST_CONTIGUOUS);
    opst_alloc(&tck, r, OPS_DTYPE_I32, 1, &n, OPST_CONTIGUOUS);
    int64_t aq = 0, ak = 0;
    for (int64_t b = 0; b <= batch; ++b) {
      opst_set_flat(&tcq, b, (double)aq);
      opst_set_flat(&tck, b, (double)ak);
      if (b < batch) aq += lens_q[b], ak += lens_k[b];
    }
    add_tensor(&c, &tcq, IN, -1);
    add_tensor(&c, &tck, IN, -1);
  } else {
    add_absent(&c);
    add_absent(&c);
  }
  add_tensor(&c, &to, OUT, -1);
  if (with_lse) {
    const int64_t ls3[3] = {batch, hq, sq}, ls2[2] = {hq, tot_q};
    if (varlen) opst_alloc(&tl, r, OPS_DTYPE_F32, 2, ls2, OPST_CONTIGUOUS);
    else opst_alloc(&tl, r, OPS_DTYPE_F32, 3, ls3, OPST_CONTIGUOUS);
    add_tensor(&c, &tl, OUT, -1);
  }
  char label[240];
  snprintf(label, sizeof label,
           "sdpa case %d %s batch %lld Sq %lld Sk %lld Hq %lld Hkv %lld D %lld Dv %lld layout %d%s%s "
           "window (%d, %d)%s%s%s",
           iter, ops_dtype_name((ops_dtype)dt), (long long)batch, (long long)(varlen ? max_q : sq),
           (long long)(varlen ? max_k : sk), (long long)hq, (long long)hkv, (long long)d, (long long)dv, layout,
           varlen ? " varlen" : "", c.sdpa.causal ? " causal" : "", (int)c.sdpa.window_left,
           (int)c.sdpa.window_right, with_mask ? " mask" : "", with_lse ? " lse" : "",
           c.sdpa.scale != 0.0f ? " scaled" : "");
  c.label = label;
  check_call(&c);
  free_call(&c);
}

/* A dense call (no mask, no varlen) into c: q, k, v in alloc_seq's `layout`, o row-major and an
 * f32 LSE, held in t[0 .. 4]. */
static void sdpa_dense_call(gcall *c, opst_tensor t[5], int32_t dt, int64_t batch, int64_t sq, int64_t sk,
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
  alloc_seq(&t[3], dt, 4, os, 0);
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
 * tiles a head, 216 tiles): an odd count, one block at a time; then d 64 with Dv 40 in pairs.
 * The _pair rows take the even counts; pinned on the odd one they refuse it. */
static void sdpa_many_tiles(void **state) {
  (void)state;
  for (int v = 0; v < 4; ++v) {
    const int32_t dt = v == 1 ? OPS_DTYPE_F16 : OPS_DTYPE_BF16;
    const int64_t d = v == 0 || v == 3 ? 64 : 128;
    gcall c;
    opst_tensor t[5];
    sdpa_dense_call(&c, t, dt, 3, v == 2 ? 1100 : 1000, 777, 8, 2, d, v == 1 ? 96 : v == 3 ? 40 : d, v % 2);
    c.label = v == 0   ? "sdpa bf16 3 x 8 heads (GQA 4) x 1000 x 777, d 64, lse: 144 work tiles in pairs"
              : v == 1 ? "sdpa f16 3 x 8 heads (GQA 4) x 1000 x 777, d 128, Dv 96, BHSD, lse: 192 work tiles in pairs"
              : v == 2 ? "sdpa bf16 3 x 8 heads (GQA 4) x 1100 x 777, d 128, lse: 216 work tiles"
                       : "sdpa bf16 3 x 8 heads (GQA 4) x 1000 x 777, d 64, Dv 40, BHSD, lse: 144 work tiles in pairs";
    check_call(&c);
    free_call(&c);
  }
}

/* Window sides of up to 2^31 - 1 keys (wider than every key: the same as none) with Sq != Sk:
 * the kernels' window edges are int sums (i + (Sk - Sq) +- a side), which such a side would
 * overflow; the launchers pass those sides as unbounded. Both kernels run (no mask). */
static void sdpa_wide_windows(void **state) {
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

static void sdpa(void **state) {
  (void)state;
  for (int i = 0; i < 48; ++i) sdpa_case(i, 0);
  sdpa_case(1, 4097); /* a long sequence: 65 key tiles, the tail of one query tile */
  sdpa_case(3, 1000);
  /* varlen batches without a single key (k and v have no rows: no tensor map can describe
     them; every row is 0, its LSE -inf): iterations 7 / 8 are varlen, not causal */
  sdpa_case(7, -1);
  sdpa_case(8, -1);
}

/* ---- autotune, graph capture and launch plans on the device -------------------------- */

typedef struct plan_seen {
  int records, choice;
  char kernel[64], plan[192];
} plan_seen;

static void on_plan(const ops_profile_record *r, void *user) {
  plan_seen *s = (plan_seen *)user;
  ++s->records;
  s->choice = r->choice;
  snprintf(s->kernel, sizeof s->kernel, "%s", r->kernel_name);
  snprintf(s->plan, sizeof s->plan, "%s", r->launch_plan != NULL ? r->launch_plan : "");
}

/* c's inputs on the device in mem (outputs poisoned), its descriptors pointing there. */
static void upload(gcall *c, void **mem) {
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != IN) memcpy(c->h[i]->buf, c->h[i]->snap, c->h[i]->bytes);
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(mem[i], c->h[i]->buf, c->h[i]->bytes, cudaMemcpyHostToDevice));
    c->v[i] = relocated(c->h[i], mem[i]);
  }
}

/* c's outputs from mem against the CPU's (check_call computed them). */
static void expect_reference(gcall *c, void **mem, const char *what) {
  CUDA_OK(cudaDeviceSynchronize());
  char why[256];
  for (int i = 0; i < c->n; ++i) {
    if (c->role[i] != OUT) continue;
    if (c->h[i]->bytes > 0) CUDA_OK(cudaMemcpy(c->h[i]->buf, mem[i], c->h[i]->bytes, cudaMemcpyDeviceToHost));
    if (!opst_fully_written(c->h[i], why, sizeof why) ||
        !compare(c->h[i], &c->ref[i], c->scale[i], !c->no_l2[i], why, sizeof why)) {
      print_error("%s, %s, output %d: %s\n", c->label, what, i, why);
      fail();
    }
  }
  ++g_runs;
}

static void explain_on(ops_handle h, gcall *c, ops_explain *e) {
  e->struct_size = sizeof *e;
  OPST_OK(c->run(h, c, NULL, 0, NULL, e));
  assert_true(e->chosen >= 0);
}

/* The launch variant each Hopper SDPA row reports running is the one explain predicts:
 * pairs for the _pair rows, persistent without a mask, a block a tile with causal. */
static void launch_plans_are_the_ones_that_ran(gcall *c, void **mem) {
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  plan_seen seen;
  memset(&seen, 0, sizeof seen);
  OPST_OK(ops_handle_set_profiler(h, on_plan, &seen));
  static const char *const kRows[3] = {"cuda_sdpa_sm90_d128_pair", "cuda_sdpa_sm90_d128", "cuda_sdpa_sm90_d128"};
  for (int k = 0; k < 3; ++k) {
    c->sdpa.causal = k == 2;
    OPST_OK(ops_handle_pin_kernel(h, kRows[k]));
    upload(c, mem);
    ops_explain e;
    explain_on(h, c, &e);
    OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
    OPST_OK(ops_handle_flush_profiler(h));
    assert_string_equal(seen.kernel, kRows[k]);
    assert_non_null(e.plan[e.chosen]);
    if (strcmp(seen.plan, e.plan[e.chosen]) != 0) {
      print_error("%s: explain predicts '%s', the launch reports '%s'\n", kRows[k], e.plan[e.chosen], seen.plan);
      fail();
    }
    printf("[ PLAN     ] %s%s: %s\n", kRows[k], k == 2 ? " (causal)" : "", seen.plan);
    if (k < 2) expect_reference(c, mem, kRows[k]);
  }
  c->sdpa.causal = 0;
  ops_handle_destroy(h);
}

/* With OPS_AUTOTUNE_MEASURE: no timing during stream capture (the graph replays the model's
 * kernel and its result is right), then the first eager run times the candidates, keeps the
 * fastest, and explain and the profiler say so. */
static void autotune_times_eagerly_and_never_in_capture(gcall *c, void **mem) {
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  OPST_OK(ops_handle_set_stream(h, stream));
  OPST_OK(ops_handle_set_autotune(h, OPS_AUTOTUNE_MEASURE));
  plan_seen seen;
  memset(&seen, 0, sizeof seen);
  upload(c, mem);
  CUDA_OK(cudaDeviceSynchronize());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  ops_explain e;
  explain_on(h, c, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_non_null(strstr(e.choice_note, "capturing a CUDA graph"));
  OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_reference(c, mem, "autotune on, in a CUDA graph");
  explain_on(h, c, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MODEL);
  assert_int_equal(e.measured, 0);
  assert_non_null(strstr(e.choice_note, "until the first run times the best"));

  OPST_OK(ops_handle_set_profiler(h, on_plan, &seen));
  upload(c, mem);
  OPST_OK(c->run(h, c, NULL, 0, NULL, NULL));
  CUDA_OK(cudaStreamSynchronize(stream));
  expect_reference(c, mem, "autotune's first eager run");
  OPST_OK(ops_handle_flush_profiler(h));
  assert_int_equal(seen.records, 1);
  assert_int_equal(seen.choice, OPS_CHOICE_MEASURED);
  explain_on(h, c, &e);
  assert_int_equal(e.choice, OPS_CHOICE_MEASURED);
  assert_true(e.measured >= 2);
  int best = -1;
  for (int i = 0; i < e.count; ++i) {
    if (e.measured_us[i] > 0 && (best < 0 || e.measured_us[i] < e.measured_us[best])) best = i;
  }
  assert_int_equal(e.chosen, best);
  assert_string_equal(seen.kernel, e.verdicts[best].kernel_name);
  printf("[ AUTOTUNE ] %s: %s\n", c->label, e.choice_note);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  ops_handle_destroy(h);
  CUDA_OK(cudaStreamDestroy(stream));
}

static void autotune_and_launch_plans(void **state) {
  (void)state;
  if (!g_have_cuda) {
    printf("[ SKIPPED  ] autotune_and_launch_plans: no CUDA device (it times kernels and reads what ran)\n");
    skip();
  }
  gcall c;
  opst_tensor t[5];
  /* 2 x 1024 rows x 8 heads (GQA 2), d 128: 8 query tiles of 128 a head, even */
  sdpa_dense_call(&c, t, OPS_DTYPE_BF16, 2, 1024, 1024, 8, 4, 128, 128, 0);
  c.label = "sdpa bf16 2 x 8 heads (GQA 2) x 1024 x 1024, d 128, lse";
  check_call(&c); /* the CPU reference, every kernel pinned, the dispatcher's choice */
  void *mem[MAXT] = {0};
  for (int i = 0; i < c.n; ++i) {
    if (c.h[i]->bytes > 0) CUDA_OK(cudaMalloc(&mem[i], c.h[i]->bytes));
  }
  launch_plans_are_the_ones_that_ran(&c, mem);
  autotune_times_eagerly_and_never_in_capture(&c, mem);
  for (int i = 0; i < c.n; ++i) cudaFree(mem[i]);
  free_call(&c);
}

/* ---- the dispatcher's choices for rows of 64 to 65536 ------------------------------ */

static void every_row_length_has_a_kernel(void **state) {
  (void)state;
  for (int64_t cols = 64; cols <= 65536; cols *= 2) {
    const int64_t s[2] = {4, cols};
    ops_tensor x, w;
    OPST_OK(ops_tensor_init(&x, (void *)(uintptr_t)4096, OPS_DTYPE_BF16, ops_device_cuda(0), 2, s, NULL));
    OPST_OK(ops_tensor_init(&w, (void *)(uintptr_t)4096, OPS_DTYPE_BF16, ops_device_cuda(0), 1, &cols, NULL));
    ops_explain e;
    e.struct_size = sizeof e;
    OPST_OK(ops_rmsnorm_explain(g_gpu, NULL, &x, &w, &x, &e));
    assert_true(e.chosen >= 0);
    printf("[ ROWS     ] rmsnorm bf16 4 x %-6lld -> %s\n", (long long)cols, e.verdicts[e.chosen].kernel_name);
    OPST_OK(ops_softmax_explain(g_gpu, NULL, &x, &x, &e));
    assert_true(e.chosen >= 0);
  }
}

static void claimed_features_are_exercised(void **state) {
  (void)state;
  if (g_have_cuda) {
    OPST_OK(ops_handle_flush_profiler(g_gpu));
    printf("[ RUNS     ] %d kernel runs checked against the CPU, %d pinned refusals checked\n", g_runs, g_refusals);
  } else {
    printf("[ DRY RUN  ] no CUDA device: coverage below is of the kernels that would run (explain on a "
           "described sm_90 device); no result was checked on a GPU\n");
  }
  opst_coverage_check("//tests/gpu:gpu_ops_test");
}

static int setup(void **state) {
  (void)state;
  g_have_cuda = opst_have_cuda("gpu_ops");
  opst_rng_init(&g_rng, opst_seed("gpu_ops"));
  g_cpu = opst_cpu_handle();
  if (g_have_cuda) {
    if (ops_handle_create(&g_gpu, ops_device_cuda(0)) != OPS_OK) return -1;
    opst_coverage_start(g_gpu);
  } else { /* the dry run: problems generated and explained, nothing launched */
    ops_device_info h100;
    h100.struct_size = sizeof h100;
    if (ops_device_info_for_sm(90, &h100) != OPS_OK || ops_handle_create_virtual(&g_gpu, &h100) != OPS_OK) return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  ops_handle_destroy(g_cpu);
  if (g_gpu) ops_handle_destroy(g_gpu);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rows_forward),
      cmocka_unit_test(rows_backward),
      cmocka_unit_test(reductions),
      cmocka_unit_test(elementwise),
      cmocka_unit_test(dropout_is_reproducible),
      cmocka_unit_test(elementwise_chains),
      cmocka_unit_test(gemm),
      cmocka_unit_test(gemm_many_tiles),
      cmocka_unit_test(gemm_tf32),
      cmocka_unit_test(sdpa_many_tiles),
      cmocka_unit_test(sdpa_wide_windows),
      cmocka_unit_test(sdpa),
      cmocka_unit_test(autotune_and_launch_plans),
      cmocka_unit_test(every_row_length_has_a_kernel),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  /* OPSLIB_TEST_FILTER=sdpa*: only the tests whose names match (a sanitizer run of one
   * family; the coverage test then does not run) */
  const char *filter = getenv("OPSLIB_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0') cmocka_set_test_filter(filter);
  return cmocka_run_group_tests_name("gpu_ops", tests, setup, teardown);
}
