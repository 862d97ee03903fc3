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
  opsi_grid_estimate ge = {1.0, 1.0, 1.0, 1};
  const int by_fn = r->backend == OPS_DEVICE_CUDA && r->grid != NULL;
  if (by_fn) r->grid(p, &ge);
  const double bytes_factor = (r->bytes_factor > 0.0f ? (double)r->bytes_factor : 1.0) * ge.bytes_factor;
  const double rate = r->unit >= 0 && r->unit < OPSI_UNIT_COUNT ? m->tflops[r->unit] : 0.0;
  c->efficiency = eff;
  c->calibration_set = NULL;
  /* the launch plan's words pick a calibration entry fitted to that plan, where the set has one */
  const char *plan = r->backend == OPS_DEVICE_CUDA && r->plan != NULL ? r->plan(p) : NULL;
  c->calibration = r->backend == OPS_DEVICE_CUDA
                       ? opsi_calibration_for(r->id, plan, dev->sm_version, dev->name, &c->calibration_set)
                       : NULL;
  const opsi_calibration *cal = c->calibration;
  const double mem_eff = r->mem_efficiency > 0.0f ? (double)r->mem_efficiency : eff;
  c->mem_efficiency = mem_eff;
  c->mem_us = cal != NULL ? c->bytes / (cal->gbps * 1e3) : c->bytes * bytes_factor / (m->mem_gbps * 1e3 * mem_eff);
  c->math_us = cal != NULL && cal->tflops > 0.0 ? c->flops / (cal->tflops * 1e6)
               : rate > 0.0                     ? c->flops / (rate * 1e6 * eff)
                                                : INFINITY;
  /* a fitted launch_us is the whole call's (tools/calibrate.py fits it per call, every launch in) */
  c->launch_us = cal != NULL ? cal->launch_us : m->launch_us * (ge.launches > 1 ? ge.launches : 1);
  c->wave_us = cal != NULL ? cal->wave_us : 0.0;
  c->wave_factor = 1.0;
  c->pad_factor = 1.0;
  c->blocks = 1.0;
  c->waves = 1.0;
  const opsi_tiling *t = &r->tiling;
  if (by_fn || (r->backend == OPS_DEVICE_CUDA && t->tile_dim[0] >= 0)) {
    double blocks = 1.0;
    if (by_fn) {
      blocks = ge.blocks;
      c->pad_factor = ge.pad_factor;
    } else {
      for (int i = 0; i < 3; ++i) {
        if (t->tile_dim[i] < 0 || t->tile[i] <= 0) continue;
        const double extent = opsi_tiled_extent(p, t->tile_dim[i]);
        const double tiles = ceil_div(extent, t->tile[i]);
        if (extent > 0) c->pad_factor *= tiles * t->tile[i] / extent;
        if (t->tile_in_grid[i]) blocks *= tiles;
      }
      for (int i = 0; i < 3; ++i) {
        if (t->grid_dims[i] >= 0) blocks *= (double)p->dims[t->grid_dims[i]];
      }
    }
    const double slots = (double)dev->sm_count * (t->blocks_per_sm > 0 ? t->blocks_per_sm : 1);
    c->blocks = blocks;
    if (blocks > 0 && slots > 0) {
      c->waves = ceil_div(blocks, slots);
      c->wave_factor = c->waves * slots / blocks;
    }
  }
  /* Calibrated: a few blocks still stream at the bandwidth the fit measured; their fixed
   * cost a wave is its own term. */
  const double mem = c->mem_us * (cal != NULL ? 1.0 : c->wave_factor);
  const double math = c->math_us * c->pad_factor * c->wave_factor;
  c->us = c->launch_us + c->waves * c->wave_us + (mem > math ? mem : math);
  c->own_us = c->us;
  c->twin_name = NULL;
}

void opsi_format_cost(const opsi_cost *c, char *buf, size_t n) {
  const int used = snprintf(buf, n,
                            "memory %.2f us (%.4g MB), math %.2f us (%.4g GFLOP), waves %.0f x%.2f (%.0f blocks), "
                            "padding x%.2f, launch %.1f us",
                            c->mem_us, c->bytes / 1e6, c->math_us, c->flops / 1e9, c->waves,
                            c->wave_factor, c->blocks, c->pad_factor, c->launch_us);
  if (used < 0 || (size_t)used >= n) return;
  if (c->twin_name != NULL && c->calibration != NULL) { /* in place of the calibration's name: a
                                                          * verdict's text is short */
    snprintf(buf + used, n - (size_t)used, " + %.1f us a wave; own %.1f us, raised to its twin's estimate",
             c->wave_us, c->own_us);
  } else if (c->twin_name != NULL) {
    snprintf(buf + used, n - (size_t)used, "; own %.1f us, raised to its twin's estimate", c->own_us);
  } else if (c->calibration != NULL) {
    snprintf(buf + used, n - (size_t)used, " + %.1f us a wave; calibrated %s (%d shapes%s)", c->wave_us,
             c->calibration_set->name, (int)c->calibration->shapes, c->calibration->plan != NULL ? " of this plan" : "");
  } else if (c->mem_efficiency != c->efficiency) {
    snprintf(buf + used, n - (size_t)used, "; row efficiency %.2f (memory %.2f)", c->efficiency, c->mem_efficiency);
  } else {
    snprintf(buf + used, n - (size_t)used, "; row efficiency %.2f", c->efficiency);
  }
}
