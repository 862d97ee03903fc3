/* The fused elementwise chain on the CPU: one walk over y, every step in double. */
#include "kernels/elementwise/ew_chain_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/common/cpu_iter.h"
#include "kernels/common/pointwise.h"
#include "kernels/elementwise/ew_chain_args.h"

ops_status opsi_ew_chain_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_ew_chain_args *c = (const opsi_ew_chain_args *)argp;
  if (c->numel == 0) return OPS_OK;
  opsi_iter it;
  opsi_iter_init(&it, c->y.ndim, c->y.shape);
  opsi_iter_add(&it, c->y.strides);
  opsi_iter_add(&it, c->x.strides);
  for (int k = 0; k < c->n_operands; ++k) opsi_iter_add(&it, c->operands[k].strides);
  do {
    double v = opsi_load(c->x.data, it.off[1], c->x.dtype);
    for (int s = 0; s < c->n_steps; ++s) {
      const opsi_chain_step *st = &c->steps[s];
      switch (st->kind) {
        case OPSI_STEP_UNARY:
          v = opsi_act_apply(st->fn, v);
          break;
        case OPSI_STEP_BINARY: {
          const ops_tensor *o = &c->operands[st->operand];
          const double w = opsi_load(o->data, it.off[2 + st->operand], o->dtype);
          v = st->operand_first ? opsi_binary_apply(st->fn, w, v) : opsi_binary_apply(st->fn, v, w);
          break;
        }
        case OPSI_STEP_SCALE:
          v = st->a * v;
          break;
        default:
          v = sin(st->a * v + st->b);
          break;
      }
    }
    opsi_store(c->y.data, it.off[0], c->y.dtype, v);
  } while (opsi_iter_next(&it));
  return OPS_OK;
}
