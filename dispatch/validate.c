/* The shared checks of dispatch/validate.h. */
#include "dispatch/validate.h"

#include <stdio.h>
#include <string.h>

#include "capabilities/rows.h"
#include "opslib/explain.h"
#include "runtime/error.h"
#include "runtime/handle_internal.h"
#include "runtime/tensor_internal.h"

/* Whether the current call on this thread writes an output over one of its inputs. */
static _Thread_local int t_in_place;

int opsi_call_in_place(void) { return t_in_place; }

ops_status opsi_check_call(const opsi_vctx *v) {
  t_in_place = 0;
  if (v->mode == OPSI_QUERY_WORKSPACE && v->workspace_out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: bytes: expected a pointer, got NULL", v->fn);
  }
  if (v->mode == OPSI_EXPLAIN) {
    if (v->explain_out == NULL) {
      return opsi_fail(OPS_ERR_NULL_POINTER, "%s: out: expected a pointer to an ops_explain, got NULL", v->fn);
    }
    const uint32_t size = v->explain_out->struct_size;
    if (size != sizeof(ops_explain) && size != OPS_EXPLAIN_SIZE_V1) {
      return opsi_fail(OPS_ERR_STRUCT_SIZE, "%s: out->struct_size: expected %zu (or %zu, the first layout), got %u",
                       v->fn, sizeof(ops_explain), (size_t)OPS_EXPLAIN_SIZE_V1, (unsigned)size);
    }
  }
  if (v->handle == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: handle: expected a handle from ops_handle_create, got NULL", v->fn);
  }
  return OPS_OK;
}

ops_status opsi_read_params(const opsi_vctx *v, const char *type, const void *params, size_t size,
                            void *local) {
  if (params == NULL) {
    return OPS_OK;
  }
  uint32_t given;
  memcpy(&given, params, sizeof given);
  if (given != size) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE,
                     "%s: params->struct_size: expected %zu (sizeof(%s); fill it with %s_init), got %u",
                     v->fn, size, type, type, (unsigned)given);
  }
  memcpy(local, params, size);
  return OPS_OK;
}

ops_status opsi_check_tensor(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                             int64_t *numel) {
  char a[64], b[64];
  if (t == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "%s: %s: expected a tensor descriptor, got NULL", v->fn, arg);
  }
  if (t->struct_size != sizeof(ops_tensor)) {
    return opsi_fail(OPS_ERR_STRUCT_SIZE,
                     "%s: %s: struct_size: expected %zu (fill it with ops_tensor_init), got %u",
                     v->fn, arg, sizeof(ops_tensor), (unsigned)t->struct_size);
  }
  if (!opsi_dtype_known(t->dtype)) {
    return opsi_fail(OPS_ERR_DTYPE_MISMATCH, "%s: %s: dtype: expected an ops_dtype value, got %d",
                     v->fn, arg, (int)t->dtype);
  }
  if (t->reserved != 0) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: %s: reserved: expected 0 (fill it with ops_tensor_init), got %d",
                     v->fn, arg, (int)t->reserved);
  }
  if (t->ndim < 0 || t->ndim > OPS_MAX_DIMS) {
    return opsi_fail(OPS_ERR_BAD_NDIM, "%s: %s: ndim: expected 0..%d, got %d", v->fn, arg,
                     OPS_MAX_DIMS, (int)t->ndim);
  }
  int64_t n, lo, hi;
  if (!opsi_shape_numel(t->ndim, t->shape, &n)) {
    char dims[256];
    return opsi_fail(OPS_ERR_BAD_SIZE,
                     "%s: %s: shape: expected non-negative extents whose product fits in int64, got %s",
                     v->fn, arg, opsi_format_dims(t->ndim, t->shape, dims, sizeof dims));
  }
  if (n > 0 && !opsi_tensor_byte_span(t, &lo, &hi)) {
    return opsi_fail(OPS_ERR_BAD_SIZE, "%s: %s: strides: the byte span of the view overflows int64",
                     v->fn, arg);
  }
  const ops_device hd = v->handle->device;
  if (t->device.type != hd.type || t->device.ordinal != hd.ordinal) {
    return opsi_fail(OPS_ERR_DEVICE_MISMATCH, "%s: %s: device: expected %s (the handle's), got %s",
                     v->fn, arg, opsi_format_device(hd, a, sizeof a),
                     opsi_format_device(t->device, b, sizeof b));
  }
  if (n > 0 && t->data == NULL && v->mode == OPSI_RUN) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "%s: %s: data: expected a pointer to %lld elements, got NULL", v->fn, arg,
                     (long long)n);
  }
  const size_t elem = ops_dtype_size((ops_dtype)t->dtype);
  if (n > 0 && (uintptr_t)t->data % elem != 0) {
    return opsi_fail(OPS_ERR_MISALIGNED,
                     "%s: %s: data: expected an address aligned to %zu bytes (%s elements), got %p",
                     v->fn, arg, elem, ops_dtype_name((ops_dtype)t->dtype), t->data);
  }
  if (numel != NULL) {
    *numel = n;
  }
  return OPS_OK;
}

ops_status opsi_check_dtype_in(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                               uint32_t allowed) {
  if (!(allowed & OPSI_DTYPE_BIT(t->dtype))) {
    char list[128];
    return opsi_fail(OPS_ERR_DTYPE_MISMATCH, "%s: %s: dtype: expected one of %s, got %s", v->fn,
                     arg, opsi_format_dtype_mask(allowed, list, sizeof list), ops_dtype_name((ops_dtype)t->dtype));
  }
  return OPS_OK;
}

ops_status opsi_check_dtype_eq(const opsi_vctx *v, const char *arg, const ops_tensor *t,
                               int32_t expected, const char *why) {
  if (t->dtype != expected) {
    return opsi_fail(OPS_ERR_DTYPE_MISMATCH, "%s: %s: dtype: expected %s (%s), got %s", v->fn, arg,
                     ops_dtype_name((ops_dtype)expected), why, ops_dtype_name((ops_dtype)t->dtype));
  }
  return OPS_OK;
}

ops_status opsi_check_ndim(const opsi_vctx *v, const char *arg, const ops_tensor *t, int lo, int hi) {
  if (t->ndim < lo || t->ndim > hi) {
    if (lo == hi) {
      return opsi_fail(OPS_ERR_BAD_NDIM, "%s: %s: ndim: expected %d, got %d", v->fn, arg, lo,
                       (int)t->ndim);
    }
    return opsi_fail(OPS_ERR_BAD_NDIM, "%s: %s: ndim: expected %d..%d, got %d", v->fn, arg, lo, hi,
                     (int)t->ndim);
  }
  return OPS_OK;
}

ops_status opsi_mul_size(const opsi_vctx *v, const char *what, int64_t *acc, int64_t factor) {
  if (__builtin_mul_overflow(*acc, factor, acc)) {
    return opsi_fail(OPS_ERR_BAD_SIZE, "%s: %s: expected a product of at most 2^63 - 1, got more (a factor %lld)",
                     v->fn, what, (long long)factor);
  }
  return OPS_OK;
}

ops_status opsi_extent_product(const opsi_vctx *v, const char *what, const ops_tensor *t, uint32_t axes,
                               int64_t *out) {
  *out = 1;
  for (int i = 0; i < t->ndim; ++i) {
    if ((axes & (1u << i)) && t->shape[i] == 0) {
      *out = 0;
      return OPS_OK;
    }
  }
  for (int i = 0; i < t->ndim; ++i) {
    if ((axes & (1u << i)) && __builtin_mul_overflow(*out, t->shape[i], out)) {
      return opsi_fail(OPS_ERR_BAD_SIZE,
                       "%s: %s: expected a product of at most 2^63 - 1, got more at axis %d (extent %lld)", v->fn,
                       what, i, (long long)t->shape[i]);
    }
  }
  return OPS_OK;
}

ops_status opsi_check_extent(const opsi_vctx *v, const char *arg, const ops_tensor *t, int axis,
                             int64_t expected, const char *what) {
  if (t->shape[axis] != expected) {
    char dims[256];
    return opsi_fail(OPS_ERR_SHAPE_MISMATCH, "%s: %s: axis %d (%s): expected %lld, got %lld (shape %s)",
                     v->fn, arg, axis, what, (long long)expected, (long long)t->shape[axis],
                     opsi_format_dims(t->ndim, t->shape, dims, sizeof dims));
  }
  return OPS_OK;
}

ops_status opsi_check_shape(const opsi_vctx *v, const char *arg, const ops_tensor *t, int ndim,
                            const int64_t *shape, const char *what) {
  int same = t->ndim == ndim;
  for (int i = 0; same && i < ndim; ++i) {
    same = t->shape[i] == shape[i];
  }
  if (!same) {
    char want[256], got[256];
    return opsi_fail(t->ndim == ndim ? OPS_ERR_SHAPE_MISMATCH : OPS_ERR_BAD_NDIM,
                     "%s: %s: shape: expected %s (%s), got %s", v->fn, arg,
                     opsi_format_dims(ndim, shape, want, sizeof want), what,
                     opsi_format_dims(t->ndim, t->shape, got, sizeof got));
  }
  return OPS_OK;
}

ops_status opsi_broadcast_to(const opsi_vctx *v, const char *arg, const ops_tensor *t, int ndim,
                             const int64_t *shape, const char *what, ops_tensor *out) {
  char want[256], got[256];
  if (t->ndim > ndim) {
    return opsi_fail(OPS_ERR_BAD_NDIM,
                     "%s: %s: expected at most %d axes to broadcast to %s (%s), got shape %s", v->fn,
                     arg, ndim, opsi_format_dims(ndim, shape, want, sizeof want), what,
                     opsi_format_dims(t->ndim, t->shape, got, sizeof got));
  }
  ops_tensor r = *t;
  r.ndim = ndim;
  const int lead = ndim - t->ndim;
  for (int i = 0; i < ndim; ++i) {
    const int j = i - lead;
    const int64_t ext = j >= 0 ? t->shape[j] : 1;
    if (ext != shape[i] && ext != 1) {
      return opsi_fail(OPS_ERR_SHAPE_MISMATCH,
                       "%s: %s: shape: expected a shape that broadcasts to %s (%s), got %s", v->fn,
                       arg, opsi_format_dims(ndim, shape, want, sizeof want), what,
                       opsi_format_dims(t->ndim, t->shape, got, sizeof got));
    }
    r.shape[i] = shape[i];
    r.strides[i] = (j >= 0 && ext == shape[i]) ? t->strides[j] : 0;
  }
  *out = r;
  return OPS_OK;
}

ops_status opsi_check_aliasing(const opsi_vctx *v, const opsi_operand *ops, int n) {
  if (v->mode != OPSI_RUN) {
    return OPS_OK; /* queries read descriptors only; the pointers may all be NULL */
  }
  for (int i = 0; i < n; ++i) {
    const opsi_operand *o = &ops[i];
    if (!o->is_output || o->t == NULL || ops_tensor_numel(o->t) == 0) {
      continue;
    }
    if (opsi_tensor_self_overlaps(o->t)) {
      return opsi_fail(OPS_ERR_ALIASING,
                       "%s: %s: strides: expected an output view that addresses each element once, "
                       "got one that overlaps itself (a 0 or overlapping stride)", v->fn, o->name);
    }
    for (int j = 0; j < n; ++j) {
      const opsi_operand *u = &ops[j];
      if (j == i || u->t == NULL || ops_tensor_numel(u->t) == 0 || !opsi_tensors_overlap(o->t, u->t)) {
        continue;
      }
      const int partner = u->t == o->in_place_of[0] || u->t == o->in_place_of[1];
      if (partner && opsi_same_view(o->t, u->t)) {
        t_in_place = 1;
        continue;
      }
      if (u->is_output && j < i) {
        continue; /* reported when the earlier output was checked */
      }
      if (partner) {
        return opsi_fail(OPS_ERR_ALIASING,
                         "%s: %s: expected no overlap with %s, or exactly the same view (in place), "
                         "got a partial overlap", v->fn, o->name, u->name);
      }
      return opsi_fail(OPS_ERR_ALIASING, "%s: %s: expected memory disjoint from %s %s, got an overlap",
                       v->fn, o->name, u->is_output ? "output" : "input", u->name);
    }
  }
  return OPS_OK;
}

ops_status opsi_check_workspace(const opsi_vctx *v, const void *workspace, size_t bytes,
                                size_t needed) {
  if (bytes > 0 && workspace == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "%s: workspace: expected a pointer to %zu bytes, got NULL", v->fn, bytes);
  }
  if (bytes < needed) {
    return opsi_fail(OPS_ERR_WORKSPACE_TOO_SMALL,
                     "%s: workspace_bytes: expected at least %zu (see %s_workspace_size), got %zu",
                     v->fn, needed, v->fn, bytes);
  }
  if (needed > 0 && (uintptr_t)workspace % 16 != 0) {
    return opsi_fail(OPS_ERR_MISALIGNED,
                     "%s: workspace: expected an address aligned to 16 bytes, got %p", v->fn, workspace);
  }
  return OPS_OK;
}

int32_t opsi_tensor_align(const ops_tensor *t) {
  if (ops_tensor_numel(t) == 0) {
    return 16;
  }
  const int64_t elem = (int64_t)ops_dtype_size((ops_dtype)t->dtype);
  uint64_t bits = (uint64_t)(uintptr_t)t->data | 16u;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] <= 1) continue;
    if (i == t->ndim - 1) {
      if (t->strides[i] != 1) return (int32_t)elem;
    } else {
      bits |= (uint64_t)(t->strides[i] * elem);
    }
  }
  return (int32_t)(bits & (~bits + 1)); /* lowest set bit */
}

int opsi_contiguous(const ops_tensor *t) { return ops_tensor_is_contiguous(t); }

void opsi_collapse_dims(int *ndim, int64_t *shape, int n, int64_t **strides) {
  int out = 0;
  for (int d = 0; d < *ndim; ++d) {
    if (shape[d] == 1) continue;
    int merge = out > 0;
    for (int k = 0; merge && k < n; ++k) merge = strides[k][d] * shape[d] == strides[k][out - 1];
    if (merge) {
      shape[out - 1] *= shape[d];
      for (int k = 0; k < n; ++k) strides[k][out - 1] = strides[k][d];
    } else {
      shape[out] = shape[d];
      for (int k = 0; k < n; ++k) strides[k][out] = strides[k][d];
      ++out;
    }
  }
  *ndim = out;
}
