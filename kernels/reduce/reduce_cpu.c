/*
 * ops_reduce on the CPU: for each output element, a double-precision fold over the reduced
 * axes in index order (deterministic). An empty fold gives the identity (sum 0, max -inf,
 * min +inf) and mean 0 / 0 = NaN. Max and min propagate NaN.
 */
#include "kernels/reduce/reduce_cpu.h"

#include <math.h>

#include "kernels/common/cpu_elem.h"
#include "kernels/common/cpu_iter.h"
#include "kernels/reduce/reduce_args.h"
#include "opslib/ops.h"

ops_status opsi_reduce_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_reduce_args *r = (const opsi_reduce_args *)argp;
  if (r->out_count == 0) return OPS_OK;
  opsi_iter outer;
  opsi_iter_init(&outer, r->kept_ndim, r->kept_shape);
  opsi_iter_add(&outer, r->kept_x_strides);
  opsi_iter_add(&outer, r->kept_y_strides);
  do {
    double acc = r->op == OPS_REDUCE_MAX ? -INFINITY : r->op == OPS_REDUCE_MIN ? INFINITY : 0.0;
    if (r->red_count > 0) {
      opsi_iter inner;
      opsi_iter_init(&inner, r->red_ndim, r->red_shape);
      opsi_iter_add(&inner, r->red_x_strides);
      do {
        const double v = opsi_load(r->x.data, outer.off[0] + inner.off[0], r->x.dtype);
        switch (r->op) {
          case OPS_REDUCE_MAX:
            if (v > acc || v != v) acc = v;
            break;
          case OPS_REDUCE_MIN:
            if (v < acc || v != v) acc = v;
            break;
          default:
            acc += v;
            break;
        }
        if (acc != acc && (r->op == OPS_REDUCE_MAX || r->op == OPS_REDUCE_MIN)) break;
      } while (opsi_iter_next(&inner));
    }
    if (r->op == OPS_REDUCE_MEAN) acc /= (double)r->red_count;
    opsi_store(r->y_data, outer.off[1], r->y_dtype, acc);
  } while (opsi_iter_next(&outer));
  return OPS_OK;
}
