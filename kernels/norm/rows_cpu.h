/* CPU references of the row-wise ops: LayerNorm / RMSNorm (with fused residual add) and
 * softmax. Neither needs a workspace. */
#ifndef OPSLIB_KERNELS_NORM_ROWS_CPU_H_
#define OPSLIB_KERNELS_NORM_ROWS_CPU_H_

#include "core/launch.h"

ops_status opsi_norm_cpu(const opsi_launch *ctx, const void *args);
ops_status opsi_softmax_cpu(const opsi_launch *ctx, const void *args);
ops_status opsi_norm_backward_cpu(const opsi_launch *ctx, const void *args);
ops_status opsi_softmax_backward_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_NORM_ROWS_CPU_H_ */
