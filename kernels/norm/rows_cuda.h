/* CUDA launchers of the row-wise ops (capability rows point at them). Each serves
 * LayerNorm, RMSNorm and softmax alike; the args say which. */
#ifndef OPSLIB_KERNELS_NORM_ROWS_CUDA_H_
#define OPSLIB_KERNELS_NORM_ROWS_CUDA_H_

#include "core/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* forward */
ops_status opsi_rows_cuda_warp_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_block_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_block(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_split(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_split_vec16(const opsi_launch *ctx, const void *args);
/* backward */
ops_status opsi_rows_cuda_bwd_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_bwd_block(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_bwd_stream(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_bwd_stream_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_rows_cuda_bwd_staged(const opsi_launch *ctx, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_NORM_ROWS_CUDA_H_ */
