/*
 * Dropout on the CPU: x's elements in logical row-major order, Philox words per 4 of them,
 * kept when the uniform (the word's top 24 bits, exact in float) is >= p, compared in float
 * like the GPU kernels do, so the mask is the same bit for bit.
 */
#include "kernels/elementwise/dropout_cpu.h"

#include "kernels/common/cpu_elem.h"
#include "kernels/common/cpu_iter.h"
#include "kernels/common/philox.h"
#include "kernels/elementwise/dropout_args.h"

ops_status opsi_dropout_cpu(const opsi_launch *ctx, const void *argp) {
  (void)ctx;
  const opsi_dropout_args *d = (const opsi_dropout_args *)argp;
  if (d->numel == 0) return OPS_OK;
  const float p = (float)d->p;
  const double keep_scale = d->p < 1.0 ? 1.0 / (1.0 - d->p) : 0.0;
  opsi_iter it;
  opsi_iter_init(&it, d->x.ndim, d->x.shape);
  opsi_iter_add(&it, d->x.strides);
  opsi_iter_add(&it, d->y.strides);
  int64_t i = 0;
  opsi_u32x4 w = {{0, 0, 0, 0}};
  do {
    if ((i & 3) == 0) w = opsi_dropout_bits(d->seed, d->offset, (uint64_t)i >> 2);
    const float u = (float)(w.v[i & 3] >> 8) * 0x1p-24f;
    const int keep = d->p < 1.0 && u >= p;
    const double v = keep ? opsi_load(d->x.data, it.off[0], d->x.dtype) * keep_scale : 0.0;
    opsi_store(d->y.data, it.off[1], d->y.dtype, v);
    ++i;
  } while (opsi_iter_next(&it));
  return OPS_OK;
}
