/*
 * The validated operands of one elementwise call (sin_affine, unary, binary), normalized
 * by the dispatcher: every input is a view broadcast to y's shape (stride 0 where it
 * repeats), so a kernel walks y's index space once and reads each input at its own strides.
 *   sin_affine: in[0] = x; in[1] = a, in[2] = b when given as tensors (else the scalars)
 *   unary:      in[0] = x, fn = ops_act
 *   binary:     in[0] = a, in[1] = b, fn = ops_binary_op
 *   scale:      in[0] = x, a = alpha
 */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_ARGS_H_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

typedef enum { OPSI_EW_SIN_AFFINE, OPSI_EW_UNARY, OPSI_EW_BINARY, OPSI_EW_SCALE } opsi_ew_kind;

typedef struct opsi_ew_args {
  int32_t kind; /* opsi_ew_kind */
  int32_t fn;
  ops_tensor y;
  ops_tensor in[3];
  int has_in[3];
  double a, b; /* sin_affine scalars, used when in[1] / in[2] are absent; scale: a */
  int64_t numel;
} opsi_ew_args;

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_ARGS_H_ */
