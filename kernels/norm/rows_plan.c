/* The work layout of the CUDA row kernels (rows_plan.h). */
#include "kernels/norm/rows_plan.h"

#include "opslib/ops.h"

static int32_t pow2_at_least(int64_t v) {
  int32_t p = 1;
  while (p < v && p < OPSI_ROWS_MAX_TPR) p <<= 1;
  return p;
}

opsi_rows_config opsi_rows_plan(int variant, int held, int partials, int64_t rows, int64_t cols, int vec) {
  opsi_rows_config c = {32, 8, 1, 1, 1, 0};
  const int64_t per = held / vec > 0 ? held / vec : 1; /* vectors a thread may hold */
  const int64_t vectors = (cols + vec - 1) / vec;
  if (variant == OPSI_ROWS_BLOCK) {
    /* as few threads per row as the registers allow: every thread keeps its whole share
     * of loads in flight at once, and the group reductions stay short */
    c.tpr = pow2_at_least((vectors + per - 1) / per);
    if (c.tpr < 32) c.tpr = 32;
    c.rpb = c.tpr >= 256 ? 1 : 256 / c.tpr;
  } else if (variant == OPSI_ROWS_SPLIT) {
    c.tpr = 256, c.rpb = 1;
  } else if (variant == OPSI_ROWS_STREAM) {
    c.tpr = OPSI_ROWS_STREAM_THREADS, c.rpb = 1;
  } else if (variant == OPSI_ROWS_STAGED) {
    /* the fewest threads a row whose stages hold it; the block is always 1024 threads */
    c.tpr = pow2_at_least((vectors + per - 1) / per);
    if (c.tpr < 32) c.tpr = 32;
    c.rpb = OPSI_ROWS_STAGED_THREADS / c.tpr;
  }
  c.vpt = (int32_t)((vectors + c.tpr - 1) / c.tpr);
  if (c.vpt < 1) c.vpt = 1;
  c.blocks = (rows + c.rpb - 1) / c.rpb;
  if (variant == OPSI_ROWS_SPLIT) {
    c.slices = (cols + OPSI_ROWS_SLICE - 1) / OPSI_ROWS_SLICE;
    if (c.slices < 1) c.slices = 1;
    c.blocks = rows * c.slices;
  } else if (variant == OPSI_ROWS_STREAM) {
    /* each block owns a partial row per output: 32..128 of them, ~16 MiB of partials at most,
       which stay in L2 while the blocks update them */
    int64_t groups = ((int64_t)1 << 22) / (cols > 0 ? cols : 1);
    groups = groups < 32 ? 32 : groups > 128 ? 128 : groups;
    c.groups = partials ? (groups < rows ? groups : rows) : 0;
    c.blocks = partials ? c.groups : (rows < OPSI_ROWS_STREAM_BLOCKS ? rows : OPSI_ROWS_STREAM_BLOCKS);
    if (c.blocks < 1) c.blocks = 1;
  } else if (variant == OPSI_ROWS_STAGED) {
    /* the launcher caps the grid further at the device's SMs; one partial row a block */
    if (c.blocks > OPSI_ROWS_STAGED_MAX_BLOCKS) c.blocks = OPSI_ROWS_STAGED_MAX_BLOCKS;
    if (c.blocks < 1) c.blocks = 1;
    c.groups = partials ? c.blocks : 0;
  } else if (partials) {
    /* group g walks rows g, g + groups, ...: about one wave of groups, whole blocks */
    int64_t groups = OPSI_ROWS_BWD_THREADS / c.tpr;
    if (groups > rows) groups = rows;
    c.blocks = (groups + c.rpb - 1) / c.rpb;
    if (c.blocks < 1) c.blocks = 1;
    c.groups = c.blocks * c.rpb;
  }
  return c;
}

static int vec_of(int32_t dtype) { return dtype == OPS_DTYPE_F32 ? 4 : 8; }

size_t opsi_rows_split_workspace(const opsi_problem *p) {
  const opsi_rows_config c =
      opsi_rows_plan(OPSI_ROWS_SPLIT, 1, 0, p->dims[OPSI_ROWS_ROWS], p->dims[OPSI_ROWS_COLS], 1);
  return (size_t)(p->dims[OPSI_ROWS_ROWS] * c.slices) * 2 * sizeof(float);
}

/* dweight and / or dbias partial rows of `groups` row groups. */
static size_t partials(const opsi_problem *p, int64_t groups) {
  const int n = ((p->flags & OPSI_F_DWEIGHT) != 0) + ((p->flags & OPSI_F_BIAS) != 0);
  return (size_t)(groups * p->dims[OPSI_ROWS_COLS]) * (size_t)n * sizeof(float);
}

static int has_partials(const opsi_problem *p) {
  return p->op != OPS_OP_SOFTMAX_BACKWARD && (p->flags & (OPSI_F_DWEIGHT | OPSI_F_BIAS)) != 0;
}

size_t opsi_rows_bwd_vec16_workspace(const opsi_problem *p) {
  if (!has_partials(p)) return 0;
  const opsi_rows_config c = opsi_rows_plan(OPSI_ROWS_BLOCK, OPSI_ROWS_NORM_BWD_HELD, 1, p->dims[OPSI_ROWS_ROWS],
                                            p->dims[OPSI_ROWS_COLS], vec_of(p->dtype));
  return partials(p, c.groups);
}

size_t opsi_rows_bwd_scalar_workspace(const opsi_problem *p) {
  if (!has_partials(p)) return 0;
  const opsi_rows_config c =
      opsi_rows_plan(OPSI_ROWS_BLOCK, OPSI_ROWS_NORM_BWD_HELD, 1, p->dims[OPSI_ROWS_ROWS], p->dims[OPSI_ROWS_COLS], 1);
  return partials(p, c.groups);
}

size_t opsi_rows_bwd_stream_workspace(const opsi_problem *p) {
  if (!has_partials(p)) return 0;
  const opsi_rows_config c =
      opsi_rows_plan(OPSI_ROWS_STREAM, 1, 1, p->dims[OPSI_ROWS_ROWS], p->dims[OPSI_ROWS_COLS], 1);
  return partials(p, c.groups);
}

size_t opsi_rows_bwd_staged_workspace(const opsi_problem *p) {
  if (!has_partials(p)) return 0;
  const opsi_rows_config c = opsi_rows_plan(OPSI_ROWS_STAGED, OPSI_ROWS_STAGED_HELD, 1, p->dims[OPSI_ROWS_ROWS],
                                            p->dims[OPSI_ROWS_COLS], vec_of(p->dtype));
  return partials(p, c.groups);
}
