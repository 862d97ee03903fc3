/* The CPU reference for ops_sdpa (golden for every test; the default without a GPU). */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_CPU_H_
#define OPSLIB_KERNELS_FLASH_SDPA_CPU_H_

#include "core/launch.h"

ops_status opsi_sdpa_cpu(const opsi_launch *ctx, const void *args);

/* (max_seqlen_k + head_dim_v) doubles: one row of scores and one output accumulator. */
size_t opsi_sdpa_cpu_workspace(const opsi_problem *problem);

#endif /* OPSLIB_KERNELS_FLASH_SDPA_CPU_H_ */
