/* The fuzz harness's plumbing; see fuzz_support.h. */
#include "tests/fuzz/fuzz_support.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the byte reader ------------------------------------------------------------------ */

uint64_t fz_bits(fz *f, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    uint8_t b = 0;
    if (f->n > 0) {
      b = *f->p++;
      f->n--;
    }
    v |= (uint64_t)b << (8 * i);
  }
  return v;
}

int fz_range(fz *f, int lo, int hi) {
  const uint64_t span = (uint64_t)((int64_t)hi - lo) + 1;
  const uint64_t v = fz_bits(f, span > 256 ? 2 : 1);
  return (int)(lo + (int64_t)(v % span));
}

int fz_one_in(fz *f, int n) { return fz_bits(f, 1) % (uint64_t)n == (uint64_t)(n - 1); }

int64_t fz_int64(fz *f) {
  static const int64_t hostile[] = {
      0, 1, -1, 2, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, (int64_t)1 << 31,
      ((int64_t)1 << 31) - 1, (int64_t)1 << 32, ((int64_t)1 << 62) + 1, (int64_t)3037000500,
      -(int64_t)3037000500, (int64_t)1 << 40, INT32_MAX, INT32_MIN, 65536, 4611686018427387904};
  const int n = (int)(sizeof hostile / sizeof hostile[0]);
  const int pick = fz_range(f, 0, n);
  if (pick < n) {
    return hostile[pick];
  }
  return (int64_t)fz_bits(f, 8);
}

int64_t fz_extent(fz *f, int max) {
  const int kind = (int)fz_bits(f, 1);
  if (kind < 240) {
    return 1 + kind % max;
  }
  if (kind < 248) {
    return 0;
  }
  return fz_int64(f);
}

float fz_float(fz *f, float usual) {
  switch (fz_bits(f, 1) % 24) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return NAN;
    case 3: return INFINITY;
    case 4: return -INFINITY;
    case 5: return 1e-30f;
    case 6: return 3e38f;
    case 7: return -1.0f;
    case 8: {
      const uint32_t bits = (uint32_t)fz_bits(f, 4);
      float v;
      memcpy(&v, &bits, sizeof v);
      return v;
    }
    default: return usual;
  }
}

void fz_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "\nops_fuzz: PROMISE BROKEN: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}

/* ---- descriptors ------------------------------------------------------------------------ */

int64_t fz_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static int64_t at_least_1(int64_t v) { return v > 1 ? v : 1; }

void fz_tensor(fz_operand *o, const char *name, int dtype, ops_device dev, int ndim,
               const int64_t *shape) {
  memset(o, 0, sizeof *o);
  o->name = name;
  o->present = 1;
  o->alias = -1;
  o->t.struct_size = sizeof(ops_tensor);
  o->t.dtype = dtype;
  o->t.device = dev;
  o->t.ndim = ndim;
  int64_t stride = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    o->t.shape[i] = shape[i];
    o->t.strides[i] = stride;
    stride = fz_mul(stride, at_least_1(shape[i]));
  }
}

void fz_layout(fz *f, fz_operand *o) {
  const int nd = o->t.ndim;
  if (nd <= 0 || nd > OPS_MAX_DIMS) {
    return;
  }
  switch (fz_bits(f, 1) % 8) {
    case 1: { /* the last two axes transposed in memory */
      if (nd < 2) break;
      const int64_t r = o->t.shape[nd - 2], c = o->t.shape[nd - 1];
      o->t.strides[nd - 2] = 1;
      o->t.strides[nd - 1] = r > 1 ? r : 1;
      int64_t s = fz_mul(at_least_1(r), at_least_1(c));
      for (int i = nd - 3; i >= 0; --i) {
        o->t.strides[i] = s;
        s = fz_mul(s, at_least_1(o->t.shape[i]));
      }
      break;
    }
    case 2: { /* padded rows: every axis but the last has a gap */
      const int64_t pad = fz_range(f, 1, 9);
      int64_t s = o->t.shape[nd - 1] < INT64_MAX - pad ? o->t.shape[nd - 1] + pad : INT64_MAX;
      for (int i = nd - 2; i >= 0; --i) {
        o->t.strides[i] = s;
        s = fz_mul(s, at_least_1(o->t.shape[i]));
      }
      break;
    }
    case 3: /* one axis broadcast */
      o->t.strides[fz_range(f, 0, nd - 1)] = 0;
      break;
    case 4: /* one axis reversed */
      o->t.strides[fz_range(f, 0, nd - 1)] *= -1; /* strides here are >= 0 and < INT64_MAX */
      break;
    case 5: /* [B, S, H, D] over BHSD memory (axes 1 and 2 swapped in memory) */
      if (nd == 4) {
        const int64_t S = at_least_1(o->t.shape[1]), H = at_least_1(o->t.shape[2]);
        const int64_t D = at_least_1(o->t.shape[3]);
        o->t.strides[3] = 1;
        o->t.strides[1] = D;
        o->t.strides[2] = fz_mul(S, D);
        o->t.strides[0] = fz_mul(H, fz_mul(S, D));
      }
      break;
    default: /* contiguous */
      break;
  }
}

void fz_mutate(fz *f, fz_operand *ops, int count) {
  if (count <= 0) {
    return;
  }
  const int times = fz_range(f, 1, 3);
  for (int m = 0; m < times; ++m) {
    fz_operand *o = &ops[fz_range(f, 0, count - 1)];
    const int axis = fz_range(f, 0, OPS_MAX_DIMS - 1);
    switch (fz_bits(f, 1) % 14) {
      case 0: o->t.struct_size = fz_one_in(f, 2) ? sizeof(ops_tensor) - 8 : (uint32_t)fz_bits(f, 4); break;
      case 1: o->t.dtype = fz_range(f, -1, 10); break;
      case 2:
        o->t.device.type = fz_range(f, 0, 3);
        o->t.device.ordinal = fz_range(f, -1, 2);
        break;
      case 3: o->t.ndim = fz_range(f, -2, 10); break;
      case 4: o->t.reserved = (int32_t)fz_bits(f, 4) | 1; break;
      case 5: o->t.shape[axis] = fz_int64(f); break;
      case 6: if (o->t.shape[axis] > INT64_MIN && o->t.shape[axis] < INT64_MAX) o->t.shape[axis] += fz_one_in(f, 2) ? 1 : -1; break;
      case 7: o->t.strides[axis] = fz_int64(f); break;
      case 8: o->t.strides[axis] = fz_range(f, -3, 3); break;
      case 9: o->present = 0; break;
      case 10:
      case 11: {
        const int j = fz_range(f, 0, count - 1);
        if (&ops[j] != o && ops[j].alias < 0) {
          o->alias = j;
          o->alias_view = fz_bits(f, 1) % 11 == 10 ? 1 : 0;
        }
        break;
      }
      case 12: o->misalign = fz_range(f, 1, 7); break;
      default: o->t.data = NULL; o->misalign = -1; break; /* NULL data on purpose */
    }
  }
}

/* ---- regions ------------------------------------------------------------------------------ */

#define FZ_GUARD 64
#define FZ_MAX_REGIONS 48

typedef struct region {
  uint8_t *block; /* guard, body, guard */
  size_t body;
  uint8_t *snap;
  uint8_t *mask; /* 1: a successful run may change the byte */
} region;

static region g_regions[FZ_MAX_REGIONS];
static int g_nregions;
static ops_device g_device;

void fz_set_device(ops_device dev) { g_device = dev; }

void fz_regions_reset(void) {
  for (int i = 0; i < g_nregions; ++i) {
    free(g_regions[i].block);
    free(g_regions[i].snap);
    free(g_regions[i].mask);
  }
  g_nregions = 0;
}

static uint8_t *new_region(size_t body) {
  if (g_nregions == FZ_MAX_REGIONS) {
    return NULL;
  }
  region *r = &g_regions[g_nregions++];
  const size_t total = body + 2 * FZ_GUARD;
  r->block = (uint8_t *)aligned_alloc(64, (total + 63) / 64 * 64);
  r->snap = (uint8_t *)malloc(total);
  r->mask = (uint8_t *)calloc(total, 1);
  r->body = body;
  if (r->block == NULL || r->snap == NULL || r->mask == NULL) {
    fz_die("out of host memory for a %zu-byte region", body);
  }
  memset(r->block, 0xA5, total);
  return r->block + FZ_GUARD;
}

static region *region_of(const void *p) {
  const uint8_t *b = (const uint8_t *)p;
  for (int i = 0; i < g_nregions; ++i) {
    region *r = &g_regions[i];
    if (b >= r->block + FZ_GUARD && b < r->block + FZ_GUARD + r->body) {
      return r;
    }
  }
  return NULL;
}

void *fz_workspace(fz *f, size_t bytes) {
  const size_t shift = fz_one_in(f, 16) ? 8 : 0;
  uint8_t *body = new_region(bytes + 16);
  if (body == NULL) {
    return NULL;
  }
  region *r = &g_regions[g_nregions - 1];
  memset(r->mask + FZ_GUARD + shift, 1, bytes);
  return body + shift;
}

/* Elements, byte span [lo, hi) relative to data, when the descriptor is well formed. */
static int geometry(const ops_tensor *t, int64_t *numel, int64_t *lo, int64_t *hi) {
  const int64_t elem = (int64_t)ops_dtype_size((ops_dtype)t->dtype);
  if (elem == 0 || t->ndim < 0 || t->ndim > OPS_MAX_DIMS) {
    return 0;
  }
  int64_t n = 1, min_off = 0, max_off = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) {
      return 0;
    }
    if (t->shape[i] == 0) {
      n = 0;
    }
  }
  if (n == 0) {
    *numel = 0;
    *lo = *hi = 0;
    return 1;
  }
  for (int i = 0; i < t->ndim; ++i) {
    int64_t reach;
    if (__builtin_mul_overflow(n, t->shape[i], &n) ||
        __builtin_mul_overflow(t->shape[i] - 1, t->strides[i], &reach) ||
        __builtin_add_overflow(reach < 0 ? min_off : max_off, reach, reach < 0 ? &min_off : &max_off)) {
      return 0;
    }
  }
  if (__builtin_mul_overflow(min_off, elem, lo) || max_off == INT64_MAX || __builtin_mul_overflow(max_off + 1, elem, hi)) {
    return 0;
  }
  *numel = n;
  return 1;
}

/* lo <= 0 <= hi: bounded on each side first, so that hi - lo cannot overflow */
static int small_span(int64_t lo, int64_t hi) {
  return lo >= -FZ_MAX_SPAN_BYTES && hi <= FZ_MAX_SPAN_BYTES && hi - lo <= FZ_MAX_SPAN_BYTES;
}

static uint64_t g_rng;

static uint32_t next_rand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)g_rng;
}

static void fill_float(uint8_t *p, size_t bytes, int dtype, int specials) {
  const size_t elem = ops_dtype_size((ops_dtype)dtype);
  for (size_t i = 0; i + elem <= bytes; i += elem) {
    const uint32_t r = next_rand();
    float v = (float)((int)(r % 4001) - 2000) / 1000.0f;
    if (specials && r % 97 == 0) {
      v = (r >> 8) % 3 == 0 ? NAN : ((r >> 8) % 3 == 1 ? INFINITY : -INFINITY);
    }
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    if (dtype == OPS_DTYPE_F32) {
      memcpy(p + i, &v, 4);
    } else if (dtype == OPS_DTYPE_BF16) {
      const uint16_t h = (uint16_t)(bits >> 16);
      memcpy(p + i, &h, 2);
    } else if (dtype == OPS_DTYPE_F16) {
      /* a small binary16 value: sign, exponent 13..16, random mantissa; or its inf / NaN */
      uint16_t h = (uint16_t)(((r >> 16) & 0x8000u) | ((13u + (r >> 3) % 4) << 10) | (r & 0x3FFu));
      if (isnan(v)) h = 0x7E00;
      if (isinf(v)) h = v > 0 ? 0x7C00 : 0xFC00;
      memcpy(p + i, &h, 2);
    } else {
      memcpy(p + i, &r, elem < 4 ? elem : 4);
    }
  }
}

static void store_index(uint8_t *p, int dtype, int64_t v) {
  if (dtype == OPS_DTYPE_I64) {
    memcpy(p, &v, 8);
  } else if (dtype == OPS_DTYPE_I32) {
    const int32_t w = (int32_t)v;
    memcpy(p, &w, 4);
  } else {
    memcpy(p, &v, ops_dtype_size((ops_dtype)dtype));
  }
}

static void fill_index(fz *f, const fz_operand *o, uint8_t *body, size_t bytes) {
  const size_t elem = ops_dtype_size((ops_dtype)o->t.dtype);
  const int raw = fz_one_in(f, 8);
  const size_t count = bytes / elem;
  int64_t prev = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t v;
    if (raw) {
      v = fz_one_in(f, 4) ? fz_int64(f) : fz_range(f, -4, 64);
    } else if (o->sorted) {
      /* cumulative lengths: 0, non-decreasing, the last reaching index_hi */
      if (i == 0) {
        v = 0;
      } else if (i + 1 == count) {
        v = o->index_hi;
      } else {
        const int64_t room = o->index_hi > prev ? o->index_hi - prev : 0; /* prev >= 0 */
        v = prev + (room > 0 ? fz_range(f, 0, (int)(room < 255 ? room : 255)) : 0);
      }
      prev = v;
    } else {
      /* zero bytes (an exhausted input) give index_hi: a full length, the last page */
      const int64_t hi = o->index_hi < 0 ? 0 : (o->index_hi > 30000 ? 30000 : o->index_hi);
      v = hi - fz_range(f, 0, (int)hi + 1);
    }
    store_index(body + i * elem, o->t.dtype, v);
  }
}

/* The region of the operand's elements; the data pointer is set to its element [0..0]. */
static void give_memory(fz *f, fz_operand *o) {
  int64_t numel, lo, hi;
  if (o->misalign < 0) {
    return; /* NULL data on purpose */
  }
  if (!geometry(&o->t, &numel, &lo, &hi)) {
    o->t.data = NULL;
    return;
  }
  if (numel == 0) {
    o->t.data = fz_one_in(f, 2) ? NULL : new_region(16);
    return;
  }
  if (numel > FZ_MAX_NUMEL || !small_span(lo, hi)) {
    o->t.data = NULL;
    return;
  }
  const size_t span = (size_t)(hi - lo);
  uint8_t *body = new_region(span + 8);
  if (body == NULL) {
    o->t.data = NULL;
    return;
  }
  if (o->fill == FZ_FILL_INDEX) {
    fill_index(f, o, body, span); /* in memory order: a strided view reads what lands there */
  } else {
    fill_float(body, span + 8, o->t.dtype, fz_one_in(f, 4));
  }
  o->t.data = body + (-lo) + (o->misalign > 0 ? o->misalign : 0);
}

void fz_place(fz *f, fz_operand *ops, int count) {
  g_rng = 0x9E3779B97F4A7C15ull ^ fz_bits(f, 4);
  for (int i = 0; i < count; ++i) {
    if (ops[i].present && ops[i].alias < 0) {
      give_memory(f, &ops[i]);
    }
  }
  for (int i = 0; i < count; ++i) {
    fz_operand *o = &ops[i];
    if (!o->present || o->alias < 0) {
      continue;
    }
    const fz_operand *src = &ops[o->alias];
    if (o->alias_view) {
      o->t = src->t;
      continue;
    }
    /* its own shape over the other's memory: only where it stays inside that memory, so
     * that an accepted input alias cannot make the harness itself read out of bounds */
    int64_t numel, lo, hi;
    const region *r = src->t.data != NULL ? region_of(src->t.data) : NULL;
    if (r != NULL && geometry(&o->t, &numel, &lo, &hi) && numel > 0 && numel <= FZ_MAX_NUMEL && small_span(lo, hi)) {
      const uint8_t *start = r->block + FZ_GUARD;
      const uint8_t *d = (const uint8_t *)src->t.data;
      if (d + lo >= start && d + hi <= start + r->body) {
        o->t.data = src->t.data;
        continue;
      }
    }
    give_memory(f, o);
  }
}

/* ---- the call check ------------------------------------------------------------------------ */

static void mark_output(const ops_tensor *t) {
  int64_t numel, lo, hi;
  if (t->data == NULL || !geometry(t, &numel, &lo, &hi) || numel == 0 || numel > FZ_MAX_NUMEL || !small_span(lo, hi)) {
    return;
  }
  region *r = region_of(t->data);
  if (r == NULL) {
    return;
  }
  const int64_t elem = (int64_t)ops_dtype_size((ops_dtype)t->dtype);
  int64_t idx[OPS_MAX_DIMS] = {0};
  for (int64_t k = 0; k < numel; ++k) {
    int64_t off = 0;
    for (int i = 0; i < t->ndim; ++i) {
      off += idx[i] * t->strides[i];
    }
    const uint8_t *p = (const uint8_t *)t->data + off * elem;
    const uint8_t *start = r->block + FZ_GUARD;
    if (p >= start && p + elem <= start + r->body) {
      memset(r->mask + (p - r->block), 1, (size_t)elem);
    }
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (++idx[i] < t->shape[i]) break;
      idx[i] = 0;
    }
  }
}

static const fz_operand *g_ops;
static int g_count;

/* OPS_FUZZ_VERBOSE=1: every call's operands on stderr, to read a reproducer */
static void print_operands(const fz_operand *ops, int count) {
  for (int i = 0; i < count; ++i) {
    const ops_tensor *t = &ops[i].t;
    if (!ops[i].present) continue;
    fprintf(stderr, "  %-20s size %u dtype %d dev %d:%d ndim %d res %d data %p shape", ops[i].name,
            (unsigned)t->struct_size, (int)t->dtype, (int)t->device.type, (int)t->device.ordinal, (int)t->ndim,
            (int)t->reserved, t->data);
    for (int d = 0; d < t->ndim && d < OPS_MAX_DIMS; ++d) fprintf(stderr, " %lld", (long long)t->shape[d]);
    fprintf(stderr, " strides");
    for (int d = 0; d < t->ndim && d < OPS_MAX_DIMS; ++d) fprintf(stderr, " %lld", (long long)t->strides[d]);
    fprintf(stderr, "\n");
  }
}

void fz_begin(const fz_operand *ops, int count) {
  g_ops = ops;
  g_count = count;
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("OPS_FUZZ_VERBOSE") != NULL;
  if (verbose && count > 0) print_operands(ops, count);
  for (int i = 0; i < g_nregions; ++i) {
    region *r = &g_regions[i];
    const size_t total = r->body + 2 * FZ_GUARD;
    memcpy(r->snap, r->block, total);
  }
  for (int i = 0; i < count; ++i) {
    if (ops[i].present && ops[i].output) {
      mark_output(&ops[i].t);
    }
  }
}

static const char *operand_of(const uint8_t *p) {
  for (int i = 0; i < g_count; ++i) {
    if (g_ops[i].present && g_ops[i].t.data != NULL && region_of(g_ops[i].t.data) == region_of(p)) {
      return g_ops[i].name;
    }
  }
  return "workspace or another buffer";
}

void fz_end(const char *call, ops_status st, int run) {
  const char *msg = ops_last_error();
  if ((int)st < 0 || (int)st > OPS_ERR_IO) {
    fz_die("%s returned %d, not an ops_status (message \"%s\")", call, (int)st, msg ? msg : "(null)");
  }
  if (st == OPS_ERR_INTERNAL) {
    fz_die("%s returned OPS_ERR_INTERNAL: \"%s\"", call, msg ? msg : "(null)");
  }
  if (msg == NULL) {
    fz_die("%s: ops_last_error() returned NULL", call);
  }
  if (st != OPS_OK && msg[0] == '\0') {
    fz_die("%s returned %s with an empty ops_last_error()", call, ops_status_name(st));
  }
  if (st == OPS_OK && msg[0] != '\0') {
    fz_die("%s succeeded but ops_last_error() says \"%s\"", call, msg);
  }
  if (st == OPS_OK) {
    for (int i = 0; i < g_count; ++i) {
      const fz_operand *o = &g_ops[i];
      if (!o->present) continue;
      const ops_tensor *t = &o->t;
      if (t->struct_size != sizeof(ops_tensor) || ops_dtype_size((ops_dtype)t->dtype) == 0 ||
          t->ndim < 0 || t->ndim > OPS_MAX_DIMS || t->reserved != 0 || t->device.type != g_device.type ||
          t->device.ordinal != g_device.ordinal) {
        fz_die("%s accepted %s with struct_size %u, dtype %d, ndim %d, reserved %d, device %d:%d "
               "(handle's %d:%d)", call, o->name, (unsigned)t->struct_size, (int)t->dtype, (int)t->ndim,
               (int)t->reserved, (int)t->device.type, (int)t->device.ordinal, (int)g_device.type,
               (int)g_device.ordinal);
      }
    }
  }
  const int may_write = (st == OPS_OK && run);
  for (int i = 0; i < g_nregions; ++i) {
    region *r = &g_regions[i];
    const size_t total = r->body + 2 * FZ_GUARD;
    if (memcmp(r->snap, r->block, total) == 0) {
      continue;
    }
    for (size_t b = 0; b < total; ++b) {
      if (r->snap[b] != r->block[b] && !(may_write && r->mask[b])) {
        const int guard = b < FZ_GUARD || b >= FZ_GUARD + r->body;
        fz_die("%s returned %s (\"%s\") and changed byte %lld of the body of %s%s (0x%02x -> 0x%02x)",
               call, ops_status_name(st), msg, (long long)b - FZ_GUARD,
               operand_of(r->block + FZ_GUARD), guard ? ", in its guard" : ", not an output element",
               r->snap[b], r->block[b]);
      }
    }
  }
  for (int i = 0; i < g_nregions; ++i) {
    memset(g_regions[i].mask, 0, g_regions[i].body + 2 * FZ_GUARD);
  }
}
