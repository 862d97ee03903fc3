/* The cp.async pipelined GEMM (f32; gemm_pipelined.cuh), B K-major and N-major. */
#include "kernels/gemm/gemm_pipelined.cuh"

OPSI_GEMM_CP_INSTANTIATE(float, false)
OPSI_GEMM_CP_INSTANTIATE(float, true)
