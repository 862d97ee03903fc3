/* CUDA launchers of the elementwise family (capability rows point at them). Each lowers
 * its op's arguments to an opsi_ew_gpu_program and runs the vec16 or the strided kernel. */
#ifndef OPSLIB_KERNELS_ELEMENTWISE_EW_CUDA_H_
#define OPSLIB_KERNELS_ELEMENTWISE_EW_CUDA_H_

#include "core/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

ops_status opsi_ew_cuda_vec16(const opsi_launch *ctx, const void *args);      /* opsi_ew_args */
ops_status opsi_ew_cuda_strided(const opsi_launch *ctx, const void *args);
ops_status opsi_ew_chain_cuda_vec16(const opsi_launch *ctx, const void *args); /* opsi_ew_chain_args */
ops_status opsi_ew_chain_cuda_strided(const opsi_launch *ctx, const void *args);
ops_status opsi_dropout_cuda_vec16(const opsi_launch *ctx, const void *args);  /* opsi_dropout_args */
ops_status opsi_dropout_cuda_strided(const opsi_launch *ctx, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_ELEMENTWISE_EW_CUDA_H_ */
