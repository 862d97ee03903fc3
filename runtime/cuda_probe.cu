/*
 * The code probe: an empty kernel compiled like every other kernel of this build (the
 * same --//tools/bazel:cuda_archs list). Asking the runtime for its attributes on a device
 * tells, without launching anything, whether the build carries machine code for that
 * device, and for which SM that code was compiled (90 when the sm_90a code is present on
 * an H100; 80 when only sm_80 code is, which then runs through binary compatibility).
 * Handle creation records it, so the dispatcher never picks a Hopper kernel that the build
 * does not contain, and an unsupported GPU gets a clear error instead of a failed launch.
 */
#include <cuda_runtime_api.h>

static __global__ void opsi_probe_kernel() {}

extern "C" int opsi_cuda_probe_code_sm(int ordinal, int *code_sm) {
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err != cudaSuccess) return (int)err;
  if (previous != ordinal && (err = cudaSetDevice(ordinal)) != cudaSuccess) return (int)err;
  cudaFuncAttributes attr;
  err = cudaFuncGetAttributes(&attr, opsi_probe_kernel);
  if (err == cudaSuccess) *code_sm = attr.binaryVersion;
  if (previous != ordinal) cudaSetDevice(previous);
  return (int)err;
}

/* An invalid configuration (more threads a block than any GPU allows), for the tests of
 * the launch error path: the error is left for cudaGetLastError. */
extern "C" void opsi_cuda_launch_invalid(void *stream) {
  opsi_probe_kernel<<<1, 2048, 0, (cudaStream_t)stream>>>();
}
