/*
 * The validated operands of one ops_gemm call, normalized by the dispatcher: a, b, d are
 * 3-D views [batch, M, K], [batch, K, N], [batch, M, N] (a broadcast batch has stride 0),
 * and c, bias, residual are 3-D views broadcast to d's shape.
 */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_ARGS_H_
#define OPSLIB_KERNELS_GEMM_GEMM_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

typedef struct opsi_gemm_args {
  ops_tensor a, b, d;
  ops_tensor c, bias, residual; /* valid when the matching has_ flag is set */
  int has_c;
  int has_bias;
  int has_residual;
  double alpha;
  double beta;
  int32_t activation; /* ops_act */
  int64_t batch, m, n, k;
} opsi_gemm_args;

#endif /* OPSLIB_KERNELS_GEMM_GEMM_ARGS_H_ */
