/*
 * opslib/handle.h: the handle, one per device, carrying a stream and call defaults.
 *
 * A handle is created for the CPU or for one CUDA device; creation reads the device's
 * properties once (SM version and count, shared-memory limits) so that no op queries
 * them again. Every op takes a handle and runs on its stream: asynchronously, with no
 * host synchronization and no allocation, so ops can be captured into a CUDA graph.
 * On the CPU, ops run synchronously on the calling thread.
 *
 * Thread-safety: ops may be called with one handle from several threads at once. The
 * setters (stream, math mode, determinism) must not race with ops on the same handle.
 */
#ifndef OPSLIB_HANDLE_H_
#define OPSLIB_HANDLE_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/status.h"
#include "opslib/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ops_handle_s *ops_handle;

/* How f32 matrix products may be computed. Half-precision inputs always accumulate in f32. */
typedef enum ops_math_mode {
  OPS_MATH_STRICT = 0,    /* f32 products in f32 arithmetic (the default) */
  OPS_MATH_ALLOW_TF32 = 1 /* f32 products may round their inputs to tf32 (10-bit mantissa) */
} ops_math_mode;

/* What the handle knows of its device, read once at creation. */
typedef struct ops_device_info {
  uint32_t struct_size; /* set by the caller to sizeof(ops_device_info) */
  ops_device device;
  char name[96];                /* "NVIDIA H100 80GB HBM3", or "cpu" */
  int32_t sm_version;           /* 10 * major + minor, e.g. 90; 0 for the CPU */
  int32_t code_sm;              /* SM of the machine code this build runs there: 90 when its
                                   sm_90a code is present on an sm_90 device, 80 when sm_80
                                   code runs by compatibility; 0 for the CPU */
  int32_t sm_count;             /* multiprocessors; 0 for the CPU */
  int64_t smem_per_block_optin; /* bytes a block may use after opting in */
  int64_t smem_per_sm;          /* bytes */
  int64_t l2_bytes;
  int64_t global_mem_bytes;
} ops_device_info;

/* Creates a handle for `device` into *out. For CUDA, the device must exist and be usable
 * (the CUDA driver is loaded); the handle's stream starts as the legacy default stream (NULL).
 * Errors: OPS_ERR_NULL_POINTER (out), OPS_ERR_UNSUPPORTED_DEVICE (unknown type, no such
 * ordinal, no CUDA driver), OPS_ERR_CUDA, OPS_ERR_OUT_OF_MEMORY. On failure *out is NULL. */
OPS_API ops_status ops_handle_create(ops_handle *out, ops_device device);

/* Destroys a handle (NULL is a no-op). The caller must have finished using it; work already
 * queued on its stream is not waited for and is unaffected. */
OPS_API ops_status ops_handle_destroy(ops_handle handle);

/* Sets the CUDA stream (a cudaStream_t, passed as void*) on which ops run. NULL means the
 * legacy default stream. opslib does not take ownership. On a CPU handle only NULL is valid.
 * Errors: OPS_ERR_NULL_POINTER (handle), OPS_ERR_INVALID_ARGUMENT. */
OPS_API ops_status ops_handle_set_stream(ops_handle handle, void *stream);
OPS_API ops_status ops_handle_get_stream(ops_handle handle, void **stream);

OPS_API ops_status ops_handle_set_math_mode(ops_handle handle, ops_math_mode mode);
OPS_API ops_status ops_handle_get_math_mode(ops_handle handle, ops_math_mode *mode);

/* deterministic != 0 restricts every op to kernels whose results are bitwise identical
 * from run to run (a fixed reduction order, no atomics). Off by default. */
OPS_API ops_status ops_handle_set_deterministic(ops_handle handle, int deterministic);
OPS_API ops_status ops_handle_get_deterministic(ops_handle handle, int *deterministic);

/* Copies the handle's device properties into *info; info->struct_size must be set.
 * Errors: OPS_ERR_NULL_POINTER, OPS_ERR_STRUCT_SIZE. */
OPS_API ops_status ops_handle_get_device_info(ops_handle handle, ops_device_info *info);

/* Number of CUDA devices the runtime sees: 0 when there is no GPU or no driver. Never fails. */
OPS_API int ops_cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_HANDLE_H_ */
