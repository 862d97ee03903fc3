/* The portable GEMM kernels (bf16): the tiled kernel and GEMV (gemm_tiled.cuh, gemv.cuh). */
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/gemm/gemv.cuh"

template cudaError_t opsi::launch_gemm_tiled<__nv_bfloat16>(const opsi::gemm_geom &, int, int, cudaStream_t, int32_t *,
                                                  int32_t *);
template cudaError_t opsi::launch_gemv<__nv_bfloat16>(const opsi::gemm_geom &, const opsi::gemv_view &, int, cudaStream_t,
                                            int32_t *, int32_t *);
