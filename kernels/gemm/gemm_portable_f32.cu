/* The portable GEMM kernels (f32): the tiled kernel and GEMV (gemm_tiled.cuh, gemv.cuh). */
#include "kernels/gemm/gemm_tiled.cuh"
#include "kernels/gemm/gemv.cuh"

template cudaError_t opsi::launch_gemm_tiled<float>(const opsi::gemm_geom &, int, int, cudaStream_t, int32_t *,
                                                  int32_t *);
template cudaError_t opsi::launch_gemv<float>(const opsi::gemm_geom &, const opsi::gemv_view &, int, cudaStream_t,
                                            int32_t *, int32_t *);
