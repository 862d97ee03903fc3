/*
 * The dispatcher core, after an entry point has validated its operands and summarized
 * them as a problem: evaluate every candidate row against the rules, choose, then run,
 * answer the workspace query, or explain, whichever the call's mode asks. The three share
 * one evaluation, so a query or an explanation always describes what a run would do.
 */
#ifndef OPSLIB_DISPATCH_DISPATCH_H_
#define OPSLIB_DISPATCH_DISPATCH_H_

#include <stddef.h>

#include "capabilities/rows.h"
#include "dispatch/validate.h"
#include "core/launch.h"
#include "opslib/explain.h"

/* A problem with the handle's facts filled in (backend, code SM, math mode, determinism),
 * align = 16, every other field 0. */
void opsi_problem_init(opsi_problem *p, int32_t op, ops_handle handle);

/* Lowers p->align to t's alignment (t may be NULL: no change): the alignment of every row
 * start, for ops that work row by row. */
void opsi_problem_add_align(opsi_problem *p, const ops_tensor *t);

/* opsi_problem_add_align for an op that works a unit-stride row at a time (norms, softmax,
 * rope, the cache append), and OPSI_F_STRIDED when t's last axis is not unit-stride. */
void opsi_problem_add_row_layout(opsi_problem *p, const ops_tensor *t);

/* Lowers p->align to the alignment of t's data address alone, for ops that see a
 * contiguous tensor as one flat run of elements (elementwise, dropout). */
void opsi_problem_add_base_align(opsi_problem *p, const ops_tensor *t);

/* Evaluates every candidate row of p's op: the rules (or the handle's pin), then the cost
 * model over the eligible rows. Fills verdicts[0..*count) when verdicts is not NULL and
 * returns the cheapest eligible row (the earliest on a tie), or NULL when none is eligible.
 * A measured choice (autotune.h) may override it: dispatch.c's decide() makes the choice. */
const opsi_kernel_row *opsi_evaluate(const opsi_vctx *v, const opsi_problem *p, ops_verdict *verdicts,
                                     int *count);

/* Runs row's launcher; a failure it names (opsi_launch_error) becomes the thread's message,
 * "<fn>: <kernel>: <what>: <detail> (error <code>)"; a CUDA launch is checked for errors. */
ops_status opsi_run_row(const char *fn, const opsi_kernel_row *row, const opsi_launch *ctx, const void *args);

/* The tail of every entry point. `empty`: the outputs have no elements (nothing runs).
 *   OPSI_RUN:             choose (OPS_ERR_UNSUPPORTED with each candidate's reason if none),
 *                         check the workspace, launch on the handle's stream, collect errors;
 *   OPSI_QUERY_WORKSPACE: the chosen kernel's workspace bytes;
 *   OPSI_EXPLAIN:         the verdicts. */
ops_status opsi_finish(const opsi_vctx *v, const opsi_problem *p, const void *args, int empty,
                       void *workspace, size_t workspace_bytes);

/* For the tests of the CUDA error path (tests/gpu): the next n CUDA launches on this thread
 * are replaced by a launch of a probe kernel with an invalid configuration, a real and
 * non-sticky CUDA error, which the op reports as any failed launch. */
void opsi_fail_next_cuda_launches(int n);

/* While on (on this thread), OPSI_RUN calls stop after the checks of a run (validation, the
 * kernel choice, the workspace) and return without running: ops_plan_execute checks every
 * step before it runs the first. */
void opsi_set_check_only(int on);

/* The problem in words, for explain and messages: "sdpa bf16 -> bf16 on cuda sm_90: ...". */
void opsi_describe_problem(const opsi_problem *p, char *buf, size_t n);

#endif /* OPSLIB_DISPATCH_DISPATCH_H_ */
