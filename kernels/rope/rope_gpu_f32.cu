// RoPE and the KV cache append for f32 (one dtype per file, so the builds run in parallel).
#include "kernels/rope/rope_gpu.cuh"

template void opsi::launch_rope<float>(const opsi::rope_gpu_geom &, int, int, cudaStream_t, int, int32_t *,
                                       int32_t *);
