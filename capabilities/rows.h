/*
 * The capability row: everything the dispatcher and `explain` know about one
 * pre-instantiated kernel, as data. If a property decides whether or how a kernel is
 * chosen, it is a field here and a rule in dispatch/rules.c, never an `if` elsewhere.
 * Rows are grouped by op (capabilities/<op>_rows.c); catalog.c indexes them by op id.
 */
#ifndef OPSLIB_CAPABILITIES_ROWS_H_
#define OPSLIB_CAPABILITIES_ROWS_H_

#include <stddef.h>
#include <stdint.h>

#include "core/launch.h"
#include "opslib/ops.h"

#define OPSI_DTYPE_BIT(dt) (1u << (dt))
#define OPSI_FLOAT_DTYPES \
  (OPSI_DTYPE_BIT(OPS_DTYPE_F32) | OPSI_DTYPE_BIT(OPS_DTYPE_F16) | OPSI_DTYPE_BIT(OPS_DTYPE_BF16))
#define OPSI_ALL_VARIANTS 0xFFFFFFFFu

/* One warp role of a kernel, e.g. {"producer", 4, "TMA loads of K and V"}. */
typedef struct opsi_warp_role {
  const char *name;
  int32_t warps;
  const char *work;
} opsi_warp_role;

#define OPSI_MAX_ROLES 3

/* The unit whose peak rate bounds a kernel's arithmetic (see capabilities/machines.c). */
typedef enum opsi_unit {
  OPSI_UNIT_CPU = 0,        /* the CPU references: scalar double precision */
  OPSI_UNIT_FFMA = 1,       /* CUDA cores, f32 fused multiply-add */
  OPSI_UNIT_MMA_F16 = 2,    /* tensor cores through mma.sync, f16 / bf16 inputs */
  OPSI_UNIT_MMA_TF32 = 3,   /* tensor cores through mma.sync, tf32 */
  OPSI_UNIT_WGMMA_F16 = 4,  /* Hopper warpgroup MMA, f16 / bf16 */
  OPSI_UNIT_WGMMA_TF32 = 5, /* Hopper warpgroup MMA, tf32 */
  OPSI_UNIT_COUNT = 6
} opsi_unit;

/* How a kernel cuts the work into blocks, for wave quantization and padding waste. Up to
 * three problem dims are tiled; a tiled dim is either spread over the grid (one block per
 * tile) or looped inside a block. grid_dims lists further dims that multiply the grid
 * (batch, heads). Entries of -1 are unused. */
typedef struct opsi_tiling {
  int8_t tile_dim[3];     /* problem.dims index tiled, or -1 */
  int32_t tile[3];        /* tile extent along it */
  int8_t tile_in_grid[3]; /* 1: one block per tile; 0: looped inside a block */
  int8_t grid_dims[3];    /* problem.dims indices that multiply the block count, or -1 */
  int32_t blocks_per_sm;  /* resident blocks per SM (from registers / smem / threads) */
} opsi_tiling;

/* The launch variant a row's launcher will take for a problem, in words (static storage),
 * for explain; the launcher reports the same words of the variant it took (launch.h). */
typedef const char *(*opsi_plan_fn)(const opsi_problem *problem);

/* A launch the tiling cannot state (split-KV: packed rows, a part count from the device),
 * for the cost model: its blocks and kernels, the padding of its math and its memory traffic over
 * the op's minimal bytes. */
typedef struct opsi_grid_estimate {
  double blocks;
  double pad_factor;   /* >= 1 */
  double bytes_factor; /* multiplies the row's bytes_factor */
  int32_t launches;    /* kernels a call launches */
} opsi_grid_estimate;
typedef void (*opsi_grid_fn)(const opsi_problem *problem, opsi_grid_estimate *estimate);

/* The parts a split row cuts a call's reduction into (split-K GEMM); a call it would run in
 * one part is not its to run (the unsplit row runs it the same way): rule "shape". */
typedef int32_t (*opsi_parts_fn)(const opsi_problem *problem);

typedef struct opsi_kernel_row {
  /* identity */
  int32_t id;       /* stable kernel_id: never renumbered or reused */
  const char *name; /* stable, unique; OPSLIB_FORCE_KERNEL takes it */
  int32_t op;       /* ops_op */
  int32_t backend;  /* ops_device_type */
  int32_t sm_min;   /* inclusive SM range (10 * major + minor); 0, 0 on the CPU */
  int32_t sm_max;

  /* what it accepts */
  uint32_t dtypes;     /* OPSI_DTYPE_BIT of each main-input dtype */
  uint32_t out_dtypes; /* OPSI_DTYPE_BIT of each output dtype */
  uint32_t variants;   /* bit per problem.variant value (activation, binary op, reduce op) */
  uint32_t flags;      /* OPSI_F_* features it implements */
  int32_t align;       /* bytes every operand's rows must be aligned to (problem.align) */
  int64_t dim_min[8];  /* per problem.dims index; 0 = no bound */
  int64_t dim_max[8];  /* 0 = no bound */
  int64_t dim_multiple[8]; /* 0 or 1 = any */
  int32_t requires_tf32;   /* 1: rounds f32 inputs to tf32, needs OPS_MATH_ALLOW_TF32 */

  /* how it is built */
  opsi_warp_role roles[OPSI_MAX_ROLES]; /* name NULL ends the list */
  int32_t stages;                       /* async pipeline stages (0: none) */
  const char *smem_layout;              /* tile shapes and swizzle / padding */
  int32_t smem_bytes;                   /* dynamic + static shared memory per block */
  int32_t threads;                      /* per block; 0 on the CPU */
  int32_t vector_bytes;                 /* bytes per global-memory access of one thread (16: uint4) */
  uint32_t fuses;                       /* OPSI_F_* prologues / epilogues it absorbs */
  int32_t deterministic;                /* bitwise identical results run to run */
  const char *reduction_order;
  int32_t twin;                         /* a deterministic row that is another row's kernel
                                           with its reductions put in a fixed order: that
                                           row's id, never outrun by this one, so that where
                                           both take a call this one is not estimated below it
                                           (0: none) */
  int32_t cluster;                      /* blocks a cluster that share loads (0 or 1: none);
                                           > 1: every block of a cluster must read the same
                                           range (the op's uniform work, dispatch/work.c) and
                                           tiled dim 0's tile count must divide by it */
  int32_t decode_sq_max;                /* > 0: a decode kernel, which takes calls without a KV
                                           cache only up to this many query rows (longer ones
                                           are prefill, for the prefill kernels); 0: no bound */
  opsi_plan_fn plan;                    /* NULL: it runs one way */
  opsi_grid_fn grid;                    /* NULL: the tiling states the grid */
  opsi_parts_fn parts;                  /* NULL: not a split row */

  /* what it costs (dispatch/cost.c; coefficients per SM family in capabilities/machines.c) */
  int32_t unit;         /* opsi_unit bounding its arithmetic */
  float efficiency;     /* fraction of the unit's peak and of memory bandwidth it reaches */
  float mem_efficiency; /* fraction of memory bandwidth, where it differs (0: efficiency) */
  float bytes_factor;   /* device memory traffic over the op's minimal bytes (2-pass: ~1.5) */
  opsi_tiling tiling;   /* CUDA rows; all -1 / 0 on the CPU */
  const char *workspace_formula; /* the workspace function in words, for explain and list */

  /* how it runs */
  opsi_workspace_fn workspace; /* NULL: needs none */
  opsi_launch_fn launch;
  const char *tests;           /* the test target(s) that exercise it */
} opsi_kernel_row;

/* 1 when every work tile of p reads the same range of its operands, as launchers see it:
 * SDPA without varlen, without a KV cache (per-sequence lengths) and without a window side
 * that cuts the keys (a side at least as long as the sequence cuts nothing; causal is a
 * window); every other op. */
int opsi_uniform_work(const opsi_problem *p);

/* 1 when an SDPA call's work tiles all come from one [B, S, H, D] layout (no varlen, no KV
 * cache), where a persistent grid can walk them in a fixed order that balances causal and
 * windowed tiles (sdpa_sm90_sched.cuh); 0 for every other op. */
int opsi_sdpa_persistent(const opsi_problem *p);

/* SDPA: query rows a batch entry (varlen: tokens_q / batch, the mean sequence length). */
double opsi_sdpa_rows_per_batch(const opsi_problem *p);

/* SDPA: the (query, key) pairs a head of sq query rows over sk keys attends: key j is visible
 * to query i when i + d - left <= j <= i + d + right, d = sk - sq (bottom-right aligned; a
 * side < 0 is unbounded). O(1). */
double opsi_sdpa_visible_pairs(int64_t sq, int64_t sk, int64_t left, int64_t right);

/* The rows of `op` (NULL, 0 for an unknown op): O(1), a table indexed by op id. */
const opsi_kernel_row *opsi_rows_for_op(int32_t op, size_t *count);

/* Every row of every op, for listing and consistency checks. */
const opsi_kernel_row *const *opsi_all_rows(size_t *count);

/* The row of that name (as `opsctl list` prints it), or NULL. */
const opsi_kernel_row *opsi_row_named(const char *name);

#endif /* OPSLIB_CAPABILITIES_ROWS_H_ */
