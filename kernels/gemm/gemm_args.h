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

/* The Hopper rows store D by TMA from shared memory where its map can be made: 16-bit, unit
 * column stride, base and row stride (and a real batch's stride) 16-byte aligned; else the
 * threads store it. The launcher takes this path and the rows' plan names it, from here. */
static inline int opsi_gemm_sm90_d_tma(const opsi_gemm_args *g) {
  const ops_tensor *d = &g->d;
  if (d->dtype != OPS_DTYPE_BF16 && d->dtype != OPS_DTYPE_F16) return 0;
  if (d->strides[2] != 1 || (uintptr_t)d->data % 16 != 0 || d->strides[1] <= 0 || d->strides[1] % 8 != 0) return 0;
  return g->batch == 1 || (d->strides[0] > 0 && d->strides[0] % 8 == 0);
}

#endif /* OPSLIB_KERNELS_GEMM_GEMM_ARGS_H_ */
