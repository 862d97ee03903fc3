/* Device discovery and launch-error collection through the CUDA runtime API. */
#include "runtime/cuda_device.h"

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "runtime/error.h"

/* runtime/cuda_probe.cu */
int opsi_cuda_probe_code_sm(int ordinal, int *code_sm);

int ops_cuda_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no driver" state for later calls */
    return 0;
  }
  return count;
}

ops_status opsi_cuda_read_device(int ordinal, ops_device_info *info) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device: cuda:%d requested, but the CUDA runtime finds no "
                     "device (%s: %s)", ordinal, cudaGetErrorName(err), cudaGetErrorString(err));
  }
  if (ordinal < 0 || ordinal >= count) {
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device: expected a CUDA ordinal in 0..%d, got %d",
                     count - 1, ordinal);
  }
  struct cudaDeviceProp prop;
  err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return opsi_fail(OPS_ERR_CUDA, "ops_handle_create: cudaGetDeviceProperties(%d) failed: %s",
                     ordinal, cudaGetErrorString(err));
  }
  int code_sm = 0;
  err = (cudaError_t)opsi_cuda_probe_code_sm(ordinal, &code_sm);
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device: cuda:%d is sm_%d%d, and this build of opslib has no "
                     "machine code for it (rebuild with --//tools/bazel:cuda_archs=sm_%d%d,...)",
                     ordinal, prop.major, prop.minor, prop.major, prop.minor);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return opsi_fail(OPS_ERR_CUDA, "ops_handle_create: probing cuda:%d failed: %s", ordinal,
                     cudaGetErrorString(err));
  }
  info->code_sm = code_sm;
  snprintf(info->name, sizeof info->name, "%.95s", prop.name);
  info->sm_version = prop.major * 10 + prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->smem_per_block_optin = (int64_t)prop.sharedMemPerBlockOptin;
  info->smem_per_sm = (int64_t)prop.sharedMemPerMultiprocessor;
  info->l2_bytes = (int64_t)prop.l2CacheSize;
  info->global_mem_bytes = (int64_t)prop.totalGlobalMem;
  return OPS_OK;
}

ops_status opsi_cuda_check_launch(const char *what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return opsi_fail(OPS_ERR_CUDA, "%s: kernel launch failed: %s (%s)", what,
                     cudaGetErrorString(err), cudaGetErrorName(err));
  }
  return OPS_OK;
}

const char *opsi_cuda_error_name(int code) { return cudaGetErrorName((cudaError_t)code); }

ops_status opsi_cuda_check_current(const char *what, int ordinal) {
  int current = -1;
  const cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) {
    return opsi_fail(OPS_ERR_CUDA, "%s: cudaGetDevice failed: %s", what, cudaGetErrorString(err));
  }
  if (current != ordinal) {
    return opsi_fail(OPS_ERR_DEVICE_MISMATCH,
                     "%s: current CUDA device: expected %d (the handle's; call cudaSetDevice(%d)), got %d", what,
                     ordinal, ordinal, current);
  }
  return OPS_OK;
}
