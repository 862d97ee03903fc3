/* CUDA_OK(call): a CUDA runtime call in a GPU test; a failure fails the case with the
 * runtime's message (cmocka's print_error and fail: include <cmocka.h> first). */
#ifndef OPSLIB_TESTS_GPU_CUDA_CHECK_H_
#define OPSLIB_TESTS_GPU_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      print_error("%s failed: %s\n", #call, cudaGetErrorString(e_));                    \
      fail();                                                                           \
    }                                                                                   \
  } while (0)

#endif /* OPSLIB_TESTS_GPU_CUDA_CHECK_H_ */
