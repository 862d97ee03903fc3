/*
 * Fields the CUDA rows share, and the SM range this build's code covers: sm_80 machine
 * code (A100, and sm_86 / sm_89 by compatibility) and sm_90a (Hopper).
 */
#ifndef OPSLIB_CAPABILITIES_CUDA_ROW_H_
#define OPSLIB_CAPABILITIES_CUDA_ROW_H_

#include "capabilities/cpu_row.h"

#define OPSI_CUDA_ROW_COMMON                                   \
  .backend = OPS_DEVICE_CUDA, .sm_min = 80, .sm_max = 90,      \
  .dtypes = OPSI_FLOAT_DTYPES, .out_dtypes = OPSI_FLOAT_DTYPES

#define OPSI_GPU_TESTS "//tests/gpu:gpu_ops_test"

#endif /* OPSLIB_CAPABILITIES_CUDA_ROW_H_ */
