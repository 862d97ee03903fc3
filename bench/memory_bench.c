/*
 * The memory-bound ops on the GPU against the copy bandwidth measured by this same binary
 * (issue 5's targets). Each benchmark times K back-to-back calls between CUDA events per
 * iteration (manual time), counts the op's minimal bytes (every input read once, every
 * output written once), and reports:
 *   TBps      achieved bandwidth over the minimal bytes;
 *   pct_copy  that as a percentage of copy/d2d (cudaMemcpyAsync device to device, bytes
 *             read + written), which runs first;
 * and the kernel the dispatcher chose as the label. Tensors are 128 MiB and more, far
 * beyond L2, so no input rotation is needed.
 *   bench_memory_bench [--benchmark_filter=REGEX]
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_cuda.h"
#include "bench/shim/opsb.h"
#include "opslib/opslib.h"

static ops_handle g_h;
static cudaStream_t g_stream;
static double g_copy_tbps;

/* ---- the timed loop ---------------------------------------------------------------- */

typedef struct timed {
  void (*call)(void *ctx);
  void *ctx;
  double bytes;   /* minimal bytes per call */
  const char *kernel;
} timed;

static void run_timed(opsb_state *s, const timed *t) {
  const double per = bench_time(s, t->call, t->ctx, g_stream);
  const double tbps = t->bytes / per / 1e12;
  opsb_set_bytes_per_iteration(s, t->bytes);
  opsb_counter(s, "TBps", tbps, 0);
  opsb_counter(s, "us", per * 1e6, 0);
  if (g_copy_tbps > 0.0) opsb_counter(s, "pct_copy", 100.0 * tbps / g_copy_tbps, 0);
  if (t->kernel) opsb_label(s, t->kernel);
}

/* ---- copy -------------------------------------------------------------------------- */

typedef struct copy_ctx {
  void *src, *dst;
  size_t bytes;
} copy_ctx;

static void copy_call(void *p) {
  copy_ctx *c = p;
  CHECK_CUDA(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, g_stream));
}

static void bm_copy(opsb_state *s, const void *arg) {
  (void)arg;
  copy_ctx c = {bench_dev_alloc(512u << 20), bench_dev_alloc(512u << 20), 512u << 20};
  CHECK_CUDA(cudaMemset(c.src, 1, c.bytes));
  const timed t = {copy_call, &c, 2.0 * (double)c.bytes, "cudaMemcpyAsync D2D, 512 MiB"};
  run_timed(s, &t);
  cudaFree(c.src), cudaFree(c.dst);
  /* the reference for every pct_copy below: the latest measurement */
  g_copy_tbps = bench_copy_tbps(g_stream);
}

/* ---- row-wise ops ------------------------------------------------------------------ */

enum { K_LAYERNORM, K_RMSNORM, K_SOFTMAX, K_ADD_RMSNORM, K_LN_BWD, K_RMS_BWD, K_SOFTMAX_BWD };
static const char *const kKindName[] = {"layernorm", "rmsnorm", "softmax", "add_rmsnorm",
                                        "layernorm_backward", "rmsnorm_backward", "softmax_backward"};

typedef struct rows_case {
  int kind;
  int64_t rows, cols;
  int32_t dtype;
} rows_case;

typedef struct rows_ctx {
  const rows_case *rc;
  ops_tensor x, y, w, b, res, res_out, dy, mean, rstd, dw, db;
  ops_norm_params np;
  ops_norm_backward_params bp;
  ops_softmax_params sp;
  void *ws;
  size_t ws_bytes;
} rows_ctx;

static void rows_call(void *p) {
  rows_ctx *c = p;
  switch (c->rc->kind) {
    case K_LAYERNORM: CHECK_OPS(ops_layernorm(g_h, &c->np, &c->x, &c->w, &c->y, c->ws, c->ws_bytes)); break;
    case K_RMSNORM:
    case K_ADD_RMSNORM: CHECK_OPS(ops_rmsnorm(g_h, &c->np, &c->x, &c->w, &c->y, c->ws, c->ws_bytes)); break;
    case K_SOFTMAX: CHECK_OPS(ops_softmax(g_h, &c->sp, &c->x, &c->y, c->ws, c->ws_bytes)); break;
    case K_LN_BWD:
      CHECK_OPS(ops_layernorm_backward(g_h, &c->bp, &c->dy, &c->x, &c->w, &c->mean, &c->rstd, &c->y, c->ws,
                                       c->ws_bytes));
      break;
    case K_RMS_BWD:
      CHECK_OPS(ops_rmsnorm_backward(g_h, &c->bp, &c->dy, &c->x, &c->w, &c->rstd, &c->y, c->ws, c->ws_bytes));
      break;
    default: CHECK_OPS(ops_softmax_backward(g_h, &c->sp, &c->dy, &c->x, &c->y, c->ws, c->ws_bytes)); break;
  }
}

static void bm_rows(opsb_state *s, const void *arg) {
  const rows_case *rc = arg;
  rows_ctx c;
  memset(&c, 0, sizeof c);
  c.rc = rc;
  const int64_t shape[2] = {rc->rows, rc->cols}, n = rc->rows * rc->cols;
  const double es = (double)ops_dtype_size((ops_dtype)rc->dtype);
  const ops_device dev = ops_device_cuda(0);
  void *px = bench_dev_fill(rc->dtype, n, -2, 2, 1), *py = bench_dev_alloc((size_t)n * (size_t)es);
  void *pw = bench_dev_fill(rc->dtype, rc->cols, 0.5, 1.5, 2), *pb = bench_dev_fill(rc->dtype, rc->cols, -1, 1, 3);
  void *pr = NULL, *pro = NULL, *pdy = NULL, *pm = NULL, *ps = NULL, *pdw = NULL, *pdb = NULL;
  CHECK_OPS(ops_tensor_init(&c.x, px, (ops_dtype)rc->dtype, dev, 2, shape, NULL));
  CHECK_OPS(ops_tensor_init(&c.y, py, (ops_dtype)rc->dtype, dev, 2, shape, NULL));
  CHECK_OPS(ops_tensor_init(&c.w, pw, (ops_dtype)rc->dtype, dev, 1, &rc->cols, NULL));
  CHECK_OPS(ops_tensor_init(&c.b, pb, (ops_dtype)rc->dtype, dev, 1, &rc->cols, NULL));
  ops_norm_params_init(&c.np);
  ops_norm_backward_params_init(&c.bp);
  ops_softmax_params_init(&c.sp);
  double bytes = 2.0 * (double)n * es; /* x in, y out */
  if (rc->kind == K_LAYERNORM) {
    c.np.bias = &c.b;
    bytes += 2.0 * (double)rc->cols * es;
  } else if (rc->kind == K_RMSNORM) {
    bytes += (double)rc->cols * es;
  } else if (rc->kind == K_ADD_RMSNORM) {
    pr = bench_dev_fill(rc->dtype, n, -1, 1, 4);
    pro = bench_dev_alloc((size_t)n * (size_t)es);
    CHECK_OPS(ops_tensor_init(&c.res, pr, (ops_dtype)rc->dtype, dev, 2, shape, NULL));
    CHECK_OPS(ops_tensor_init(&c.res_out, pro, (ops_dtype)rc->dtype, dev, 2, shape, NULL));
    c.np.residual = &c.res;
    c.np.residual_out = &c.res_out;
    bytes += 2.0 * (double)n * es + (double)rc->cols * es; /* residual in, x + residual out */
  } else if (rc->kind >= K_LN_BWD) {
    pdy = bench_dev_fill(rc->dtype, n, -1, 1, 5);
    CHECK_OPS(ops_tensor_init(&c.dy, pdy, (ops_dtype)rc->dtype, dev, 2, shape, NULL));
    bytes += (double)n * es; /* dy in */
    if (rc->kind != K_SOFTMAX_BWD) {
      pm = bench_dev_alloc((size_t)rc->rows * 4), ps = bench_dev_alloc((size_t)rc->rows * 4);
      CHECK_OPS(ops_tensor_init(&c.mean, pm, OPS_DTYPE_F32, dev, 1, &rc->rows, NULL));
      CHECK_OPS(ops_tensor_init(&c.rstd, ps, OPS_DTYPE_F32, dev, 1, &rc->rows, NULL));
      /* real statistics from the forward */
      ops_norm_params f;
      ops_norm_params_init(&f);
      f.rstd_out = &c.rstd;
      f.mean_out = rc->kind == K_LN_BWD ? &c.mean : NULL;
      size_t fws = 0;
      CHECK_OPS(rc->kind == K_LN_BWD ? ops_layernorm_workspace_size(g_h, &f, &c.x, &c.w, &c.y, &fws)
                                     : ops_rmsnorm_workspace_size(g_h, &f, &c.x, &c.w, &c.y, &fws));
      void *pfws = fws ? bench_dev_alloc(fws) : NULL; /* the split forward of long rows needs one */
      CHECK_OPS(rc->kind == K_LN_BWD ? ops_layernorm(g_h, &f, &c.x, &c.w, &c.y, pfws, fws)
                                     : ops_rmsnorm(g_h, &f, &c.x, &c.w, &c.y, pfws, fws));
      CHECK_CUDA(cudaStreamSynchronize(g_stream));
      cudaFree(pfws);
      pdw = bench_dev_alloc((size_t)rc->cols * (size_t)es), pdb = bench_dev_alloc((size_t)rc->cols * (size_t)es);
      CHECK_OPS(ops_tensor_init(&c.dw, pdw, (ops_dtype)rc->dtype, dev, 1, &rc->cols, NULL));
      CHECK_OPS(ops_tensor_init(&c.db, pdb, (ops_dtype)rc->dtype, dev, 1, &rc->cols, NULL));
      c.bp.dweight = &c.dw;
      c.bp.dbias = rc->kind == K_LN_BWD ? &c.db : NULL;
      const double stats = rc->kind == K_LN_BWD ? 2.0 : 1.0, params = rc->kind == K_LN_BWD ? 3.0 : 2.0;
      bytes += 4.0 * stats * (double)rc->rows + params * (double)rc->cols * es; /* w in; dw, db out */
    } else {
      CHECK_OPS(ops_softmax(g_h, &c.sp, &c.x, &c.x, NULL, 0)); /* y: a real softmax output */
    }
  }
  /* the workspace and the kernel, as the dispatcher chooses them */
  ops_explain e;
  e.struct_size = sizeof e;
  switch (rc->kind) {
    case K_LAYERNORM:
      CHECK_OPS(ops_layernorm_workspace_size(g_h, &c.np, &c.x, &c.w, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_layernorm_explain(g_h, &c.np, &c.x, &c.w, &c.y, &e));
      break;
    case K_RMSNORM:
    case K_ADD_RMSNORM:
      CHECK_OPS(ops_rmsnorm_workspace_size(g_h, &c.np, &c.x, &c.w, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_rmsnorm_explain(g_h, &c.np, &c.x, &c.w, &c.y, &e));
      break;
    case K_SOFTMAX:
      CHECK_OPS(ops_softmax_workspace_size(g_h, &c.sp, &c.x, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_softmax_explain(g_h, &c.sp, &c.x, &c.y, &e));
      break;
    case K_LN_BWD:
      CHECK_OPS(ops_layernorm_backward_workspace_size(g_h, &c.bp, &c.dy, &c.x, &c.w, &c.mean, &c.rstd, &c.y,
                                                      &c.ws_bytes));
      CHECK_OPS(ops_layernorm_backward_explain(g_h, &c.bp, &c.dy, &c.x, &c.w, &c.mean, &c.rstd, &c.y, &e));
      break;
    case K_RMS_BWD:
      CHECK_OPS(ops_rmsnorm_backward_workspace_size(g_h, &c.bp, &c.dy, &c.x, &c.w, &c.rstd, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_rmsnorm_backward_explain(g_h, &c.bp, &c.dy, &c.x, &c.w, &c.rstd, &c.y, &e));
      break;
    default:
      CHECK_OPS(ops_softmax_backward_workspace_size(g_h, &c.sp, &c.dy, &c.x, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_softmax_backward_explain(g_h, &c.sp, &c.dy, &c.x, &c.y, &e));
      break;
  }
  c.ws = c.ws_bytes ? bench_dev_alloc(c.ws_bytes) : NULL;
  const timed t = {rows_call, &c, bytes, e.chosen >= 0 ? e.verdicts[e.chosen].kernel_name : "?"};
  run_timed(s, &t);
  void *all[] = {px, py, pw, pb, pr, pro, pdy, pm, ps, pdw, pdb, c.ws};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) cudaFree(all[i]);
}

/* ---- reductions and elementwise ---------------------------------------------------- */

typedef struct flat_case {
  const char *what; /* "sum_last", "sum_axis0", "sin", "add", "dropout" */
  int64_t rows, cols;
  int32_t dtype;
} flat_case;

typedef struct flat_ctx {
  const flat_case *fc;
  ops_tensor x, x2, y;
  ops_reduce_params rp;
  ops_sin_affine_params sp;
  ops_binary_params bp;
  ops_dropout_params dp;
  void *ws;
  size_t ws_bytes;
} flat_ctx;

static void flat_call(void *p) {
  flat_ctx *c = p;
  const char *w = c->fc->what;
  if (strncmp(w, "sum", 3) == 0) {
    CHECK_OPS(ops_reduce(g_h, &c->rp, &c->x, &c->y, c->ws, c->ws_bytes));
  } else if (strcmp(w, "sin") == 0) {
    CHECK_OPS(ops_sin_affine(g_h, &c->sp, &c->x, &c->y, c->ws, c->ws_bytes));
  } else if (strcmp(w, "add") == 0) {
    CHECK_OPS(ops_binary(g_h, &c->bp, &c->x, &c->x2, &c->y, c->ws, c->ws_bytes));
  } else {
    CHECK_OPS(ops_dropout(g_h, &c->dp, &c->x, &c->y, c->ws, c->ws_bytes));
  }
}

static void bm_flat(opsb_state *s, const void *arg) {
  const flat_case *fc = arg;
  flat_ctx c;
  memset(&c, 0, sizeof c);
  c.fc = fc;
  const ops_device dev = ops_device_cuda(0);
  const int64_t shape[2] = {fc->rows, fc->cols}, n = fc->rows * fc->cols;
  const double es = (double)ops_dtype_size((ops_dtype)fc->dtype);
  void *px = bench_dev_fill(fc->dtype, n, -2, 2, 7), *px2 = NULL, *py = NULL;
  CHECK_OPS(ops_tensor_init(&c.x, px, (ops_dtype)fc->dtype, dev, 2, shape, NULL));
  ops_explain e;
  e.struct_size = sizeof e;
  double bytes = (double)n * es;
  if (strncmp(fc->what, "sum", 3) == 0) {
    ops_reduce_params_init(&c.rp);
    const int axis0 = strcmp(fc->what, "sum_axis0") == 0;
    c.rp.axes = axis0 ? 1u : 2u;
    const int64_t out = axis0 ? fc->cols : fc->rows;
    py = bench_dev_alloc((size_t)out * (size_t)es);
    CHECK_OPS(ops_tensor_init(&c.y, py, (ops_dtype)fc->dtype, dev, 1, &out, NULL));
    bytes += (double)out * es;
    CHECK_OPS(ops_reduce_workspace_size(g_h, &c.rp, &c.x, &c.y, &c.ws_bytes));
    CHECK_OPS(ops_reduce_explain(g_h, &c.rp, &c.x, &c.y, &e));
  } else {
    py = bench_dev_alloc((size_t)n * (size_t)es);
    CHECK_OPS(ops_tensor_init(&c.y, py, (ops_dtype)fc->dtype, dev, 2, shape, NULL));
    bytes += (double)n * es;
    if (strcmp(fc->what, "sin") == 0) {
      ops_sin_affine_params_init(&c.sp);
      c.sp.a = 2.0f, c.sp.b = 1.0f;
      CHECK_OPS(ops_sin_affine_workspace_size(g_h, &c.sp, &c.x, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_sin_affine_explain(g_h, &c.sp, &c.x, &c.y, &e));
    } else if (strcmp(fc->what, "add") == 0) {
      px2 = bench_dev_fill(fc->dtype, n, -1, 1, 8);
      CHECK_OPS(ops_tensor_init(&c.x2, px2, (ops_dtype)fc->dtype, dev, 2, shape, NULL));
      bytes += (double)n * es;
      ops_binary_params_init(&c.bp);
      CHECK_OPS(ops_binary_workspace_size(g_h, &c.bp, &c.x, &c.x2, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_binary_explain(g_h, &c.bp, &c.x, &c.x2, &c.y, &e));
    } else {
      ops_dropout_params_init(&c.dp);
      c.dp.p = 0.1f, c.dp.seed = 42;
      CHECK_OPS(ops_dropout_workspace_size(g_h, &c.dp, &c.x, &c.y, &c.ws_bytes));
      CHECK_OPS(ops_dropout_explain(g_h, &c.dp, &c.x, &c.y, &e));
    }
  }
  c.ws = c.ws_bytes ? bench_dev_alloc(c.ws_bytes) : NULL;
  const timed t = {flat_call, &c, bytes, e.chosen >= 0 ? e.verdicts[e.chosen].kernel_name : "?"};
  run_timed(s, &t);
  cudaFree(px), cudaFree(px2), cudaFree(py), cudaFree(c.ws);
}

/* ---- the targets ------------------------------------------------------------------- */

#define BF16 OPS_DTYPE_BF16
static const rows_case kRows[] = {
    {K_LAYERNORM, 16384, 4096, BF16},   {K_LAYERNORM, 65536, 1024, BF16},   {K_LAYERNORM, 4096, 16384, BF16},
    {K_RMSNORM, 16384, 4096, BF16},     {K_RMSNORM, 65536, 1024, BF16},     {K_RMSNORM, 4096, 16384, BF16},
    {K_SOFTMAX, 16384, 4096, BF16},     {K_SOFTMAX, 65536, 1024, BF16},     {K_SOFTMAX, 4096, 16384, BF16},
    {K_ADD_RMSNORM, 16384, 4096, BF16}, {K_ADD_RMSNORM, 65536, 1024, BF16}, {K_ADD_RMSNORM, 4096, 16384, BF16},
    {K_LN_BWD, 16384, 4096, BF16},      {K_LN_BWD, 65536, 1024, BF16},      {K_LN_BWD, 4096, 16384, BF16},
    {K_RMS_BWD, 16384, 4096, BF16},     {K_RMS_BWD, 65536, 1024, BF16},     {K_RMS_BWD, 4096, 16384, BF16},
    {K_SOFTMAX_BWD, 16384, 4096, BF16}, {K_SOFTMAX_BWD, 65536, 1024, BF16}, {K_SOFTMAX_BWD, 4096, 16384, BF16},
    /* beyond the register variants: the split / stream ones */
    {K_RMSNORM, 1024, 65536, BF16},     {K_SOFTMAX, 1024, 65536, BF16},     {K_RMS_BWD, 1024, 65536, BF16},
    {K_LAYERNORM, 16384, 4096, OPS_DTYPE_F32},
};

static const flat_case kFlat[] = {
    {"sum_last", 16384, 4096, BF16},         {"sum_axis0", 16384, 4096, BF16},
    {"sin", 1, 1 << 28, OPS_DTYPE_F32},      {"add", 16384, 4096, BF16},
    {"dropout", 16384, 4096, BF16},
};

int main(int argc, char **argv) {
  if (!bench_open("memory_bench", &g_h, &g_stream)) return 0;
  opsb_register("copy/d2d_512MiB", bm_copy, NULL, 1);
  static char names[64][96];
  int k = 0;
  for (size_t i = 0; i < sizeof kRows / sizeof kRows[0]; ++i, ++k) {
    snprintf(names[k], sizeof names[k], "%s/%s/%lldx%lld", kKindName[kRows[i].kind],
             ops_dtype_name((ops_dtype)kRows[i].dtype), (long long)kRows[i].rows, (long long)kRows[i].cols);
    opsb_register(names[k], bm_rows, &kRows[i], 1);
  }
  for (size_t i = 0; i < sizeof kFlat / sizeof kFlat[0]; ++i, ++k) {
    snprintf(names[k], sizeof names[k], "%s/%s/%lldx%lld", kFlat[i].what, ops_dtype_name((ops_dtype)kFlat[i].dtype),
             (long long)kFlat[i].rows, (long long)kFlat[i].cols);
    opsb_register(names[k], bm_flat, &kFlat[i], 1);
  }
  const int rc = opsb_main(argc, argv);
  ops_handle_destroy(g_h);
  cudaStreamDestroy(g_stream);
  return rc;
}
