/* The Hopper GEMM (gemm_sm90.cuh), f16, tiles of 128 x 256, B K-major. Written by tools/gen_kernel_sources.py from kernels/gemm/gemm_kernels.h. */
#include "kernels/gemm/gemm_sm90.cuh"

OPSI_GEMM_SM90_INSTANTIATE(__half, 256, false, false)
