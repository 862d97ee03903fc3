/* One Hopper GEMM instantiation a file (they compile in parallel): f16, 128x256 tiles, B MN-major. */
#include "kernels/gemm/gemm_sm90.cuh"

OPSI_GEMM_SM90_INSTANTIATE(__half, 256, true)
