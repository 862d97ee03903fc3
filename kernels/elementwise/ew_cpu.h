/* The CPU reference of the elementwise ops. */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_CPU_H_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_CPU_H_

#include "core/launch.h"

ops_status opsi_elementwise_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_CPU_H_ */
