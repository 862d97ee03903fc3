/*
 * Determinism and CUDA faults on the GPU.
 *
 * Determinism soak: on a handle with the determinism flag, each op runs 20 times on realistic
 * shapes (prefill and paged decode attention, a skinny and a square GEMM, norms and their
 * backward with dweight, softmax, a column reduction, RoPE, the cache append, dropout,
 * binary), alternating between two streams while another handle keeps a third stream busy
 * with GEMMs, and every run's outputs must be bitwise identical to the first's. The kernel
 * each op chose must say deterministic in its capability row.
 *
 * CUDA faults: a launch that fails (a real launch of 2048 threads a block put in place of the
 * kernel's, through the dispatcher's test hook) returns OPS_ERR_CUDA naming the CUDA error,
 * writes nothing, and the handle's next call succeeds; after a kernel that trapped (the
 * context's sticky error, in a child process of its own), an op returns OPS_ERR_CUDA naming
 * the error. Under compute-sanitizer (which would report the deliberate faults) the fault
 * cases skip and say so. Without a CUDA device every case skips.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, posix_spawn, waitpid */

#include <cuda_runtime_api.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "dispatch/dispatch.h"
#include "opslib/opslib.h"
#include "tests/gpu/cuda_check.h"
#include "tests/support/opst.h"

extern char **environ;
int opst_gpu_trap(void *stream);

enum { RUNS = 20, MAX_BUFS = 10 };

static int g_cuda;
static opst_rng g_r;

/* ---- device tensors ------------------------------------------------------------------- */

typedef struct dbuf {
  void *d;
  size_t bytes;
  ops_tensor t;
} dbuf;

static void dalloc_fill(dbuf *b, int32_t dt, int nd, const int64_t *shape, int kind) {
  int64_t n = 1;
  for (int i = 0; i < nd; ++i) n *= shape[i];
  const size_t elem = ops_dtype_size((ops_dtype)dt);
  b->bytes = (size_t)n * elem;
  CUDA_OK(cudaMalloc(&b->d, b->bytes > 0 ? b->bytes : 16));
  unsigned char *h = (unsigned char *)malloc(b->bytes + 16);
  for (int64_t i = 0; i < n; ++i) {
    const double v = opst_uniform(&g_r, -1.0, 1.0);
    if (kind == 1) { /* int32 indices in [0, 1024) */
      const int32_t w = (int32_t)(opst_u64(&g_r) % 1024);
      memcpy(h + i * 4, &w, 4);
    } else {
      opst_encode(h + (size_t)i * elem, dt, v);
    }
  }
  CUDA_OK(cudaMemcpy(b->d, h, b->bytes, cudaMemcpyHostToDevice));
  free(h);
  OPST_OK(ops_tensor_init(&b->t, b->d, (ops_dtype)dt, ops_device_cuda(0), nd, shape, NULL));
}

static void dalloc(dbuf *b, int32_t dt, int nd, const int64_t *shape) { dalloc_fill(b, dt, nd, shape, 0); }

static void dfree(dbuf *b) {
  cudaFree(b->d);
  memset(b, 0, sizeof *b);
}

/* ---- one op of the soak ----------------------------------------------------------------- */

typedef struct soak_case {
  const char *name;
  dbuf buf[MAX_BUFS];
  int nbuf;
  int out[MAX_BUFS]; /* 1: compared across runs */
  ops_status (*run)(ops_handle h, struct soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e);
  int64_t i[8];      /* the case's own numbers */
} soak_case;

#define B(k) (&c->buf[k].t)
#define CALL(fn, ...) \
  (e ? fn##_explain(h, __VA_ARGS__, e) : query ? fn##_workspace_size(h, __VA_ARGS__, query) : fn(h, __VA_ARGS__, ws, ws_bytes))

static ops_status run_sdpa(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_sdpa_params p;
  ops_sdpa_params_init(&p);
  p.causal = 1;
  if (c->i[0]) { /* paged decode: kv_lens, block_table */
    p.kv_lens = B(5);
    p.block_table = B(6);
  }
  return CALL(ops_sdpa, &p, B(0), B(1), B(2), B(3), B(4));
}

static ops_status run_gemm(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_gemm_params p;
  ops_gemm_params_init(&p);
  p.bias = B(3);
  p.activation = OPS_ACT_GELU_TANH;
  return CALL(ops_gemm, &p, B(0), B(1), B(2));
}

static ops_status run_rms(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_norm_params p;
  ops_norm_params_init(&p);
  p.residual = B(3);
  p.residual_out = B(4);
  p.rstd_out = B(5);
  return CALL(ops_rmsnorm, &p, B(0), B(1), B(2));
}

static ops_status run_ln(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_norm_params p;
  ops_norm_params_init(&p);
  p.mean_out = B(3);
  p.rstd_out = B(4);
  return CALL(ops_layernorm, &p, B(0), B(1), B(2));
}

static ops_status run_rms_bwd(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_norm_backward_params p;
  ops_norm_backward_params_init(&p);
  p.dweight = B(5);
  return CALL(ops_rmsnorm_backward, &p, B(0), B(1), B(2), B(3), B(4));
}

static ops_status run_softmax(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  return CALL(ops_softmax, NULL, B(0), B(1));
}

static ops_status run_reduce(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_reduce_params p;
  ops_reduce_params_init(&p);
  p.axes = 1u; /* down the columns */
  return CALL(ops_reduce, &p, B(0), B(1));
}

static ops_status run_rope(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_rope_params p;
  ops_rope_params_init(&p);
  p.k = B(3);
  p.k_out = B(4);
  return CALL(ops_rope, &p, B(0), B(1), B(2));
}

static ops_status run_append(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_rope_params rp;
  ops_rope_params_init(&rp);
  ops_kv_cache_append_params p;
  ops_kv_cache_append_params_init(&p);
  p.rope = &rp;
  p.positions = B(5);
  return CALL(ops_kv_cache_append, &p, B(0), B(1), B(2), B(3), B(4));
}

static ops_status run_dropout(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_dropout_params p;
  ops_dropout_params_init(&p);
  p.p = 0.1f;
  p.seed = 1234;
  return CALL(ops_dropout, &p, B(0), B(1));
}

static ops_status run_binary(ops_handle h, soak_case *c, void *ws, size_t ws_bytes, size_t *query, ops_explain *e) {
  ops_binary_params p;
  ops_binary_params_init(&p);
  p.op = OPS_BINARY_MUL;
  return CALL(ops_binary, &p, B(0), B(1), B(2));
}

#define ADD(c_, role, dt, nd, ...)                                        \
  do {                                                                    \
    const int64_t s_[] = {__VA_ARGS__};                                   \
    dalloc(&(c_)->buf[(c_)->nbuf], dt, nd, s_);                           \
    (c_)->out[(c_)->nbuf++] = (role);                                     \
  } while (0)

static void build_case(soak_case *c, int which) {
  memset(c, 0, sizeof *c);
  const int32_t bf = OPS_DTYPE_BF16, f32 = OPS_DTYPE_F32;
  switch (which) {
    case 0:
      c->name = "sdpa prefill causal bf16 B2 S1024 H16 D128 + lse";
      c->run = run_sdpa;
      ADD(c, 0, bf, 4, 2, 1024, 16, 128);
      ADD(c, 0, bf, 4, 2, 1024, 16, 128);
      ADD(c, 0, bf, 4, 2, 1024, 16, 128);
      ADD(c, 1, bf, 4, 2, 1024, 16, 128);
      ADD(c, 1, f32, 3, 2, 16, 1024);
      break;
    case 1: {
      c->name = "sdpa paged decode bf16 B8 kv 8192 (page 16) Hq32:Hkv8 D128 + lse";
      c->run = run_sdpa;
      c->i[0] = 1;
      const int64_t pages = 8 * 8192 / 16;
      ADD(c, 0, bf, 4, 8, 1, 32, 128);
      ADD(c, 0, bf, 4, pages, 16, 8, 128);
      ADD(c, 0, bf, 4, pages, 16, 8, 128);
      ADD(c, 1, bf, 4, 8, 1, 32, 128);
      ADD(c, 1, f32, 3, 8, 32, 1);
      /* kv_lens: 8192 each; block_table: a permutation-free identity (sequence b owns pages
       * b * 512 ..) written below */
      ADD(c, 0, OPS_DTYPE_I32, 1, 8);
      ADD(c, 0, OPS_DTYPE_I32, 2, 8, 512);
      int32_t lens[8], table[8 * 512];
      for (int b = 0; b < 8; ++b) lens[b] = 8192 - 37 * b;
      for (int i = 0; i < 8 * 512; ++i) table[i] = (i * 7) % (int)pages; /* scattered, 7 coprime */
      CUDA_OK(cudaMemcpy(c->buf[5].d, lens, sizeof lens, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(c->buf[6].d, table, sizeof table, cudaMemcpyHostToDevice));
      break;
    }
    case 2:
      c->name = "gemm bf16 M64 N4096 K4096 + bias + gelu";
      c->run = run_gemm;
      ADD(c, 0, bf, 2, 64, 4096);
      ADD(c, 0, bf, 2, 4096, 4096);
      ADD(c, 1, bf, 2, 64, 4096);
      ADD(c, 0, bf, 1, 4096);
      break;
    case 3:
      c->name = "gemm bf16 M2048 N2048 K2048 + bias + gelu";
      c->run = run_gemm;
      ADD(c, 0, bf, 2, 2048, 2048);
      ADD(c, 0, bf, 2, 2048, 2048);
      ADD(c, 1, bf, 2, 2048, 2048);
      ADD(c, 0, bf, 1, 2048);
      break;
    case 4:
      c->name = "rmsnorm bf16 4096 x 8192 + residual, residual_out, rstd";
      c->run = run_rms;
      ADD(c, 0, bf, 2, 4096, 8192);
      ADD(c, 0, bf, 1, 8192);
      ADD(c, 1, bf, 2, 4096, 8192);
      ADD(c, 0, bf, 2, 4096, 8192);
      ADD(c, 1, bf, 2, 4096, 8192);
      ADD(c, 1, f32, 1, 4096);
      break;
    case 5:
      c->name = "layernorm f32 1024 x 30000 + mean, rstd";
      c->run = run_ln;
      ADD(c, 0, f32, 2, 1024, 30000);
      ADD(c, 0, f32, 1, 30000);
      ADD(c, 1, f32, 2, 1024, 30000);
      ADD(c, 1, f32, 1, 1024);
      ADD(c, 1, f32, 1, 1024);
      break;
    case 6:
      c->name = "rmsnorm_backward bf16 8192 x 4096 + dweight (f32)";
      c->run = run_rms_bwd;
      ADD(c, 0, bf, 2, 8192, 4096);
      ADD(c, 0, bf, 2, 8192, 4096);
      ADD(c, 0, bf, 1, 4096);
      ADD(c, 0, f32, 1, 8192);
      ADD(c, 1, bf, 2, 8192, 4096);
      ADD(c, 1, f32, 1, 4096);
      break;
    case 7:
      c->name = "softmax bf16 4096 x 32000";
      c->run = run_softmax;
      ADD(c, 0, bf, 2, 4096, 32000);
      ADD(c, 1, bf, 2, 4096, 32000);
      break;
    case 8:
      c->name = "reduce sum f32 over axis 0 of 65536 x 1024";
      c->run = run_reduce;
      ADD(c, 0, f32, 2, 65536, 1024);
      ADD(c, 1, f32, 1, 1024);
      break;
    case 9:
      c->name = "rope bf16 q [8192, 32, 128], k [8192, 8, 128]";
      c->run = run_rope;
      dalloc_fill(&c->buf[c->nbuf++], OPS_DTYPE_I32, 1, (const int64_t[]){8192}, 1);
      ADD(c, 0, bf, 3, 8192, 32, 128);
      ADD(c, 1, bf, 3, 8192, 32, 128);
      ADD(c, 0, bf, 3, 8192, 8, 128);
      ADD(c, 1, bf, 3, 8192, 8, 128);
      break;
    case 10: {
      c->name = "kv_cache_append + rope bf16 T4096 Hkv8 D128 into 1024 pages of 16";
      c->run = run_append;
      ADD(c, 0, bf, 3, 4096, 8, 128);
      ADD(c, 0, bf, 3, 4096, 8, 128);
      ADD(c, 0, OPS_DTYPE_I32, 1, 4096);
      ADD(c, 1, bf, 4, 1024, 16, 8, 128);
      ADD(c, 1, bf, 4, 1024, 16, 8, 128);
      dalloc_fill(&c->buf[c->nbuf++], OPS_DTYPE_I32, 1, (const int64_t[]){4096}, 1);
      int32_t slots[4096];
      for (int t = 0; t < 4096; ++t) slots[t] = (int32_t)((t * 5 + 3) % 16384); /* distinct slots */
      CUDA_OK(cudaMemcpy(c->buf[2].d, slots, sizeof slots, cudaMemcpyHostToDevice));
      break;
    }
    case 11:
      c->name = "dropout bf16 16M elements, p 0.1";
      c->run = run_dropout;
      ADD(c, 0, bf, 2, 4096, 4096);
      ADD(c, 1, bf, 2, 4096, 4096);
      break;
    default:
      c->name = "binary mul f32 [4096, 4096] x [4096] broadcast";
      c->run = run_binary;
      ADD(c, 0, f32, 2, 4096, 4096);
      ADD(c, 0, f32, 1, 4096);
      ADD(c, 1, f32, 2, 4096, 4096);
      break;
  }
}
enum { CASES = 13 };

static void free_case(soak_case *c) {
  for (int k = 0; k < c->nbuf; ++k) dfree(&c->buf[k]);
}

/* Copies the case's outputs to host memory (one block, in buffer order). */
static unsigned char *outputs_of(soak_case *c, size_t *bytes) {
  size_t total = 0;
  for (int k = 0; k < c->nbuf; ++k) total += c->out[k] ? c->buf[k].bytes : 0;
  unsigned char *h = (unsigned char *)malloc(total + 1);
  size_t at = 0;
  for (int k = 0; k < c->nbuf; ++k) {
    if (!c->out[k]) continue;
    CUDA_OK(cudaMemcpy(h + at, c->buf[k].d, c->buf[k].bytes, cudaMemcpyDeviceToHost));
    at += c->buf[k].bytes;
  }
  *bytes = total;
  return h;
}

/* ---- determinism ------------------------------------------------------------------------- */

/* compute-sanitizer injects its library into the process (after CUDA's initialization) */
static int under_sanitizer(void) {
  if (getenv("CUDA_INJECTION64_PATH") != NULL) return 1;
  FILE *f = fopen("/proc/self/maps", "r");
  if (f == NULL) return 0;
  char line[512];
  int found = 0;
  while (!found && fgets(line, sizeof line, f) != NULL) found = strstr(line, "sanitizer") != NULL;
  fclose(f);
  return found;
}

/* Under compute-sanitizer: the cases of moderate size (decode with its combine, the skinny
 * GEMM, the append, binary), twice each; racecheck of the others would take hours. */
static int sanitizer_case(int which) { return which == 1 || which == 2 || which == 10 || which == CASES - 1; }

static void determinism_soak(void **state) {
  (void)state;
  if (!g_cuda) {
    skip();
  }
  ops_handle h, busy;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  OPST_OK(ops_handle_create(&busy, ops_device_cuda(0)));
  OPST_OK(ops_handle_set_deterministic(h, 1));
  cudaStream_t sa, sb, sc;
  CUDA_OK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&sc, cudaStreamNonBlocking));
  OPST_OK(ops_handle_set_stream(busy, sc));
  /* the other work: a 4096^3 bf16 GEMM, queued on stream C before every run */
  dbuf ga, gb, gd;
  dalloc(&ga, OPS_DTYPE_BF16, 2, (const int64_t[]){4096, 4096});
  dalloc(&gb, OPS_DTYPE_BF16, 2, (const int64_t[]){4096, 4096});
  dalloc(&gd, OPS_DTYPE_BF16, 2, (const int64_t[]){4096, 4096});
  /* under compute-sanitizer (memcheck, racecheck): two runs of a few ops, no GEMMs beside:
   * the launches' memory and shared-memory safety, in minutes */
  const int sanitized = under_sanitizer();
  const int runs = sanitized ? 2 : RUNS;
  int total_runs = 0, ops = 0;
  for (int which = 0; which < CASES; ++which) {
    if (sanitized && !sanitizer_case(which)) continue;
    ops++;
    soak_case c;
    build_case(&c, which);
    ops_explain e;
    e.struct_size = sizeof e;
    OPST_OK(c.run(h, &c, NULL, 0, NULL, &e));
    assert_true(e.chosen >= 0);
    ops_kernel_info info;
    info.struct_size = sizeof info;
    OPST_OK(ops_kernel_info_by_name(e.verdicts[e.chosen].kernel_name, &info));
    assert_int_equal(info.deterministic, 1);
    size_t ws_bytes = 0;
    OPST_OK(c.run(h, &c, NULL, 0, &ws_bytes, NULL));
    void *ws = NULL;
    if (ws_bytes > 0) CUDA_OK(cudaMalloc(&ws, ws_bytes));
    unsigned char *first = NULL;
    size_t bytes = 0;
    int same = 0;
    for (int r = 0; r < runs; ++r) {
      if (runs == RUNS) OPST_OK(ops_gemm(busy, NULL, &ga.t, &gb.t, &gd.t, NULL, 0));
      cudaStream_t s = r % 2 ? sb : sa;
      OPST_OK(ops_handle_set_stream(h, s));
      /* the outputs poisoned first: a run must write them all again */
      for (int k = 0; k < c.nbuf; ++k) { /* the append writes its slots alone: one poison for it */
        if (c.out[k]) CUDA_OK(cudaMemsetAsync(c.buf[k].d, c.run == run_append ? 0x7F : 0x7F - r, c.buf[k].bytes, s));
      }
      const ops_status st = c.run(h, &c, ws, ws_bytes, NULL, NULL);
      if (st != OPS_OK) fail_msg("%s: run %d: %s", c.name, r, ops_last_error());
      CUDA_OK(cudaStreamSynchronize(s));
      size_t n = 0;
      unsigned char *out = outputs_of(&c, &n);
      if (first == NULL) {
        first = out;
        bytes = n;
        same++;
        continue;
      }
      assert_int_equal(n, bytes);
      same += memcmp(out, first, n) == 0;
      free(out);
    }
    printf("[ DETERMINISM ] %-72s %s: %d/%d runs bitwise identical (2 streams%s)\n", c.name,
           e.verdicts[e.chosen].kernel_name, same, runs, runs == RUNS ? ", GEMMs beside" : "");
    if (same != runs) fail_msg("%s: %d of %d runs differ from the first", c.name, runs - same, runs);
    total_runs += runs;
    free(first);
    cudaFree(ws);
    free_case(&c);
  }
  CUDA_OK(cudaDeviceSynchronize());
  printf("[ DETERMINISM ] %d ops x %d runs = %d runs, all identical%s\n", ops, runs, total_runs,
         sanitized ? " (under compute-sanitizer: a subset, twice each)" : "");
  dfree(&ga);
  dfree(&gb);
  dfree(&gd);
  OPST_OK(ops_handle_destroy(h));
  OPST_OK(ops_handle_destroy(busy));
  cudaStreamDestroy(sa);
  cudaStreamDestroy(sb);
  cudaStreamDestroy(sc);
}

/* ---- CUDA faults --------------------------------------------------------------------------- */

static void failed_launch_is_reported_and_the_handle_recovers(void **state) {
  (void)state;
  if (!g_cuda) skip();
  if (under_sanitizer()) {
    printf("[ SKIP     ] under compute-sanitizer, which reports the deliberate invalid launch\n");
    skip();
  }
  ops_handle h;
  OPST_OK(ops_handle_create(&h, ops_device_cuda(0)));
  soak_case c;
  build_case(&c, 4); /* rmsnorm */
  for (int k = 0; k < c.nbuf; ++k) {
    if (c.out[k]) CUDA_OK(cudaMemset(c.buf[k].d, 0x5A, c.buf[k].bytes));
  }
  size_t n0 = 0;
  unsigned char *before = outputs_of(&c, &n0);
  opsi_fail_next_cuda_launches(1);
  const ops_status st = c.run(h, &c, NULL, 0, NULL, NULL);
  printf("[ FAULT    ] forced invalid launch: %s: %s\n", ops_status_name(st), ops_last_error());
  assert_int_equal(st, OPS_ERR_CUDA);
  assert_non_null(strstr(ops_last_error(), "kernel launch failed")); /* and the error's name: */
  assert_non_null(strstr(ops_last_error(), "(cudaError"));
  assert_non_null(strstr(ops_last_error(), "ops_rmsnorm"));
  CUDA_OK(cudaDeviceSynchronize());
  size_t n1 = 0;
  unsigned char *after = outputs_of(&c, &n1);
  assert_int_equal(n0, n1);
  assert_memory_equal(before, after, n0); /* nothing ran */
  free(after);
  /* the error was not sticky: the same handle runs the op next */
  OPST_OK(c.run(h, &c, NULL, 0, NULL, NULL));
  CUDA_OK(cudaDeviceSynchronize());
  after = outputs_of(&c, &n1);
  assert_true(memcmp(before, after, n0) != 0);
  printf("[ FAULT    ] the next call on the same handle: OPS_OK, outputs written\n");
  free(before);
  free(after);
  free_case(&c);
  OPST_OK(ops_handle_destroy(h));
}

/* The child: a kernel traps; then an op on a fresh handle must say OPS_ERR_CUDA and name the
 * error. Exit status 0 when it does. */
static int sticky_child(void) {
  ops_handle h;
  if (ops_handle_create(&h, ops_device_cuda(0)) != OPS_OK) return 2;
  soak_case c;
  g_cuda = 1;
  build_case(&c, 12); /* binary */
  opst_gpu_trap(NULL);
  const cudaError_t sync = cudaDeviceSynchronize(); /* the context's error is now sticky */
  const ops_status st = c.run(h, &c, NULL, 0, NULL, NULL);
  printf("[ FAULT    ] after a trapped kernel (%s): %s: %s\n", cudaGetErrorName(sync), ops_status_name(st),
         ops_last_error());
  const int named = strstr(ops_last_error(), cudaGetErrorName(sync)) != NULL ||
                    strstr(ops_last_error(), cudaGetErrorString(sync)) != NULL;
  const ops_status dst = ops_handle_destroy(h);
  printf("[ FAULT    ] ops_handle_destroy after it: %s\n", ops_status_name(dst));
  fflush(stdout);
  return st == OPS_ERR_CUDA && named && sync != cudaSuccess ? 0 : 1;
}

static void sticky_error_is_reported(void **state) {
  (void)state;
  if (!g_cuda) skip();
  if (under_sanitizer()) {
    printf("[ SKIP     ] under compute-sanitizer, which reports the deliberate trap\n");
    skip();
  }
  fflush(stdout);
  char *argv[] = {(char *)"gpu_soak_test", NULL};
  char **env = NULL;
  int n = 0;
  while (environ[n] != NULL) ++n;
  env = (char **)calloc((size_t)n + 2, sizeof *env);
  for (int i = 0; i < n; ++i) env[i] = environ[i];
  env[n] = (char *)"OPS_GPU_SOAK_STICKY_CHILD=1";
  pid_t pid;
  assert_int_equal(posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env), 0);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  free(env);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static int setup(void **state) {
  (void)state;
  g_cuda = opst_have_cuda("gpu_soak");
  opst_rng_init(&g_r, opst_seed("gpu_soak"));
  return 0;
}

int main(void) {
  if (getenv("OPS_GPU_SOAK_STICKY_CHILD") != NULL) {
    opst_rng_init(&g_r, 1);
    return sticky_child();
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(determinism_soak),
      cmocka_unit_test(failed_launch_is_reported_and_the_handle_recovers),
      cmocka_unit_test(sticky_error_is_reported),
  };
  return cmocka_run_group_tests_name("gpu_soak", tests, setup, NULL);
}
