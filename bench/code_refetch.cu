/* The two kernels bench/code_refetch.py runs before each timed call (built there into a cubin,
 * loaded as a module of its own). Both run the same chain of 12800 dependent FMAs a thread, one
 * constant for all, on every SM: code_small as 400 turns of a 32-FMA loop, code_big unrolled
 * (200 KB of instructions), after which no SM holds any of the timed call's code in its
 * instruction caches. */
template <int UNROLL> __device__ __forceinline__ void fma_chain(float *out, int turns) {
  float a = threadIdx.x + blockIdx.x;
  for (int i = 0; i < turns; ++i) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) a = fmaf(a, 1.0000001f, 1e-9f);
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}

extern "C" __global__ void code_small(float *out, int turns) { fma_chain<32>(out, turns); }

extern "C" __global__ void code_big(float *out, int turns) { fma_chain<12800>(out, turns); }
