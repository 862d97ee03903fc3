/* The tensor descriptor's public helpers and the shared descriptor facts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opslib/tensor.h"
#include "runtime/error.h"
#include "runtime/tensor_internal.h"

size_t ops_dtype_size(ops_dtype dtype) {
  switch (dtype) {
    case OPS_DTYPE_F32:
    case OPS_DTYPE_I32:
      return 4;
    case OPS_DTYPE_F16:
    case OPS_DTYPE_BF16:
      return 2;
    case OPS_DTYPE_I64:
      return 8;
    case OPS_DTYPE_U8:
    case OPS_DTYPE_FP8_E4M3:
    case OPS_DTYPE_FP8_E5M2:
      return 1;
    case OPS_DTYPE_INVALID:
      break;
  }
  return 0;
}

const char *ops_dtype_name(ops_dtype dtype) {
  switch (dtype) {
    case OPS_DTYPE_F32: return "f32";
    case OPS_DTYPE_F16: return "f16";
    case OPS_DTYPE_BF16: return "bf16";
    case OPS_DTYPE_I32: return "i32";
    case OPS_DTYPE_I64: return "i64";
    case OPS_DTYPE_U8: return "u8";
    case OPS_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case OPS_DTYPE_FP8_E5M2: return "fp8_e5m2";
    case OPS_DTYPE_INVALID: break;
  }
  return "invalid";
}

bool opsi_dtype_known(int32_t dtype) { return ops_dtype_size((ops_dtype)dtype) != 0; }

ops_device ops_device_cpu(void) {
  ops_device d = {OPS_DEVICE_CPU, 0};
  return d;
}

ops_device ops_device_cuda(int ordinal) {
  ops_device d = {OPS_DEVICE_CUDA, ordinal};
  return d;
}

bool opsi_shape_numel(int ndim, const int64_t *shape, int64_t *numel) {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0) {
      return false;
    }
    zero = zero || shape[i] == 0;
  }
  /* A zero extent makes the count 0 however large the others are. */
  if (zero) {
    *numel = 0;
    return true;
  }
  for (int i = 0; i < ndim; ++i) {
    if (__builtin_mul_overflow(n, shape[i], &n)) {
      return false;
    }
  }
  *numel = n;
  return true;
}

bool opsi_tensor_byte_span(const ops_tensor *t, int64_t *lo, int64_t *hi) {
  int64_t elem = (int64_t)ops_dtype_size((ops_dtype)t->dtype);
  int64_t min_off = 0, max_off = 0;
  for (int i = 0; i < t->ndim; ++i) {
    int64_t reach;
    if (__builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &reach)) {
      return false;
    }
    if (reach < 0) {
      if (__builtin_add_overflow(min_off, reach, &min_off)) return false;
    } else {
      if (__builtin_add_overflow(max_off, reach, &max_off)) return false;
    }
  }
  if (__builtin_mul_overflow(min_off, elem, lo)) return false;
  int64_t top;
  if (__builtin_add_overflow(max_off, 1, &top)) return false;
  if (__builtin_mul_overflow(top, elem, hi)) return false;
  return true;
}

typedef struct {
  int64_t extent;
  int64_t stride;
} axis;

static int compare_axis(const void *a, const void *b) {
  int64_t sa = ((const axis *)a)->stride, sb = ((const axis *)b)->stride;
  return (sa > sb) - (sa < sb);
}

bool opsi_tensor_self_overlaps(const ops_tensor *t) {
  /* Sort the axes of extent > 1 by |stride|: the view is one-to-one when each stride
   * steps over everything the smaller axes can reach. */
  axis ax[OPS_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] > 1) {
      ax[n].extent = t->shape[i];
      ax[n].stride = t->strides[i] < 0 ? -t->strides[i] : t->strides[i];
      ++n;
    }
  }
  qsort(ax, (size_t)n, sizeof ax[0], compare_axis);
  int64_t reach = 0; /* largest offset the axes so far can add */
  for (int i = 0; i < n; ++i) {
    if (ax[i].stride <= reach) {
      return true;
    }
    reach += ax[i].stride * (ax[i].extent - 1);
  }
  return false;
}

/* One axis of the difference of two indices: c in [lo, hi] steps stride (> 0) elements. */
typedef struct {
  int64_t lo, hi, stride, reach; /* reach: what the axes after it can add, in absolute value */
} diff_axis;

static int compare_diff_axis(const void *a, const void *b) {
  int64_t sa = ((const diff_axis *)a)->stride, sb = ((const diff_axis *)b)->stride;
  return (sa < sb) - (sa > sb);
}

static int64_t floor_div(int64_t x, int64_t y) { return x / y - (x % y != 0 && (x < 0) != (y < 0)); }

/* 1 when some c (c_i in [lo_i, hi_i]) has sum c_i stride_i == r; -1 past the node budget. */
static int reach_offset(const diff_axis *ax, int n, int64_t r, int *budget) {
  if (n == 0) return r == 0;
  if (--*budget < 0) return -1;
  int64_t lo = floor_div(r - ax->reach + ax->stride - 1, ax->stride), hi = floor_div(r + ax->reach, ax->stride);
  if (lo < ax->lo) lo = ax->lo;
  if (hi > ax->hi) hi = ax->hi;
  for (int64_t c = lo; c <= hi; ++c) {
    const int found = reach_offset(ax + 1, n - 1, r - c * ax->stride, budget);
    if (found != 0) return found;
  }
  return 0;
}

/* Two views of one element size and the same strides (columns of one buffer: q and k heads
 * of a fused QKV tensor) share an element only when their offset is a difference of indices.
 * 1: they share one, 0: they do not, -1: not decided (other layouts; a search too long). */
static int same_strides_share(const ops_tensor *a, const ops_tensor *b) {
  const int64_t elem = (int64_t)ops_dtype_size((ops_dtype)a->dtype);
  if (elem == 0 || elem != (int64_t)ops_dtype_size((ops_dtype)b->dtype) || a->ndim != b->ndim) return -1;
  const intptr_t delta = (intptr_t)b->data - (intptr_t)a->data;
  if (delta % elem != 0) return -1;
  diff_axis ax[OPS_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < a->ndim; ++i) {
    if (a->shape[i] > 1 || b->shape[i] > 1) {
      if (a->strides[i] != b->strides[i]) return -1;
      if (a->strides[i] == 0) continue;
      /* element of a at ia meets element of b at ib when sum (ia - ib) stride == delta */
      int64_t lo = -(b->shape[i] - 1), hi = a->shape[i] - 1, st = a->strides[i];
      if (st < 0) {
        const int64_t t = lo;
        lo = -hi;
        hi = -t;
        st = -st;
      }
      ax[n].lo = lo;
      ax[n].hi = hi;
      ax[n].stride = st;
      ++n;
    }
  }
  qsort(ax, (size_t)n, sizeof ax[0], compare_diff_axis);
  int64_t reach = 0;
  for (int i = n - 1; i >= 0; --i) {
    ax[i].reach = reach;
    int64_t m = ax[i].hi > -ax[i].lo ? ax[i].hi : -ax[i].lo;
    if (__builtin_mul_overflow(m, ax[i].stride, &m) || __builtin_add_overflow(reach, m, &reach)) return -1;
  }
  int budget = 4096;
  return reach_offset(ax, n, (int64_t)(delta / elem), &budget);
}

bool opsi_tensors_overlap(const ops_tensor *a, const ops_tensor *b) {
  int64_t alo, ahi, blo, bhi;
  if (!opsi_tensor_byte_span(a, &alo, &ahi) || !opsi_tensor_byte_span(b, &blo, &bhi)) {
    return true;
  }
  intptr_t pa = (intptr_t)a->data, pb = (intptr_t)b->data;
  if (!(pa + alo < pb + bhi && pb + blo < pa + ahi)) return false;
  return same_strides_share(a, b) != 0;
}

bool opsi_same_view(const ops_tensor *a, const ops_tensor *b) {
  if (a->data != b->data || a->dtype != b->dtype || a->ndim != b->ndim) {
    return false;
  }
  for (int i = 0; i < a->ndim; ++i) {
    if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->strides[i] != b->strides[i])) {
      return false;
    }
  }
  return true;
}

const char *opsi_format_dims(int ndim, const int64_t *dims, char *buf, size_t n) {
  size_t used = 0;
  used += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && used < n; ++i) {
    used += (size_t)snprintf(buf + used, n - used, i ? ", %lld" : "%lld", (long long)dims[i]);
  }
  if (used < n) {
    snprintf(buf + used, n - used, "]");
  }
  return buf;
}

const char *opsi_format_dtype_mask(uint32_t mask, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int dt = 1; dt < 32 && used < n; ++dt) {
    if (mask & (1u << dt)) {
      used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "",
                               ops_dtype_name((ops_dtype)dt));
    }
  }
  return buf;
}

const char *opsi_format_device(ops_device device, char *buf, size_t n) {
  if (device.type == OPS_DEVICE_CPU) {
    snprintf(buf, n, "cpu");
  } else if (device.type == OPS_DEVICE_CUDA) {
    snprintf(buf, n, "cuda:%d", (int)device.ordinal);
  } else {
    snprintf(buf, n, "device type %d", (int)device.type);
  }
  return buf;
}

ops_status ops_tensor_init(ops_tensor *t, void *data, ops_dtype dtype, ops_device device, int ndim,
                           const int64_t *shape, const int64_t *strides) {
  opsi_clear_error();
  if (t == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER, "ops_tensor_init: t is NULL; expected a descriptor");
  }
  if (!opsi_dtype_known(dtype)) {
    return opsi_fail(OPS_ERR_DTYPE_MISMATCH,
                     "ops_tensor_init: dtype: expected an ops_dtype value, got %d", (int)dtype);
  }
  if (ndim < 0 || ndim > OPS_MAX_DIMS) {
    return opsi_fail(OPS_ERR_BAD_NDIM, "ops_tensor_init: ndim: expected 0..%d, got %d",
                     OPS_MAX_DIMS, ndim);
  }
  if (ndim > 0 && shape == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "ops_tensor_init: shape is NULL; expected %d extents", ndim);
  }
  int64_t numel;
  if (!opsi_shape_numel(ndim, shape, &numel)) {
    char dims[256];
    return opsi_fail(OPS_ERR_BAD_SIZE,
                     "ops_tensor_init: shape: expected non-negative extents whose product fits "
                     "in int64, got %s", opsi_format_dims(ndim, shape, dims, sizeof dims));
  }
  ops_tensor r;
  memset(&r, 0, sizeof r);
  r.struct_size = (uint32_t)sizeof(ops_tensor);
  r.dtype = dtype;
  r.device = device;
  r.ndim = ndim;
  r.data = data;
  int64_t step = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    r.shape[i] = shape[i];
    if (strides != NULL) {
      r.strides[i] = strides[i];
    } else {
      r.strides[i] = step;
      /* a nonempty shape's product fits (numel does); an empty one's other extents may not */
      if (i > 0 && __builtin_mul_overflow(step, shape[i] > 0 ? shape[i] : 1, &step)) {
        char dims[256];
        return opsi_fail(OPS_ERR_BAD_SIZE,
                         "ops_tensor_init: shape: expected extents whose contiguous strides fit in int64 "
                         "(the product of the nonzero ones), got %s", opsi_format_dims(ndim, shape, dims, sizeof dims));
      }
    }
  }
  int64_t lo, hi;
  if (numel > 0 && !opsi_tensor_byte_span(&r, &lo, &hi)) {
    return opsi_fail(OPS_ERR_BAD_SIZE,
                     "ops_tensor_init: strides: the byte span of the view overflows int64");
  }
  *t = r;
  return OPS_OK;
}

int64_t ops_tensor_numel(const ops_tensor *t) {
  int64_t n;
  if (t == NULL || t->ndim < 0 || t->ndim > OPS_MAX_DIMS || !opsi_shape_numel(t->ndim, t->shape, &n)) {
    return -1;
  }
  return n;
}

int ops_tensor_is_contiguous(const ops_tensor *t) {
  if (t == NULL || t->ndim < 0 || t->ndim > OPS_MAX_DIMS) {
    return 0;
  }
  /* step: the stride axis i needs; once the extents' product overflows, no stride can be
   * it, and only extents of 1 remain possible */
  int64_t step = 1;
  int overflowed = 0;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] < 0) {
      return 0;
    }
    if (t->shape[i] != 1 && (overflowed || t->strides[i] != step)) {
      return 0;
    }
    overflowed |= __builtin_mul_overflow(step, t->shape[i], &step);
  }
  return 1;
}

ops_status ops_tensor_permute(const ops_tensor *t, const int *perm, ops_tensor *out) {
  opsi_clear_error();
  if (t == NULL || perm == NULL || out == NULL) {
    return opsi_fail(OPS_ERR_NULL_POINTER,
                     "ops_tensor_permute: %s is NULL", t == NULL ? "t" : perm == NULL ? "perm" : "out");
  }
  if (t->ndim < 0 || t->ndim > OPS_MAX_DIMS) {
    return opsi_fail(OPS_ERR_BAD_NDIM, "ops_tensor_permute: t: expected ndim 0..%d, got %d",
                     OPS_MAX_DIMS, (int)t->ndim);
  }
  bool seen[OPS_MAX_DIMS] = {false};
  for (int i = 0; i < t->ndim; ++i) {
    if (perm[i] < 0 || perm[i] >= t->ndim || seen[perm[i]]) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT,
                       "ops_tensor_permute: perm[%d]: expected a permutation of 0..%d, got %d", i,
                       (int)t->ndim - 1, perm[i]);
    }
    seen[perm[i]] = true;
  }
  ops_tensor r = *t;
  for (int i = 0; i < t->ndim; ++i) {
    r.shape[i] = t->shape[perm[i]];
    r.strides[i] = t->strides[perm[i]];
  }
  *out = r;
  return OPS_OK;
}
