/*
 * kernels/common/fast_div.h: division by multiply-high against C's own division, on the
 * host (the same code the kernels run, __umulhi aside). Small divisors with every small
 * dividend and the largest ones; random divisors up to 2^31 - 1, powers of two and their
 * neighbours, each at the edges of many quotients (q d - 1, q d, q d + 1) and at random.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kernels/common/fast_div.h"
#include "tests/support/opst.h"

static opst_rng g_rng;

static void check(opsi_fast_div f, uint32_t n) {
  const uint32_t want = n / f.d, got = opsi_fast_div_q(f, n);
  if (got != want) fail_msg("%u / %u: fast_div gives %u, expected %u (m %u, s %u)", n, f.d, got, want, f.m, f.s);
}

static void small_divisors(void **state) {
  (void)state;
  for (uint32_t d = 1; d <= 4096; ++d) {
    const opsi_fast_div f = opsi_fast_div_make(d);
    for (uint32_t n = 0; n < 3 * 4096; ++n) check(f, n);
    for (uint32_t k = 0; k < 256; ++k) check(f, 0x7fffffffu - k);
  }
}

static uint32_t random_divisor(int kind) {
  const int p = (int)opst_int(&g_rng, 0, 30);
  switch (kind) {
    case 0: return (uint32_t)1 << p;
    case 1: return ((uint32_t)1 << p) + 1;
    case 2: return p > 0 ? ((uint32_t)1 << p) - 1 : 1;
    default: return (uint32_t)opst_int(&g_rng, 1, 0x7fffffff);
  }
}

static void quotient_edges(void **state) {
  (void)state;
  for (int t = 0; t < 100000; ++t) {
    const uint32_t d = random_divisor(t % 4);
    const opsi_fast_div f = opsi_fast_div_make(d);
    const uint32_t qmax = 0x7fffffffu / d;
    for (int k = 0; k < 16; ++k) {
      const uint64_t q = k < 2 ? qmax - (uint32_t)k : (uint64_t)opst_int(&g_rng, 0, qmax);
      for (int e = -1; e <= 1; ++e) {
        const int64_t n = (int64_t)(q * d) + e;
        if (n >= 0 && n <= 0x7fffffff) check(f, (uint32_t)n);
      }
      check(f, (uint32_t)opst_int(&g_rng, 0, 0x7fffffff));
    }
  }
}

int main(void) {
  opst_rng_init(&g_rng, opst_seed("fast_div"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(small_divisors),
      cmocka_unit_test(quotient_edges),
  };
  return cmocka_run_group_tests_name("fast_div", tests, NULL, NULL);
}
