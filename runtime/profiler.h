/*
 * The profiling hook's machinery (public contract: ops_handle_set_profiler in handle.h).
 * The dispatcher brackets each launch with begin/end; with profiling off, begin is one
 * pointer test. On CUDA the pair of events recorded around the launch waits in a ring
 * until polled complete; records are delivered in call order, outside any lock.
 */
#ifndef OPSLIB_RUNTIME_PROFILER_H_
#define OPSLIB_RUNTIME_PROFILER_H_

#include "opslib/handle.h"

typedef struct opsi_profile_token {
  int slot;           /* CUDA: the ring slot of this launch */
  double host_start;  /* CPU: host clock at begin, microseconds */
} opsi_profile_token;

/* 1 when profiling is on (and *tok is set up), 0 otherwise. */
int opsi_profile_begin(ops_handle h, opsi_profile_token *tok);

/* Completes the record of the launch begun with tok. rec->time_us, gbps and tflops are
 * filled here (from the events or the host clock); rec->problem is copied. */
void opsi_profile_end(ops_handle h, const opsi_profile_token *tok, const ops_profile_record *rec);

/* Delivers every pending record (waiting for their events), then frees the profiler. */
void opsi_profiler_stop(ops_handle h);

/* Installs the JSON-lines file profiler of OPSLIB_PROFILE=<path>. */
ops_status opsi_profiler_start_file(ops_handle h, const char *path);

#endif /* OPSLIB_RUNTIME_PROFILER_H_ */
