// The reduction kernels for bf16 (one dtype per file, so the builds run in parallel).
#include "kernels/reduce/reduce_gpu.cuh"

template void opsi::launch_reduce<__nv_bfloat16>(const opsi::reduce_geom &, int, int, cudaStream_t, int, int32_t *, int32_t *);
