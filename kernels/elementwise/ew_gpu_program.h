/*
 * What the CUDA elementwise kernels run: every elementwise op (sin_affine, unary, binary,
 * scale, dropout, and the chains fusion produces) lowers to one short program over a
 * register v: v = x; v = step_1(v); ...; y = v, with up to four operand tensors. Plain
 * data, built by the host launchers (ew_cuda_launch.cu), passed to the kernel by value.
 */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_GPU_PROGRAM_H_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_GPU_PROGRAM_H_

#include <stdint.h>

#include "kernels/elementwise/ew_chain_args.h"

#define OPSI_EW_GPU_MAX_DIMS 8
#define OPSI_EW_GPU_OPERANDS (2 + OPSI_CHAIN_MAX_OPERANDS) /* y, x, operands */

typedef struct opsi_gpu_step {
  int32_t kind;          /* opsi_step_kind */
  int32_t fn;
  int32_t operand;       /* binary: index into the operands */
  int32_t operand_first; /* binary: operand op v */
  float a, b;
} opsi_gpu_step;

typedef struct opsi_ew_gpu_program {
  void *y;
  const void *x;
  const void *operands[OPSI_CHAIN_MAX_OPERANDS];
  int32_t dtype;
  int32_t n_steps;
  opsi_gpu_step steps[OPSI_CHAIN_MAX_STEPS];
  uint64_t seed, offset; /* dropout */
  int64_t numel;
  /* the strided path: y's index space with its dims collapsed; strides per operand
   * (0: y, 1: x, 2..: operands), in elements */
  int32_t ndim;
  int64_t shape[OPSI_EW_GPU_MAX_DIMS];
  int64_t stride[OPSI_EW_GPU_OPERANDS][OPSI_EW_GPU_MAX_DIMS];
} opsi_ew_gpu_program;

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_GPU_PROGRAM_H_ */
