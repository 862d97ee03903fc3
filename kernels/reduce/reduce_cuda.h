/* CUDA launchers of ops_reduce (capability rows point at them). */
#ifndef OPSLIB_KERNELS_REDUCE_REDUCE_CUDA_H_
#define OPSLIB_KERNELS_REDUCE_REDUCE_CUDA_H_

#include "core/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

ops_status opsi_reduce_cuda_rows_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_reduce_cuda_rows(const opsi_launch *ctx, const void *args);
ops_status opsi_reduce_cuda_columns_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_reduce_cuda_columns(const opsi_launch *ctx, const void *args);
ops_status opsi_reduce_cuda_columns_cluster(const opsi_launch *ctx, const void *args);
ops_status opsi_reduce_cuda_strided(const opsi_launch *ctx, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_REDUCE_REDUCE_CUDA_H_ */
