/*
 * The fuzz harness's plumbing: a reader over libFuzzer's bytes, operands whose memory lies
 * in guarded regions, and the check of the bad-input promise after each call.
 *
 * Every region is snapshotted before a call. After a call that failed, every byte of every
 * region (guards, inputs, outputs, workspace) must be unchanged and ops_last_error() must
 * name the failure; after a call that succeeded, only the element bytes of the call's
 * outputs and the workspace it was given may differ. A breach aborts with the call, the
 * status, the message and the first changed byte, so libFuzzer keeps the input.
 */
#ifndef OPSLIB_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define OPSLIB_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <stddef.h>
#include <stdint.h>

#include "opslib/opslib.h"

/* The bytes libFuzzer gave; reads past the end return zeros, which pick the plain path. */
typedef struct fz {
  const uint8_t *p;
  size_t n;
} fz;

uint64_t fz_bits(fz *f, int bytes);
int fz_range(fz *f, int lo, int hi);     /* lo..hi inclusive */
int fz_one_in(fz *f, int n);             /* 1 with probability 1/n (n > 0) */
int64_t fz_extent(fz *f, int max);       /* mostly 1..max; sometimes 0 or a hostile value */
int64_t fz_int64(fz *f);                 /* a hostile or arbitrary int64 */
float fz_float(fz *f, float usual);      /* usual, or 0, -0, NaN, inf, a tiny or huge value */
int64_t fz_mul(int64_t a, int64_t b);    /* a * b saturated at INT64_MAX: hostile extents stay
                                            hostile without overflowing in the harness */

/* Largest operands that are given memory: bigger ones get data = NULL, so they reach the
 * validation and dispatch paths (which must refuse NULL data) but never a CPU loop. */
#define FZ_MAX_NUMEL 4096
#define FZ_MAX_SPAN_BYTES (1 << 18)
#define FZ_MAX_WORKSPACE (1 << 20)

typedef enum fz_fill {
  FZ_FILL_FLOAT = 0, /* small random values in the tensor's dtype (an odd NaN or inf) */
  FZ_FILL_INDEX = 1  /* integers from the fuzz input: lengths, page ids, slots, positions */
} fz_fill;

typedef struct fz_operand {
  ops_tensor t;
  const char *name;
  int present;   /* 0: the call gets NULL for it */
  int output;    /* 1: the op may write its elements */
  int fill;      /* fz_fill */
  int64_t index_hi; /* FZ_FILL_INDEX: plausible values lie in [-1, index_hi] */
  int sorted;       /* FZ_FILL_INDEX: plausible contents are non-decreasing from 0 (cu_seqlens) */
  int alias;        /* set by fz_mutate: -1, or the operand whose memory this one shares */
  int alias_view;   /* 1: the very same view as `alias`; 0: its data pointer, its own shape */
  int misalign;     /* set by fz_mutate: bytes added to the data pointer; -1: data NULL on purpose */
} fz_operand;

/* A descriptor with the handle's device, contiguous, strides chosen by `layout` bits. */
void fz_tensor(fz_operand *o, const char *name, int dtype, ops_device dev, int ndim,
               const int64_t *shape);
/* Gives the operand a layout from the input: contiguous, transposed, padded, broadcast
 * (stride 0) or reversed (negative stride). Keeps the shape. */
void fz_layout(fz *f, fz_operand *o);
/* Breaks an operand (or several) the way a careless caller would: a field of the descriptor
 * (struct_size, dtype, device, ndim, reserved, an extent, a stride), NULL, or an alias of
 * another operand. */
void fz_mutate(fz *f, fz_operand *ops, int count);
/* Gives every present operand memory (a fresh region) when it is small enough, fills it,
 * and sometimes misaligns it; then applies the aliases fz_mutate chose. */
void fz_place(fz *f, fz_operand *ops, int count);

/* Regions live for one fuzz input. */
void fz_regions_reset(void);
/* A region of `bytes` (plus guards) for a workspace; *out is 16-byte aligned unless the input
 * asks for less. The whole body is writable by a successful call. */
void *fz_workspace(fz *f, size_t bytes);

/* Call checks. fz_begin snapshots every region and marks what `ops` may write; fz_end
 * verifies the promise for a call that returned `st`: run != 0 for a call that runs the op
 * (outputs and workspace may change on success), 0 for queries (nothing may change). */
void fz_begin(const fz_operand *ops, int count);
/* The device of the handle the next calls use: a call that succeeds must have been given
 * descriptors of that device, of the right struct_size, a known dtype and reserved == 0. */
void fz_set_device(ops_device dev);
void fz_end(const char *call, ops_status st, int run);

/* Aborts with a message (libFuzzer records the input as a crash). */
void fz_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

#endif /* OPSLIB_TESTS_FUZZ_FUZZ_SUPPORT_H_ */
