/* The Hopper GEMM (gemm_sm90.cuh), bf16, tiles of 128 x 64, B K-major, for calls without an epilogue. Written by tools/gen_kernel_sources.py from kernels/gemm/gemm_kernels.h. */
#include "kernels/gemm/gemm_sm90.cuh"

OPSI_GEMM_SM90_INSTANTIATE(__nv_bfloat16, 64, false, true)
