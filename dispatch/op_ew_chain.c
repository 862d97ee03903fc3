/* The fused elementwise chain: validation (every operand broadcasts to y, one dtype, y may
 * be x in place), normalization into opsi_ew_chain_args, then the dispatcher. */
#include "dispatch/op_ew_chain.h"

#include <string.h>

#include "dispatch/dispatch.h"
#include "kernels/common/pointwise.h"
#include "runtime/error.h"

ops_status opsi_ew_chain_entry(const opsi_vctx *vc, const opsi_chain *c, void *workspace, size_t workspace_bytes) {
  opsi_clear_error();
  OPSI_TRY(opsi_check_call(vc));
  if (c->n_steps < 1 || c->n_steps > OPSI_CHAIN_MAX_STEPS || c->n_operands < 0 ||
      c->n_operands > OPSI_CHAIN_MAX_OPERANDS) {
    return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: chain: expected 1..%d steps and 0..%d operand tensors, got %d and %d",
                     vc->fn, OPSI_CHAIN_MAX_STEPS, OPSI_CHAIN_MAX_OPERANDS, c->n_steps, c->n_operands);
  }
  static const char *const names[OPSI_CHAIN_MAX_OPERANDS] = {"operand 0", "operand 1", "operand 2", "operand 3"};
  opsi_ew_chain_args a;
  memset(&a, 0, sizeof a);
  int64_t ny;
  OPSI_TRY(opsi_check_tensor(vc, "y", c->y, &ny));
  OPSI_TRY(opsi_check_dtype_in(vc, "y", c->y, OPSI_FLOAT_DTYPES));
  OPSI_TRY(opsi_check_tensor(vc, "x", c->x, NULL));
  OPSI_TRY(opsi_check_dtype_eq(vc, "x", c->x, c->y->dtype, "y's dtype"));
  OPSI_TRY(opsi_broadcast_to(vc, "x", c->x, c->y->ndim, c->y->shape, "y's shape", &a.x));
  opsi_problem pr;
  opsi_problem_init(&pr, OPS_OP_EW_CHAIN, vc->handle);
  opsi_operand operands[OPSI_CHAIN_MAX_OPERANDS + 2];
  operands[0] = (opsi_operand){"x", c->x, 0, {NULL, NULL}};
  for (int k = 0; k < c->n_operands; ++k) {
    OPSI_TRY(opsi_check_tensor(vc, names[k], c->operands[k], NULL));
    OPSI_TRY(opsi_check_dtype_eq(vc, names[k], c->operands[k], c->y->dtype, "y's dtype"));
    OPSI_TRY(opsi_broadcast_to(vc, names[k], c->operands[k], c->y->ndim, c->y->shape, "y's shape", &a.operands[k]));
    operands[1 + k] = (opsi_operand){names[k], c->operands[k], 0, {NULL, NULL}};
    opsi_problem_add_base_align(&pr, c->operands[k]);
    if (!opsi_contiguous(c->operands[k])) pr.flags |= OPSI_F_STRIDED;
  }
  for (int s = 0; s < c->n_steps; ++s) {
    const opsi_chain_step *st = &c->steps[s];
    const int ok = (st->kind == OPSI_STEP_UNARY && opsi_act_known(st->fn)) ||
                   (st->kind == OPSI_STEP_BINARY && opsi_binary_known(st->fn) && st->operand >= 0 &&
                    st->operand < c->n_operands) ||
                   st->kind == OPSI_STEP_SCALE || st->kind == OPSI_STEP_SIN_AFFINE;
    if (!ok) {
      return opsi_fail(OPS_ERR_INVALID_ARGUMENT, "%s: chain step %d: expected a known unary fn, binary op with an "
                       "operand, scale or sin_affine, got kind %d fn %d operand %d",
                       vc->fn, s, (int)st->kind, (int)st->fn, (int)st->operand);
    }
    a.steps[s] = *st;
  }
  operands[1 + c->n_operands] = (opsi_operand){"y", c->y, 1, {c->x, NULL}};
  OPSI_TRY(opsi_check_aliasing(vc, operands, c->n_operands + 2));
  a.y = *c->y;
  a.n_operands = c->n_operands;
  a.n_steps = c->n_steps;
  a.numel = ny;
  pr.dtype = c->y->dtype;
  pr.out_dtype = c->y->dtype;
  pr.dims[OPSI_EW_NUMEL] = ny;
  pr.dims[OPSI_EW_NDIM] = c->y->ndim;
  pr.dims[OPSI_EW_INPUTS] = 1 + c->n_operands;
  if (!opsi_contiguous(c->x) || !opsi_contiguous(c->y)) pr.flags |= OPSI_F_STRIDED;
  for (int k = -1; k < c->n_operands; ++k) {
    const ops_tensor *t = k < 0 ? c->x : c->operands[k];
    if (t->ndim != c->y->ndim || memcmp(t->shape, c->y->shape, sizeof(int64_t) * (size_t)c->y->ndim) != 0) {
      pr.flags |= OPSI_F_BROADCAST;
    }
  }
  opsi_problem_add_base_align(&pr, c->x);
  opsi_problem_add_base_align(&pr, c->y);
  return opsi_finish(vc, &pr, &a, ny == 0, workspace, workspace_bytes);
}
