/* The CPU reference for ops_sdpa_backward (golden for every test; the default without a GPU). */
#ifndef OPSLIB_KERNELS_FLASH_SDPA_BWD_CPU_H_
#define OPSLIB_KERNELS_FLASH_SDPA_BWD_CPU_H_

#include "core/launch.h"
#include "kernels/flash/sdpa_args.h"

/* The forward's operands as ops_sdpa normalizes them (o and lse read, not written), and the
 * gradients as 4-D [B, S, H, D] views alike (varlen: batch stride 0 over the packed rows). */
typedef struct opsi_sdpa_bwd_args {
  opsi_sdpa_args fwd;
  ops_tensor dout, dq, dk, dv;
  opsi_sdpa_bwd_geom geom; /* the same call as the CUDA kernels read it (CUDA runs; else 0) */
} opsi_sdpa_bwd_args;

ops_status opsi_sdpa_bwd_cpu(const opsi_launch *ctx, const void *args);

/* Doubles: a KV head's dk and dv accumulators (max_seqlen_k x (head_dim + head_dim_v)), a
 * row of probabilities (max_seqlen_k) and a dq accumulator (head_dim). */
size_t opsi_sdpa_bwd_cpu_workspace(const opsi_problem *problem);

#endif /* OPSLIB_KERNELS_FLASH_SDPA_BWD_CPU_H_ */
