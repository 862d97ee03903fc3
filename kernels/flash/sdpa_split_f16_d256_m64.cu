/* The split-KV attention (sdpa_split.cuh), f16, head dims up to 256, 64 packed query rows a block. Written by tools/gen_kernel_sources.py from kernels/flash/sdpa_kernels.h. */
#include "kernels/flash/sdpa_split.cuh"

OPSI_SDPA_SPLIT_INSTANTIATE(__half, 256, 64)
