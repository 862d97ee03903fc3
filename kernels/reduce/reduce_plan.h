/*
 * How the CUDA reductions cut their work, as functions of the problem alone (so the
 * capability rows' workspace formulas and the launchers agree): how many blocks split
 * each long row, how many row chunks a column reduction is cut into. Partial results go
 * to the workspace as f32 and are combined in chunk order: deterministic, no atomics.
 */
#ifndef OPSLIB_KERNELS_REDUCE_REDUCE_PLAN_H_
#define OPSLIB_KERNELS_REDUCE_REDUCE_PLAN_H_

#include <stddef.h>
#include <stdint.h>

#include "core/problem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks per row for the rows kernel: > 1 only for few, long rows (each block then takes
 * a chunk of at least 4096 elements; ~264 blocks in all, two per H100 SM). */
int64_t opsi_reduce_row_splits(int64_t rows, int64_t reduced);

/* Row chunks of a column reduction over an [R, K] view: ~264 blocks of 256 threads x 8
 * columns in all (one wave of 2 an SM), at least 32 rows a chunk, at most 1024 chunks. */
int64_t opsi_reduce_column_splits(int64_t reduced, int64_t columns);

/* The cluster columns kernel (sm_90): blocks a cluster, a quarter of the rows each. */
#define OPSI_REDUCE_CLUSTER 4

size_t opsi_reduce_rows_workspace(const opsi_problem *p);
size_t opsi_reduce_columns_workspace(const opsi_problem *p);

#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_KERNELS_REDUCE_REDUCE_PLAN_H_ */
