/* The cp.async pipelined GEMM (bf16; gemm_pipelined.cuh), B K-major and N-major. */
#include "kernels/gemm/gemm_pipelined.cuh"

OPSI_GEMM_CP_INSTANTIATE(__nv_bfloat16, false)
OPSI_GEMM_CP_INSTANTIATE(__nv_bfloat16, true)
