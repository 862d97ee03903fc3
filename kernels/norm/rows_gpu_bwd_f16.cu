// The backward row kernels for f16 (one dtype and direction per file, so the builds run in parallel).
#include "kernels/norm/rows_launch.cuh"

template void opsi::launch_rows_backward<__half>(const opsi::row_geom &, int, int, cudaStream_t, int, int32_t *, int32_t *);
