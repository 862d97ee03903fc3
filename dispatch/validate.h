/*
 * Checks shared by every entry point. Each returns OPS_OK or a specific status with the
 * message set through opsi_fail(): "<fn>: <argument>: expected <what>, got <value>".
 * Entry points run all their checks before anything is written.
 */
#ifndef OPSLIB_DISPATCH_VALIDATE_H_
#define OPSLIB_DISPATCH_VALIDATE_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/handle.h"
#include "opslib/tensor.h"

/* What an entry point was asked to do with a valid call. */
typedef enum opsi_mode {
  OPSI_RUN = 0,            /* ops_X: run it */
  OPSI_QUERY_WORKSPACE = 1,/* ops_X_workspace_size: report the chosen kernel's workspace */
  OPSI_EXPLAIN = 2         /* ops_X_explain: report every candidate; descriptors only */
} opsi_mode;

/* Who is checking and why: the public function's name (for messages), its handle, the
 * mode, and where the query modes put their answer. */
typedef struct opsi_vctx {
  const char *fn;
  ops_handle handle;
  opsi_mode mode;
  size_t *workspace_out;
  struct ops_explain *explain_out;
} opsi_vctx;

/* The handle, and the answer slot of a query mode: not NULL, of a known struct_size. */
ops_status opsi_check_call(const opsi_vctx *v);

/* Copies the caller's params over *local (already holding the defaults). params == NULL
 * keeps the defaults. struct_size must be one this library knows (size). */
ops_status opsi_read_params(const opsi_vctx *v, const char *type, const void *params, size_t size,
                            void *local);

/* A well-formed descriptor on the handle's device: struct_size, known dtype, ndim 0..8,
 * non-negative extents whose count and byte span fit in int64, data not NULL when there
 * are elements (only checked when running: queries read descriptors), data aligned to the
 * element size. *numel receives the element count. */
ops_status opsi_check_tensor(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                             int64_t *numel);

/* t's dtype is one of `allowed` (OPSI_DTYPE_BIT mask). */
ops_status opsi_check_dtype_in(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                               uint32_t allowed);

/* t's dtype equals `expected`; `why` says where that expectation comes from ("q's dtype"). */
ops_status opsi_check_dtype_eq(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                               int32_t expected, const char *why);

ops_status opsi_check_ndim(const opsi_vctx *v, const char *arg, const ops_tensor *t, int lo, int hi);

/* *acc *= factor, or OPS_ERR_BAD_SIZE naming `what` when the product passes 2^63 - 1 (extents
 * of a tensor that passed opsi_check_tensor can: an empty tensor's other extents are unbounded). */
ops_status opsi_mul_size(const opsi_vctx *v, const char *what, int64_t *acc, int64_t factor);

/* The product of t's extents on the axes in `axes` (bit i: axis i) into *out: 0 when one of them
 * is 0 however large the others, else OPS_ERR_BAD_SIZE naming `what` and the axis where it
 * passes 2^63 - 1. */
ops_status opsi_extent_product(const opsi_vctx *v, const char *what, const ops_tensor *t, uint32_t axes,
                               int64_t *out);

/* t->shape[axis] == expected; `what` names the axis and the source of the expectation. */
ops_status opsi_check_extent(const opsi_vctx *v, const char *arg, const ops_tensor *t, int axis,
                             int64_t expected, const char *what);

/* t has exactly `shape` (ndim and extents); `what` names where the shape comes from. */
ops_status opsi_check_shape(const opsi_vctx *v, const char *arg, const ops_tensor *t, int ndim,
                            const int64_t *shape, const char *what);

/* t broadcasts (NumPy rules, aligned right) to `shape`; *out becomes the broadcast view
 * with ndim axes (stride 0 where t repeats). */
ops_status opsi_broadcast_to(const opsi_vctx *v, const char *arg, const ops_tensor *t, int ndim,
                             const int64_t *shape, const char *what, ops_tensor *out);

/* One operand of a call for the aliasing check. Absent operands have t == NULL. */
typedef struct opsi_operand {
  const char *name;
  const ops_tensor *t;
  int is_output;
  const ops_tensor *in_place_of[2]; /* outputs: inputs it may be the very same view of */
} opsi_operand;

/* No output overlaps itself, an input, or another output, except an output that is the
 * same view as one of its in_place_of inputs. (Only checked when running: in queries the
 * data pointers may all be NULL.) */
ops_status opsi_check_aliasing(const opsi_vctx *v, const opsi_operand *ops, int n);

/* 1 when the call being checked on this thread (since its opsi_check_call) passed
 * opsi_check_aliasing with an output that is the very same view as one of its inputs: a
 * second run of its kernel would read the first run's output (autotune does not time it). */
int opsi_call_in_place(void);

/* The caller's workspace holds `needed` bytes and is 16-byte aligned. */
ops_status opsi_check_workspace(const opsi_vctx *v, const void *workspace, size_t bytes,
                                size_t needed);

/* Largest power of two <= 16 dividing t's data address and the byte stride of every axis
 * but the last; the element size when the last axis is strided (not 1). Tensors without
 * elements count as 16. */
int32_t opsi_tensor_align(const ops_tensor *t);

/* Collapses a dim list walked by n operands: drops extents of 1 and merges neighbours that
 * every operand steps through as through one dim. strides[k] is operand k's list. */
void opsi_collapse_dims(int *ndim, int64_t *shape, int n, int64_t **strides);

/* 1 when t is contiguous row-major. */
int opsi_contiguous(const ops_tensor *t);

#endif /* OPSLIB_DISPATCH_VALIDATE_H_ */
