/*
 * Measured cost coefficients: for one device (an SM range and the device that was measured),
 * per kernel, the terms of the cost model fitted to a workload sweep (bench/sweep.py) by
 * tools/calibrate.py, which generates capabilities/calibration_<device>.c. Data with its
 * provenance (device, date, commit and file of the measurement); refitting is one command
 * (the generated file's header says which).
 *
 * With an entry, dispatch/cost.c estimates a kernel as
 *   launch_us + waves x wave_us + max(bytes / gbps, flops x padding x wave quantization / tflops)
 * and without one from the row's efficiency against the machine's peaks (machines.c).
 */
#ifndef OPSLIB_CAPABILITIES_CALIBRATION_H_
#define OPSLIB_CAPABILITIES_CALIBRATION_H_

#include <stddef.h>
#include <stdint.h>

typedef struct opsi_calibration {
  int32_t kernel_id;
  const char *kernel_name; /* the row's name, checked against the id by the tests */
  double launch_us;        /* fixed time a call (launch, gaps between back-to-back calls) */
  double wave_us;          /* fixed time a wave of blocks (prologue, pipeline fill, epilogue) */
  double gbps;             /* bytes over time: the op's minimal bytes, GB/s */
  double tflops;           /* padded, wave-quantized flops over time; 0: the row's efficiency */
  int32_t shapes;          /* measured shapes it was fitted to */
  double rms_log_error;    /* of the fit over those shapes */
  const char *plan;        /* NULL: the kernel's calls; else only those whose launch plan (the
                            * row's plan function, explain's words) contains these words, which
                            * take this entry before the kernel's other one */
} opsi_calibration;

typedef struct opsi_calibration_set {
  const char *name;    /* short tag explain prints: "h100-2026-11-24" */
  int32_t sm_min, sm_max;
  const char *device;  /* the device measured */
  const char *source;  /* the sweep file, its date and commit, and the fitting command */
  const opsi_calibration *entries;
  int32_t count;
} opsi_calibration_set;

/* The entry of kernel_id for a call whose launch plan is `plan` (NULL: the row has none) on a
 * device of SM `sm` named `device` (NULL: none) and, in *set when not NULL, the set it comes
 * from: the entry of a set measured on that device (its `device` equal to the name) where one
 * has the kernel, else of the first set (k_sets' order) whose SM range holds `sm`, or NULL where
 * that set has none (another device's set never answers). Within a set, an entry whose plan
 * words the call's plan contains comes before the kernel's entry without plan words. device
 * may be NULL (the SM alone decides). */
const opsi_calibration *opsi_calibration_for(int32_t kernel_id, const char *plan, int32_t sm, const char *device,
                                             const opsi_calibration_set **set);

/* Every calibration set, for listing and checks. */
const opsi_calibration_set *const *opsi_calibration_sets(int *count);

#endif /* OPSLIB_CAPABILITIES_CALIBRATION_H_ */
