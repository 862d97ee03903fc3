/*
 * The CUDA runtime calls of the runtime layer, behind plain C functions so that the rest
 * of the library never includes CUDA headers for them.
 */
#ifndef OPSLIB_RUNTIME_CUDA_DEVICE_H_
#define OPSLIB_RUNTIME_CUDA_DEVICE_H_

#include "opslib/handle.h"

/* Fills the CUDA fields of *info for `ordinal`. Errors: OPS_ERR_UNSUPPORTED_DEVICE (no
 * driver, no such device), OPS_ERR_CUDA. */
ops_status opsi_cuda_read_device(int ordinal, ops_device_info *info);

/* After a kernel launch: OPS_OK, or OPS_ERR_CUDA naming `what` and the CUDA error. */
ops_status opsi_cuda_check_launch(const char *what);

/* The calling thread's current CUDA device is `ordinal` (ops launch there). */
ops_status opsi_cuda_check_current(const char *what, int ordinal);

/* cudaGetErrorName of a CUDA runtime error number ("cudaErrorIllegalAddress"). */
const char *opsi_cuda_error_name(int code);

/* Launches the code probe (cuda_probe.cu) with 2048 threads a block on `stream` (a
 * cudaStream_t): an invalid configuration, left for the next cudaGetLastError. For tests of
 * the launch error path (opsi_fail_next_cuda_launches). */
void opsi_cuda_launch_invalid(void *stream);

#endif /* OPSLIB_RUNTIME_CUDA_DEVICE_H_ */
