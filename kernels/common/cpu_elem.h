/*
 * Element access for the CPU reference kernels: every dtype read as double, every double
 * written back with one correct rounding (round to nearest, ties to even; overflow to inf;
 * NaN kept). The CPU backend computes in double, so its results are the golden reference.
 */
#ifndef OPSLIB_KERNELS_COMMON_CPU_ELEM_H_
#define OPSLIB_KERNELS_COMMON_CPU_ELEM_H_

#include <stdint.h>
#include <string.h>

#include "opslib/tensor.h"

/* IEEE binary16 and bfloat16 bit patterns <-> float / double. */
float opsi_f16_bits_to_float(uint16_t bits);
uint16_t opsi_double_to_f16_bits(double value);
uint16_t opsi_double_to_bf16_bits(double value);

static inline float opsi_bf16_bits_to_float(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Element `offset` (in elements) of `base` as double. Float dtypes only. */
static inline double opsi_load(const void *base, int64_t offset, int32_t dtype) {
  switch (dtype) {
    case OPS_DTYPE_F32:
      return (double)((const float *)base)[offset];
    case OPS_DTYPE_F16:
      return (double)opsi_f16_bits_to_float(((const uint16_t *)base)[offset]);
    case OPS_DTYPE_BF16:
      return (double)opsi_bf16_bits_to_float(((const uint16_t *)base)[offset]);
    default:
      return 0.0;
  }
}

/* Stores `value` rounded to `dtype` at element `offset` of `base`. Float dtypes only. */
static inline void opsi_store(void *base, int64_t offset, int32_t dtype, double value) {
  switch (dtype) {
    case OPS_DTYPE_F32:
      ((float *)base)[offset] = (float)value;
      break;
    case OPS_DTYPE_F16:
      ((uint16_t *)base)[offset] = opsi_double_to_f16_bits(value);
      break;
    case OPS_DTYPE_BF16:
      ((uint16_t *)base)[offset] = opsi_double_to_bf16_bits(value);
      break;
    default:
      break;
  }
}

#endif /* OPSLIB_KERNELS_COMMON_CPU_ELEM_H_ */
