/*
 * Timing a launch for the autotuner: device time between CUDA events on the handle's
 * stream, host time on the CPU, and whether the stream is capturing a CUDA graph (when
 * nothing may be timed or waited for).
 */
#ifndef OPSLIB_RUNTIME_TIMING_H_
#define OPSLIB_RUNTIME_TIMING_H_

#include "opslib/handle.h"

/* The host's monotonic clock, in microseconds (for durations). */
double opsi_host_us(void);

typedef ops_status (*opsi_timed_fn)(void *arg);

/* Runs fn(arg) once untimed, then `trials` times `reps` back-to-back runs, timing each trial
 * as a whole (events on the handle's stream, or the host clock on the CPU; the host waits),
 * and gives the best trial's time a run in *best_us. Fails with fn's status, or
 * OPS_ERR_CUDA. */
ops_status opsi_time_runs(ops_handle h, opsi_timed_fn fn, void *arg, int trials, int reps, double *best_us);

/* 1 when the handle's stream is capturing a CUDA graph, or its capture state cannot be read
 * (then too nothing is timed); 0 otherwise and on the CPU. */
int opsi_stream_capturing(ops_handle h);

#endif /* OPSLIB_RUNTIME_TIMING_H_ */
