/*
 * The analytic cost model that ranks eligible kernels (seed 002: choose by a cost that can
 * explain itself, not by a pile of rules). For a problem and a row on a device:
 *   work:    the op's minimal device-memory bytes and its flops (work.c);
 *   time:    launch + max(bytes * bytes_factor / bandwidth, flops / unit rate * padding)
 *            * wave quantization, bandwidth and rate scaled by the row's efficiency;
 *   waves:   blocks over (SMs x resident blocks per SM), rounded up, from the row's tiling;
 *   padding: tiled extents rounded up to whole tiles, over the real extents.
 * Coefficients come from capabilities/machines.c (per SM family), the rest from the row.
 */
#ifndef OPSLIB_DISPATCH_COST_H_
#define OPSLIB_DISPATCH_COST_H_

#include <stddef.h>

#include "capabilities/rows.h"
#include "opslib/handle.h"

typedef struct opsi_cost {
  double bytes, flops;    /* the op's minimal work */
  double mem_us, math_us; /* at the row's efficiency, before quantization */
  double wave_factor;     /* >= 1 */
  double pad_factor;      /* >= 1 */
  double launch_us;
  double us;              /* the estimate */
} opsi_cost;

/* The op's minimal bytes moved and flops, from the problem alone. */
void opsi_work(const opsi_problem *p, double *bytes, double *flops);

/* The estimate of row r for p on dev. */
void opsi_estimate(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *dev,
                   opsi_cost *c);

/* The estimate's terms in words, for explain. */
void opsi_format_cost(const opsi_cost *c, char *buf, size_t n);

#endif /* OPSLIB_DISPATCH_COST_H_ */
