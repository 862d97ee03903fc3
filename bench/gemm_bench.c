/*
 * ops_gemm on the GPU against cuBLAS / cuBLASLt, linked into this binary and run on the same
 * buffers in the same process (issue 6's targets). Each case registers three benchmarks:
 *   <case>/opslib     ops_gemm (the dispatcher's choice; its kernel is the label);
 *   <case>/cublas     cublasGemmEx, bf16 in, f32 compute (the default algorithm);
 *   <case>/cublaslt   cublasLtMatmul with the case's epilogue fused where cuBLASLt has one
 *                     (bias + GELU(tanh)), the heuristic's first algorithm;
 *   <case>/cublaslt_then_gelu (epilogue cases) cublasLtMatmul with the bias fused, then GELU
 *                     as a separate kernel (ops_unary in place): the unfused pipeline;
 * and reports TFLOPs (2 M N K per call) and, for opslib, pct_cublas against the faster of
 * the case's cublas / cublaslt benchmarks as reported (they run before it), and
 * pct_unfused against cublaslt_then_gelu. f32 cases ("tf32") run with tf32 allowed on
 * both sides (CUBLAS_COMPUTE_32F_FAST_TF32; the handle's OPS_MATH_ALLOW_TF32). GEMV cases report TBps over the minimal
 * bytes and pct_copy against copy/d2d, measured first.
 * Layout names: "tn" = A row-major, B K-major (B^T row-major, as a Linear layer's weight);
 * "nn" = A and B row-major. Inputs are random in [-1, 1) (never zeros).
 *   bench_gemm_bench [--benchmark_filter=REGEX]
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_cuda.h"
#include "bench/shim/opsb.h"
#include "opslib/opslib.h"

static ops_handle g_h;
static cudaStream_t g_stream;
static cublasHandle_t g_blas;
static cublasLtHandle_t g_lt;
static void *g_lt_ws;
static const size_t kLtWorkspace = 64u << 20;
static double g_copy_tbps;
/* The latest measurement of the case's cublasGemmEx and cublasLtMatmul. Google Benchmark
 * calls a benchmark several times (probe runs with few iterations, then the reported one):
 * the last call is the reported one, so "latest" is what the table shows (a running maximum
 * would keep a probe's outlier). */
static double g_cublas_tflops[3]; /* cublasGemmEx, cublasLtMatmul, cublasLtMatmul then GELU */

#define CHECK_BLAS(call)                                                       \
  do {                                                                         \
    int st_ = (int)(call);                                                     \
    if (st_ != 0) {                                                            \
      fprintf(stderr, "%s:%d: %s: status %d\n", __FILE__, __LINE__, #call, st_); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

enum { EPI_NONE = 0, EPI_BIAS_GELU = 1 };

typedef struct gemm_case {
  const char *name;
  int64_t m, n, k;
  int b_kmajor; /* 1: B^T row-major ("tn"); 0: B row-major ("nn") */
  int epi;
  const char *pin; /* NULL: the dispatcher's choice; else the kernel opslib runs */
  int f32;         /* 1: f32 operands, tf32 allowed (cuBLAS: CUBLAS_COMPUTE_32F_FAST_TF32) */
} gemm_case;

/* What the cuBLASLt benchmark runs: the case's epilogue fused where cuBLASLt has it, or
 * (LT_BIAS_THEN_GELU) the GEMM with only the bias fused, GELU then as a separate kernel. */
enum { LT_FUSED = 0, LT_BIAS_THEN_GELU = 1 };

typedef struct gemm_ctx {
  const gemm_case *gc;
  void *a, *b, *d, *bias;
  ops_tensor ta, tb, td, tbias;
  ops_gemm_params p;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld;
  cublasLtMatmulHeuristicResult_t algo;
  void *ws; /* ops_gemm's workspace (ops_gemm_workspace_size) */
  size_t ws_bytes;
} gemm_ctx;

static void setup(gemm_ctx *c, const gemm_case *gc, int lt_mode) {
  memset(c, 0, sizeof *c);
  c->gc = gc;
  const int64_t m = gc->m, n = gc->n, k = gc->k;
  const ops_dtype dt = gc->f32 ? OPS_DTYPE_F32 : OPS_DTYPE_BF16;
  const cudaDataType_t cdt = gc->f32 ? CUDA_R_32F : CUDA_R_16BF;
  c->a = bench_dev_fill(dt, m * k, -1, 1, 11);
  c->b = bench_dev_fill(dt, k * n, -1, 1, 12);
  c->d = bench_dev_alloc((size_t)(m * n) * ops_dtype_size(dt));
  c->bias = bench_dev_fill(dt, n, -1, 1, 13);
  const ops_device dev = ops_device_cuda(0);
  const int64_t sa[2] = {m, k}, sb[2] = {k, n}, sd[2] = {m, n};
  CHECK_OPS(ops_tensor_init(&c->ta, c->a, dt, dev, 2, sa, NULL));
  if (gc->b_kmajor) {
    const int64_t strides[2] = {1, k};
    CHECK_OPS(ops_tensor_init(&c->tb, c->b, dt, dev, 2, sb, strides));
  } else {
    CHECK_OPS(ops_tensor_init(&c->tb, c->b, dt, dev, 2, sb, NULL));
  }
  CHECK_OPS(ops_tensor_init(&c->td, c->d, dt, dev, 2, sd, NULL));
  CHECK_OPS(ops_tensor_init(&c->tbias, c->bias, dt, dev, 1, &n, NULL));
  ops_gemm_params_init(&c->p);
  if (gc->epi == EPI_BIAS_GELU) {
    c->p.bias = &c->tbias;
    c->p.activation = OPS_ACT_GELU_TANH;
  }
  /* cuBLASLt, column-major: D^T [N, M] = B^T [N, K] x A^T [K, M] */
  CHECK_BLAS(cublasLtMatmulDescCreate(&c->op, gc->f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                      CUDA_R_32F));
  const cublasOperation_t ta = gc->b_kmajor ? CUBLAS_OP_T : CUBLAS_OP_N, tn = CUBLAS_OP_N;
  CHECK_BLAS(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CHECK_BLAS(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &tn, sizeof tn));
  if (gc->epi == EPI_BIAS_GELU) {
    const cublasLtEpilogue_t e = lt_mode == LT_BIAS_THEN_GELU ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS;
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    CHECK_BLAS(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c->bias, sizeof c->bias));
  }
  if (gc->b_kmajor) {
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&c->la, cdt, (uint64_t)k, (uint64_t)n, k));
  } else {
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&c->la, cdt, (uint64_t)n, (uint64_t)k, n));
  }
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&c->lb, cdt, (uint64_t)k, (uint64_t)m, k));
  CHECK_BLAS(cublasLtMatrixLayoutCreate(&c->ld, cdt, (uint64_t)n, (uint64_t)m, n));
  cublasLtMatmulPreference_t pref;
  CHECK_BLAS(cublasLtMatmulPreferenceCreate(&pref));
  CHECK_BLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kLtWorkspace,
                                                  sizeof kLtWorkspace));
  int found = 0;
  CHECK_BLAS(cublasLtMatmulAlgoGetHeuristic(g_lt, c->op, c->la, c->lb, c->ld, c->ld, pref, 1, &c->algo, &found));
  if (found == 0) {
    fprintf(stderr, "cuBLASLt found no algorithm for %s\n", gc->name);
    exit(1);
  }
  cublasLtMatmulPreferenceDestroy(pref);
}

static void teardown(gemm_ctx *c) {
  cudaFree(c->a), cudaFree(c->b), cudaFree(c->d), cudaFree(c->bias), cudaFree(c->ws);
  cublasLtMatrixLayoutDestroy(c->la), cublasLtMatrixLayoutDestroy(c->lb), cublasLtMatrixLayoutDestroy(c->ld);
  cublasLtMatmulDescDestroy(c->op);
}

static void call_opslib(void *p) {
  gemm_ctx *c = p;
  CHECK_OPS(ops_gemm(g_h, &c->p, &c->ta, &c->tb, &c->td, c->ws, c->ws_bytes));
}

static void call_cublas(void *p) {
  gemm_ctx *c = p;
  const gemm_case *gc = c->gc;
  const float one = 1.0f, zero = 0.0f;
  const int m = (int)gc->m, n = (int)gc->n, k = (int)gc->k;
  const cudaDataType_t cdt = gc->f32 ? CUDA_R_32F : CUDA_R_16BF;
  CHECK_BLAS(cublasGemmEx(g_blas, gc->b_kmajor ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, c->b, cdt,
                          gc->b_kmajor ? k : n, c->a, cdt, k, &zero, c->d, cdt, n,
                          gc->f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static void call_cublaslt(void *p) {
  gemm_ctx *c = p;
  const float one = 1.0f, zero = 0.0f;
  CHECK_BLAS(cublasLtMatmul(g_lt, c->op, &one, c->b, c->la, c->a, c->lb, &zero, c->d, c->ld, c->d, c->ld,
                            &c->algo.algo, g_lt_ws, kLtWorkspace, g_stream));
}

/* cuBLASLt's GEMM + bias, then GELU (tanh) in place as its own kernel (opslib's unary op):
 * the unfused pipeline a framework without a fused epilogue runs. */
static void call_cublaslt_then_gelu(void *p) {
  gemm_ctx *c = p;
  call_cublaslt(p);
  ops_unary_params u;
  ops_unary_params_init(&u);
  u.fn = OPS_ACT_GELU_TANH;
  CHECK_OPS(ops_unary(g_h, &u, &c->td, &c->td, NULL, 0));
}

static int is_gemv(const gemm_case *gc) { return gc->m == 1 || gc->n == 1; }

static void report(opsb_state *s, const gemm_case *gc, double per, int which) {
  const double flops = 2.0 * (double)gc->m * (double)gc->n * (double)gc->k;
  const double tflops = flops / per / 1e12;
  opsb_counter(s, "TFLOPs", tflops, 0);
  opsb_counter(s, "us", per * 1e6, 0);
  if (is_gemv(gc)) {
    const double bytes = 2.0 * ((double)gc->m * gc->k + (double)gc->k * gc->n + (double)gc->m * gc->n);
    opsb_counter(s, "TBps", bytes / per / 1e12, 0);
    if (g_copy_tbps > 0.0) opsb_counter(s, "pct_copy", 100.0 * bytes / per / 1e12 / g_copy_tbps, 0);
  }
  const double best = g_cublas_tflops[0] > g_cublas_tflops[1] ? g_cublas_tflops[0] : g_cublas_tflops[1];
  if (which == 0 && best > 0.0) opsb_counter(s, "pct_cublas", 100.0 * tflops / best, 0);
  if (which == 0 && g_cublas_tflops[2] > 0.0) opsb_counter(s, "pct_unfused", 100.0 * tflops / g_cublas_tflops[2], 0);
  if (which != 0) g_cublas_tflops[which - 1] = tflops;
}

/* The cuBLAS side of a case: which call, the cuBLASLt setup it needs, its label (plain and
 * with the case's epilogue). Slot i + 1 of g_cublas_tflops; only epilogue cases run the last. */
typedef struct reference {
  void (*call)(void *);
  int lt_mode;
  const char *label, *label_epi;
} reference;

static const reference kRefs[3] = {
    {call_cublas, LT_FUSED, "cublasGemmEx", "cublasGemmEx"},
    {call_cublaslt, LT_FUSED, "cublasLtMatmul", "cublasLtMatmul, GELU_BIAS epilogue fused"},
    {call_cublaslt_then_gelu, LT_BIAS_THEN_GELU, NULL,
     "cublasLtMatmul (BIAS epilogue) + ops_unary GELU(tanh) in place"},
};

typedef struct case_ref {
  const gemm_case *gc;
  int ref; /* index into kRefs */
} case_ref;

/* The cuBLAS benchmarks of a case run first (registration order) and set the bar. */
static void bm_reference(opsb_state *s, const void *arg) {
  const case_ref *cr = arg;
  const gemm_case *gc = cr->gc;
  const reference *r = &kRefs[cr->ref];
  if (cr->ref == 0) g_cublas_tflops[0] = g_cublas_tflops[1] = g_cublas_tflops[2] = 0.0;
  gemm_ctx c;
  setup(&c, gc, r->lt_mode);
  report(s, gc, bench_time(s, r->call, &c, g_stream), cr->ref + 1);
  opsb_label(s, gc->epi == EPI_NONE ? r->label : r->label_epi);
  teardown(&c);
}

static void bm_opslib(opsb_state *s, const void *arg) {
  const gemm_case *gc = arg;
  gemm_ctx c;
  setup(&c, gc, LT_FUSED);
  CHECK_OPS(ops_handle_set_math_mode(g_h, gc->f32 ? OPS_MATH_ALLOW_TF32 : OPS_MATH_STRICT));
  CHECK_OPS(ops_handle_pin_kernel(g_h, gc->pin));
  ops_explain e;
  e.struct_size = sizeof e;
  CHECK_OPS(ops_gemm_explain(g_h, &c.p, &c.ta, &c.tb, &c.td, &e));
  CHECK_OPS(ops_gemm_workspace_size(g_h, &c.p, &c.ta, &c.tb, &c.td, &c.ws_bytes));
  if (c.ws_bytes > 0) c.ws = bench_dev_alloc(c.ws_bytes);
  report(s, gc, bench_time(s, call_opslib, &c, g_stream), 0);
  opsb_label(s, e.chosen >= 0 ? e.verdicts[e.chosen].kernel_name : "none");
  CHECK_OPS(ops_handle_pin_kernel(g_h, NULL));
  CHECK_OPS(ops_handle_set_math_mode(g_h, OPS_MATH_STRICT));
  teardown(&c);
}

static void bm_copy(opsb_state *s, const void *arg) {
  (void)arg;
  while (opsb_keep_running(s)) {
    g_copy_tbps = bench_copy_tbps(g_stream);
    opsb_set_iteration_time(s, 1e-3);
  }
  opsb_counter(s, "TBps", g_copy_tbps, 0);
  opsb_label(s, "cudaMemcpyAsync D2D, 512 MiB, best of 17");
}

static const gemm_case kCases[] = {
    {"tn/4096x4096x4096", 4096, 4096, 4096, 1, EPI_NONE, NULL, 0},
    {"nn/4096x4096x4096", 4096, 4096, 4096, 0, EPI_NONE, NULL, 0},
    {"tn/8192x8192x8192", 8192, 8192, 8192, 1, EPI_NONE, NULL, 0},
    {"nn/8192x8192x8192", 8192, 8192, 8192, 0, EPI_NONE, NULL, 0},
    {"tn/16384x4096x4096", 16384, 4096, 4096, 1, EPI_NONE, NULL, 0},
    {"tn/4096x14336x4096", 4096, 14336, 4096, 1, EPI_NONE, NULL, 0},
    {"tn/8192x4096x4096", 8192, 4096, 4096, 1, EPI_NONE, NULL, 0}, /* the next case without its epilogue */
    {"tn_bias_gelu/8192x4096x4096", 8192, 4096, 4096, 1, EPI_BIAS_GELU, NULL, 0},
    {"tn/4096x4096x4000", 4096, 4096, 4000, 1, EPI_NONE, NULL, 0},
    {"tn/64x14336x4096", 64, 14336, 4096, 1, EPI_NONE, NULL, 0},
    {"tn/16x14336x4096", 16, 14336, 4096, 1, EPI_NONE, NULL, 0},
    {"tn/4x14336x4096", 4, 14336, 4096, 1, EPI_NONE, NULL, 0},
    {"tn/1x14336x4096", 1, 14336, 4096, 1, EPI_NONE, NULL, 0},
    {"nn/14336x1x4096", 14336, 1, 4096, 0, EPI_NONE, NULL, 0},
    /* the other Hopper tile shape, pinned */
    {"tn_pinned_128x128/4096x4096x4096", 4096, 4096, 4096, 1, EPI_NONE, "cuda_gemm_sm90_128x128", 0},
    /* the portable kernels, pinned: what A100-class GPUs and refused layouts get */
    {"tn_pinned_mma/4096x4096x4096", 4096, 4096, 4096, 1, EPI_NONE, "cuda_gemm_mma", 0},
    {"nn_pinned_mma/4096x4096x4096", 4096, 4096, 4096, 0, EPI_NONE, "cuda_gemm_mma", 0},
    {"tn_pinned_mma_cp/4096x4096x4096", 4096, 4096, 4096, 1, EPI_NONE, "cuda_gemm_mma_cp", 0},
    {"nn_pinned_mma_cp/4096x4096x4096", 4096, 4096, 4096, 0, EPI_NONE, "cuda_gemm_mma_cp", 0},
    /* few output tiles (issue 26's rows), the K split and the kernel without it, pinned */
    {"tn_pinned_splitk/16x4096x4096", 16, 4096, 4096, 1, EPI_NONE, "cuda_gemm_sm90_128x128_splitk", 0},
    {"tn_pinned_128x128/16x4096x4096", 16, 4096, 4096, 1, EPI_NONE, "cuda_gemm_sm90_128x128", 0},
    {"tn_pinned_splitk256/16x4096x4096", 16, 4096, 4096, 1, EPI_NONE, "cuda_gemm_sm90_128x256_splitk", 0},
    {"tn_pinned_splitk/128x4096x14336", 128, 4096, 14336, 1, EPI_NONE, "cuda_gemm_sm90_128x128_splitk", 0},
    {"tn_pinned_128x128/128x4096x14336", 128, 4096, 14336, 1, EPI_NONE, "cuda_gemm_sm90_128x128", 0},
    {"tn_bias_gelu_pinned_splitk/64x4096x4096", 64, 4096, 4096, 1, EPI_BIAS_GELU, "cuda_gemm_sm90_128x128_splitk", 0},
    /* f32 with tf32 allowed */
    {"tn_tf32/4096x4096x4096", 4096, 4096, 4096, 1, EPI_NONE, NULL, 1},
    {"nn_tf32/4096x4096x4096", 4096, 4096, 4096, 0, EPI_NONE, NULL, 1},
};

/* Issue 26's grid: M in {16 .. 512} over Llama-3 8B and 70B projections (N x K, the weight
 * K-major as nn.Linear stores it), the dispatcher's choice: "tn_small/MxNxK". */
static const int64_t kSmallM[] = {16, 32, 64, 128, 256, 512};
static const int64_t kSmallNK[][2] = {{4096, 4096}, {6144, 4096}, {14336, 4096}, {4096, 14336},
                                      {8192, 8192}, {28672, 8192}, {8192, 28672}};
enum { NSMALL = (int)(sizeof kSmallM / sizeof kSmallM[0] * (sizeof kSmallNK / sizeof kSmallNK[0])) };
static gemm_case g_small[NSMALL];
static char g_small_names[NSMALL][48];

static void register_case(const gemm_case *gc, char (*name)[96], case_ref *ref, int *k, int *nr) {
  static const char *const ref_names[3] = {"cublas", "cublaslt", "cublaslt_then_gelu"};
  for (int r = 0; r < 3; ++r) {
    if (r == 2 && gc->epi == EPI_NONE) continue; /* the unfused pipeline: epilogue cases */
    ref[*nr] = (case_ref){gc, r};
    snprintf(name[*k], sizeof name[*k], "gemm/%s/%s", gc->name, ref_names[r]);
    opsb_register(name[*k], bm_reference, &ref[*nr], 1);
    ++*k, ++*nr;
  }
  snprintf(name[*k], sizeof name[*k], "gemm/%s/opslib", gc->name);
  opsb_register(name[(*k)++], bm_opslib, gc, 1);
}

int main(int argc, char **argv) {
  if (!bench_open("gemm_bench", &g_h, &g_stream)) return 0;
  CHECK_BLAS(cublasCreate(&g_blas));
  CHECK_BLAS(cublasSetStream(g_blas, g_stream));
  CHECK_BLAS(cublasLtCreate(&g_lt));
  g_lt_ws = bench_dev_alloc(kLtWorkspace);
  opsb_register("copy/d2d_512MiB", bm_copy, NULL, 1);
  enum { NCASES = sizeof kCases / sizeof kCases[0] };
  static char names[4 * (NCASES + NSMALL)][96];
  static case_ref refs[3 * (NCASES + NSMALL)];
  int k = 0, nr = 0;
  for (int i = 0; i < NCASES; ++i) register_case(&kCases[i], names, refs, &k, &nr);
  for (int i = 0; i < NSMALL; ++i) {
    const int64_t m = kSmallM[i % 6], n = kSmallNK[i / 6][0], kk = kSmallNK[i / 6][1];
    snprintf(g_small_names[i], sizeof g_small_names[i], "tn_small/%lldx%lldx%lld", (long long)m, (long long)n,
             (long long)kk);
    g_small[i] = (gemm_case){g_small_names[i], m, n, kk, 1, EPI_NONE, NULL, 0};
    register_case(&g_small[i], names, refs, &k, &nr);
  }
  const int rc = opsb_main(argc, argv);
  cudaFree(g_lt_ws);
  cublasLtDestroy(g_lt);
  cublasDestroy(g_blas);
  ops_handle_destroy(g_h);
  cudaStreamDestroy(g_stream);
  return rc;
}
