/* The autotuner's clocks of timing.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, strtok_r, strdup, fsync, getpid */
#include "runtime/timing.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <time.h>

#include "runtime/error.h"
#include "runtime/handle_internal.h"

double opsi_host_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static ops_status run_n(opsi_timed_fn fn, void *arg, int n) {
  for (int i = 0; i < n; ++i) OPSI_TRY(fn(arg));
  return OPS_OK;
}

static ops_status time_host(opsi_timed_fn fn, void *arg, int trials, int reps, double *best_us) {
  OPSI_TRY(fn(arg));
  double best = INFINITY;
  for (int t = 0; t < trials; ++t) {
    const double t0 = opsi_host_us();
    OPSI_TRY(run_n(fn, arg, reps));
    const double us = (opsi_host_us() - t0) / reps;
    if (us < best) best = us;
  }
  *best_us = best;
  return OPS_OK;
}

static ops_status cuda_fail(cudaError_t e, const char *what) {
  return opsi_fail(OPS_ERR_CUDA, "autotune: %s failed: %s", what, cudaGetErrorString(e));
}

static ops_status time_cuda(ops_handle h, opsi_timed_fn fn, void *arg, int trials, int reps, double *best_us) {
  cudaStream_t stream = (cudaStream_t)h->stream;
  cudaEvent_t start, stop;
  cudaError_t e = cudaEventCreate(&start);
  if (e != cudaSuccess) return cuda_fail(e, "cudaEventCreate");
  e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cudaEventDestroy(start);
    return cuda_fail(e, "cudaEventCreate");
  }
  ops_status st = fn(arg);
  double best = INFINITY;
  for (int t = 0; st == OPS_OK && t < trials; ++t) {
    cudaEventRecord(start, stream);
    st = run_n(fn, arg, reps);
    if (st != OPS_OK) break;
    cudaEventRecord(stop, stream);
    e = cudaEventSynchronize(stop);
    float ms = 0.0f;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
    if (e != cudaSuccess) {
      st = cuda_fail(e, "timing a candidate (cudaEventSynchronize)");
      break;
    }
    const double us = 1e3 * (double)ms / reps;
    if (us < best) best = us;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *best_us = best;
  return st;
}

ops_status opsi_time_runs(ops_handle h, opsi_timed_fn fn, void *arg, int trials, int reps, double *best_us) {
  *best_us = INFINITY;
  return h->device.type == OPS_DEVICE_CUDA ? time_cuda(h, fn, arg, trials, reps, best_us)
                                           : time_host(fn, arg, trials, reps, best_us);
}

int opsi_stream_capturing(ops_handle h) {
  if (h->device.type != OPS_DEVICE_CUDA) return 0;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t e = cudaStreamIsCapturing((cudaStream_t)h->stream, &status);
  if (e != cudaSuccess) {
    cudaGetLastError(); /* a query refused during another stream's global capture: do not time */
    return 1;
  }
  return status != cudaStreamCaptureStatusNone;
}
