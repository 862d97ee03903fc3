/* The work split of the CUDA reductions (reduce_plan.h). */
#include "kernels/reduce/reduce_plan.h"

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

int64_t opsi_reduce_row_splits(int64_t rows, int64_t reduced) {
  if (rows <= 0 || rows >= 264 || reduced < 16384) return 1;
  return clamp64((264 + rows - 1) / rows, 1, reduced / 4096);
}

int64_t opsi_reduce_column_splits(int64_t reduced, int64_t columns) {
  const int64_t col_blocks = columns / 2048 + (columns % 2048 != 0); /* no overflow near 2^63 */
  /* one wave of 2 blocks per SM of an H100 (132 SMs; the kernel's registers allow 2), chunks
     of >= 32 rows */
  return clamp64(264 / (col_blocks > 0 ? col_blocks : 1), 1, clamp64(reduced / 32, 1, 1024));
}

size_t opsi_reduce_rows_workspace(const opsi_problem *p) {
  const int64_t splits = opsi_reduce_row_splits(p->dims[OPSI_REDUCE_OUT], p->dims[OPSI_REDUCE_INNER]);
  return splits > 1 ? (size_t)(p->dims[OPSI_REDUCE_OUT] * splits) * sizeof(float) : 0;
}

size_t opsi_reduce_columns_workspace(const opsi_problem *p) {
  const int64_t splits = opsi_reduce_column_splits(p->dims[OPSI_REDUCE_INNER], p->dims[OPSI_REDUCE_OUT]);
  return splits > 1 ? (size_t)(p->dims[OPSI_REDUCE_OUT] * splits) * sizeof(float) : 0;
}
