/*
 * Elementwise ops on the CPU: one walk over y's index space, every input read at its
 * broadcast strides, the function evaluated in double and rounded once into y. In-place
 * use is safe because each y element is written right after its own inputs are read.
 */
#include "kernels/elementwise/ew_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/common/cpu_iter.h"
#include "kernels/common/pointwise.h"
#include "kernels/elementwise/ew_args.h"

static const int64_t k_zero_strides[OPS_MAX_DIMS] = {0};

ops_status opsi_elementwise_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_ew_args *e = (const opsi_ew_args *)argp;
  if (e->numel == 0) return OPS_OK;
  opsi_iter it;
  opsi_iter_init(&it, e->y.ndim, e->y.shape);
  opsi_iter_add(&it, e->y.strides);
  for (int k = 0; k < 3; ++k) {
    opsi_iter_add(&it, e->has_in[k] ? e->in[k].strides : k_zero_strides);
  }
  do {
    double v[3] = {0.0, 0.0, 0.0};
    for (int k = 0; k < 3; ++k) {
      if (e->has_in[k]) v[k] = opsi_load(e->in[k].data, it.off[1 + k], e->in[k].dtype);
    }
    double r;
    switch (e->kind) {
      case OPSI_EW_SIN_AFFINE: {
        const double a = e->has_in[1] ? v[1] : e->a;
        const double b = e->has_in[2] ? v[2] : e->b;
        r = sin(a * v[0] + b);
        break;
      }
      case OPSI_EW_UNARY:
        r = opsi_act_apply(e->fn, v[0]);
        break;
      case OPSI_EW_SCALE:
        r = e->a * v[0];
        break;
      default:
        r = opsi_binary_apply(e->fn, v[0], v[1]);
        break;
    }
    opsi_store(e->y.data, it.off[0], e->y.dtype, r);
  } while (opsi_iter_next(&it));
  return OPS_OK;
}
