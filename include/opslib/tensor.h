/*
 * opslib/tensor.h: dtypes, devices and the tensor descriptor.
 *
 * A tensor descriptor does not own memory: it says where the data is (a pointer on one
 * device), its element type, and how a logical index maps to memory (shape and strides,
 * both in elements). Strides may be any value, including 0 (broadcast) and negative, for
 * inputs; an output must not overlap itself. ndim may be 0 (a scalar, one element).
 * A tensor with a 0 extent has no elements and its data pointer may be NULL.
 */
#ifndef OPSLIB_TENSOR_H_
#define OPSLIB_TENSOR_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. Values are ABI: never renumbered. */
typedef enum ops_dtype {
  OPS_DTYPE_INVALID = 0, /* a zero-initialized descriptor is rejected */
  OPS_DTYPE_F32 = 1,
  OPS_DTYPE_F16 = 2,
  OPS_DTYPE_BF16 = 3,
  OPS_DTYPE_I32 = 4,
  OPS_DTYPE_I64 = 5,
  OPS_DTYPE_U8 = 6,
  OPS_DTYPE_FP8_E4M3 = 7, /* reserved: accepted in descriptors, no op takes it yet */
  OPS_DTYPE_FP8_E5M2 = 8  /* reserved: likewise */
} ops_dtype;

/* Bytes per element of `dtype`, or 0 for an unknown value. */
OPS_API size_t ops_dtype_size(ops_dtype dtype);

/* "f32", "f16", "bf16", "i32", "i64", "u8", "fp8_e4m3", "fp8_e5m2", or "invalid". */
OPS_API const char *ops_dtype_name(ops_dtype dtype);

typedef enum ops_device_type {
  OPS_DEVICE_CPU = 1,
  OPS_DEVICE_CUDA = 2
} ops_device_type;

/* A device: the CPU (ordinal 0), or one CUDA GPU by its runtime ordinal. */
typedef struct ops_device {
  int32_t type;    /* ops_device_type */
  int32_t ordinal; /* CUDA device ordinal; 0 for the CPU */
} ops_device;

OPS_API ops_device ops_device_cpu(void);
OPS_API ops_device ops_device_cuda(int ordinal);

#define OPS_MAX_DIMS 8

typedef struct ops_tensor {
  uint32_t struct_size; /* sizeof(ops_tensor); set by ops_tensor_init */
  int32_t dtype;        /* ops_dtype */
  ops_device device;
  int32_t ndim;         /* 0..OPS_MAX_DIMS */
  int32_t reserved;     /* must be 0 */
  void *data;           /* element [0,...,0]; may be NULL when the tensor has no elements */
  int64_t shape[OPS_MAX_DIMS];
  int64_t strides[OPS_MAX_DIMS]; /* in elements, not bytes */
} ops_tensor;

/* Fills *t. strides == NULL means contiguous row-major (the last axis has stride 1).
 * Checks what can be checked without the op: t not NULL, a known dtype, 0 <= ndim <= 8,
 * shape/strides not NULL when ndim > 0, no negative extent, an element count and byte
 * span that fit in int64. Errors: OPS_ERR_NULL_POINTER, OPS_ERR_DTYPE_MISMATCH,
 * OPS_ERR_BAD_NDIM, OPS_ERR_BAD_SIZE. Thread-safe. */
OPS_API ops_status ops_tensor_init(ops_tensor *t, void *data, ops_dtype dtype, ops_device device,
                                   int ndim, const int64_t *shape, const int64_t *strides);

/* Number of elements (1 for ndim 0, 0 when any extent is 0); -1 when t is NULL,
 * malformed, or the count overflows int64. */
OPS_API int64_t ops_tensor_numel(const ops_tensor *t);

/* 1 when t is contiguous row-major (extents of 1 may have any stride), else 0. */
OPS_API int ops_tensor_is_contiguous(const ops_tensor *t);

/* *out = t with its axes reordered: out axis i is t's axis perm[i] (a view, no copy).
 * Example: a BHSD buffer seen as BSHD is permute(t, {0, 2, 1, 3}).
 * Errors: OPS_ERR_NULL_POINTER, OPS_ERR_INVALID_ARGUMENT (perm not a permutation). */
OPS_API ops_status ops_tensor_permute(const ops_tensor *t, const int *perm, ops_tensor *out);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_TENSOR_H_ */
