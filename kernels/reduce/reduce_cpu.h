/* The CPU reference of ops_reduce. */
#ifndef OPSLIB_KERNELS_REDUCE_REDUCE_CPU_H_
#define OPSLIB_KERNELS_REDUCE_REDUCE_CPU_H_

#include "core/launch.h"

ops_status opsi_reduce_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_REDUCE_REDUCE_CPU_H_ */
