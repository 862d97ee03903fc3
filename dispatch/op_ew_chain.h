/*
 * The fused elementwise chain as an op: reached by fused plans (dispatch/fusion.c), not
 * by a public entry point. Validation and dispatch like every op.
 */
#ifndef OPSLIB_DISPATCH_OP_EW_CHAIN_H_
#define OPSLIB_DISPATCH_OP_EW_CHAIN_H_

#include "dispatch/validate.h"
#include "kernels/elementwise/ew_chain_args.h"

typedef struct opsi_chain {
  const ops_tensor *x;
  const ops_tensor *y;
  const ops_tensor *operands[OPSI_CHAIN_MAX_OPERANDS];
  int n_operands;
  opsi_chain_step steps[OPSI_CHAIN_MAX_STEPS];
  int n_steps;
} opsi_chain;

/* Runs, sizes or explains the chain (vc->mode), like an entry point. */
ops_status opsi_ew_chain_entry(const opsi_vctx *vc, const opsi_chain *c, void *workspace, size_t workspace_bytes);

#endif /* OPSLIB_DISPATCH_OP_EW_CHAIN_H_ */
