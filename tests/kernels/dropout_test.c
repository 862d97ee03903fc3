/*
 * ops_dropout on the CPU backend. The generator first: Philox4x32-10 written again here
 * (a 64-bit product per multiply, rounds unrolled by a table of keys) must reproduce the
 * published known-answer vectors (Random123's kat_vectors), and so must the library's.
 * Then random problems (any shape and strides, in place, f32 / f16 / bf16, p from 0 to 1,
 * 64-bit seeds and offsets) against the mask this test derives itself, and the properties
 * a training loop relies on: the same (seed, offset) gives the same bits; advancing the
 * offset by k shifts the mask by 4k elements; p = 0 copies, p = 1 zeroes; the dropped
 * fraction is p within statistical bounds.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/common/philox.h"
#include "opslib/opslib.h"
#include "tests/support/coverage.h"
#include "tests/support/opst.h"

static ops_handle g_h;
static opst_rng g_rng;

/* Philox4x32-10 from the paper's description: S-box = two 32x32 -> 64 products. */
static void philox_ref(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t x[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
  uint64_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = 0xD2511F53ull * x[0], p1 = 0xCD9E8D57ull * x[2];
    const uint32_t y0 = (uint32_t)(p1 >> 32) ^ x[1] ^ (uint32_t)k0;
    const uint32_t y1 = (uint32_t)p1;
    const uint32_t y2 = (uint32_t)(p0 >> 32) ^ x[3] ^ (uint32_t)k1;
    const uint32_t y3 = (uint32_t)p0;
    x[0] = y0, x[1] = y1, x[2] = y2, x[3] = y3;
    k0 = (k0 + 0x9E3779B9ull) & 0xFFFFFFFFull;
    k1 = (k1 + 0xBB67AE85ull) & 0xFFFFFFFFull;
  }
  memcpy(out, x, sizeof x);
}

static void philox_known_answers(void **state) {
  (void)state;
  static const struct {
    uint32_t ctr[4], key[2], want[4];
  } kat[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof kat[0]; ++i) {
    uint32_t got[4];
    philox_ref(kat[i].ctr, kat[i].key, got);
    assert_memory_equal(got, kat[i].want, sizeof got);
    const opsi_u32x4 c = {{kat[i].ctr[0], kat[i].ctr[1], kat[i].ctr[2], kat[i].ctr[3]}};
    const opsi_u32x4 lib = opsi_philox4x32_10(c, kat[i].key[0], kat[i].key[1]);
    assert_memory_equal(lib.v, kat[i].want, sizeof got);
  }
}

/* Element i's verdict under the documented convention. */
static int kept(uint64_t seed, uint64_t offset, uint64_t i, float p) {
  const uint64_t counter = offset + i / 4;
  const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  uint32_t w[4];
  philox_ref(ctr, key, w);
  const float u = (float)(w[i % 4] >> 8) / 16777216.0f;
  return p < 1.0f && u >= p;
}

static void run_dropout(const opst_tensor *x, const opst_tensor *y, float p, uint64_t seed, uint64_t offset) {
  ops_dropout_params prm;
  ops_dropout_params_init(&prm);
  prm.p = p, prm.seed = seed, prm.offset = offset;
  OPST_OK(ops_dropout(g_h, &prm, &x->t, &y->t, NULL, 0));
}

static void random_case(int iter) {
  opst_rng *r = &g_rng;
  static const int32_t dtypes[3] = {OPS_DTYPE_F32, OPS_DTYPE_F16, OPS_DTYPE_BF16};
  static const float ps[6] = {0.0f, 0.1f, 0.25f, 0.5f, 0.9f, 1.0f};
  const int32_t dt = dtypes[opst_int(r, 0, 2)];
  const int ndim = (int)opst_int(r, 0, 4);
  int64_t s[4];
  for (int i = 0; i < ndim; ++i) s[i] = opst_int(r, opst_chance(r, 0.03) ? 0 : 1, 9);
  const float p = opst_chance(r, 0.7) ? ps[opst_int(r, 0, 5)] : (float)opst_uniform(r, 0, 1);
  const uint64_t seed = opst_u64(r), offset = opst_chance(r, 0.2) ? ~0ull - (uint64_t)opst_int(r, 0, 3) : opst_u64(r);
  opst_tensor x, y;
  opst_alloc_any(&x, r, dt, ndim, s);
  opst_fill_uniform(&x, r, -2, 2);
  const int in_place = opst_chance(r, 0.25);
  if (in_place) {
    y = x;
  } else {
    opst_alloc_any(&y, r, dt, ndim, s);
  }
  const int64_t n = opst_numel(&x);
  double *ref = calloc((size_t)n + 1, sizeof(double));
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = kept(seed, offset, (uint64_t)i, p) ? opst_at_flat(&x, i) / (1.0 - (double)p) : 0.0;
  }
  run_dropout(&x, &y, p, seed, offset);
  char why[256];
  if (!opst_fully_written(&y, why, sizeof why) || !opst_check_close(&y, ref, opst_rtol(dt), opst_atol(dt), why, sizeof why)) {
    print_error("case %d (%s p=%g n=%lld%s): %s\n", iter, ops_dtype_name((ops_dtype)dt), (double)p, (long long)n,
                in_place ? " in place" : "", why);
    fail();
  }
  if (!in_place) assert_true(opst_untouched(&x));
  free(ref);
  opst_free(&x);
  if (!in_place) opst_free(&y);
}

static void random_problems(void **state) {
  (void)state;
  for (int i = 0; i < 200; ++i) random_case(i);
}

static void masks_are_reproducible_and_shift_with_the_offset(void **state) {
  (void)state;
  const int64_t n = 4099;
  opst_tensor x, a, b, c;
  opst_alloc(&x, &g_rng, OPS_DTYPE_F32, 1, &n, OPST_CONTIGUOUS);
  for (int64_t i = 0; i < n; ++i) opst_set_flat(&x, i, 1.0 + (double)(i % 5));
  opst_snapshot(&x);
  opst_alloc(&a, &g_rng, OPS_DTYPE_F32, 1, &n, OPST_CONTIGUOUS);
  opst_alloc(&b, &g_rng, OPS_DTYPE_F32, 1, &n, OPST_CONTIGUOUS);
  opst_alloc(&c, &g_rng, OPS_DTYPE_F32, 1, &n, OPST_CONTIGUOUS);
  const uint64_t seed = opst_u64(&g_rng), offset = 1000;
  run_dropout(&x, &a, 0.4f, seed, offset);
  run_dropout(&x, &b, 0.4f, seed, offset);
  assert_memory_equal(a.t.data, b.t.data, (size_t)n * 4);
  run_dropout(&x, &c, 0.4f, seed, offset + 10); /* element j of c is element j + 40 of a */
  for (int64_t j = 0; j + 40 < n; ++j) assert_true((opst_at_flat(&c, j) == 0.0) == (opst_at_flat(&a, j + 40) == 0.0));
  run_dropout(&x, &b, 0.4f, seed + 1, offset); /* another seed: another mask */
  int64_t differ = 0;
  for (int64_t j = 0; j < n; ++j) differ += (opst_at_flat(&a, j) == 0.0) != (opst_at_flat(&b, j) == 0.0);
  assert_true(differ > n / 4);
  run_dropout(&x, &b, 0.0f, seed, offset);
  assert_memory_equal(b.t.data, x.t.data, (size_t)n * 4);
  run_dropout(&x, &b, 1.0f, seed, offset);
  for (int64_t j = 0; j < n; ++j) assert_true(opst_at_flat(&b, j) == 0.0);
  opst_free(&x), opst_free(&a), opst_free(&b), opst_free(&c);
}

static void dropped_fraction_is_p(void **state) {
  (void)state;
  const int64_t n = 1 << 18;
  opst_tensor x, y;
  opst_alloc(&x, &g_rng, OPS_DTYPE_F32, 1, &n, OPST_CONTIGUOUS);
  for (int64_t i = 0; i < n; ++i) opst_set_flat(&x, i, 1.0);
  opst_snapshot(&x);
  opst_alloc(&y, &g_rng, OPS_DTYPE_F32, 1, &n, OPST_CONTIGUOUS);
  static const float ps[3] = {0.1f, 0.5f, 0.8f};
  for (int k = 0; k < 3; ++k) {
    run_dropout(&x, &y, ps[k], opst_u64(&g_rng), 0);
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) dropped += opst_at_flat(&y, i) == 0.0;
    const double sd = sqrt((double)n * ps[k] * (1.0 - ps[k]));
    if (fabs((double)dropped - ps[k] * (double)n) > 5.0 * sd) {
      print_error("p=%g: dropped %lld of %lld\n", (double)ps[k], (long long)dropped, (long long)n);
      fail();
    }
  }
  opst_free(&x), opst_free(&y);
}

static void claimed_features_are_exercised(void **state) {
  (void)state;
  opst_coverage_check("//tests/kernels:dropout_test");
}

static int setup(void **state) {
  (void)state;
  g_h = opst_cpu_handle();
  opst_rng_init(&g_rng, opst_seed("dropout"));
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
      cmocka_unit_test(philox_known_answers),
      cmocka_unit_test(random_problems),
      cmocka_unit_test(masks_are_reproducible_and_shift_with_the_offset),
      cmocka_unit_test(dropped_fraction_is_p),
      cmocka_unit_test(claimed_features_are_exercised),
  };
  return cmocka_run_group_tests_name("dropout_cpu", tests, setup, teardown);
}
