/*
 * The contract between the dispatch layer and a kernel's launcher: the launch context
 * (stream, workspace), what the launcher reports of its launch, and how it reports a failure.
 * A launcher receives its family's argument struct (e.g. kernels/flash/sdpa_args.h, built by
 * the dispatch layer) as `const void *`. Launchers never format messages: they return a
 * status and name what failed (opsi_launch_error); the dispatch layer writes the message.
 */
#ifndef OPSLIB_CORE_LAUNCH_H_
#define OPSLIB_CORE_LAUNCH_H_

#include <stddef.h>
#include <stdint.h>

#include "core/problem.h"
#include "opslib/handle.h"
#include "opslib/status.h"

/* Why a launch failed, in static strings: the dispatch layer (opsi_run_row) formats them as
 * "<fn>: <kernel>: <what>: <detail>" (detail NULL: without it; code != 0: " (error <code>)"). */
typedef struct opsi_launch_error {
  const char *what;   /* e.g. "launch", "the tensor map of k" */
  const char *detail; /* e.g. cudaGetErrorString's text; NULL when what says it all */
  int32_t code;       /* the CUDA driver's or runtime's error number, or 0 */
} opsi_launch_error;

/* What a CUDA launcher reports of its launch (for the profiler, and for the test that holds
 * every launch to its capability row); CPU launchers leave 0. */
typedef struct opsi_launch_info {
  int32_t grid[3];
  int32_t block[3];
  int32_t smem_bytes;     /* dynamic shared memory of the launch */
  const char *plan;       /* the launch variant it took, in the words of its row's plan function
                             (static storage); NULL: the kernel has one way to run */
  int32_t cluster;        /* blocks a cluster (0 or 1: none) */
  opsi_launch_error error; /* set with a failing status */
} opsi_launch_info;

typedef struct opsi_launch {
  ops_handle handle;
  int32_t sm_count; /* the device's multiprocessors, for grid sizing */
  void *stream;     /* cudaStream_t */
  void *workspace;
  size_t workspace_bytes;
  opsi_launch_info *info; /* filled by the launcher */
  int32_t sm;             /* the device's SM version (90: Hopper), for launch attributes */
} opsi_launch;

typedef ops_status (*opsi_launch_fn)(const opsi_launch *ctx, const void *args);

/* A launcher's failure: names it in ctx's info and returns status. */
static inline ops_status opsi_launch_failed(const opsi_launch *ctx, ops_status status, const char *what,
                                            const char *detail, int32_t code) {
  ctx->info->error.what = what;
  ctx->info->error.detail = detail;
  ctx->info->error.code = code;
  return status;
}

#ifdef __cplusplus
extern "C" {
#endif
/* What the runtime does for launchers (runtime/cuda_device.c): cudaFuncSetAttribute(fn,
 * cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), skipped where the current CUDA context
 * already has that limit or a larger one from an earlier call (the attribute lasts as long as
 * the context; kept per kernel and context id). Returns a cudaError_t. */
int opsi_cuda_smem_optin(const void *fn, int32_t bytes);

/* The CUDA driver's function `name` in its CUDA 12.0 form, reached through the runtime (the
 * static runtime: no libcuda link), or NULL where the driver has none; leaves no error
 * behind in the runtime. */
void *opsi_cuda_driver_entry(const char *name);
#ifdef __cplusplus
}
#endif

#endif /* OPSLIB_CORE_LAUNCH_H_ */
