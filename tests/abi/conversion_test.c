/* The CPU backend's dtype conversions are exact: every f16 / bf16 pattern decodes to its
 * value and encodes back to itself, and doubles round to the nearest representable value
 * with ties to even (checked against a brute-force search over all 2^16 patterns). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/common/cpu_elem.h"
#include "tests/support/opst.h"

/* All finite, non-negative values of a 16-bit format, ascending, as (value, bits). */
typedef struct {
  double v;
  uint16_t bits;
} entry;

static int cmp_entry(const void *a, const void *b) {
  const double x = ((const entry *)a)->v, y = ((const entry *)b)->v;
  return (x > y) - (x < y);
}

static size_t finite_table(int32_t dtype, entry *out) {
  size_t n = 0;
  for (uint32_t b = 0; b < 0x8000u; ++b) {
    uint16_t bits = (uint16_t)b;
    const double v = opst_decode(&bits, dtype);
    if (isfinite(v)) out[n++] = (entry){v, bits};
  }
  qsort(out, n, sizeof out[0], cmp_entry);
  return n;
}

/* Brute force: the nearest entry to |v|, ties to the even pattern; inf past the top. */
static uint16_t nearest(const entry *t, size_t n, double v, int mant_bits) {
  const uint16_t sign = signbit(v) ? 0x8000u : 0u;
  const double a = fabs(v);
  const double top = t[n - 1].v, ulp_top = top - t[n - 2].v;
  const uint16_t inf = (uint16_t)(mant_bits == 10 ? 0x7C00u : 0x7F80u);
  if (a >= top + ulp_top / 2) return sign | inf; /* ties at the top go to even = inf */
  size_t lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (t[mid].v <= a) lo = mid; else hi = mid;
  }
  const double dl = a - t[lo].v, dh = t[hi].v - a;
  if (a >= t[hi].v) return sign | t[hi].bits;
  if (dl < dh) return sign | t[lo].bits;
  if (dh < dl) return sign | t[hi].bits;
  return sign | ((t[lo].bits & 1u) ? t[hi].bits : t[lo].bits);
}

static void check_format(int32_t dtype, int mant_bits, uint16_t (*encode)(double)) {
  static entry table[0x8000];
  const size_t n = finite_table(dtype, table);
  /* Every pattern round-trips (NaN stays NaN). */
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    uint16_t bits = (uint16_t)b;
    const double v = opst_decode(&bits, dtype);
    const double lib = dtype == OPS_DTYPE_F16 ? opsi_f16_bits_to_float(bits) : opsi_bf16_bits_to_float(bits);
    if (isnan(v)) {
      assert_true(isnan(lib));
      const uint16_t back = encode(v);
      uint16_t tmp = back;
      assert_true(isnan(opst_decode(&tmp, dtype)));
      continue;
    }
    assert_true(lib == v);
    assert_int_equal(encode(v), bits);
  }
  /* Random doubles over the whole range, and exact ties between neighbours. */
  opst_rng r;
  opst_rng_init(&r, opst_seed(dtype == OPS_DTYPE_F16 ? "conversion_f16" : "conversion_bf16"));
  for (int i = 0; i < 200000; ++i) {
    double v;
    if (i % 2 == 0) {
      const size_t k = (size_t)opst_int(&r, 0, (int64_t)n - 2);
      v = i % 4 == 0 ? (table[k].v + table[k + 1].v) / 2 : opst_uniform(&r, table[k].v, table[k + 1].v);
    } else {
      v = ldexp(opst_uniform(&r, 1.0, 2.0), (int)opst_int(&r, mant_bits == 10 ? -30 : -140, mant_bits == 10 ? 17 : 129));
    }
    if (opst_chance(&r, 0.5)) v = -v;
    const uint16_t want = nearest(table, n, v, mant_bits), got = encode(v);
    if (want != got) {
      print_error("%s: %.17g encodes to 0x%04x, nearest is 0x%04x\n", ops_dtype_name((ops_dtype)dtype), v, got, want);
      fail();
    }
  }
}

static void f16_is_exact(void **state) {
  (void)state;
  check_format(OPS_DTYPE_F16, 10, opsi_double_to_f16_bits);
}

static void bf16_is_exact(void **state) {
  (void)state;
  check_format(OPS_DTYPE_BF16, 7, opsi_double_to_bf16_bits);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(f16_is_exact),
      cmocka_unit_test(bf16_is_exact),
  };
  return cmocka_run_group_tests_name("conversion", tests, NULL, NULL);
}
