/* One Hopper GEMM instantiation a file (they compile in parallel): bf16, 128x256 tiles, B K-major. */
#include "kernels/gemm/gemm_sm90.cuh"

OPSI_GEMM_SM90_INSTANTIATE(__nv_bfloat16, 256, false)
