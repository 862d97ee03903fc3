/* The CPU kernels of ops_gemm: the reference and its panel loop order. */
#ifndef OPSLIB_KERNELS_GEMM_GEMM_CPU_H_
#define OPSLIB_KERNELS_GEMM_GEMM_CPU_H_

#include "core/launch.h"

ops_status opsi_gemm_cpu(const opsi_launch *ctx, const void *args);
/* The same arithmetic, a row of A against a panel of 64 columns of B at a time. */
ops_status opsi_gemm_cpu_panel(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_GEMM_GEMM_CPU_H_ */
