// The elementwise kernels for f16 (one dtype per file, so the builds run in parallel).
#include "kernels/elementwise/ew_gpu_kernels.cuh"

template void opsi::launch_ew_program<__half>(const opsi_ew_gpu_program &, int, int, cudaStream_t, int, int32_t *,
                                            int32_t *);
