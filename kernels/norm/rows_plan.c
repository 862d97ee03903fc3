/* The work layout of the CUDA row kernels (rows_plan.h). */
#include "kernels/norm/rows_plan.h"

#include "opslib/ops.h"

/* Sizes come from validated tensors, whose extents may each be near 2^63 when another is 0:
 * the arithmetic below neither overflows nor wraps. */
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); } /* a >= 0, b > 0 */

static int64_t mul_sat(int64_t a, int64_t b) { /* a, b >= 0 */
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

static size_t bytes_sat(int64_t count, int64_t each) {
  const int64_t r = mul_sat(count, each);
  return (uint64_t)r > SIZE_MAX ? SIZE_MAX : (size_t)r;
}

static int32_t pow2_at_least(int64_t v) {
  int32_t p = 1;
  while (p < v && p < OPSI_ROWS_MAX_TPR) p <<= 1;
  return p;
}

opsi_rows_config opsi_rows_plan(int variant, int held, int partials, int64_t rows, int64_t cols, int vec) {
  opsi_rows_config c = {32, 8, 1, 1, 1, 0};
  const int64_t per = held / vec > 0 ? held / vec : 1; /* vectors a thread may hold */
  const int64_t vectors = ceil_div(cols, vec);
  if (variant == OPSI_ROWS_BLOCK) {
    /* as few threads per row as the registers allow: every thread keeps its whole share
     * of loads in flight at once, and the group reductions stay short */
    c.tpr = pow2_at_least(ceil_div(vectors, per));
    if (c.tpr < 32) c.tpr = 32;
    c.rpb = c.tpr >= 256 ? 1 : 256 / c.tpr;
  } else if (variant == OPSI_ROWS_SPLIT) {
    c.tpr = 256, c.rpb = 1;
  } else if (variant == OPSI_ROWS_STREAM) {
    c.tpr = OPSI_ROWS_STREAM_THREADS, c.rpb = 1;
  } else if (variant == OPSI_ROWS_STAGED) {
    /* the fewest threads a row whose stages hold it; the block is always 1024 threads */
    c.tpr = pow2_at_least(ceil_div(vectors, per));
    if (c.tpr < 32) c.tpr = 32;
    c.rpb = OPSI_ROWS_STAGED_THREADS / c.tpr;
  }
  const int64_t vpt = ceil_div(vectors, c.tpr);
  c.vpt = vpt < 1 ? 1 : vpt > INT32_MAX ? INT32_MAX : (int32_t)vpt;
  c.blocks = ceil_div(rows, c.rpb);
  if (variant == OPSI_ROWS_SPLIT) {
    c.slices = ceil_div(cols, OPSI_ROWS_SLICE);
    if (c.slices < 1) c.slices = 1;
    c.blocks = mul_sat(rows, c.slices);
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
  return bytes_sat(mul_sat(p->dims[OPSI_ROWS_ROWS], c.slices), 2 * (int64_t)sizeof(float));
}

/* dweight and / or dbias partial rows of `groups` row groups. */
static size_t partials(const opsi_problem *p, int64_t groups) {
  const int n = ((p->flags & OPSI_F_DWEIGHT) != 0) + ((p->flags & OPSI_F_BIAS) != 0);
  return bytes_sat(mul_sat(groups, p->dims[OPSI_ROWS_COLS]), n * (int64_t)sizeof(float));
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
