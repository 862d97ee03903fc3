/* The CPU reference of ops_rope and ops_kv_cache_append (one launcher: opsi_rope_args). */
#ifndef OPSLIB_KERNELS_ROPE_ROPE_CPU_H_
#define OPSLIB_KERNELS_ROPE_ROPE_CPU_H_

#include "core/launch.h"

ops_status opsi_rope_cpu(const opsi_launch *ctx, const void *args);

#endif /* OPSLIB_KERNELS_ROPE_ROPE_CPU_H_ */
