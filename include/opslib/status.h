/*
 * opslib/status.h: status codes and the detailed message of the last failure.
 *
 * Every opslib function that can fail returns an ops_status. The numeric values are part
 * of the ABI: they are never renumbered or reused, and new codes are added at the end.
 * A failing call also leaves a message on the calling thread that names the argument,
 * what was expected and what was given; ops_last_error() returns it.
 */
#ifndef OPSLIB_STATUS_H_
#define OPSLIB_STATUS_H_

#include "opslib/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ops_status {
  OPS_OK = 0,
  OPS_ERR_INVALID_ARGUMENT = 1,    /* a parameter value is out of its range */
  OPS_ERR_NULL_POINTER = 2,        /* a required pointer is NULL (also: NULL data, size > 0) */
  OPS_ERR_STRUCT_SIZE = 3,         /* struct_size is not one this library knows */
  OPS_ERR_DTYPE_MISMATCH = 4,      /* a dtype is unknown, unsupported or inconsistent */
  OPS_ERR_SHAPE_MISMATCH = 5,      /* extents do not agree between operands */
  OPS_ERR_BAD_NDIM = 6,            /* wrong number of dimensions */
  OPS_ERR_BAD_SIZE = 7,            /* a negative extent, or a size that overflows int64 */
  OPS_ERR_ALIASING = 8,            /* an output overlaps an input or another output */
  OPS_ERR_MISALIGNED = 9,          /* a pointer or stride breaks an alignment requirement */
  OPS_ERR_DEVICE_MISMATCH = 10,    /* a tensor lives on another device than the handle */
  OPS_ERR_UNSUPPORTED_DEVICE = 11, /* the device does not exist or cannot be used */
  OPS_ERR_WORKSPACE_TOO_SMALL = 12,
  OPS_ERR_UNSUPPORTED = 13,        /* valid input, but no kernel of this build serves it */
  OPS_ERR_CUDA = 14,               /* a CUDA runtime call failed */
  OPS_ERR_OUT_OF_MEMORY = 15,      /* host allocation failed (handle creation only) */
  OPS_ERR_INTERNAL = 16,           /* a bug in opslib: please report it */
  OPS_ERR_IO = 17                  /* a file opslib was asked to write cannot be written */
} ops_status;

/* A short English description of `status`, e.g. "shape mismatch". Static storage; an
 * unknown value gives "unknown status". Thread-safe. */
OPS_API const char *ops_status_string(ops_status status);

/* The enumerator's name, e.g. "OPS_ERR_SHAPE_MISMATCH", or "OPS_ERR_UNKNOWN". */
OPS_API const char *ops_status_name(ops_status status);

/* The detailed message of the most recent opslib call on this thread that failed, or ""
 * when the most recent call succeeded. The pointer stays valid until the next opslib call
 * on this thread. Example: "ops_sdpa: k: expected dtype bf16 (the dtype of q), got f16". */
OPS_API const char *ops_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_STATUS_H_ */
