/*
 * Thread soak on the CPU backend, built with ThreadSanitizer (the library's C sources too):
 * 8 threads call random ops for OPS_SOAK_SECONDS each phase (default 8), and every output
 * must equal, bit for bit, what one thread computed first (the CPU kernels sum in index
 * order, so any difference is a race). The ops: gemm with a fused epilogue, the norms,
 * softmax, binary, unary, dropout, reduce, sdpa, rope, and fusion plans each thread builds
 * and runs itself. Phases, as handle.h's threading contract allows:
 *   - each thread on its own handle;
 *   - all threads on one handle: its plan cache, a pinned kernel, autotune on, a profiler
 *     whose records must number the kernel runs, explain beside the runs.
 * ThreadSanitizer halts on its first report. A long run: OPS_SOAK_SECONDS=600.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, posix_spawn, waitpid */

#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "opslib/fusion.h"
#include "opslib/opslib.h"

#define THREADS 8

/* ThreadSanitizer: the first report fails the test */
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "halt_on_error=1:second_deadlock_stack=1"; }
#define JOBS 48

/* ---- jobs: an op, its shapes, its inputs (shared, read-only), its reference output ------ */

typedef enum { J_GEMM, J_LAYERNORM, J_RMSNORM, J_SOFTMAX, J_BINARY, J_UNARY, J_REDUCE, J_SDPA, J_ROPE,
               J_DROPOUT, J_PLAN, J_KINDS } job_kind;

typedef struct job {
  job_kind kind;
  int32_t dtype;
  int64_t d[4];
  void *in[4];
  ops_tensor tin[4];
  int64_t out_shape[4];
  int out_ndim;
  size_t out_bytes;
  unsigned char *ref;
} job;

static job g_jobs[JOBS];

static uint64_t next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int64_t pick(uint64_t *s, int64_t lo, int64_t hi) { return lo + (int64_t)(next(s) % (uint64_t)(hi - lo + 1)); }

static void *filled(uint64_t *s, int32_t dtype, int64_t n) {
  const size_t elem = ops_dtype_size((ops_dtype)dtype);
  unsigned char *p = (unsigned char *)malloc((size_t)n * elem + 16);
  for (int64_t i = 0; i < n; ++i) {
    const float v = (float)((int64_t)(next(s) % 2001) - 1000) / 500.0f;
    if (dtype == OPS_DTYPE_F32) {
      memcpy(p + i * 4, &v, 4);
    } else if (dtype == OPS_DTYPE_I32) {
      const int32_t w = (int32_t)(next(s) % 4096);
      memcpy(p + i * 4, &w, 4);
    } else { /* bf16: the top half of the f32 */
      uint32_t bits;
      memcpy(&bits, &v, 4);
      const uint16_t h = (uint16_t)(bits >> 16);
      memcpy(p + i * 2, &h, 2);
    }
  }
  return p;
}

static void input(job *j, int slot, uint64_t *s, int32_t dtype, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  j->in[slot] = filled(s, dtype, n);
  assert_int_equal(ops_tensor_init(&j->tin[slot], j->in[slot], (ops_dtype)dtype, ops_device_cpu(), ndim, shape, NULL),
                   OPS_OK);
}

static void output(job *j, int ndim, const int64_t *shape, int32_t dtype) {
  j->out_ndim = ndim;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    j->out_shape[i] = shape[i];
    n *= shape[i];
  }
  j->out_bytes = (size_t)n * ops_dtype_size((ops_dtype)dtype);
}

static void make_job(job *j, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  memset(j, 0, sizeof *j);
  j->kind = (job_kind)(next(&s) % J_KINDS);
  j->dtype = next(&s) % 2 ? OPS_DTYPE_F32 : OPS_DTYPE_BF16;
  const int32_t dt = j->dtype;
  const int64_t r = pick(&s, 1, 24), c = pick(&s, 1, 48);
  switch (j->kind) {
    case J_GEMM: case J_PLAN: {
      const int64_t k = pick(&s, 1, 40);
      input(j, 0, &s, dt, 2, (int64_t[]){r, k});
      input(j, 1, &s, dt, 2, (int64_t[]){k, c});
      input(j, 2, &s, dt, 1, (int64_t[]){c});
      output(j, 2, (int64_t[]){r, c}, dt);
      break;
    }
    case J_LAYERNORM: case J_RMSNORM:
      input(j, 0, &s, dt, 2, (int64_t[]){r, c});
      input(j, 1, &s, dt, 1, (int64_t[]){c});
      output(j, 2, (int64_t[]){r, c}, dt);
      break;
    case J_SOFTMAX: case J_UNARY: case J_DROPOUT:
      input(j, 0, &s, dt, 2, (int64_t[]){r, c});
      output(j, 2, (int64_t[]){r, c}, dt);
      break;
    case J_BINARY:
      input(j, 0, &s, dt, 2, (int64_t[]){r, c});
      input(j, 1, &s, dt, 1, (int64_t[]){c});
      output(j, 2, (int64_t[]){r, c}, dt);
      break;
    case J_REDUCE:
      input(j, 0, &s, dt, 2, (int64_t[]){r, c});
      output(j, 1, (int64_t[]){r}, OPS_DTYPE_F32);
      break;
    case J_SDPA: {
      const int64_t b = pick(&s, 1, 2), sq = pick(&s, 1, 12), sk = pick(&s, 1, 24), h = pick(&s, 1, 2) * 2;
      const int64_t d = pick(&s, 1, 3) * 8;
      input(j, 0, &s, dt, 4, (int64_t[]){b, sq, h, d});
      input(j, 1, &s, dt, 4, (int64_t[]){b, sk, h / 2, d});
      input(j, 2, &s, dt, 4, (int64_t[]){b, sk, h / 2, d});
      output(j, 4, (int64_t[]){b, sq, h, d}, dt);
      break;
    }
    default: { /* J_ROPE */
      const int64_t t = pick(&s, 1, 16), h = pick(&s, 1, 4), d = pick(&s, 1, 8) * 2;
      input(j, 0, &s, OPS_DTYPE_I32, 1, (int64_t[]){t});
      input(j, 1, &s, dt, 3, (int64_t[]){t, h, d});
      output(j, 3, (int64_t[]){t, h, d}, dt);
      break;
    }
  }
}

/* Runs job j on handle h into out (j->out_bytes); *launches: the kernels it ran. */
static ops_status run_job(ops_handle h, const job *j, void *out, int *launches) {
  ops_tensor y;
  ops_status st = ops_tensor_init(&y, out, (ops_dtype)(j->kind == J_REDUCE ? OPS_DTYPE_F32 : j->dtype),
                                  ops_device_cpu(), j->out_ndim, j->out_shape, NULL);
  if (st != OPS_OK) return st;
  const ops_tensor *a = &j->tin[0], *b = &j->tin[1], *c = &j->tin[2];
  *launches = 1;
  switch (j->kind) {
    case J_GEMM: {
      ops_gemm_params p;
      ops_gemm_params_init(&p);
      p.bias = c;
      p.activation = OPS_ACT_GELU_TANH;
      return ops_gemm(h, &p, a, b, &y, NULL, 0);
    }
    case J_LAYERNORM: return ops_layernorm(h, NULL, a, b, &y, NULL, 0);
    case J_RMSNORM: return ops_rmsnorm(h, NULL, a, b, &y, NULL, 0);
    case J_SOFTMAX: return ops_softmax(h, NULL, a, &y, NULL, 0);
    case J_UNARY: {
      ops_unary_params p;
      ops_unary_params_init(&p);
      p.fn = OPS_ACT_SILU;
      return ops_unary(h, &p, a, &y, NULL, 0);
    }
    case J_DROPOUT: {
      ops_dropout_params p;
      ops_dropout_params_init(&p);
      p.p = 0.3f;
      p.seed = 77;
      return ops_dropout(h, &p, a, &y, NULL, 0);
    }
    case J_BINARY: {
      ops_binary_params p;
      ops_binary_params_init(&p);
      p.op = OPS_BINARY_MUL;
      return ops_binary(h, &p, a, b, &y, NULL, 0);
    }
    case J_REDUCE: {
      ops_reduce_params p;
      ops_reduce_params_init(&p);
      p.axes = 2u;
      p.op = OPS_REDUCE_MEAN;
      return ops_reduce(h, &p, a, &y, NULL, 0);
    }
    case J_SDPA: {
      ops_sdpa_params p;
      ops_sdpa_params_init(&p);
      p.causal = 1;
      size_t bytes = 0;
      st = ops_sdpa_workspace_size(h, &p, a, b, c, &y, NULL, &bytes);
      if (st != OPS_OK) return st;
      void *ws = bytes > 0 ? aligned_alloc(16, (bytes + 15) / 16 * 16) : NULL;
      st = ops_sdpa(h, &p, a, b, c, &y, NULL, ws, bytes);
      free(ws);
      return st;
    }
    case J_ROPE: return ops_rope(h, NULL, a, b, &y, NULL, 0);
    default: { /* J_PLAN: gemm -> binary add of a bias row -> relu, planned on this thread */
      ops_tensor t0, t1;
      const size_t bytes = j->out_bytes;
      void *m0 = malloc(bytes), *m1 = malloc(bytes);
      ops_tensor_init(&t0, m0, (ops_dtype)j->dtype, ops_device_cpu(), 2, j->out_shape, NULL);
      ops_tensor_init(&t1, m1, (ops_dtype)j->dtype, ops_device_cpu(), 2, j->out_shape, NULL);
      ops_binary_params bp;
      ops_binary_params_init(&bp);
      ops_unary_params up;
      ops_unary_params_init(&up);
      up.fn = OPS_ACT_RELU;
      ops_node n[3];
      for (int i = 0; i < 3; ++i) ops_node_init(&n[i]);
      n[0].op = OPS_OP_GEMM, n[0].in[0] = a, n[0].in[1] = b, n[0].out = &t0;
      n[1].op = OPS_OP_BINARY, n[1].params = &bp, n[1].in[0] = &t0, n[1].in[1] = c, n[1].out = &t1;
      n[2].op = OPS_OP_UNARY, n[2].params = &up, n[2].in[0] = &t1, n[2].out = &y;
      ops_plan plan = NULL;
      st = ops_fuse(h, n, 3, 0, &plan);
      if (st == OPS_OK) {
        *launches = ops_plan_step_count(plan);
        st = ops_plan_execute(h, plan, NULL, 0);
        ops_plan_destroy(plan);
      }
      free(m0);
      free(m1);
      return st;
    }
  }
}

/* ---- threads -------------------------------------------------------------------------- */

typedef struct worker {
  int index;
  ops_handle shared; /* NULL: the worker makes its own */
  double seconds;
  long runs, launches, mismatches, errors;
  char first_error[256];
} worker;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *work(void *arg) {
  worker *w = (worker *)arg;
  ops_handle h = w->shared;
  if (h == NULL && ops_handle_create(&h, ops_device_cpu()) != OPS_OK) {
    w->errors++;
    return NULL;
  }
  uint64_t s = 1000 + (uint64_t)w->index;
  const double end = now() + w->seconds;
  while (now() < end) {
    const job *j = &g_jobs[next(&s) % JOBS];
    unsigned char *out = (unsigned char *)malloc(j->out_bytes + 1);
    memset(out, 0xCD, j->out_bytes + 1);
    int launches = 0;
    if (next(&s) % 8 == 0) { /* explain beside the runs: reads the same plan cache */
      ops_explain e;
      e.struct_size = sizeof e;
      ops_tensor y;
      ops_tensor_init(&y, out, (ops_dtype)j->dtype, ops_device_cpu(), j->out_ndim, j->out_shape, NULL);
      if (j->kind == J_SOFTMAX && ops_softmax_explain(h, NULL, &j->tin[0], &y, &e) != OPS_OK) w->errors++;
    }
    const ops_status st = run_job(h, j, out, &launches);
    if (st != OPS_OK) {
      if (w->errors++ == 0) snprintf(w->first_error, sizeof w->first_error, "%s", ops_last_error());
    } else if (memcmp(out, j->ref, j->out_bytes) != 0 || out[j->out_bytes] != 0xCD) {
      w->mismatches++;
    }
    w->runs++;
    w->launches += launches;
    free(out);
  }
  if (w->shared == NULL) ops_handle_destroy(h);
  return NULL;
}

static double soak_seconds(void) {
  const char *e = getenv("OPS_SOAK_SECONDS");
  return e != NULL && atof(e) > 0 ? atof(e) : 8.0;
}

static long run_threads(ops_handle shared, long *launches) {
  pthread_t t[THREADS];
  worker w[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].index = i;
    w[i].shared = shared;
    w[i].seconds = soak_seconds();
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  long runs = 0;
  *launches = 0;
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(t[i], NULL);
    if (w[i].errors || w[i].mismatches) {
      fail_msg("thread %d: %ld errors (first: %s), %ld outputs differ from the single-threaded run", i,
               w[i].errors, w[i].first_error, w[i].mismatches);
    }
    runs += w[i].runs;
    *launches += w[i].launches;
  }
  printf("  %d threads x %.0f s: %ld calls, every output bitwise equal to the single-threaded run\n", THREADS,
         soak_seconds(), runs);
  return runs;
}

/* ---- phases ------------------------------------------------------------------------------- */

static void separate_handles(void **state) {
  (void)state;
  long launches;
  assert_true(run_threads(NULL, &launches) > 0);
}

static long g_records;
static pthread_mutex_t g_records_lock = PTHREAD_MUTEX_INITIALIZER;

static long g_bad_records;

/* called on the threads that run ops: counts only (cmocka's asserts belong to the main thread) */
static void count_record(const ops_profile_record *r, void *user) {
  (void)user;
  pthread_mutex_lock(&g_records_lock);
  g_records++;
  g_bad_records += r->kernel_name == NULL || r->struct_size != sizeof *r;
  pthread_mutex_unlock(&g_records_lock);
}

static void shared_handle(void **state) {
  (void)state;
  ops_handle h;
  assert_int_equal(ops_handle_create(&h, ops_device_cpu()), OPS_OK);
  /* every setting the contract asks to make before ops run, made before the threads start */
  ops_kernel_info info;
  info.struct_size = sizeof info;
  for (int i = 0; i < ops_kernel_count(); ++i) {
    if (ops_kernel_info_at(i, &info) == OPS_OK && info.op == OPS_OP_GEMM && info.backend == OPS_DEVICE_CPU) {
      assert_int_equal(ops_handle_pin_kernel(h, info.name), OPS_OK);
      break;
    }
  }
  assert_int_equal(ops_handle_set_autotune(h, OPS_AUTOTUNE_MEASURE), OPS_OK);
  g_records = 0;
  assert_int_equal(ops_handle_set_profiler(h, count_record, NULL), OPS_OK);
  long launches;
  const long runs = run_threads(h, &launches);
  assert_int_equal(ops_handle_flush_profiler(h), OPS_OK);
  printf("  profiler: %ld records for %ld kernel runs\n", g_records, launches);
  assert_true(runs > 0);
  assert_int_equal(g_records, launches);
  assert_int_equal(g_bad_records, 0);
  assert_int_equal(ops_handle_destroy(h), OPS_OK);
}

static int setup(void **state) {
  (void)state;
  ops_handle h;
  assert_int_equal(ops_handle_create(&h, ops_device_cpu()), OPS_OK);
  for (int i = 0; i < JOBS; ++i) {
    make_job(&g_jobs[i], (uint64_t)i + 1);
    g_jobs[i].ref = (unsigned char *)malloc(g_jobs[i].out_bytes);
    memset(g_jobs[i].ref, 0xCD, g_jobs[i].out_bytes);
    int launches;
    if (run_job(h, &g_jobs[i], g_jobs[i].ref, &launches) != OPS_OK) {
      fprintf(stderr, "job %d (kind %d): %s\n", i, (int)g_jobs[i].kind, ops_last_error());
      return -1;
    }
  }
  ops_handle_destroy(h);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < JOBS; ++i) {
    for (int k = 0; k < 4; ++k) free(g_jobs[i].in[k]);
    free(g_jobs[i].ref);
  }
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(separate_handles),
      cmocka_unit_test(shared_handle),
  };
  return cmocka_run_group_tests_name("thread_soak", tests, setup, teardown);
}
