// The forward row kernels for f32 (one dtype and direction per file, so the builds run in parallel).
#include "kernels/norm/rows_launch.cuh"

template void opsi::launch_rows_forward<float>(const opsi::row_geom &, int, int, cudaStream_t, int, int32_t *, int32_t *);
