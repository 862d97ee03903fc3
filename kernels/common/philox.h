/*
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
 * for dropout: counter-based, so element i's random number is a pure function of (seed,
 * offset, i) and the mask can be recomputed in the backward pass instead of stored. One
 * definition serves the CPU reference (C) and the CUDA kernels, so both draw the same bits.
 *
 * opslib's convention: element i (row-major logical index) of a dropout call uses word
 * i % 4 of philox(counter = {lo(offset + i / 4), hi(offset + i / 4), 0, 0},
 * key = {lo(seed), hi(seed)}); its top 24 bits give u = (word >> 8) * 2^-24 in [0, 1),
 * exact in float; the element is kept when u >= p (compared in float).
 */
#ifndef OPSLIB_KERNELS_COMMON_PHILOX_H_
#define OPSLIB_KERNELS_COMMON_PHILOX_H_

#include <stdint.h>

#if defined(__CUDACC__)
#define OPSI_HD __host__ __device__ __forceinline__
#else
#define OPSI_HD static inline
#endif

typedef struct opsi_u32x4 {
  uint32_t v[4];
} opsi_u32x4;

OPSI_HD void opsi_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo) {
  const uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

OPSI_HD opsi_u32x4 opsi_philox4x32_10(opsi_u32x4 c, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    opsi_mulhilo32(0xD2511F53u, c.v[0], &hi0, &lo0);
    opsi_mulhilo32(0xCD9E8D57u, c.v[2], &hi1, &lo1);
    const opsi_u32x4 n = {{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    c = n;
    k0 += 0x9E3779B9u; /* the key schedule (the golden ratio and sqrt(3) - 1) */
    k1 += 0xBB67AE85u;
  }
  return c;
}

/* The four uniforms of elements 4 * block .. 4 * block + 3 of a dropout call. */
OPSI_HD opsi_u32x4 opsi_dropout_bits(uint64_t seed, uint64_t offset, uint64_t block) {
  const uint64_t counter = offset + block;
  const opsi_u32x4 c = {{(uint32_t)counter, (uint32_t)(counter >> 32), 0u, 0u}};
  return opsi_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

#endif /* OPSLIB_KERNELS_COMMON_PHILOX_H_ */
