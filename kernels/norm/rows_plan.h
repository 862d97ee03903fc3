/*
 * How the CUDA row kernels (LayerNorm, RMSNorm, softmax; forward and backward) lay out
 * their work, as functions of the problem alone, so that the capability rows' limits and
 * workspace formulas and the launchers agree:
 *   threads per row (tpr), rows per block (rpb), vectors per thread (vpt) of the register
 *   variants; slices per row of the split variant; the row groups whose dweight / dbias
 *   partial rows the backward writes.
 */
#ifndef OPSLIB_KERNELS_NORM_ROWS_PLAN_H_
#define OPSLIB_KERNELS_NORM_ROWS_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#include "core/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  OPSI_ROWS_WARP = 0,   /* a warp per row, 8 rows per block */
  OPSI_ROWS_BLOCK = 1,  /* 32..1024 threads per row, the row held in registers */
  OPSI_ROWS_SPLIT = 2,  /* forward, any length: a row cut into slices across blocks, read twice */
  OPSI_ROWS_STREAM = 3, /* backward, any length: blocks walk rows, each row read twice */
  OPSI_ROWS_STAGED = 4  /* norm backward, sm_90, 16-bit 16-byte rows: blocks of 1024 walk the rows,
                           the next rows' dy and x copied into shared memory (cp.async) meanwhile */
};

/* Floats of a row that one thread holds in registers, per kernel. */
#define OPSI_ROWS_WARP_HELD 32     /* forward, a warp per row: rows <= 32 * 32 = 1024 */
#define OPSI_ROWS_FWD_HELD 16      /* forward, a block per row: rows <= 1024 * 16 = 16384 */
/* ...except the 16-byte block variant without a residual, which holds bytes as loaded:
   4 vectors a thread (32 bf16 / f16 or 16 f32 elements), still <= OPSI_ROWS_FWD_MAX_COLS */
#define OPSI_ROWS_FWD_VEC16_BYTES 64
#define OPSI_ROWS_NORM_BWD_HELD 8  /* norm backward (dy * w, xhat, and two partial sums each) */
#define OPSI_ROWS_SM_BWD_HELD 16   /* softmax backward (dy, y) */
#define OPSI_ROWS_MAX_TPR 1024

#define OPSI_ROWS_WARP_MAX_COLS (32 * OPSI_ROWS_WARP_HELD)
#define OPSI_ROWS_FWD_MAX_COLS (OPSI_ROWS_MAX_TPR * OPSI_ROWS_FWD_HELD)
#define OPSI_ROWS_NORM_BWD_MAX_COLS (OPSI_ROWS_MAX_TPR * OPSI_ROWS_NORM_BWD_HELD)
#define OPSI_ROWS_SM_BWD_MAX_COLS (OPSI_ROWS_MAX_TPR * OPSI_ROWS_SM_BWD_HELD)

#define OPSI_ROWS_SLICE 8192            /* elements per slice of the split variant */
#define OPSI_ROWS_BWD_THREADS 131072    /* threads the backward's row groups aim at (~1 wave) */
#define OPSI_ROWS_STREAM_THREADS 512    /* the stream backward's block */
#define OPSI_ROWS_STREAM_BLOCKS 1024    /* its grid without dweight / dbias (rows beyond: walked) */
#define OPSI_ROWS_STAGED_HELD 16        /* elements of dy and of x a thread stages per row */
#define OPSI_ROWS_STAGED_THREADS 1024   /* the staged backward's block: one a SM */
#define OPSI_ROWS_STAGED_MAX_COLS (OPSI_ROWS_STAGED_THREADS * OPSI_ROWS_STAGED_HELD)
#define OPSI_ROWS_STAGED_MAX_BLOCKS 256 /* its grid: min(row batches, SMs, this); workspace for this */
#define OPSI_ROWS_STAGED_STAGES 3       /* sm_90: 3 x 64 KB + the 32 KB weight row of its 227 KB */

typedef struct opsi_rows_config {
  int32_t tpr, rpb, vpt;
  int64_t blocks;
  int64_t slices; /* split: slices per row */
  int64_t groups; /* backward with partials: row groups, one partial row each */
} opsi_rows_config;

/* vec: elements per access (8 for 16-bit dtypes, 4 for f32, 1 for the scalar kernels);
 * held: one of the *_HELD above; partials: the backward writes dweight / dbias partials. */
opsi_rows_config opsi_rows_plan(int variant, int held, int partials, int64_t rows, int64_t cols, int vec);

size_t opsi_rows_split_workspace(const opsi_problem *p);
size_t opsi_rows_bwd_vec16_workspace(const opsi_problem *p);
size_t opsi_rows_bwd_scalar_workspace(const opsi_problem *p);
size_t opsi_rows_bwd_stream_workspace(const opsi_problem *p);
size_t opsi_rows_bwd_staged_workspace(const opsi_problem *p);
/* Shared memory of one stage of the staged backward: per thread 16-byte slots for its
 * vectors of dy and of x. After the stages, the weight row when it fits W_BYTES. */
#define OPSI_ROWS_STAGED_STAGE_BYTES (OPSI_ROWS_STAGED_THREADS * 2 * OPSI_ROWS_STAGED_HELD * (int)sizeof(uint16_t))
#define OPSI_ROWS_STAGED_W_BYTES 32768
#define OPSI_ROWS_STAGED_SMEM (OPSI_ROWS_STAGED_STAGES * OPSI_ROWS_STAGED_STAGE_BYTES + OPSI_ROWS_STAGED_W_BYTES)

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_NORM_ROWS_PLAN_H_ */
