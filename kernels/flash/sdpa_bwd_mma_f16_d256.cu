/* The sm_80-class attention backward (sdpa_bwd_mma.cuh), f16, head dims up to 256. Written by tools/gen_kernel_sources.py from kernels/flash/sdpa_kernels.h. */
#include "kernels/flash/sdpa_bwd_mma.cuh"

OPSI_SDPA_BWD_MMA_INSTANTIATE(__half, 256)
