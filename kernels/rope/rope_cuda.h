/* CUDA launchers of ops_rope and ops_kv_cache_append (opsi_rope_args): the 16-byte vector
 * kernel and the any-stride kernel (kernels/rope/rope_gpu.cuh), a block a token (rope) or a
 * warp a token (the append); the append of whole rows. */
#ifndef OPSLIB_KERNELS_ROPE_ROPE_CUDA_H_
#define OPSLIB_KERNELS_ROPE_ROPE_CUDA_H_

#include "core/launch.h"

#ifdef __cplusplus
extern "C" {
#endif

ops_status opsi_rope_cuda_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_rope_cuda_strided(const opsi_launch *ctx, const void *args);
/* a warp a token (ROPE_THREADS / 32 tokens a block at once) */
ops_status opsi_kv_cache_append_cuda_vec16(const opsi_launch *ctx, const void *args);
ops_status opsi_kv_cache_append_cuda_strided(const opsi_launch *ctx, const void *args);
/* a warp a token, its heads one run in every operand (append_rows_kernel) */
ops_status opsi_kv_cache_append_cuda_rows(const opsi_launch *ctx, const void *args);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_ROPE_ROPE_CUDA_H_ */
