/*
 * The validated operands of one ops_dropout call: y = x * keep_i / (1 - p), keep_i drawn
 * from Philox for logical element i (kernels/common/philox.h), x and y of one shape.
 */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_DROPOUT_ARGS_H_
#define OPSLIB_KERNELS_ELEMENTWISE_DROPOUT_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

typedef struct opsi_dropout_args {
  ops_tensor x, y;
  int64_t numel;
  double p;
  uint64_t seed, offset;
} opsi_dropout_args;

#endif /* OPSLIB_KERNELS_ELEMENTWISE_DROPOUT_ARGS_H_ */
