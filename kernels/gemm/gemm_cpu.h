/* The CPU reference for ops_gemm. */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_CPU_H_
#define OPSLIB_KERNELS_GEMM_GEMM_CPU_H_

#include "kernels/common/launch.h"

ops_status opsi_gemm_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_GEMM_GEMM_CPU_H_ */
