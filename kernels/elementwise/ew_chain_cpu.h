/* The CPU reference of the fused elementwise chain. */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_CHAIN_CPU_H_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_CHAIN_CPU_H_

#include "core/launch.h"

ops_status opsi_ew_chain_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_CHAIN_CPU_H_ */
