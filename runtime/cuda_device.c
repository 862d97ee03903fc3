/* Device discovery and launch-error collection through the CUDA runtime API. */
#include "runtime/cuda_device.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/launch.h"
#include "runtime/error.h"

/* runtime/cuda_probe.cu */
int opsi_cuda_probe_code_sm(int ordinal, int *code_sm);

int ops_cuda_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); /* clear the sticky "no driver" state for later calls */
    return 0;
  }
  return count;
}

ops_status opsi_cuda_read_device(int ordinal, ops_device_info *info) {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device: cuda:%d requested, but the CUDA runtime finds no "
                     "device (%s: %s)", ordinal, cudaGetErrorName(err), cudaGetErrorString(err));
  }
  if (ordinal < 0 || ordinal >= count) {
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device: expected a CUDA ordinal in 0..%d, got %d",
                     count - 1, ordinal);
  }
  struct cudaDeviceProp prop;
  err = cudaGetDeviceProperties(&prop, ordinal);
  if (err != cudaSuccess) {
    return opsi_fail(OPS_ERR_CUDA, "ops_handle_create: cudaGetDeviceProperties(%d) failed: %s",
                     ordinal, cudaGetErrorString(err));
  }
  int code_sm = 0;
  err = (cudaError_t)opsi_cuda_probe_code_sm(ordinal, &code_sm);
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();
    return opsi_fail(OPS_ERR_UNSUPPORTED_DEVICE,
                     "ops_handle_create: device: cuda:%d is sm_%d%d, and this build of opslib has no "
                     "machine code for it (rebuild with --//tools/bazel:cuda_archs=sm_%d%d,...)",
                     ordinal, prop.major, prop.minor, prop.major, prop.minor);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return opsi_fail(OPS_ERR_CUDA, "ops_handle_create: probing cuda:%d failed: %s", ordinal,
                     cudaGetErrorString(err));
  }
  info->code_sm = code_sm;
  snprintf(info->name, sizeof info->name, "%.95s", prop.name);
  info->sm_version = prop.major * 10 + prop.minor;
  info->sm_count = prop.multiProcessorCount;
  info->smem_per_block_optin = (int64_t)prop.sharedMemPerBlockOptin;
  info->smem_per_sm = (int64_t)prop.sharedMemPerMultiprocessor;
  info->l2_bytes = (int64_t)prop.l2CacheSize;
  info->global_mem_bytes = (int64_t)prop.totalGlobalMem;
  return OPS_OK;
}

ops_status opsi_cuda_check_launch(const char *what) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    return opsi_fail(OPS_ERR_CUDA, "%s: kernel launch failed: %s (%s)", what,
                     cudaGetErrorString(err), cudaGetErrorName(err));
  }
  return OPS_OK;
}

const char *opsi_cuda_error_name(int code) { return cudaGetErrorName((cudaError_t)code); }

ops_status opsi_cuda_check_current(const char *what, int ordinal) {
  int current = -1;
  const cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) {
    return opsi_fail(OPS_ERR_CUDA, "%s: cudaGetDevice failed: %s", what, cudaGetErrorString(err));
  }
  if (current != ordinal) {
    return opsi_fail(OPS_ERR_DEVICE_MISMATCH,
                     "%s: current CUDA device: expected %d (the handle's; call cudaSetDevice(%d)), got %d", what,
                     ordinal, ordinal, current);
  }
  return OPS_OK;
}

/* ---- shared-memory opt-in, once per (kernel, context) ------------------------------------ */

/* The current context's id, through the driver's entry points (no libcuda link); 0 where the
 * driver has none or no context is current. */
typedef CUresult (*opsi_ctx_get_current_fn)(CUcontext *);
typedef CUresult (*opsi_ctx_get_id_fn)(CUcontext, unsigned long long *);
static opsi_ctx_get_current_fn g_ctx_current;
static opsi_ctx_get_id_fn g_ctx_id;
static pthread_once_t g_ctx_once = PTHREAD_ONCE_INIT;

void *opsi_cuda_driver_entry(const char *name) {
  void *p = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return NULL;
  }
  return p;
}

static void ctx_entries(void) {
  void *current = opsi_cuda_driver_entry("cuCtxGetCurrent"), *id = opsi_cuda_driver_entry("cuCtxGetId");
  if (current != NULL && id != NULL) { /* ISO C has no cast from void * to a function */
    memcpy(&g_ctx_current, &current, sizeof current);
    memcpy(&g_ctx_id, &id, sizeof id);
  }
}

static unsigned long long current_ctx_id(void) {
  pthread_once(&g_ctx_once, ctx_entries);
  CUcontext ctx = NULL;
  unsigned long long id = 0;
  if (g_ctx_current == NULL || g_ctx_id == NULL || g_ctx_current(&ctx) != CUDA_SUCCESS || ctx == NULL) return 0;
  return g_ctx_id(ctx, &id) == CUDA_SUCCESS ? id : 0;
}

/* Open addressing over (kernel, context id): readers take no lock (a slot's key is published
 * after its limit, with release; a limit only grows); a writer holds g_optin_lock, so that
 * two threads never set one kernel's limit out of order. A full table sets every time. */
#define OPTIN_SLOTS 4096
typedef struct {
  _Atomic(uintptr_t) fn;
  _Atomic(unsigned long long) ctx;
  _Atomic(int32_t) bytes;
} optin_slot;
static optin_slot g_optin[OPTIN_SLOTS];
static pthread_mutex_t g_optin_lock = PTHREAD_MUTEX_INITIALIZER;

/* The slot of (fn, ctx) (*hit 1), or the empty slot where it would go (*hit 0; NULL: the
 * table is full). */
static optin_slot *optin_find(uintptr_t fn, unsigned long long ctx, int *hit) {
  const uint64_t h = ((uint64_t)fn ^ (ctx * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull;
  *hit = 0;
  for (int i = 0; i < OPTIN_SLOTS; ++i) {
    optin_slot *s = &g_optin[((h >> 52) + (uint64_t)i) & (OPTIN_SLOTS - 1)];
    const uintptr_t f = atomic_load_explicit(&s->fn, memory_order_acquire);
    if (f == 0) return s;
    if (f == fn && atomic_load_explicit(&s->ctx, memory_order_relaxed) == ctx) {
      *hit = 1;
      return s;
    }
  }
  return NULL;
}

int opsi_cuda_smem_optin(const void *fn, int32_t bytes) {
  const unsigned long long ctx = current_ctx_id();
  if (ctx == 0) return (int)cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  int hit = 0;
  optin_slot *s = optin_find((uintptr_t)fn, ctx, &hit);
  if (hit && atomic_load_explicit(&s->bytes, memory_order_acquire) >= bytes) return (int)cudaSuccess;
  pthread_mutex_lock(&g_optin_lock);
  s = optin_find((uintptr_t)fn, ctx, &hit); /* again: another thread may have set it meanwhile */
  cudaError_t e = cudaSuccess;
  if (!hit || atomic_load_explicit(&s->bytes, memory_order_relaxed) < bytes) {
    e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e == cudaSuccess && s != NULL) {
      atomic_store_explicit(&s->bytes, bytes, memory_order_release);
      if (!hit) {
        atomic_store_explicit(&s->ctx, ctx, memory_order_relaxed);
        atomic_store_explicit(&s->fn, (uintptr_t)fn, memory_order_release);
      }
    }
  }
  pthread_mutex_unlock(&g_optin_lock);
  return (int)e;
}
