/*
 * Unsigned division by a divisor fixed for a whole kernel, by a multiply-high, an add and a
 * shift instead of the division routine (the round-up method of Granlund and Montgomery):
 * for 1 <= d < 2^31 and s = ceil(log2 d), m = floor(2^32 (2^s - d) / d) + 1 fits 32 bits, and
 * for every n < 2^31, n / d = (umulhi(n, m) + n) >> s (the sum stays below 2^32). The
 * divisor's constants are made once (one 64-bit division); host C and CUDA alike.
 */
#ifndef OPSLIB_KERNELS_COMMON_FAST_DIV_H_
#define OPSLIB_KERNELS_COMMON_FAST_DIV_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define OPSI_FAST_DIV_FN __host__ __device__ __forceinline__
#else
#define OPSI_FAST_DIV_FN static inline
#endif

typedef struct opsi_fast_div {
  uint32_t d, m, s;
} opsi_fast_div;

/* d in [1, 2^31) */
OPSI_FAST_DIV_FN opsi_fast_div opsi_fast_div_make(uint32_t d) {
  opsi_fast_div f;
  uint32_t s = 0;
  while (s < 31 && ((uint32_t)1 << s) < d) ++s;
  f.d = d, f.s = s;
  f.m = (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1);
  return f;
}

/* n / f.d for n in [0, 2^31) */
OPSI_FAST_DIV_FN uint32_t opsi_fast_div_q(opsi_fast_div f, uint32_t n) {
#if defined(__CUDA_ARCH__)
  const uint32_t hi = __umulhi(n, f.m);
#else
  const uint32_t hi = (uint32_t)(((uint64_t)n * f.m) >> 32);
#endif
  return (hi + n) >> f.s;
}

#endif /* OPSLIB_KERNELS_COMMON_FAST_DIV_H_ */
