/*
 * What the GPU benchmarks share: checked CUDA / opslib calls, device buffers filled with
 * random values, the timed loop (CUDA events around back-to-back calls, manual time), and
 * the device-to-device copy bandwidth that memory-bound results are read against.
 */
#ifndef OPSLIB_BENCH_BENCH_CUDA_H_
#define OPSLIB_BENCH_BENCH_CUDA_H_

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/shim/opsb.h"
#include "opslib/opslib.h"

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define CHECK_OPS(call)                                                                \
  do {                                                                                 \
    ops_status s_ = (call);                                                            \
    if (s_ != OPS_OK) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, ops_last_error()); \
      exit(1);                                                                         \
    }                                                                                  \
  } while (0)

/* The benchmark's CUDA handle on device 0 with its own non-blocking stream; 0 (after saying
 * so, as `name`) when this host has no CUDA device, 1 otherwise. */
int bench_open(const char *name, ops_handle *h, cudaStream_t *stream);

/* A device buffer of n elements of dtype, filled with values in [lo, hi). */
void *bench_dev_fill(int32_t dtype, int64_t n, double lo, double hi, uint64_t seed);
void *bench_dev_alloc(size_t bytes);

/* Times call(ctx) on `stream` for the benchmark's iterations: 3 warm-up calls, then per
 * iteration as many back-to-back calls as fill ~2 ms between two events; returns the mean
 * seconds per call. */
double bench_time(opsb_state *s, void (*call)(void *ctx), void *ctx, cudaStream_t stream);

/* cudaMemcpyAsync device to device of 512 MiB on `stream`, bytes read + written per
 * second, best of 17 after 3 warm-ups (TB/s). */
double bench_copy_tbps(cudaStream_t stream);

#endif /* OPSLIB_BENCH_BENCH_CUDA_H_ */
