/* Correctly rounded conversions between double and the 16-bit float formats. */
#include "kernels/common/cpu_elem.h"

#include <math.h>

float opsi_f16_bits_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    float f = (float)man * 0x1p-24f; /* zero or subnormal: man * 2^-24, exact in float */
    return sign ? -f : f;
  }
  if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Rounds |value| to a binary format with `eb` exponent and `mb` mantissa bits (IEEE-style:
 * bias 2^(eb-1) - 1, subnormals, all-ones exponent for inf/NaN). Returns the bit pattern.
 * Scaling by a power of two is exact in double, so nearbyint() (round to nearest even in
 * the default mode) performs the one and only rounding. */
static uint32_t round_to_format(double value, int eb, int mb) {
  const uint32_t sign = signbit(value) ? 1u << (eb + mb) : 0u;
  const uint32_t exp_all = ((1u << eb) - 1u) << mb;
  if (isnan(value)) {
    return sign | exp_all | (1u << (mb - 1));
  }
  const double a = fabs(value);
  if (isinf(a)) {
    return sign | exp_all;
  }
  if (a == 0.0) {
    return sign;
  }
  const int bias = (1 << (eb - 1)) - 1;
  const int emin = 1 - bias;
  int e;
  frexp(a, &e);
  int E = e - 1; /* a in [2^E, 2^(E+1)) */
  if (E < emin) {
    E = emin; /* subnormal: the quantum stays 2^(emin - mb) */
  }
  double r = nearbyint(ldexp(a, mb - E));
  if (r >= ldexp(1.0, mb + 1)) { /* rounded up to the next binade */
    r = ldexp(1.0, mb);
    E += 1;
  }
  if (r < ldexp(1.0, mb)) {
    return sign | (uint32_t)r; /* subnormal */
  }
  if (E + bias >= (1 << eb) - 1) {
    return sign | exp_all; /* overflow */
  }
  return sign | ((uint32_t)(E + bias) << mb) | ((uint32_t)r - (1u << mb));
}

uint16_t opsi_double_to_f16_bits(double value) { return (uint16_t)round_to_format(value, 5, 10); }

uint16_t opsi_double_to_bf16_bits(double value) { return (uint16_t)round_to_format(value, 8, 7); }
