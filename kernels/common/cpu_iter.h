/*
 * A strided multi-index walk over a shape, carrying the element offset of up to six
 * operands at once (NumPy's nditer, without the buffering). Operands that broadcast have
 * stride 0 on those axes. The last axis moves fastest.
 *
 *   opsi_iter it;
 *   opsi_iter_init(&it, ndim, shape);
 *   opsi_iter_add(&it, x_strides);            // operand 0
 *   opsi_iter_add(&it, y_strides);            // operand 1
 *   if (numel > 0) do { use(it.off[0], it.off[1]); } while (opsi_iter_next(&it));
 */
#ifndef OPSLIB_KERNELS_COMMON_CPU_ITER_H_
#define OPSLIB_KERNELS_COMMON_CPU_ITER_H_

#include <stdbool.h>
#include <stdint.h>

#include "opslib/tensor.h"

#define OPSI_ITER_MAX_OPERANDS 6

typedef struct opsi_iter {
  int ndim;
  int nops;
  int64_t shape[OPS_MAX_DIMS];
  int64_t idx[OPS_MAX_DIMS];
  int64_t strides[OPSI_ITER_MAX_OPERANDS][OPS_MAX_DIMS];
  int64_t off[OPSI_ITER_MAX_OPERANDS];
} opsi_iter;

static inline void opsi_iter_init(opsi_iter *it, int ndim, const int64_t *shape) {
  it->ndim = ndim;
  it->nops = 0;
  for (int d = 0; d < ndim; ++d) {
    it->shape[d] = shape[d];
    it->idx[d] = 0;
  }
}

/* Adds an operand; returns its index. */
static inline int opsi_iter_add(opsi_iter *it, const int64_t *strides) {
  int k = it->nops++;
  for (int d = 0; d < it->ndim; ++d) {
    it->strides[k][d] = strides[d];
  }
  it->off[k] = 0;
  return k;
}

/* Advances to the next index; false after the last one. */
static inline bool opsi_iter_next(opsi_iter *it) {
  for (int d = it->ndim - 1; d >= 0; --d) {
    if (++it->idx[d] < it->shape[d]) {
      for (int k = 0; k < it->nops; ++k) {
        it->off[k] += it->strides[k][d];
      }
      return true;
    }
    for (int k = 0; k < it->nops; ++k) {
      it->off[k] -= it->strides[k][d] * (it->shape[d] - 1);
    }
    it->idx[d] = 0;
  }
  return false;
}

#endif /* OPSLIB_KERNELS_COMMON_CPU_ITER_H_ */
