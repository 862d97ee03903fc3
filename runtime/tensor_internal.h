/*
 * Facts about tensor descriptors that validation and kernels share: element counts and
 * byte spans with overflow checks, overlap tests, and printable shapes for messages.
 */
#ifndef OPSLIB_RUNTIME_TENSOR_INTERNAL_H_
#define OPSLIB_RUNTIME_TENSOR_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opslib/tensor.h"

bool opsi_dtype_known(int32_t dtype);

/* Element count of shape[0..ndim); false on a negative extent or int64 overflow. */
bool opsi_shape_numel(int ndim, const int64_t *shape, int64_t *numel);

/* Byte offsets, relative to data, of the lowest byte and one past the highest byte the
 * tensor touches. Requires numel > 0. False when the span overflows int64. */
bool opsi_tensor_byte_span(const ops_tensor *t, int64_t *lo, int64_t *hi);

/* True when two distinct indices of t address overlapping bytes (e.g. a 0 stride on an
 * axis of extent > 1). Conservative: it may report overlap for exotic interleavings. */
bool opsi_tensor_self_overlaps(const ops_tensor *t);

/* True when a and b may share bytes (both must have elements): their memory ranges
 * intersect, unless they have one element size and the same strides and no element of one
 * is an element of the other (interleaved columns of one buffer: q and k of a fused QKV). */
bool opsi_tensors_overlap(const ops_tensor *a, const ops_tensor *b);

/* True when a and b are the same view: data, dtype, shape and strides. */
bool opsi_same_view(const ops_tensor *a, const ops_tensor *b);

/* Writes "[2, 3, 4]" into buf. Returns buf. */
const char *opsi_format_dims(int ndim, const int64_t *dims, char *buf, size_t n);

/* Writes the dtypes whose bit (1u << dtype) is set in mask, "f32, f16, bf16". Returns buf. */
const char *opsi_format_dtype_mask(uint32_t mask, char *buf, size_t n);

/* Writes "cpu" or "cuda:1" into buf. Returns buf. */
const char *opsi_format_device(ops_device device, char *buf, size_t n);

#endif /* OPSLIB_RUNTIME_TENSOR_INTERNAL_H_ */
