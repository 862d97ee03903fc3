/* The Hopper attention forward (sdpa_sm90.cuh), f16, the shape D64 (head dims up to 64), clusters of 1. Written by tools/gen_kernel_sources.py from kernels/flash/sdpa_kernels.h. */
#include "kernels/flash/sdpa_sm90.cuh"

OPSI_SDPA_SM90_INSTANTIATE(__half, D64, 1)
