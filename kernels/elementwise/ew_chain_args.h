/*
 * A chain of elementwise steps evaluated in one pass (the form the fusion rules give a
 * chain of elementwise ops): v = x; v = step_1(v); ...; y = v. Each step is a unary
 * function, a binary op with an operand tensor (on either side), a scale, or sin(a v + b).
 * x and every operand are views broadcast to y's shape. Intermediate values are never
 * rounded to the dtype (double on the CPU, f32 on GPUs): only y is.
 */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_CHAIN_ARGS_H_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_CHAIN_ARGS_H_

#include <stdint.h>

#include "opslib/tensor.h"

#define OPSI_CHAIN_MAX_STEPS 8
#define OPSI_CHAIN_MAX_OPERANDS 4

typedef enum {
  OPSI_STEP_UNARY,
  OPSI_STEP_BINARY,
  OPSI_STEP_SCALE,
  OPSI_STEP_SIN_AFFINE,
  OPSI_STEP_DROPOUT /* a = p, b = 1 / (1 - p); needs the element's logical index (GPU programs) */
} opsi_step_kind;

typedef struct opsi_chain_step {
  int32_t kind;          /* opsi_step_kind */
  int32_t fn;            /* ops_act (unary) or ops_binary_op (binary) */
  int32_t operand;       /* binary: index into operands */
  int32_t operand_first; /* binary: 1 = operand op v, 0 = v op operand */
  double a, b;           /* scale: a; sin_affine: a, b */
} opsi_chain_step;

typedef struct opsi_ew_chain_args {
  ops_tensor x; /* broadcast to y */
  ops_tensor y;
  ops_tensor operands[OPSI_CHAIN_MAX_OPERANDS];
  int n_operands;
  opsi_chain_step steps[OPSI_CHAIN_MAX_STEPS];
  int n_steps;
  int64_t numel;
} opsi_ew_chain_args;

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_CHAIN_ARGS_H_ */
