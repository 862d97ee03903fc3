/*
 * The dispatcher core, after an entry point has validated its operands and summarized
 * them as a problem: choose a row (rules, then order), check the workspace, launch, and
 * collect launch errors. The same choice answers the workspace-size query.
 */
#ifndef OPSLIB_DISPATCH_DISPATCH_H_
#define OPSLIB_DISPATCH_DISPATCH_H_

#include <stddef.h>

#include "capabilities/rows.h"
#include "dispatch/validate.h"
#include "kernels/common/launch.h"

/* A problem with the handle's facts filled in (backend, SM, math mode, determinism),
 * align = 16, every other field 0. */
void opsi_problem_init(opsi_problem *p, int32_t op, ops_handle handle);

/* Lowers p->align to t's alignment (t may be NULL: no change). */
void opsi_problem_add_align(opsi_problem *p, const ops_tensor *t);

/* The eligible row for p, or OPS_ERR_UNSUPPORTED with every candidate's reason. */
ops_status opsi_select(const opsi_vctx *v, const opsi_problem *p, const opsi_kernel_row **row);

/* Runs the call: nothing when `empty` (the outputs have no elements), else select, check
 * the workspace, launch on the handle's stream, collect the launch status. */
ops_status opsi_execute(const opsi_vctx *v, const opsi_problem *p, const void *args, int empty,
                        void *workspace, size_t workspace_bytes);

/* The workspace bytes the chosen kernel needs (0 when `empty`). */
ops_status opsi_workspace_query(const opsi_vctx *v, const opsi_problem *p, int empty,
                                size_t *bytes);

/* The tail of every entry point, which serves both the op (query == NULL: execute) and
 * its workspace-size query (query != NULL: answer it), so the two always agree. */
static inline ops_status opsi_finish(const opsi_vctx *v, const opsi_problem *p, const void *args,
                                     int empty, void *workspace, size_t workspace_bytes,
                                     size_t *query) {
  if (query != NULL) {
    return opsi_workspace_query(v, p, empty, query);
  }
  return opsi_execute(v, p, args, empty, workspace, workspace_bytes);
}

/* The error of a workspace-size query called with bytes == NULL. */
ops_status opsi_null_query(const char *fn);

#endif /* OPSLIB_DISPATCH_DISPATCH_H_ */
