/* The Hopper attention backward (sdpa_bwd_sm90.cuh), f16, head dims up to 256. Written by tools/gen_kernel_sources.py from kernels/flash/sdpa_kernels.h. */
#include "kernels/flash/sdpa_bwd_sm90.cuh"

OPSI_SDPA_BWD_SM90_INSTANTIATE(__half, 256)
