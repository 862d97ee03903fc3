/*
 * The analytic cost model that ranks eligible kernels (seed 002: choose by a cost that can
 * explain itself, not by a pile of rules). For a problem and a row on a device:
 *   work:    the op's minimal device-memory bytes and its flops (work.c);
 *   waves:   blocks over (SMs x resident blocks per SM), rounded up, from the row's tiling;
 *   padding: tiled extents rounded up to whole tiles, over the real extents;
 *   time, where the device has a calibration entry for the row (capabilities/calibration.h,
 *   measured by bench/sweep.py and fitted by tools/calibrate.py):
 *            launch + waves x wave_us + max(bytes x stream / gbps, flops x padding x quantization / tflops)
 *   and otherwise, from the row's efficiency against the machine's peaks (machines.c):
 *            launch + max(bytes x bytes_factor x stream / bandwidth, flops / unit rate x padding) x quantization
 *   where quantization = waves x slots / blocks (a partial last wave costs a whole one), and
 *   stream the row's own factor for a load path its calibration did not measure (rows.h).
 */
#ifndef OPSLIB_DISPATCH_COST_H_
#define OPSLIB_DISPATCH_COST_H_

#include <stddef.h>

#include "capabilities/calibration.h"
#include "capabilities/rows.h"
#include "opslib/handle.h"

typedef struct opsi_cost {
  double bytes, flops;    /* the op's minimal work */
  double mem_us, math_us; /* at the row's efficiency, before quantization */
  double blocks;          /* the launch's blocks (1 for a row without tiling) */
  double waves;           /* ceil(blocks / resident slots) */
  double wave_factor;     /* waves x slots / blocks, >= 1 */
  double pad_factor;      /* >= 1 */
  double launch_us;
  double wave_us;         /* fixed time a wave (calibrated rows; 0 otherwise) */
  double us;              /* the estimate */
  double own_us;          /* the row's own, where its twin's (rows.h) raised it; else us */
  const char *twin_name;  /* that twin, or NULL */
  const opsi_calibration *calibration;         /* the entry used, or NULL: the row's efficiency */
  const opsi_calibration_set *calibration_set; /* where it comes from */
  double efficiency;                           /* the row's, when uncalibrated */
  double mem_efficiency;                       /* the row's for memory, when uncalibrated */
} opsi_cost;

/* The op's minimal bytes moved and flops, from the problem alone. */
void opsi_work(const opsi_problem *p, double *bytes, double *flops);

/* The extent of problem dim `dim` that a kernel's tiles cover, for blocks and padding:
 * dims[dim], except SDPA's seqlen_q under varlen, where a batch entry's query tiles cover
 * its mean length (the blocks of shorter sequences exit at once). */
double opsi_tiled_extent(const opsi_problem *p, int dim);

/* The estimate of row r for p on dev. */
void opsi_estimate(const opsi_problem *p, const opsi_kernel_row *r, const ops_device_info *dev,
                   opsi_cost *c);

/* The estimate's terms in words, for explain. */
void opsi_format_cost(const opsi_cost *c, char *buf, size_t n);

#endif /* OPSLIB_DISPATCH_COST_H_ */
