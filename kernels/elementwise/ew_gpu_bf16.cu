// The elementwise kernels for bf16 (one dtype per file, so the builds run in parallel).
#include "kernels/elementwise/ew_gpu_kernels.cuh"

template void opsi::launch_ew_program<__nv_bfloat16>(const opsi_ew_gpu_program &, int, int, cudaStream_t, int, int32_t *,
                                            int32_t *);
