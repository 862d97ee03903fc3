/* The shared test helpers of opst.h. */
#include "tests/support/opst.h"

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

/* ---- random ---------------------------------------------------------------------- */

uint64_t opst_seed(const char *suite) {
  const char *env = getenv("OPSLIB_TEST_SEED");
  uint64_t seed;
  if (env != NULL && *env != '\0') {
    seed = strtoull(env, NULL, 0);
  } else {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    seed = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
  }
  printf("[ SEED     ] %s: OPSLIB_TEST_SEED=%" PRIu64 " replays this run\n", suite, seed);
  return seed;
}

void opst_rng_init(opst_rng *r, uint64_t seed) { r->s = seed; }

uint64_t opst_u64(opst_rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double opst_uniform(opst_rng *r, double lo, double hi) {
  return lo + (hi - lo) * ((double)(opst_u64(r) >> 11) * 0x1p-53);
}

int64_t opst_int(opst_rng *r, int64_t lo, int64_t hi) {
  return lo + (int64_t)(opst_u64(r) % (uint64_t)(hi - lo + 1));
}

int64_t *opst_permutation(opst_rng *r, int64_t n) {
  int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; ++i) perm[i] = i;
  for (int64_t i = n - 1; i > 0; --i) { /* Fisher-Yates */
    const int64_t j = opst_int(r, 0, i), x = perm[i];
    perm[i] = perm[j], perm[j] = x;
  }
  return perm;
}

int opst_chance(opst_rng *r, double p) { return opst_uniform(r, 0.0, 1.0) < p; }

/* ---- elements -------------------------------------------------------------------- */

__extension__ typedef _Float16 opst_f16;

static size_t elem_size(int32_t dtype) { return ops_dtype_size((ops_dtype)dtype); }

double opst_decode(const void *p, int32_t dtype) {
  switch (dtype) {
    case OPS_DTYPE_F32: {
      float f;
      memcpy(&f, p, 4);
      return f;
    }
    case OPS_DTYPE_F16: {
      opst_f16 h;
      memcpy(&h, p, 2);
      return (double)h;
    }
    case OPS_DTYPE_BF16: {
      uint16_t b;
      memcpy(&b, p, 2);
      uint32_t u = (uint32_t)b << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    case OPS_DTYPE_I32: {
      int32_t i;
      memcpy(&i, p, 4);
      return i;
    }
    case OPS_DTYPE_I64: {
      int64_t i;
      memcpy(&i, p, 8);
      return (double)i;
    }
    case OPS_DTYPE_U8:
      return *(const uint8_t *)p;
    default:
      return NAN;
  }
}

void opst_encode(void *p, int32_t dtype, double v) {
  switch (dtype) {
    case OPS_DTYPE_F32: {
      float f = (float)v;
      memcpy(p, &f, 4);
      break;
    }
    case OPS_DTYPE_F16: {
      opst_f16 h = (opst_f16)v;
      memcpy(p, &h, 2);
      break;
    }
    case OPS_DTYPE_BF16: {
      float f = (float)v;
      uint32_t u;
      memcpy(&u, &f, 4);
      uint16_t b;
      if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
        b = (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
      } else {
        b = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
      }
      memcpy(p, &b, 2);
      break;
    }
    case OPS_DTYPE_I32: {
      int32_t i = (int32_t)v;
      memcpy(p, &i, 4);
      break;
    }
    case OPS_DTYPE_I64: {
      int64_t i = (int64_t)v;
      memcpy(p, &i, 8);
      break;
    }
    case OPS_DTYPE_U8:
      *(uint8_t *)p = (uint8_t)v;
      break;
    default:
      break;
  }
}

double opst_round(double v, int32_t dtype) {
  unsigned char tmp[8];
  opst_encode(tmp, dtype, v);
  return opst_decode(tmp, dtype);
}

/* ---- tensors --------------------------------------------------------------------- */

static void poison_pattern(int32_t dtype, unsigned char *pat, size_t *len) {
  switch (dtype) {
    case OPS_DTYPE_F32: {
      const uint32_t u = 0x7FA5A5A5u;
      memcpy(pat, &u, 4);
      *len = 4;
      break;
    }
    case OPS_DTYPE_F16: {
      const uint16_t u = 0x7DA5u;
      memcpy(pat, &u, 2);
      *len = 2;
      break;
    }
    case OPS_DTYPE_BF16: {
      const uint16_t u = 0x7FA5u;
      memcpy(pat, &u, 2);
      *len = 2;
      break;
    }
    default:
      memset(pat, 0xA5, 8);
      *len = 1;
      break;
  }
}

void opst_span(int ndim, const int64_t *shape, const int64_t *strides, int64_t *lo, int64_t *hi) {
  *lo = 0, *hi = 0;
  for (int i = 0; i < ndim; ++i) {
    const int64_t reach = (shape[i] > 0 ? shape[i] - 1 : 0) * strides[i];
    if (reach < 0) *lo += reach; else *hi += reach;
  }
}

void opst_alloc(opst_tensor *x, opst_rng *r, int32_t dtype, int ndim, const int64_t *shape,
                opst_layout layout) {
  memset(x, 0, sizeof *x);
  const int64_t es = (int64_t)elem_size(dtype);
  int64_t strides[OPS_MAX_DIMS] = {0};
  int order[OPS_MAX_DIMS];
  for (int i = 0; i < ndim; ++i) order[i] = ndim - 1 - i; /* innermost first */
  int64_t offset = 0;
  if (layout == OPST_STRIDED) {
    for (int i = ndim - 1; i > 0; --i) { /* shuffle the memory order of the axes */
      const int j = (int)opst_int(r, 0, i);
      const int t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    offset = opst_int(r, 0, 3);
  }
  int64_t step = 1;
  for (int k = 0; k < ndim; ++k) {
    const int ax = order[k];
    strides[ax] = step;
    int64_t pad = layout == OPST_STRIDED ? opst_int(r, 0, 2) : 0;
    step *= (shape[ax] > 0 ? shape[ax] : 1) + pad;
  }
  if (layout == OPST_STRIDED) {
    for (int i = 0; i < ndim; ++i) {
      if (opst_chance(r, 0.15)) strides[i] = -strides[i];
    }
  }
  int64_t lo, hi, numel = 1;
  opst_span(ndim, shape, strides, &lo, &hi);
  for (int i = 0; i < ndim; ++i) numel *= shape[i];
  const int64_t slack = layout == OPST_STRIDED ? opst_int(r, 0, 3) : 0;
  const int64_t elems = (numel > 0 ? hi - lo + 1 : 0) + offset + slack;
  x->bytes = (size_t)(elems > 0 ? elems : 1) * (size_t)es;
  x->buf = (unsigned char *)malloc(x->bytes);
  x->snap = (unsigned char *)malloc(x->bytes);
  unsigned char pat[8];
  size_t plen;
  poison_pattern(dtype, pat, &plen);
  for (size_t b = 0; b < x->bytes; b += plen) memcpy(x->buf + b, pat, plen);
  void *data = x->buf + (offset - lo) * es;
  if (ops_tensor_init(&x->t, data, (ops_dtype)dtype, ops_device_cpu(), ndim, shape, strides) != OPS_OK) {
    print_error("opst_alloc: ops_tensor_init failed: %s\n", ops_last_error());
    fail();
  }
  opst_snapshot(x);
}

void opst_alloc_any(opst_tensor *x, opst_rng *r, int32_t dtype, int ndim, const int64_t *shape) {
  opst_alloc(x, r, dtype, ndim, shape, opst_chance(r, 0.5) ? OPST_STRIDED : OPST_CONTIGUOUS);
}

void opst_free(opst_tensor *x) {
  free(x->buf);
  free(x->snap);
  memset(x, 0, sizeof *x);
}

int64_t opst_numel(const opst_tensor *x) {
  int64_t n = 1;
  for (int i = 0; i < x->t.ndim; ++i) n *= x->t.shape[i];
  return n;
}

static unsigned char *elem_ptr(const opst_tensor *x, const int64_t *idx) {
  int64_t off = 0;
  for (int i = 0; i < x->t.ndim; ++i) off += idx[i] * x->t.strides[i];
  return (unsigned char *)x->t.data + off * (int64_t)elem_size(x->t.dtype);
}

static void unflatten(const opst_tensor *x, int64_t i, int64_t *idx) {
  for (int d = x->t.ndim - 1; d >= 0; --d) {
    idx[d] = i % x->t.shape[d];
    i /= x->t.shape[d];
  }
}

double opst_at(const opst_tensor *x, const int64_t *idx) { return opst_decode(elem_ptr(x, idx), x->t.dtype); }

double opst_at_flat(const opst_tensor *x, int64_t i) {
  int64_t idx[OPS_MAX_DIMS];
  unflatten(x, i, idx);
  return opst_at(x, idx);
}

void opst_set(opst_tensor *x, const int64_t *idx, double v) { opst_encode(elem_ptr(x, idx), x->t.dtype, v); }

void opst_set_flat(opst_tensor *x, int64_t i, double v) {
  int64_t idx[OPS_MAX_DIMS];
  unflatten(x, i, idx);
  opst_set(x, idx, v);
}

void opst_fill_uniform(opst_tensor *x, opst_rng *r, double lo, double hi) {
  const int64_t n = opst_numel(x);
  for (int64_t i = 0; i < n; ++i) opst_set_flat(x, i, opst_uniform(r, lo, hi));
  opst_snapshot(x);
}

int opst_next_index(int ndim, const int64_t *shape, int64_t *idx) {
  for (int d = ndim - 1; d >= 0; --d) {
    if (++idx[d] < shape[d]) return 1;
    idx[d] = 0;
  }
  return 0;
}

void opst_snapshot(opst_tensor *x) { memcpy(x->snap, x->buf, x->bytes); }

int opst_untouched(const opst_tensor *x) { return memcmp(x->snap, x->buf, x->bytes) == 0; }

int opst_fully_written(const opst_tensor *x, char *why, size_t n) {
  const size_t es = elem_size(x->t.dtype);
  unsigned char pat[8];
  size_t plen;
  poison_pattern(x->t.dtype, pat, &plen);
  unsigned char *is_elem = (unsigned char *)calloc(x->bytes, 1);
  const int64_t count = opst_numel(x);
  int ok = 1;
  for (int64_t i = 0; i < count && ok; ++i) {
    int64_t idx[OPS_MAX_DIMS];
    unflatten(x, i, idx);
    const unsigned char *p = elem_ptr(x, idx);
    memset(is_elem + (p - x->buf), 1, es);
    if (plen == es && memcmp(p, pat, es) == 0) {
      snprintf(why, n, "element %lld (row-major) still holds the poison: never written", (long long)i);
      ok = 0;
    }
  }
  for (size_t b = 0; b < x->bytes && ok; ++b) {
    if (!is_elem[b] && x->buf[b] != x->snap[b]) {
      snprintf(why, n, "byte %zu of the buffer lies outside the view and was changed", b);
      ok = 0;
    }
  }
  free(is_elem);
  return ok;
}

/* ---- comparison ------------------------------------------------------------------ */

double opst_rtol(int32_t dtype) {
  switch (dtype) {
    case OPS_DTYPE_BF16: return 0x1p-8 * 1.01;  /* half an ulp of an 8-bit significand */
    case OPS_DTYPE_F16: return 0x1p-11 * 1.01;
    default: return 1e-6;                     /* f32: half an ulp is 6e-8; allow order effects */
  }
}

/* At least 1e-12 for every dtype: a result that is exactly 0 in mathematics (a LayerNorm
 * element equal to its row mean, a dot product that cancels) comes out of any double
 * computation as noise of ~1e-16 times the size of the terms, in the reference and in the
 * library alike. f16 needs more: half its subnormal spacing. */
double opst_atol(int32_t dtype) {
  switch (dtype) {
    case OPS_DTYPE_F16: return 0x1p-25 * 1.01;
    default: return 1e-12;
  }
}

int opst_check_close(const opst_tensor *x, const double *ref, double rtol, double atol, char *why,
                     size_t n) {
  const int64_t count = opst_numel(x);
  for (int64_t i = 0; i < count; ++i) {
    const double got = opst_at_flat(x, i), want = ref[i];
    if (isnan(want) || isnan(got)) {
      if (isnan(want) && isnan(got)) continue;
      snprintf(why, n, "element %lld: got %.9g, want %.9g", (long long)i, got, want);
      return 0;
    }
    if (isinf(want) || isinf(got)) {
      if (got == want) continue;
      /* a finite reference just past the largest finite value rounds to inf */
      if (isinf(got) && fabs(want) > 0 && opst_round(want, x->t.dtype) == got) continue;
      snprintf(why, n, "element %lld: got %.9g, want %.9g", (long long)i, got, want);
      return 0;
    }
    const double tol = rtol * fabs(want) + atol;
    if (fabs(got - want) > tol) {
      snprintf(why, n, "element %lld: got %.9g, want %.9g (|diff| %.3g > tol %.3g)", (long long)i,
               got, want, fabs(got - want), tol);
      return 0;
    }
  }
  return 1;
}

/* ---- misc ------------------------------------------------------------------------ */

void *opst_workspace(size_t bytes) {
  return bytes == 0 ? NULL : aligned_alloc(16, (bytes + 15) / 16 * 16);
}

ops_handle opst_cpu_handle(void) {
  ops_handle h = NULL;
  OPST_OK(ops_handle_create(&h, ops_device_cpu()));
  return h;
}

ops_handle opst_virtual_handle(int sm) {
  ops_device_info info;
  OPST_OK(ops_device_info_for_sm(sm, &info));
  ops_handle h = NULL;
  OPST_OK(ops_handle_create_virtual(&h, &info));
  return h;
}

int opst_have_cuda(const char *suite) {
  const int n = ops_cuda_device_count();
  if (n == 0) {
    printf("[ SKIP     ] %s: no CUDA device (no GPU, or no NVIDIA driver on this machine); "
           "the GPU tests run on a GPU host from the bundle (tools/pack_gpu_bundle.sh)\n", suite);
  }
  return n > 0;
}
