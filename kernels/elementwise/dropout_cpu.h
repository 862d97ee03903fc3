/* The CPU reference of ops_dropout. */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_DROPOUT_CPU_H_
#define OPSLIB_KERNELS_ELEMENTWISE_DROPOUT_CPU_H_

#include "core/launch.h"

ops_status opsi_dropout_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_ELEMENTWISE_DROPOUT_CPU_H_ */
