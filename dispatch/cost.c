/* The estimate of dispatch/cost.h. */
#include "dispatch/cost.h"

#include <math.h>
#include <stdio.h>

#include "capabilities/machines.h"

static double ceil_div(double a, double b) { return b > 0 ? ceil(a / b) : 1.0; }

void opsi_estimate(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *dev,
                   opsi_cost *c) {
  const opsi_machine *m = opsi_machine_for(p->backend, dev->sm_version);
  opsi_work(p, &c->bytes, &c->flops);
  const double eff = r->efficiency > 0.0f ? (double)r->efficiency : 1.0;
  const double bytes_factor = r->bytes_factor > 0.0f ? (double)r->bytes_factor : 1.0;
  const double rate = r->unit >= 0 && r->unit < OPSI_UNIT_COUNT ? m->tflops[r->unit] : 0.0;
  c->mem_us = c->bytes * bytes_factor / (m->mem_gbps * 1e3 * eff);
  c->math_us = rate > 0.0 ? c->flops / (rate * 1e6 * eff) : INFINITY;
  c->launch_us = m->launch_us;
  c->wave_factor = 1.0;
  c->pad_factor = 1.0;
  const opsi_tiling *t = &r->tiling;
  if (r->backend == OPS_DEVICE_CUDA && t->tile_dim[0] >= 0) {
    double blocks = 1.0;
    for (int i = 0; i < 3; ++i) {
      if (t->tile_dim[i] < 0 || t->tile[i] <= 0) continue;
      const double extent = (double)p->dims[t->tile_dim[i]];
      const double tiles = ceil_div(extent, t->tile[i]);
      if (extent > 0) c->pad_factor *= tiles * t->tile[i] / extent;
      if (t->tile_in_grid[i]) blocks *= tiles;
    }
    for (int i = 0; i < 3; ++i) {
      if (t->grid_dims[i] >= 0) blocks *= (double)p->dims[t->grid_dims[i]];
    }
    const double slots = (double)dev->sm_count * (t->blocks_per_sm > 0 ? t->blocks_per_sm : 1);
    if (blocks > 0 && slots > 0) {
      c->wave_factor = ceil_div(blocks, slots) * slots / blocks;
    }
  }
  const double mem = c->mem_us * c->wave_factor, math = c->math_us * c->pad_factor * c->wave_factor;
  c->us = c->launch_us + (mem > math ? mem : math);
}

void opsi_format_cost(const opsi_cost *c, char *buf, size_t n) {
  snprintf(buf, n, "memory %.2f us (%.3g MB), math %.2f us (%.3g GFLOP), waves x%.2f, padding x%.2f, launch %.1f us",
           c->mem_us, c->bytes / 1e6, c->math_us, c->flops / 1e9, c->wave_factor, c->pad_factor, c->launch_us);
}
