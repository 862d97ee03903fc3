// y = a x + b on the GPU: the smallest kernel that proves this build's device code runs.
#include <cuda_runtime_api.h>

static __global__ void affine_kernel(const float *x, float *y, int n, float a, float b) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

extern "C" int opst_gpu_affine(const float *x, float *y, int n, float a, float b, void *stream) {
  affine_kernel<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(x, y, n, a, b);
  return (int)cudaGetLastError();
}

// A kernel that traps: the sticky error a faulting kernel leaves in the context, for the
// CUDA fault cases of gpu_soak_test (which run it in a child process of their own).
static __global__ void trap_kernel() { asm volatile("trap;"); }

extern "C" int opst_gpu_trap(void *stream) {
  trap_kernel<<<1, 1, 0, (cudaStream_t)stream>>>();
  return (int)cudaGetLastError();
}

// A kernel with dynamic shared memory, for the shared-memory opt-in test of gpu_smoke_test:
// its address (what opsi_cuda_smem_optin is keyed on) and a launch with `bytes` of it.
static __global__ void smem_kernel(float *y) {
  extern __shared__ float buf[];
  buf[threadIdx.x] = (float)threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) y[0] = buf[blockDim.x - 1];
}

extern "C" const void *opst_gpu_smem_kernel(void) { return reinterpret_cast<const void *>(smem_kernel); }

extern "C" int opst_gpu_smem_launch(float *y, int bytes, void *stream) {
  smem_kernel<<<1, 32, bytes, (cudaStream_t)stream>>>(y);
  return (int)cudaGetLastError();
}
