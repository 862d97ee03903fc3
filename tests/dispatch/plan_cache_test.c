/*
 * The plan cache: hits return what was stored for exactly that key (never a torn or
 * foreign entry) under 8 threads writing and reading colliding keys; the dispatcher's use
 * of it under 8 threads gives every call the right kernel and result; a repeated call hits.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "opslib/opslib.h"
#include "runtime/plan_cache.h"
#include "tests/support/opst.h"

enum { THREADS = 8, KEYS = 3000, WORDS = 13 };

static opsi_plan_cache g_cache;

static void make_key(uint64_t k, uint64_t *key) {
  for (int i = 0; i < WORDS; ++i) key[i] = k * 0x9E3779B97F4A7C15ull + (uint64_t)i * 0x632BE59BD9B4E019ull;
}

typedef struct {
  uint64_t seed;
  long hits, wrong;
} worker;

static void *hammer(void *arg) {
  worker *w = (worker *)arg;
  opst_rng r;
  opst_rng_init(&r, w->seed);
  uint64_t key[WORDS], value[2];
  for (int i = 0; i < 200000; ++i) {
    const uint64_t k = (uint64_t)opst_int(&r, 0, KEYS - 1);
    make_key(k, key);
    if (opsi_plan_cache_get(&g_cache, key, WORDS, value)) {
      ++w->hits;
      if (value[0] != k || value[1] != ~k) ++w->wrong;
    } else {
      const uint64_t v[2] = {k, ~k};
      opsi_plan_cache_put(&g_cache, key, WORDS, v);
    }
  }
  return NULL;
}

static void concurrent_hits_are_never_torn(void **state) {
  (void)state;
  memset(&g_cache, 0, sizeof g_cache);
  pthread_t t[THREADS];
  worker w[THREADS];
  const uint64_t seed = opst_seed("plan_cache");
  for (int i = 0; i < THREADS; ++i) {
    w[i] = (worker){seed + (uint64_t)i, 0, 0};
    pthread_create(&t[i], NULL, hammer, &w[i]);
  }
  long hits = 0, wrong = 0;
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(t[i], NULL);
    hits += w[i].hits;
    wrong += w[i].wrong;
  }
  printf("[ CACHE    ] %d threads, %d keys over %d slots: %ld hits, %ld wrong\n", THREADS, KEYS, OPSI_CACHE_SLOTS,
         hits, wrong);
  assert_int_equal(wrong, 0);
  assert_true(hits > 0);
}

static void replacement_and_clear(void **state) {
  (void)state;
  memset(&g_cache, 0, sizeof g_cache);
  uint64_t key[WORDS], other[WORDS], v[2];
  make_key(1, key);
  const uint64_t val[2] = {7, 8};
  assert_false(opsi_plan_cache_get(&g_cache, key, WORDS, v));
  opsi_plan_cache_put(&g_cache, key, WORDS, val);
  assert_true(opsi_plan_cache_get(&g_cache, key, WORDS, v));
  assert_true(v[0] == 7 && v[1] == 8);
  memcpy(other, key, sizeof key);
  other[WORDS - 1] ^= 1; /* one bit apart: a different key */
  assert_false(opsi_plan_cache_get(&g_cache, other, WORDS, v));
  assert_false(opsi_plan_cache_get(&g_cache, key, WORDS - 1, v)); /* key length is part of the key */
  opsi_plan_cache_clear(&g_cache);
  assert_false(opsi_plan_cache_get(&g_cache, key, WORDS, v));
}

/* ---- through the dispatcher ---- */

static ops_handle g_h;

typedef struct {
  uint64_t seed;
  int failures;
} op_worker;

static void *softmax_worker(void *arg) {
  op_worker *w = (op_worker *)arg;
  opst_rng r;
  opst_rng_init(&r, w->seed);
  float x[64], y[64];
  for (int it = 0; it < 3000; ++it) {
    const int64_t rows = opst_int(&r, 1, 4), cols = opst_int(&r, 1, 16);
    const int64_t s[2] = {rows, cols};
    for (int i = 0; i < rows * cols; ++i) x[i] = (float)opst_uniform(&r, -3, 3);
    ops_tensor tx, ty;
    ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 2, s, NULL);
    ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 2, s, NULL);
    if (ops_softmax(g_h, NULL, &tx, &ty, NULL, 0) != OPS_OK) {
      ++w->failures;
      continue;
    }
    for (int64_t i = 0; i < rows; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < cols; ++j) sum += y[i * cols + j];
      if (fabs(sum - 1.0) > 1e-5) ++w->failures;
    }
  }
  return NULL;
}

static void eight_threads_share_one_handle(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  pthread_t t[THREADS];
  op_worker w[THREADS];
  const uint64_t seed = opst_seed("plan_cache_ops");
  for (int i = 0; i < THREADS; ++i) {
    w[i] = (op_worker){seed + (uint64_t)i, 0};
    pthread_create(&t[i], NULL, softmax_worker, &w[i]);
  }
  int failures = 0;
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(t[i], NULL);
    failures += w[i].failures;
  }
  assert_int_equal(failures, 0);
  ops_handle_destroy(g_h);
}

static int g_hits[4], g_calls;
static void count_hits(const ops_profile_record *r, void *user) {
  (void)user;
  if (g_calls < 4) g_hits[g_calls] = r->plan_cache_hit;
  ++g_calls;
}

static void a_repeated_call_hits_and_settings_change_the_key(void **state) {
  (void)state;
  ops_handle h = opst_cpu_handle();
  OPST_OK(ops_handle_set_profiler(h, count_hits, NULL));
  float x[4] = {1, 2, 3, 4}, y[4];
  const int64_t s[1] = {4};
  ops_tensor tx, ty;
  OPST_OK(ops_tensor_init(&tx, x, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  OPST_OK(ops_tensor_init(&ty, y, OPS_DTYPE_F32, ops_device_cpu(), 1, s, NULL));
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  OPST_OK(ops_handle_set_deterministic(h, 1)); /* part of the key: a new plan */
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  OPST_OK(ops_softmax(h, NULL, &tx, &ty, NULL, 0));
  assert_int_equal(g_calls, 4);
  assert_int_equal(g_hits[0], 0);
  assert_int_equal(g_hits[1], 1);
  assert_int_equal(g_hits[2], 0);
  assert_int_equal(g_hits[3], 1);
  ops_handle_destroy(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(concurrent_hits_are_never_torn),
      cmocka_unit_test(replacement_and_clear),
      cmocka_unit_test(eight_threads_share_one_handle),
      cmocka_unit_test(a_repeated_call_hits_and_settings_change_the_key),
  };
  return cmocka_run_group_tests_name("plan_cache", tests, NULL, NULL);
}
