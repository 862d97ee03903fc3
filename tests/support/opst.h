/*
 * opst: the one helper library of opslib's tests (STYLE.md 8): a seeded random source,
 * tensors with random layouts over poisoned buffers, element access that does not use
 * the library's own conversions, and tolerance checks.
 *
 * Poison: every buffer starts filled with a NaN bit pattern that opslib never produces
 * (f32 0x7FA5A5A5, f16 0x7DA5, bf16 0x7FA5; other dtypes 0xA5 bytes). After an op,
 * opst_fully_written() proves that every element of the output view was written and that
 * no byte outside the view (padding between strided elements, the slack before and after)
 * changed; opst_untouched() proves a failed call wrote nothing at all.
 */
#ifndef OPSLIB_TESTS_SUPPORT_OPST_H_
#define OPSLIB_TESTS_SUPPORT_OPST_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/opslib.h"

/* ---- random ---------------------------------------------------------------------- */
typedef struct opst_rng {
  uint64_t s;
} opst_rng;

/* A fresh seed per run (printed, so a failure can be replayed), or OPSLIB_TEST_SEED. */
uint64_t opst_seed(const char *suite);
void opst_rng_init(opst_rng *r, uint64_t seed);
uint64_t opst_u64(opst_rng *r);
double opst_uniform(opst_rng *r, double lo, double hi);
int64_t opst_int(opst_rng *r, int64_t lo, int64_t hi); /* inclusive */
/* A uniformly random order of 0 .. n - 1, malloc'ed (the caller frees it). */
int64_t *opst_permutation(opst_rng *r, int64_t n);
int opst_chance(opst_rng *r, double p);

/* ---- elements -------------------------------------------------------------------- */
/* Independent of opslib's own conversions: f16 through the compiler's _Float16, bf16 by
 * rounding the float bit pattern. */
double opst_decode(const void *p, int32_t dtype);
void opst_encode(void *p, int32_t dtype, double v);
double opst_round(double v, int32_t dtype); /* v as the dtype stores it */

/* ---- tensors --------------------------------------------------------------------- */
typedef enum {
  OPST_CONTIGUOUS = 0,
  OPST_STRIDED = 1 /* random axis order, padding, start offset, and sometimes negative strides */
} opst_layout;

typedef struct opst_tensor {
  ops_tensor t;
  unsigned char *buf;
  size_t bytes;
  unsigned char *snap; /* the bytes as of the last opst_snapshot */
} opst_tensor;

/* Allocates a poisoned buffer and a view of `shape` on the CPU. */
void opst_alloc(opst_tensor *x, opst_rng *r, int32_t dtype, int ndim, const int64_t *shape,
                opst_layout layout);
/* A random layout half of the time. */
void opst_alloc_any(opst_tensor *x, opst_rng *r, int32_t dtype, int ndim, const int64_t *shape);
void opst_free(opst_tensor *x);
/* The elements a view of `shape` and `strides` reaches below (*lo <= 0) and above (*hi >= 0)
 * its element [0, ..., 0]. */
void opst_span(int ndim, const int64_t *shape, const int64_t *strides, int64_t *lo, int64_t *hi);

int64_t opst_numel(const opst_tensor *x);
/* Element at a multi-index / at row-major logical position `i`. */
double opst_at(const opst_tensor *x, const int64_t *idx);
double opst_at_flat(const opst_tensor *x, int64_t i);
void opst_set(opst_tensor *x, const int64_t *idx, double v);
void opst_set_flat(opst_tensor *x, int64_t i, double v);
void opst_fill_uniform(opst_tensor *x, opst_rng *r, double lo, double hi);

/* Advances a row-major multi-index; 0 after the last. */
int opst_next_index(int ndim, const int64_t *shape, int64_t *idx);

void opst_snapshot(opst_tensor *x);
int opst_untouched(const opst_tensor *x);
/* 1 if every element was written and nothing else changed since the snapshot; else 0 and
 * a reason in why. */
int opst_fully_written(const opst_tensor *x, char *why, size_t n);

/* ---- comparison ------------------------------------------------------------------ */
/* Per-element bound for a result computed exactly and rounded once into dtype, with room
 * for a different summation order in double: |out - ref| <= rtol |ref| + atol. */
double opst_rtol(int32_t dtype);
double opst_atol(int32_t dtype);

/* Compares x's elements (row-major logical order) with ref[]. NaN matches NaN only. */
int opst_check_close(const opst_tensor *x, const double *ref, double rtol, double atol, char *why,
                     size_t n);

/* ---- misc ------------------------------------------------------------------------ */
/* A 16-byte aligned buffer of `bytes` (NULL for 0); release with free(). */
void *opst_workspace(size_t bytes);

/* A CPU handle; fails the test when it cannot be created. */
ops_handle opst_cpu_handle(void);
/* A virtual handle describing the reference GPU of sm (ops_device_info_for_sm): explains and
 * sizes workspaces, never runs; fails the test when it cannot be created. */
ops_handle opst_virtual_handle(int sm);
/* 1 when a CUDA device is usable; else prints why GPU tests are skipped. */
int opst_have_cuda(const char *suite);

/* cmocka's assert with the message of a failed opslib call attached. */
#define OPST_OK(call)                                                                      \
  do {                                                                                     \
    ops_status opst_st_ = (call);                                                          \
    if (opst_st_ != OPS_OK) {                                                              \
      print_error("%s returned %s: %s\n", #call, ops_status_name(opst_st_), ops_last_error()); \
      fail();                                                                              \
    }                                                                                      \
  } while (0)

#endif /* OPSLIB_TESTS_SUPPORT_OPST_H_ */
