// The reduction kernels for f16 (one dtype per file, so the builds run in parallel).
#include "kernels/reduce/reduce_gpu.cuh"

template void opsi::launch_reduce<__half>(const opsi::reduce_geom &, int, int, cudaStream_t, int, int32_t *, int32_t *);
